"""A private PostgreSQL for tests, benches and the floor demo: initdb + pg_ctl in a temp dir.

Debian's postgresql package puts the server's programs under /usr/lib/postgresql/<ver>/bin
(not on PATH). The cluster listens on 127.0.0.1 at a free port and on a Unix socket in its
own directory, trusts local connections, and is thrown away on close(). PostgreSQL refuses to
run as root: as root the cluster belongs to the package's `postgres` user.

`stop("immediate")` is a crash as far as PostgreSQL is concerned (no checkpoint; recovery
replays the WAL at the next start); `restart()` starts it again on the same port and data.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Literal

from tablectl.simulators.broker import free_port

INSTALL_HINT = "install Debian's postgresql package: sudo apt-get install postgresql"
SUPERUSER = "tablectl"
StopMode = Literal["smart", "fast", "immediate"]


def find_bindir() -> Path:
    """The newest installed server's bin directory (where initdb and pg_ctl are)."""
    override = os.environ.get("TABLECTL_PG_BINDIR")
    candidates = [Path(override)] if override else []
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = sorted(
            (p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
        )
        candidates += [v / "bin" for v in reversed(versions)]
    if found := shutil.which("initdb"):
        candidates.append(Path(found).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    raise FileNotFoundError(f"PostgreSQL's initdb not found; {INSTALL_HINT}")


class PrivatePostgres:
    """start(), stop() and restart() on the same port and data; close() removes it all."""

    def __init__(self, port: int | None = None, *, fsync: bool = True) -> None:
        self.bindir = find_bindir()
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.fsync = fsync
        self._dir = Path(tempfile.mkdtemp(prefix="tablectl-postgres-"))
        self.data = self._dir / "data"
        self.socket_dir = self._dir / "run"
        self.log = self._dir / "postgres.log"
        self._owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError(
                    "PostgreSQL does not run as root and there is no postgres user; " + INSTALL_HINT
                ) from None
        self.socket_dir.mkdir()
        if self._owner:
            for path in (self._dir, self.socket_dir):
                os.chown(path, self._owner.pw_uid, self._owner.pw_gid)
        self._initialised = False

    def _run(self, *args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        user = self._owner.pw_uid if self._owner else None
        group = self._owner.pw_gid if self._owner else None
        return subprocess.run(
            [str(a) for a in args],
            check=check,
            capture_output=True,
            text=True,
            user=user,
            group=group,
            cwd=self._dir,
        )

    def _initdb(self) -> None:
        self._run(
            self.bindir / "initdb",
            "-D", self.data, "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
            "--locale=C", "--no-instructions",
        )  # fmt: skip
        settings = {
            "listen_addresses": f"'{self.host}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            "fsync": "on" if self.fsync else "off",
            # Off with fsync: a test kills processes, never the machine.
            "full_page_writes": "on" if self.fsync else "off",
            "max_connections": "200",
            "shared_buffers": "64MB",
            "log_min_messages": "warning",
            "log_line_prefix": "'%m [%p] %a '",
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# tablectl's private instance\n")
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        self._initialised = True

    def start(self) -> None:
        if not self._initialised:
            self._initdb()
        result = self._run(
            self.bindir / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start",
            check=False,
        )  # fmt: skip
        if result.returncode != 0:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"PostgreSQL did not start: {result.stderr.strip()}\n{tail}")

    def stop(self, mode: StopMode = "fast") -> None:
        if not (self.data / "postmaster.pid").exists():
            return
        self._run(self.bindir / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: StopMode = "fast") -> None:
        self.stop(mode)
        self.start()

    def conninfo(self, dbname: str = "postgres", *, application_name: str | None = None) -> str:
        """A libpq connection string over TCP (as a controller on another host would use)."""
        parts = [f"host={self.host}", f"port={self.port}", f"user={SUPERUSER}", f"dbname={dbname}"]
        if application_name:
            parts.append(f"application_name={application_name}")
        return " ".join(parts)

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run SQL with psql (tuples only, unaligned): for set-up and inspection."""
        result = self._run(
            self.bindir / "psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
            "-h", self.host, "-p", str(self.port), "-U", SUPERUSER, "-d", dbname, "-c", sql,
            check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"psql: {result.stderr.strip()}")
        return result.stdout.strip()

    def create_database(self, name: str) -> str:
        """A new, empty database; returns its conninfo."""
        self.psql(f'CREATE DATABASE "{name}"')
        return self.conninfo(name)

    @property
    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        return None

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

"""What the link tests share: a database per test, a link config, controllers as processes."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.link import ledger
from tablectl.link.config import LinkConfig, load_link_config

_databases = itertools.count(1)


def new_database(postgres: PrivatePostgres, hint: str = "link") -> str:
    """A fresh, empty database in the session's PostgreSQL: its conninfo."""
    return postgres.create_database(f"{hint}_{os.getpid()}_{next(_databases)}")


@dataclass
class LinkSetup:
    path: Path
    conninfo: str
    config: LinkConfig


def write_config(
    directory: Path,
    conninfo: str,
    broker: PrivateBroker,
    *,
    tables: str,
    hit_policy: str = "ordered",
    window_ms: int = 1000,
    link_timeout_s: float = 5,
    broadcast_ms: int = 200,
    sign: str | None = None,
    database: str = "",
    name: str = "link.toml",
    link_id: str = "bank",
    game: str = "three-card-poker",
    level: str = (
        'rate_of_progression_percent = "14"\ninitial_amount = "1000.00"\nreset_amount = "1000.00"\n'
    ),
) -> LinkSetup:
    paytable = 'paytable = "A"\n' if game == "three-card-poker" else ""
    # No sign unless asked: a test's controllers would all want the same port.
    sign_section = f'listen = "{sign}"\n' if sign else "enabled = false\n"
    text = (
        "[database]\n"
        f'conninfo = "{conninfo}"\n'
        "statement_timeout_ms = 30000\n"
        f"{database}"
        "[mqtt]\n"
        f'host = "{broker.host}"\nport = {broker.port}\n'
        f"[sign]\n{sign_section}"
        "[[link]]\n"
        f'link_id = "{link_id}"\ntitle = "Mini Royal"\ngame = "{game}"\n{paytable}'
        f'wager = "5.00"\nhit_policy = "{hit_policy}"\n'
        f"simultaneous_window_ms = {window_ms}\nlink_timeout_s = {link_timeout_s}\n"
        f"broadcast_interval_ms = {broadcast_ms}\n"
        f'tables = ["{tables}"]\n'
        "[[link.level]]\n" + level
    )
    path = directory / name
    path.write_text(text)
    return LinkSetup(path, conninfo, load_link_config(path))


async def prepare(setup: LinkSetup, *, operating: bool = True) -> None:
    """Migrate the ledger, write the config's links, open them."""
    conn = await ledger.connect(setup.conninfo, application_name="test-prepare")
    try:
        await ledger.migrate(conn, by="test")
        for definition in setup.config.definitions():
            await ledger.apply_definition(conn, definition, by="test")
            if operating:
                await ledger.set_operating(conn, definition.link_id, True, by="test")
    finally:
        await conn.close()


HANG_GUARD_S = 60  # a hang fails the test here instead of stalling CI; not a timing claim


class ControllerProcess:
    """`tablectl link run` in its own process (a real one: SIGKILL kills it), its READY=1
    heard on a notify socket standing in for systemd's."""

    def __init__(self, config: Path, controller_id: str) -> None:
        self.controller_id = controller_id
        self.config = config.with_name(f"{controller_id}-{config.name}")
        self.config.write_text(
            f'[controller]\ncontroller_id = "{controller_id}"\n' + config.read_text()
        )
        self.log = config.with_name(f"{controller_id}.log")
        self._notify_path = config.with_name(f"{controller_id}.notify")
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        """Start it and wait for READY=1 (it has the ledger and the broker)."""
        self._notify_path.unlink(missing_ok=True)
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(self._notify_path))
        notify.setblocking(False)
        self._spawn()
        try:
            async with asyncio.timeout(HANG_GUARD_S):
                ready = b""
                while not ready.startswith(b"READY=1"):
                    ready = await asyncio.get_running_loop().sock_recv(notify, 4096)
        except TimeoutError:
            raise AssertionError(f"{self.controller_id} never ready:\n{self.output()}") from None
        finally:
            notify.close()

    def _spawn(self) -> None:
        self._log_file = self.log.open("ab")
        tablectl = Path(sys.executable).with_name("tablectl")
        self.proc = subprocess.Popen(
            [
                str(tablectl),
                "--log-level",
                os.environ.get("TABLECTL_TEST_LINK_LOG", "INFO"),
                "link",
                "run",
                "--config",
                str(self.config),
            ],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NOTIFY_SOCKET": str(self._notify_path)},
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL: no goodbye, whatever it was doing."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(HANG_GUARD_S)

    def stop(self) -> int | None:
        """SIGTERM; its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(HANG_GUARD_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()
        return self.proc.returncode

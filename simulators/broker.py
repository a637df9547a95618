"""A private Mosquitto for tests, benches and the demo: free port, generated config, own process.

Plain (loopback, anonymous) by default; with `secure=` it runs the shipped broker config
(config/mosquitto/tablectl.conf: TLS with client certificates, each client's identity its
certificate's common name, and the shipped ACL), only its paths and port changed, on a
throwaway PKI made with openssl.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

INSTALL_HINT = "install Debian's mosquitto package: sudo apt-get install mosquitto"
SHIPPED = Path(__file__).resolve().parents[1] / "config" / "mosquitto"


def find_mosquitto(name: str = "mosquitto") -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if not found:
        raise FileNotFoundError(f"{name} not found; {INSTALL_HINT}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


@dataclass
class Pki:
    """A CA, a server certificate for 127.0.0.1/localhost, and client certificates by name."""

    root: Path
    name: str = "tablectl-test-ca"

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.ca_key, self.ca_cert = self.root / "ca.key", self.root / "ca.crt"
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", self.ca_key)
        _openssl(
            "req", "-x509", "-new", "-key", self.ca_key, "-sha256", "-days", "2",
            "-subj", f"/CN={self.name}", "-out", self.ca_cert,
        )  # fmt: skip
        self.server_cert, self.server_key = self.issue(
            "server", "subjectAltName=IP:127.0.0.1,DNS:localhost"
        )

    def issue(
        self, cn: str, extension: str | None = None, *, subject: str | None = None
    ) -> tuple[Path, Path]:
        """A certificate with this common name (or this whole subject, named cn on disk),
        signed by this CA: (cert, key)."""
        key, csr, cert = (self.root / f"{cn}.{ext}" for ext in ("key", "csr", "crt"))
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
        _openssl("req", "-new", "-key", key, "-subj", subject or f"/CN={cn}", "-out", csr)
        ext = self.root / f"{cn}.ext"
        ext.write_text((extension or "basicConstraints=CA:FALSE") + "\n")
        _openssl(
            "x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key,
            "-CAcreateserial", "-days", "2", "-sha256", "-extfile", ext, "-out", cert,
        )  # fmt: skip
        key.chmod(0o600)
        return cert, key


@dataclass
class Secure:
    """What a secure broker needs: its site and its backends (for the ACL). Who may connect
    is whoever holds a certificate of its CA (`PrivateBroker.pki.issue`)."""

    site: str
    backends: tuple[str, ...] = ("pgs",)


def shipped_acl(site: str, backends: tuple[str, ...]) -> str:
    """config/mosquitto/tablectl.acl for this site, its `pgs` block repeated per backend."""
    text = (SHIPPED / "tablectl.acl").read_text().replace("SITE", site)
    head, _, block = text.partition("user pgs\n")
    return head + "".join(
        f"user {b}\n" + block.replace("/ack/pgs", f"/ack/{b}") + "\n" for b in backends
    )


class PrivateBroker:
    """start(), stop() and start() again on the same port (a broker restart); pause() and
    resume() (SIGSTOP, SIGCONT): a broker that holds its connections and answers nothing.

    max_queued: messages the broker queues per subscriber behind those in flight, past which it
    drops them silently (Mosquitto's default is 1,000; a slow backend meets it).
    max_inflight: messages sent to a subscriber awaiting its PUBACK (Mosquitto's default is
    20); with max_queued, what a subscriber that reads no more is held before drops.
    max_packet_size: the largest packet it takes, said in its CONNACK (Mosquitto's
    `max_packet_size`); retain_available false: it keeps no retained messages."""

    def __init__(
        self,
        port: int | None = None,
        *,
        secure: Secure | None = None,
        max_queued: int = 100_000,
        host: str = "127.0.0.1",  # another address: a veth's, for a table in a netns
        max_packet_size: int | None = None,
        retain_available: bool = True,
        max_inflight: int = 100,
    ) -> None:
        self.host = host
        self.port = port or free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="tablectl-mosquitto-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self.log = self._dir / "mosquitto.log"
        self.pki: Pki | None = None
        conf = self._dir / "mosquitto.conf"
        if secure is None:
            conf.write_text(
                f"listener {self.port} {self.host}\n"
                "allow_anonymous true\n"
                "persistence false\n"
                "set_tcp_nodelay true\n"
                f"max_inflight_messages {max_inflight}\n"
                f"max_queued_messages {max_queued}\n"
                f"log_dest file {self.log}\n"
                "user root\n"
                + (f"max_packet_size {max_packet_size}\n" if max_packet_size else "")
                + ("" if retain_available else "retain_available false\n")
            )
        else:
            conf.write_text(self._secure_conf(secure))
        self._conf = conf

    def _secure_conf(self, secure: Secure) -> str:
        self.pki = pki = Pki(self._dir / "pki")
        acl = self._dir / "tablectl.acl"
        acl.write_text(shipped_acl(secure.site, secure.backends))
        paths = {
            "cafile": pki.ca_cert,
            "certfile": pki.server_cert,
            "keyfile": pki.server_key,
            "acl_file": acl,
        }
        lines = []
        for line in (SHIPPED / "tablectl.conf").read_text().splitlines():
            key = line.split(" ", 1)[0]
            if key == "listener":
                line = f"listener {self.port} {self.host}"
            elif key in paths:
                line = f"{key} {paths[key]}"
            elif key == "persistence":
                line = "persistence false"
            elif key == "persistence_location":
                continue
            lines.append(line)
        # Started as root, Mosquitto would become user mosquitto and not read our temp files.
        lines += [f"log_dest file {self.log}", "log_type all", "user root"]
        return "\n".join(lines) + "\n"

    def start(self, timeout_s: float = 10.0) -> None:
        self._proc = subprocess.Popen(
            [find_mosquitto(), "-c", str(self._conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode() if self._proc.stderr else ""
                raise RuntimeError(f"mosquitto exited at start: {err.strip()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"mosquitto did not listen on {self.host}:{self.port}")

    def stop(self) -> None:
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.send_signal(signal.SIGCONT)  # a paused broker hears it only once resumed
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc and self._proc.stderr:
            self._proc.stderr.close()
        self._proc = None

    def pause(self) -> None:
        """The broker stops answering (SIGSTOP): connections stay open, nothing is read."""
        assert self._proc is not None
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> PrivateBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

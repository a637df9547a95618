"""A private Mosquitto for tests and the demo: free port, generated config, own process."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

INSTALL_HINT = "install Debian's mosquitto package: sudo apt-get install mosquitto"


def find_mosquitto() -> str:
    found = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/sbin")
    if not found:
        raise FileNotFoundError(f"mosquitto not found; {INSTALL_HINT}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateBroker:
    """start(), stop() and start() again on the same port (a broker restart)."""

    def __init__(self, port: int | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="tablectl-mosquitto-"))
        self._proc: subprocess.Popen[bytes] | None = None
        conf = self._dir / "mosquitto.conf"
        conf.write_text(
            f"listener {self.port} {self.host}\n"
            "allow_anonymous true\n"
            "persistence false\n"
            f"log_dest file {self._dir / 'mosquitto.log'}\n"
        )
        self._conf = conf

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
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc and self._proc.stderr:
            self._proc.stderr.close()
        self._proc = None

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

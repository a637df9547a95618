"""A daemon in its own process, as systemd runs it: on a simulated shuffler, with a
notify socket standing in for systemd's, its log read as it comes."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from .test_service import table_toml

HANG_GUARD_S = 60  # a hang fails the test here instead of stalling CI; not a timing claim


class Daemon:
    """A daemon process and what it has logged so far (read as it comes: a full pipe would
    block its writes, which is not what these tests are about)."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        config: Path,
        sim: ShufflerSimulator,
        notify: socket.socket,
        ready: str,
    ) -> None:
        self.proc = proc
        self.config = config
        self.sim = sim
        self.ready = ready  # the READY=1 datagram, with its STATUS=
        self._notify = notify
        self.stderr = bytearray()
        self._reader = asyncio.create_task(self._read(), name="daemon-stderr")

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            self.stderr += chunk

    async def notification(self) -> str:
        """The next datagram the daemon sends systemd."""
        data = await asyncio.get_running_loop().sock_recv(self._notify, 4096)
        return data.decode()

    async def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit code and everything it logged."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(HANG_GUARD_S):
                code = await self.proc.wait()
                await self._reader
        except TimeoutError:
            print(self.stderr.decode()[-3000:])
            raise
        return code, self.stderr.decode()


@asynccontextmanager
async def daemon_process(
    tmp_path: Path, broker: PrivateBroker, *argv: str, nofile: int | None = None
) -> AsyncIterator[Daemon]:
    """A daemon process on a simulated shuffler; yields once it has told systemd READY."""
    sim = ShufflerSimulator(shuffle_ms=20)
    config = table_toml(tmp_path, sim.open_pty(), broker)
    table = SimulatedTableInputs(6)  # a daemon with the mock GPIO backend connects to it
    table_server = await table.serve(tmp_path / "data" / "table-simulator.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)

    def limit_descriptors() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = await asyncio.create_subprocess_exec(
        *[arg.replace("CONFIG", str(config)) for arg in argv],
        env={**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify")},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=limit_descriptors,  # only setrlimit, before exec
    )
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            ready = b""
            while not ready.startswith(b"READY=1"):
                ready = await asyncio.get_running_loop().sock_recv(notify, 4096)
        yield Daemon(proc, config, sim, notify, ready.decode())
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        notify.close()
        sim.close()
        table_server.close()

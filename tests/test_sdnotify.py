"""systemd notification never blocks the daemon: a notify socket that stops reading, one that
refuses, and the daemon under both."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.util.sdnotify import Notifier

from .daemons import HANG_GUARD_S, Daemon
from .test_service import table_toml

TABLECTL = Path(sys.executable).with_name("tablectl")


@pytest.fixture
def systemd(tmp_path: Path) -> Iterator[socket.socket]:
    """systemd's end of the notify socket, with the smallest queue the kernel allows."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    sock.bind(str(tmp_path / "notify"))
    sock.setblocking(False)
    yield sock
    sock.close()


async def datagrams_until(sock: socket.socket, text: str) -> list[str]:
    """What systemd reads, until a datagram carries text."""
    loop = asyncio.get_running_loop()
    got: list[str] = []
    async with asyncio.timeout(HANG_GUARD_S):
        while not got or text not in got[-1]:
            got.append((await loop.sock_recv(sock, 65536)).decode())
    return got


async def test_a_socket_that_stops_reading_never_blocks_and_then_gets_the_latest(
    systemd: socket.socket, tmp_path: Path
) -> None:
    notifier = Notifier(str(tmp_path / "notify"))
    assert notifier.notify("READY=1\nSTATUS=starting")
    with capture_logs() as logs:
        for n in range(5000):  # a blocking send would hang here after a few
            assert notifier.notify(f"STATUS=round {n}")
            if n % 100 == 0:
                assert notifier.notify("WATCHDOG=1")
    assert notifier.deferred > 0 and notifier.waiting  # the queue filled: merged, kept
    full = [e for e in logs if "not reading" in e["event"]]
    assert len(full) == 1  # said once, not per notification
    got = await datagrams_until(systemd, "STATUS=round 4999")
    assert got[0] == "READY=1\nSTATUS=starting"
    # Sent from the loop once there was room again: the latest status and the keep-alive.
    assert set(got[-1].splitlines()) == {"WATCHDOG=1", "STATUS=round 4999"}
    assert not notifier.waiting and notifier.dropped == 0
    notifier.close()


async def test_a_socket_that_refuses_drops_the_notification_and_says_so_once(
    tmp_path: Path,
) -> None:
    gone = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    gone.bind(str(tmp_path / "notify"))
    gone.close()  # the path stays, nobody reads it: refused
    notifier = Notifier(str(tmp_path / "notify"))
    with capture_logs() as logs:
        assert not notifier.notify("STOPPING=1\nSTATUS=stopping")
        assert not notifier.notify("STATUS=still stopping")
    assert notifier.dropped == 2 and not notifier.waiting
    assert [e["event"] for e in logs] == ["systemd's notify socket refused"]
    assert not Notifier(str(tmp_path / "no-such-socket")).notify("READY=1")
    assert not Notifier(None).notify("READY=1")  # not run by systemd


async def test_an_abstract_socket_is_reached(tmp_path: Path) -> None:
    name = f"tablectl-test-{os.getpid()}-{tmp_path.name}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as systemd:
        systemd.bind("\0" + name)
        systemd.setblocking(False)
        notifier = Notifier("@" + name)
        assert notifier.notify("READY=1")
        assert await datagrams_until(systemd, "READY=1") == ["READY=1"]
        notifier.close()


# --- the daemon, as systemd runs it -----------------------------------------------------------


@contextlib.asynccontextmanager
async def daemon_for(
    tmp_path: Path, broker: PrivateBroker, systemd: socket.socket, **env: str
) -> AsyncIterator[Daemon]:
    sim = ShufflerSimulator(shuffle_ms=20)
    config = table_toml(tmp_path, sim.open_pty(), broker)
    table = SimulatedTableInputs(6)
    table_server = await table.serve(tmp_path / "data" / "table-simulator.sock")
    proc = await asyncio.create_subprocess_exec(
        str(TABLECTL),
        "run",
        "--config",
        str(config),
        env={**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify"), **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        (ready,) = await datagrams_until(systemd, "READY=1")
        yield Daemon(proc, config, sim, systemd, ready)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        sim.close()
        table_server.close()


async def status_exit_code(config: Path) -> int | None:
    status = await asyncio.create_subprocess_exec(
        str(TABLECTL), "status", "--config", str(config), "--json", stdout=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(HANG_GUARD_S):
        await status.communicate()
    return status.returncode


async def test_the_daemon_serves_on_while_systemd_stops_reading(
    tmp_path: Path, broker: PrivateBroker, systemd: socket.socket
) -> None:
    # Keep-alives every 50 ms fill the queue in a moment; a blocking send would then stop the
    # loop: no control socket, no MQTT, no GPIO.
    async with daemon_for(tmp_path, broker, systemd, WATCHDOG_USEC="100000") as daemon:
        async with asyncio.timeout(HANG_GUARD_S):
            full = b"systemd is not reading its notify socket"
            while full not in daemon.stderr:  # noqa: ASYNC110 (its log, read as it comes)
                await asyncio.sleep(0.05)
        assert await status_exit_code(daemon.config) == 0  # the loop answers
        # systemd reads again: the keep-alives were waiting, and they come.
        await datagrams_until(systemd, "WATCHDOG=1")
        await datagrams_until(systemd, "WATCHDOG=1")
        code, log = await daemon.stop()
    assert code == 0, log[-2000:]
    assert "Traceback" not in log


async def test_a_refused_notify_socket_at_sigterm_is_an_orderly_stop(
    tmp_path: Path, broker: PrivateBroker, systemd: socket.socket
) -> None:
    async with daemon_for(tmp_path, broker, systemd) as daemon:
        systemd.close()  # systemd's socket gone: STOPPING=1 at SIGTERM is refused
        code, log = await daemon.stop()
    assert code == 0, log[-2000:]
    assert "ExceptionGroup" not in log and "Traceback" not in log
    assert "systemd's notify socket refused" in log

"""Stopping is always possible: SIGTERM ends the daemon in bounded time, under load, even when
a task loses or refuses its cancellation; and 1,100 idle clients cannot take the socket."""

from __future__ import annotations

import asyncio
import json
import sys
from contextlib import suppress
from pathlib import Path

import pytest
from tablectl.simulators.broker import PrivateBroker

from tablectl.control import client
from tablectl.service.shutdown import EXIT_STOP_DEADLINE

from .daemons import daemon_process
from .test_service import TABLECTL

HARNESS = Path(__file__).with_name("stop_harness.py")


async def load(socket_path: Path, n: int) -> list[asyncio.StreamWriter]:
    """n clients at once: a third ask for status, a third void the round, a third say nothing."""
    writers = []
    requests = [b'{"cmd": "status"}\n', b'{"cmd": "void", "reason": "shoe-jam", "by": "D1"}\n', b""]
    for i in range(n):
        with suppress(OSError):
            _, writer = await asyncio.open_unix_connection(str(socket_path))
            writer.write(requests[i % 3])
            writers.append(writer)
    return writers


async def test_sigterm_under_load_stops_the_daemon_and_closes_acceptance(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    argv = (sys.executable, str(HARNESS), "CONFIG", "normal", "10")
    async with daemon_process(tmp_path, broker, *argv) as daemon:
        writers = await load(tmp_path / "c.sock", 150)
        code, err = await daemon.stop()
        for writer in writers:
            writer.close()
    assert code == 0, err
    events = [json.loads(line)["event"] for line in err.splitlines() if line.startswith("{")]
    assert "stopping" in events and events[-1] == "tablectl stopped"
    # Every step was one transaction: the journal chains and replays after the stop.
    for verb in ("verify", "replay"):
        proc2 = await asyncio.create_subprocess_exec(
            str(TABLECTL), "journal", verb, "--config", str(daemon.config)
        )
        assert await proc2.wait() == 0, verb


async def test_a_lost_cancellation_is_repeated(tmp_path: Path, broker: PrivateBroker) -> None:
    argv = (sys.executable, str(HARNESS), "CONFIG", "swallow-once", "30")
    async with daemon_process(tmp_path, broker, *argv) as daemon:
        code, err = await daemon.stop()
    assert code == 0, err
    assert "tablectl stopped" in err and "did not stop within" not in err


async def test_a_task_that_never_ends_meets_the_deadline(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    argv = (sys.executable, str(HARNESS), "CONFIG", "stubborn", "2")
    async with daemon_process(tmp_path, broker, *argv) as daemon:
        code, err = await daemon.stop()
    assert code == EXIT_STOP_DEADLINE
    assert "did not stop within 2s of the stop signal" in err
    assert "tasks still running:" in err and "shuffler" in err


@pytest.mark.slow
async def test_1100_idle_clients_with_256_descriptors(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    """The field report: 1,100 idle connections exhausted the descriptors, status stopped
    answering and the log filled. Now: status answers, a few log lines, a clean stop."""
    argv = (str(TABLECTL), "run", "--config", "CONFIG")
    async with daemon_process(tmp_path, broker, *argv, nofile=256) as daemon:
        idle = []
        for _ in range(1100):
            _, writer = await asyncio.open_unix_connection(str(tmp_path / "c.sock"))
            idle.append(writer)
        try:
            reply = await asyncio.to_thread(client.call, tmp_path / "c.sock", {"cmd": "status"})
        except Exception:
            print(daemon.stderr.decode()[-5000:])
            raise
        assert reply["ok"] is True and reply["data"]["table"] == "tcp-07"
        code, err = await daemon.stop()
        for writer in idle:
            writer.close()
    assert code == 0, err[-2000:]
    lines = err.splitlines()
    assert len(lines) < 60, f"{len(lines)} log lines"
    assert sum("control connections dropped" in line for line in lines) == 1

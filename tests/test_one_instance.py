"""One daemon and one simulator per table, with real processes: a second `tablectl run` or
`tablectl simulate table` on the same config is refused (exit 1, naming the PID that holds the
table) before it touches anything, and the first carries on; a lock left by a killed process
does not block the next start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sqlite3
from pathlib import Path

import pytest
from tablectl.simulators.broker import PrivateBroker

from tablectl.config import load_config
from tablectl.util import instance_lock

from .test_simulate_table import TABLECTL, Simulator, sim_config, status_until, tablectl


def boots(database: Path) -> int:
    """How many daemons have stepped on this journal's inputs."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        (count,) = db.execute("SELECT COUNT(DISTINCT boot_id) FROM inputs").fetchone()
    return int(count)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        async with asyncio.timeout(15):
            await proc.wait()


async def test_a_second_daemon_and_a_second_simulator_are_refused(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    config = sim_config(tmp_path, broker)
    cfg = load_config(config)
    sim_proc = await asyncio.create_subprocess_exec(
        str(TABLECTL), "simulate", "table", "--config", str(config), "--shuffle-ms", "50",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    sim = Simulator(sim_proc)
    daemons: list[asyncio.subprocess.Process] = []

    async def start_daemon() -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            str(TABLECTL), "run", "--config", str(config), stderr=asyncio.subprocess.DEVNULL
        )
        daemons.append(proc)
        return proc

    async def second(*argv: str) -> tuple[int, str]:
        """A second instance: it should end at once; if it does not, it is stopped after."""
        proc = await asyncio.create_subprocess_exec(
            str(TABLECTL), *argv, "--config", str(config),
            stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        daemons.append(proc)
        async with asyncio.timeout(30):
            _, err = await proc.communicate()
        assert proc.returncode is not None
        return proc.returncode, err.decode()

    try:
        await sim.said(lambda line: "simulated table ready" in line)
        first = await start_daemon()
        await status_until(config, lambda s: s["phase"] == "betting")

        code, out = await second("run")
        assert code == 1, out
        assert f"another tablectl run is running for this table: PID {first.pid} holds" in out
        # The first is untouched: its socket answers, and the second never stepped on the
        # journal.
        code, out = await tablectl("status", "--config", str(config))
        assert code == 0, out
        assert first.returncode is None
        assert boots(cfg.storage.database) == 1

        code, out = await second("simulate", "table")
        assert code == 1, out
        assert f"simulate table is running for this table: PID {sim_proc.pid} holds" in out
        # The first simulator still serves the daemon: its socket, its shuffler link, a chip.
        assert cfg.simulator_socket.is_socket()
        # (the port leads to the simulator's own link, which leads to its pseudo-terminal)
        assert os.readlink(os.readlink(cfg.shuffler.port)).startswith("/dev/pts/")
        assert await sim.type("place 2") == "chip on seat 2\n"
        await status_until(config, lambda s: s["wagers"] == {"2": 100})

        # A power cut: the lock file stays behind, and the next daemon starts all the same.
        first.send_signal(signal.SIGKILL)
        await first.wait()
        assert cfg.storage.run_lock.read_text() == f"{first.pid}\n"
        again = await start_daemon()
        await status_until(config, lambda s: s["phase"] == "locked")  # power-up locks out
        assert cfg.storage.run_lock.read_text() == f"{again.pid}\n"
        assert boots(cfg.storage.database) == 2

        # The simulator's too: killed, it leaves its lock file, socket and link behind.
        sim_proc.send_signal(signal.SIGKILL)
        await sim_proc.wait()
        sim_proc = await asyncio.create_subprocess_exec(
            str(TABLECTL), "simulate", "table", "--config", str(config),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await Simulator(sim_proc).said(lambda line: "simulated table ready" in line)
        assert cfg.simulator_lock.read_text() == f"{sim_proc.pid}\n"
    finally:
        for proc in (*daemons, sim_proc):
            await _stop(proc)
    assert sim_proc.returncode == 0


def test_the_lock_is_one_per_path_within_a_process_too(tmp_path: Path) -> None:
    """flock, not fcntl's per-process record locks: a second open in the same process is
    refused as well, and leaving the first releases it."""
    path = tmp_path / "data" / "x.lock"
    refused = re.escape(f"PID {os.getpid()} holds {path}")
    with (
        instance_lock.held(path, "x"),
        pytest.raises(instance_lock.InstanceLocked, match=refused),
        instance_lock.held(path, "x"),
    ):
        raise AssertionError("a second holder in the same process")
    with instance_lock.held(path, "x"):
        assert path.read_text() == f"{os.getpid()}\n"


def test_a_path_is_removed_only_by_the_process_that_made_it(tmp_path: Path) -> None:
    ours = tmp_path / "control.sock"
    ours.write_text("first")
    made = instance_lock.OwnedPath.created(ours)
    ours.rename(tmp_path / "moved")
    ours.write_text("another daemon's")  # the path now names someone else's file
    made.remove()
    assert ours.read_text() == "another daemon's"
    mine = instance_lock.OwnedPath.created(ours)
    mine.remove()
    assert not ours.exists()

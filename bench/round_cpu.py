"""CPU per round: the whole daemon against the core alone, on the same rounds.

A table daemon on simulated devices (bench/table_process.py, its own process: the loop, the
journal thread, the relay to a private Mosquitto; the simulated shuffler on a pty served by
another process, bench/shuffler_process.py, as a real one is a machine of its own) plays
--rounds rounds of Three Card Poker (chips on two seats, the lock-out, the dealer settles),
one every --round-s, and reports the daemon process's CPU time for them, its loop thread's
share, and how often its threads slept and woke. Two baselines, from the same run: the core
alone stepping the very inputs that daemon journaled, with the JSON each step leaves (the
state for its hash, the records) -- what every round must cost wherever it runs; and a bare
sleep and wake-up of a thread, as many as the daemon's and as often on average (evenly
spaced) -- what waking costs on this machine before any work. The ratios say what the service
layer adds; min / median / max over --runs.

Run: .venv/bin/python bench/round_cpu.py [--runs 3] [--rounds 60] [--round-s 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from figures import spread
from tablectl.simulators.broker import PrivateBroker

from tablectl.core.events import PowerUp, TableRules, input_from_journal
from tablectl.core.table import TableState, step
from tablectl.service.dispatcher import journal_entries, journal_input
from tablectl.store.journal import JournalReader

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class DaemonCpu:
    per_round_s: float  # every thread of the daemon's process
    loop_per_round_s: float  # its event loop's thread alone
    sleeps_per_round: float  # its threads' sleeps and wake-ups (voluntary context switches)
    wall_per_round_s: float


async def daemon_round_cpu(
    broker: PrivateBroker, data_dir: Path, rounds: int, round_s: float
) -> DaemonCpu:
    shuffler = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "shuffler_process.py"), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert shuffler.stdout is not None
        pty = (await shuffler.stdout.readline()).decode().strip()
        return await _table_cpu(broker, data_dir, rounds, round_s, pty)
    finally:
        shuffler.terminate()
        await shuffler.wait()


async def _table_cpu(
    broker: PrivateBroker, data_dir: Path, rounds: int, round_s: float, shuffler_pty: str
) -> DaemonCpu:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HERE / "table_process.py"),
        "--port",
        str(broker.port),
        "--table",
        "cpu-01",
        "--data-dir",
        str(data_dir),
        "--round-s",
        str(round_s),
        "--rounds",
        str(rounds),
        "--shuffler",
        shuffler_pty,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    result = None
    async with asyncio.timeout(60 + rounds * (round_s + 1)):
        async for line in proc.stdout:
            if line.startswith(b"{"):
                result = json.loads(line)
        await proc.wait()
    assert result is not None, "the table process reported nothing"
    played = int(result["rounds"])
    return DaemonCpu(
        float(result["cpu_s"]) / played,
        float(result["loop_cpu_s"]) / played,
        int(result["sleeps"]) / played,
        float(result["wall_s"]) / played,
    )


def bare_wake_up_cpu(interval_s: float, count: int) -> float:
    """CPU seconds a thread is charged for sleeping interval_s and waking to do nothing,
    per wake-up: the floor under a daemon that wakes as often (on a VM, far from zero)."""
    cpu0 = time.thread_time()
    for _ in range(count):
        time.sleep(interval_s)
    return (time.thread_time() - cpu0) / count


def core_cpu(data_dir: Path) -> tuple[float, int]:
    """The core stepping every journaled input, with each step's JSON: CPU seconds, rounds."""
    reader = JournalReader(data_dir / "tablectl.sqlite3")
    try:
        rows = list(reader.inputs())
    finally:
        reader.close()
    events = [input_from_journal(row.type, row.data) for row in rows]
    rules: TableRules | None = None
    state: TableState | None = None
    rounds = 0
    cpu0 = time.process_time()
    for event in events:
        if isinstance(event, PowerUp):
            rules = event.rules
        assert rules is not None
        state = state or TableState.initial(rules)
        state, effects = step(rules, state, event)
        state.model_dump_json()
        journal_entries(effects)
        journal_input(event)
        rounds += event.TYPE == "settle"
    return time.process_time() - cpu0, rounds


async def main(runs: int, rounds: int, round_s: float) -> None:
    figures: dict[str, list[float]] = {}
    with PrivateBroker() as broker:
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as tmp:
                daemon = await daemon_round_cpu(broker, Path(tmp), rounds, round_s)
                cpu, settled = core_cpu(Path(tmp))
                core = cpu / max(1, settled)
            # A bare wake-up as often as the daemon's threads woke, on average, in that run.
            interval = daemon.wall_per_round_s / daemon.sleeps_per_round
            bare = bare_wake_up_cpu(interval, count=max(50, int(2 / interval)))
            wakes_floor = daemon.sleeps_per_round * bare
            for name, value in (
                ("daemon CPU per round (ms)", daemon.per_round_s * 1000),
                ("  of which its loop thread (ms)", daemon.loop_per_round_s * 1000),
                ("  its threads' sleeps + wake-ups", daemon.sleeps_per_round),
                ("  every ms one, on average", interval * 1000),
                ("bare wake-up as often (us, baseline)", bare * 1e6),
                ("daemon / its wake-ups bare", daemon.per_round_s / wakes_floor),
                ("core alone per round (ms, baseline)", core * 1000),
                ("daemon / core alone", daemon.per_round_s / core),
            ):
                figures.setdefault(name, []).append(value)
    print(f"runs: {runs}, rounds per run: {rounds}, one every {round_s} s")
    for name, values in figures.items():
        print(f"{name:<40} {spread(values, '8.3f')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--round-s", type=float, default=0.1)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.rounds, args.round_s))

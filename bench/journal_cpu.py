"""The journal's CPU per commit: in a table process, and cold against a raw SQLite commit.

Issue 15: every core step is committed by one journal thread (`Dispatcher._write`: each
step's `Stepped.commit()`, then `Store.commit_steps`, the mark's write included), and its
commits come a few ms apart, so its CPU is "cold" (caches and branch predictors taken by
everything else between two commits). Each run measures it twice:

- in situ: a table process (bench/table_process.py: the daemon on simulated devices, chips
  on two seats, the lock-out, the dealer settles) plays --rounds rounds; in that process,
  each commit's CPU (time.thread_time_ns, user + kernel, in the thread that commits it):
  its steps' `Stepped.commit()` and `Store.commit_steps`, less the time in `on_durable`
  (the hand-off to the loop: the relay's work when a lock-out is committed on the loop). No
  baseline is taken there: the figure is absolute, and the process's other work is real;
- cold, against a baseline: that table's inputs stepped through the core again, each with
  the effects and state it left, grouped into commits as the daemon grouped them (the
  inputs of one commit share its `ts`; a device's report carries its cursor as a
  key-value), and committed here as `Dispatcher._write` does (durable: WAL,
  synchronous=FULL, the mark fdatasynced); "to durable" is the CPU up to `on_durable`
  (SQLite's COMMIT returned). Beside each, in the same run, under the same pauses,
  interleaved commit by commit: the baseline, a bare one-row SQLite transaction (BEGIN
  IMMEDIATE, one INSERT, COMMIT; WAL, synchronous=FULL), the least a durable commit costs.
  Between two commits the thread sleeps --pause-ms (uniform, seeded), 2 to 10 ms by
  default: the cold case that matters.

Each run reports its medians per commit; min/median/max over the runs are printed, with
each run's ratio to its raw commit.

Run: .venv/bin/python bench/journal_cpu.py [--runs 3] [--rounds 40] [--pause-ms 2 10]
     [--journal PATH: re-step this journal instead (no in-situ figure)] [--dir DIR]
"""

from __future__ import annotations

import argparse
import atexit
import json
import random
import runpy
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from itertools import groupby
from pathlib import Path
from typing import Any

from figures import spread
from tablectl.simulators.broker import PrivateBroker

from tablectl.core.events import Event, PowerUp, TableRules, input_from_journal
from tablectl.core.table import Rejected, TableState, step
from tablectl.service.dispatcher import Stepped, Submission
from tablectl.store.journal import JournalReader, MarkLater, OnDurable, StepCommit, Store

HERE = Path(__file__).resolve().parent
# The inputs that come as a device's report (the simulated shuffler's): each moves its cursor.
REPORTS = ("shuffle_started", "shuffle_completed", "device_identified", "device_resumed")
CURSOR = "device.shuffler.cursor"
IN_SITU = "--in-table-process"  # this file, run as the table process (see `record`)


def record(rounds: int, into: Path) -> list[float]:
    """A table process plays `rounds` rounds into `into` (as in bench/round_cpu.py); each
    of its commits' CPU in microseconds, as it measured them."""
    with PrivateBroker() as broker:
        table = [sys.executable, __file__, IN_SITU, "--port", str(broker.port)]
        table += ["--table", "cpu-01", "--data-dir", str(into), "--round-s", "0.1"]
        out = subprocess.run(
            [*table, "--rounds", str(rounds)], check=True, capture_output=True, text=True
        ).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith('{"commits_us"')]
    assert lines, "the table process reported no commit"
    return [float(us) for us in lines[-1]["commits_us"]]


def in_table_process(argv: list[str]) -> None:
    """bench/table_process.py, with each commit's CPU measured in the thread that made it
    (printed as JSON when the process ends)."""
    commits: list[float] = []
    adding = threading.Lock()  # a mark written later adds to its commit from another thread
    made = threading.local()  # CPU of the Stepped.commit() calls for the next commit
    stepped_commit = Stepped.commit
    commit_steps = Store.commit_steps

    def timed_stepped_commit(self: Stepped) -> StepCommit:
        t0 = time.thread_time_ns()
        try:
            return stepped_commit(self)
        finally:
            made.ns = getattr(made, "ns", 0) + time.thread_time_ns() - t0

    def timed_commit_steps(
        self: Store,
        steps: Sequence[StepCommit],
        *,
        on_durable: OnDurable | None = None,
        mark_later: MarkLater | None = None,
    ) -> list[list[Any]]:
        handing_on = 0
        with adding:  # this commit's place: a mark written later adds its CPU there
            entry = len(commits)
            commits.append(0.0)

        def later(write: Callable[[], None]) -> None:
            def timed_write() -> None:
                t = time.thread_time_ns()
                try:
                    write()
                finally:
                    with adding:
                        commits[entry] += (time.thread_time_ns() - t) / 1000

            assert mark_later is not None
            mark_later(timed_write)

        def durable(rows: Any) -> None:
            nonlocal handing_on
            t = time.thread_time_ns()
            try:
                if on_durable is not None:
                    on_durable(rows)
            finally:
                handing_on += time.thread_time_ns() - t

        t0 = time.thread_time_ns()
        try:
            return commit_steps(
                self, steps, on_durable=durable, mark_later=None if mark_later is None else later
            )
        finally:
            cpu = time.thread_time_ns() - t0 - handing_on + getattr(made, "ns", 0)
            made.ns = 0
            with adding:
                commits[entry] += cpu / 1000

    Stepped.commit = timed_stepped_commit  # type: ignore[method-assign]
    Store.commit_steps = timed_commit_steps  # type: ignore[method-assign]
    atexit.register(lambda: print(json.dumps({"commits_us": commits}), flush=True))
    sys.argv = [str(HERE / "table_process.py"), *argv]
    runpy.run_path(str(HERE / "table_process.py"), run_name="__main__")


def batches(journal: Path) -> list[list[Stepped]]:
    """The journal's inputs stepped again, grouped into its commits (one `ts` each)."""
    reader = JournalReader(journal)
    try:
        rows = list(reader.inputs())
    finally:
        reader.close()
    rules: TableRules | None = None
    state: TableState | None = None
    out: list[list[Stepped]] = []
    cursor = 0
    for _, group in groupby(rows, key=lambda r: r.ts):
        stepped: list[Stepped] = []
        for row in group:
            event: Event = input_from_journal(row.type, row.data)
            if isinstance(event, PowerUp):
                rules = event.rules
            assert rules is not None, "a journal starts with a power-up"
            state = state or TableState.initial(rules)
            kv = None
            if row.type in REPORTS:
                cursor += 1
                kv = {CURSOR: f"2138704926:{cursor}"}
            try:
                state, effects = step(rules, state, event)
            except Rejected as exc:  # not journaled by the daemon: cannot be here
                raise AssertionError(f"input {row.input_seq} refused on replay") from exc
            stepped.append(Stepped(Submission(event), state, effects, kv))
        out.append(stepped)
    return out


Commit = Callable[[list[Stepped]], tuple[int, int]]  # CPU ns: the whole, up to durable


def _store(path: Path) -> Commit:
    store = Store(path, boot_id="01a24425-83e6-7e83-9cd0-372a09257342")
    durable_at: list[int] = []

    def on_durable(rows: object) -> None:
        durable_at.append(time.thread_time_ns())

    def commit(stepped: list[Stepped]) -> tuple[int, int]:
        t0 = time.thread_time_ns()
        # As Dispatcher._write: each step's commit made in the committing thread, written.
        store.commit_steps([item.commit() for item in stepped], on_durable=on_durable)
        t1 = time.thread_time_ns()
        return t1 - t0, durable_at.pop() - t0

    return commit


def _raw(path: Path) -> Commit:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    n = 0

    def commit(stepped: list[Stepped]) -> tuple[int, int]:
        nonlocal n
        n += 1
        t0 = time.thread_time_ns()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?, ?)", (n, "x"))
        db.execute("COMMIT")
        cpu = time.thread_time_ns() - t0
        return cpu, cpu

    return commit


def cold(
    where: Path, commits: list[list[Stepped]], pause_ms: tuple[float, float], seed: int
) -> dict[str, float]:
    """One pass over the commits: each kind's median CPU per commit, in microseconds."""
    rng = random.Random(seed)
    kinds = {"raw": _raw(where / "raw.sqlite3"), "store": _store(where / "store.sqlite3")}
    cpu: dict[str, list[int]] = {"raw": [], "store": [], "store, to durable": []}
    for n, stepped in enumerate(commits):
        for kind in kinds if n % 2 else reversed(kinds):
            time.sleep(rng.uniform(*pause_ms) / 1000)
            whole, durable = kinds[kind](stepped)
            cpu[kind].append(whole)
            if kind == "store":
                cpu["store, to durable"].append(durable)
    return {kind: statistics.median(v) / 1000 for kind, v in cpu.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=40, help="rounds the table plays")
    parser.add_argument("--journal", type=Path, help="re-step this table's journal instead")
    parser.add_argument("--pause-ms", type=float, nargs=2, default=(2.0, 10.0))
    parser.add_argument("--dir", type=Path, default=None, help="where the journals go")
    args = parser.parse_args()
    pause = (args.pause_ms[0], args.pause_ms[1])
    medians: list[dict[str, float]] = []
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            figures: dict[str, float] = {}
            journal = args.journal
            if journal is None:
                journal = Path(tmp) / "table" / "tablectl.sqlite3"
                in_situ = record(args.rounds, journal.parent)
                figures["in situ"] = statistics.median(in_situ)
            commits = batches(journal)
            figures.update(cold(Path(tmp), commits, pause, seed=n))
            medians.append(figures)
    print(
        f"{args.runs} runs; each {len(commits)} commits of {sum(map(len, commits))} steps; "
        "CPU per commit (us), the median of each run:"
    )
    for kind in medians[0]:
        label = "in a table process" if kind == "in situ" else f"cold: {kind}"
        print(f"  {label:<26} {spread([m[kind] for m in medians], '7.1f')}")
    print(f"  (cold: a pause of {pause[0]:g}-{pause[1]:g} ms before each commit)")
    print("ratios to the raw commit (per run):")
    for kind in ("store", "store, to durable"):
        ratios = [m[kind] / m["raw"] for m in medians]
        print(f"  {'cold: ' + kind + ' / raw':<30} {spread(ratios, '5.2f')}")


if __name__ == "__main__":
    if sys.argv[1:2] == [IN_SITU]:
        in_table_process(sys.argv[2:])
    else:
        main()

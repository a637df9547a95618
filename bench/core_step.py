"""CPU of one core step, cold and hot, against pydantic floors measured in the same moments.

The inputs are those of a journal the table process wrote (bench/table_process.py: Three Card
Poker, chips on two seats, the lock-out, the dealer settles; about nine steps a round), or of
any journal given with --journal (a tablectl.sqlite3, or a `.dump` such as tests/journals/*).
Every input is validated once, before anything is timed; then, on each run, they are stepped
through `core.table.step` from the initial state twice:

- cold: each measured call comes after its own --pause-ms sleep, as in the daemon, where steps
  come milliseconds apart and caches and branch predictors have moved on;
- hot: back to back, the figure a loop in a profiler shows.

Each step's CPU is timed with time.thread_time_ns, and so is what is done with its output in
the journal thread (the state's JSON for its hash, each record's `model_dump(mode="json")`,
the input's). The floors, from the same run under the same pauses and never a figure this
code sets: one pydantic `model_validate` of the input's journaled data, and a bare
`model_copy()` of the state the step was given. Figures are the mean per step over a run,
then min / median / max over --runs; "lock-out" and "chip" are those inputs' own means (the
lock-out's latency path, and what it waits behind).

Run: .venv/bin/python bench/core_step.py [--runs 3] [--pause-ms 3] [--journal PATH ...]
     (without --journal it records one first: --record-rounds, with a private Mosquitto)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from figures import spread

from tablectl.core.effects import Effect
from tablectl.core.events import Event, PowerUp, TableRules, input_from_journal
from tablectl.core.table import Rejected, TableState, step
from tablectl.service.dispatcher import journal_entries, journal_input
from tablectl.store.journal import JournalReader

HERE = Path(__file__).resolve().parent
Figures = dict[str, list[float]]


def record(data_dir: Path, rounds: int) -> Path:
    """A journal written by the real daemon (bench/table_process.py) on simulated devices."""
    from tablectl.simulators.broker import PrivateBroker

    async def run() -> None:
        with PrivateBroker() as broker:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(HERE / "table_process.py"),
                *("--port", str(broker.port), "--table", "core-01"),
                *("--data-dir", str(data_dir), "--round-s", "0.1", "--rounds", str(rounds)),
                stdout=asyncio.subprocess.DEVNULL,
            )
            async with asyncio.timeout(60 + rounds * 2):
                await proc.wait()

    asyncio.run(run())
    return data_dir / "tablectl.sqlite3"


def journaled(path: Path) -> list[tuple[Event, dict[str, Any]]]:
    """Every input of a journal (a database, or an SQL dump of one), with its stored data."""
    with tempfile.TemporaryDirectory() as tmp:
        if path.suffix == ".sql":
            db = Path(tmp) / "tablectl.sqlite3"
            with sqlite3.connect(db) as conn:
                conn.executescript(path.read_text())
            conn.close()
            path = db
        reader = JournalReader(path)
        try:
            rows = list(reader.inputs())
        finally:
            reader.close()
    return [(input_from_journal(row.type, row.data), row.data) for row in rows]


def cpu_ns(call: Callable[[], object]) -> int:
    t0 = time.thread_time_ns()
    call()
    return time.thread_time_ns() - t0


def journaled_json(effects: list[Effect], event: Event) -> None:
    """What the journal thread makes of a step besides the state: its records' and input's."""
    journal_entries(effects)
    journal_input(event)


def one_pass(inputs: list[tuple[Event, dict[str, Any]]], pause_s: float) -> dict[str, float]:
    """Step every input from the initial state; the mean CPU per step of each part (us)."""
    pause = time.sleep if pause_s > 0 else (lambda _: None)
    sums: dict[str, int] = {}
    counts: dict[str, int] = {}

    def add(name: str, ns: int) -> None:
        sums[name] = sums.get(name, 0) + ns
        counts[name] = counts.get(name, 0) + 1

    rules: TableRules | None = None
    state: TableState | None = None
    for event, data in inputs:
        if isinstance(event, PowerUp):
            rules = event.rules
        assert rules is not None
        state = state or TableState.initial(rules)
        given, cls = state, type(event)
        pause(pause_s)
        add("floor: model_validate(input)", cpu_ns(functools.partial(cls.model_validate, data)))
        pause(pause_s)
        add("floor: state.model_copy()", cpu_ns(given.model_copy))
        out: list[tuple[TableState, list[Effect]]] = []
        pause(pause_s)
        t0 = time.thread_time_ns()
        try:
            out.append(step(rules, given, event))
        except Rejected:
            out.append((given, []))
        ns = time.thread_time_ns() - t0
        add("step", ns)
        if event.TYPE == "lockout_pressed":
            add("step: lock-out", ns)
        elif event.TYPE == "chip_sensed":
            add("step: chip", ns)
        state, effects = out[0]
        pause(pause_s)
        add("state JSON", cpu_ns(state.model_dump_json))
        pause(pause_s)
        add("records + input JSON", cpu_ns(functools.partial(journaled_json, effects, event)))
    return {name: sums[name] / counts[name] / 1000 for name in sums}


def report(title: str, figures: Figures) -> None:
    print(title)
    for name, values in figures.items():
        print(f"  {name:<40} {spread(values, '8.1f')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pause-ms", type=float, default=3.0)
    parser.add_argument("--journal", type=Path, action="append", default=[])
    parser.add_argument("--record-rounds", type=int, default=40)
    parser.add_argument("--limit", type=int, default=0, help="step only the first N inputs")
    parser.add_argument("--json", action="store_true", help="one line of JSON, for scripts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = args.journal or [record(Path(tmp), args.record_rounds)]
        inputs = [pair for path in paths for pair in journaled(path)]
    if args.limit:
        inputs = inputs[: args.limit]
    settles = sum(event.TYPE == "settle" for event, _ in inputs)
    cold: Figures = {}
    hot: Figures = {}
    one_pass(inputs, 0)  # imports, pydantic's lazily built serializers
    for _ in range(args.runs):
        for figures, pause_s in ((cold, args.pause_ms / 1000), (hot, 0.0)):
            for name, value in one_pass(inputs, pause_s).items():
                figures.setdefault(name, []).append(value)
    for figures in (cold, hot):
        for floor in ("floor: model_validate(input)", "floor: state.model_copy()"):
            ratios = zip(figures["step"], figures[floor], strict=True)
            figures[f"step / {floor}"] = [step_us / floor_us for step_us, floor_us in ratios]
    if args.json:
        print(json.dumps({"inputs": len(inputs), "cold": cold, "hot": hot}))
        return
    print(
        f"{len(inputs)} inputs ({settles} rounds settled) from {', '.join(map(str, paths))}; "
        f"{args.runs} runs; CPU per step in us (mean over a run), ratios unitless"
    )
    report(f"cold ({args.pause_ms} ms before each measured call)", cold)
    report("hot (back to back)", hot)


if __name__ == "__main__":
    main()

"""What the journal's mark costs a commit, against a raw SQLite commit measured in the same run.

The mark (tablectl/store/mark.py) is a 4 KiB slot rewritten in place and fdatasynced after
each (group) commit, before the next may begin; the rows are handed on between the two
(`on_durable`), so the mark is off the path from a step to its publication. Each run times,
interleaved commit by commit so that they share the machine's noise:
- raw: a bare SQLite transaction of the same content (three rows, an input, the table state
  of about 2 KB; WAL, synchronous=FULL), no hashing: the least a durable commit costs here;
- mark: the mark's write alone (a pwrite of one slot and an fdatasync);
- store, no mark: `Store.commit_steps` with the mark's write left out (hashes, JSON, the same
  transaction): the store as it was;
- store: `Store.commit_steps` as the daemon runs it, the mark included (what the journal
  thread spends: the next commit waits for it);
- store, to durable: the same commits, until `on_durable` is called (SQLite's COMMIT
  returned; the mark not yet written): what a step waits for before it may be published.
Each figure is the median of a run's commits; runs repeat, and min/median/max over the runs
are printed (2 noisy cores). The group commit (`Dispatcher.consume`) shares one commit, and so
one mark write, among every input that queued meanwhile.

Run: .venv/bin/python bench/journal_mark.py [--runs 7] [--commits 200] [--steps 1] [--dir DIR]
(--steps: steps per group commit, as a burst of inputs shares one.)
(DIR: a directory on the disk the table's data_dir lives on; default a temporary one.)
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tablectl.config import load_config
from tablectl.core.table import TableState
from tablectl.store.chain import JournalHead
from tablectl.store.journal import SCHEMA, StepCommit, StepInput, Store
from tablectl.store.mark import JournalMark

CONFIG = Path(__file__).resolve().parents[1] / "config" / "three-card-poker.toml"
ENTRIES: list[tuple[str, dict[str, Any]]] = [
    ("wager.accepted", {"round_id": 7, "seat": 3, "wager_cents": 100}),
    ("wagers.counted", {"round_id": 7, "seats": [1, 3, 5], "rule": "649a.8(b)"}),
    ("meter.contribution", {"round_id": 7, "seat": 3, "contribution": 145_000}),
]


def _state_json() -> str:
    state = TableState.initial(load_config(CONFIG).rules())
    return state.model_dump_json()


Commit = Callable[[int], float | None]  # a commit; when it was durable, if it says


def _raw(path: Path, state_json: str, steps: int) -> Commit:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.executescript(SCHEMA)

    def commit(n: int) -> None:
        db.execute("BEGIN IMMEDIATE")
        for step in range(steps):
            first = (n * steps + step) * len(ENTRIES)
            for k, (type_, data) in enumerate(ENTRIES):
                db.execute(
                    "INSERT INTO journal (seq, event_id, ts, boot_id, type, data, prev_hash, "
                    "hash) VALUES (?, ?, '2024-05-01T10:00:00.000Z', 'b', ?, ?, '', '')",
                    (first + k + 1, f"e{first + k}", type_, str(data)),
                )
            db.execute(
                "INSERT INTO inputs (input_seq, ts, boot_id, type, data, state_hash) "
                "VALUES (?, '2024-05-01T10:00:00.000Z', 'b', 'chip_sensed', '{}', '')",
                (n * steps + step + 1,),
            )
        db.execute(
            "INSERT INTO kv VALUES ('table_state', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (state_json,),
        )
        db.execute("COMMIT")

    return commit


def _store(path: Path, state_json: str, steps: int, *, mark: bool) -> Commit:
    store = Store(path, boot_id="bench")
    if not mark:
        # The store as it was before the mark: the same commit path, the write left out.
        store._mark.write = lambda gen, base, next_: None  # type: ignore[method-assign]
    step = StepCommit(state_json, ENTRIES, StepInput("chip_sensed", {"seat": 3}), None)
    durable: list[float] = []

    def on_durable(rows: object) -> None:
        durable.append(time.perf_counter())

    def commit(n: int) -> float | None:
        store.commit_steps([step] * steps, on_durable=on_durable)
        return durable.pop()

    return commit


def _mark(path: Path) -> Commit:
    mark = JournalMark(path)
    head = JournalHead()

    def commit(n: int) -> None:
        mark.write(n + 1, head, JournalHead(seq=n))

    return commit


def run(where: Path, commits: int, steps: int, state_json: str) -> dict[str, float]:
    kinds = {
        "raw": _raw(where / "raw.sqlite3", state_json, steps),
        "mark": _mark(where / "alone.mark"),
        "store, no mark": _store(where / "nomark.sqlite3", state_json, steps, mark=False),
        "store": _store(where / "store.sqlite3", state_json, steps, mark=True),
    }
    times: dict[str, list[float]] = {k: [] for k in kinds}
    times["store, to durable"] = []
    for n in range(commits):
        for kind, commit in kinds.items():
            t0 = time.perf_counter()
            durable = commit(n)
            times[kind].append(time.perf_counter() - t0)
            if kind == "store" and durable is not None:
                times["store, to durable"].append(durable - t0)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--steps", type=int, default=1, help="steps per (group) commit")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    state_json = _state_json()
    medians: list[dict[str, float]] = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            medians.append(run(Path(tmp), args.commits, args.steps, state_json))

    def spread(values: list[float], unit: str = " ms") -> str:
        return (
            f"min {min(values):.3f}{unit}  median {statistics.median(values):.3f}{unit}  "
            f"max {max(values):.3f}{unit}"
        )

    print(
        f"{args.runs} runs x {args.commits} commits of {args.steps} step(s); per-commit "
        "medians of each run:"
    )
    for kind in medians[0]:
        print(f"  {kind:<17} {spread([m[kind] for m in medians])}")
    print("ratios (per run):")
    ratios = {
        "mark / raw": [m["mark"] / m["raw"] for m in medians],
        "store / store, no mark": [m["store"] / m["store, no mark"] for m in medians],
        "store / raw": [m["store"] / m["raw"] for m in medians],
        "to durable / raw": [m["store, to durable"] / m["raw"] for m in medians],
        "to durable / no mark": [m["store, to durable"] / m["store, no mark"] for m in medians],
    }
    for name, values in ratios.items():
        print(f"  {name:<23} {spread(values, unit='x')}")


if __name__ == "__main__":
    main()

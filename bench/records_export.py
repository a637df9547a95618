"""The records export of a long session against `journal export` of the same rows.

A session of N rounds is journaled by stepping the core (simulators/journal_session.py); then,
in the same run and repeatedly, the same period is exported as `tablectl journal export
--format csv` does it (the baseline: every row, no routing, no signing) and as `tablectl
records` does it, in CSV only and in CSV, JSON lines and PDF. Times are min/median/max of the
runs and the ratio of medians to the baseline's; sizes are the files written.

Run: .venv/bin/python bench/records_export.py [--rounds 600] [--runs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from tablectl.simulators.journal_session import play_session

from tablectl import cli
from tablectl.records.export import ExportRequest, Format, export_records
from tablectl.records.signing import create_key, load_key


def timed(run: Callable[[], None], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        out.append(time.perf_counter() - start)
    return out


def size(path: Path) -> int:
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else (path.stat().st_size)
    )


def main(rounds: int, runs: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="tablectl-bench-records-"))
    try:
        database = work / "tablectl.sqlite3"
        start = datetime(2024, 6, 1, 10, tzinfo=UTC)
        began = time.perf_counter()
        table, facts = play_session(database, rounds=rounds, start=start)
        table.close()
        assert facts.ended is not None
        end = facts.ended + timedelta(seconds=1)
        print(
            f"session: {rounds} rounds, {facts.rounds_settled} settled, {facts.hits} hits, "
            f"{(facts.ended - start) / timedelta(hours=1):.1f} h of play, "
            f"{table.store.last_seq:,} journal rows, {size(database) / 1e6:.1f} MB "
            f"(journaled in {time.perf_counter() - began:.1f} s)"
        )
        key_path = work / "key"
        create_key(key_path)
        key = load_key(key_path)
        out = work / "out"

        def baseline() -> None:
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            argv = ["journal", "export", "--data-dir", str(work), "--format", "csv"]
            argv += ["--since", start.isoformat(), "--until", end.isoformat()]
            with contextlib.redirect_stderr(io.StringIO()):  # its one-line summary
                assert cli.main([*argv, "-o", str(out / "journal.csv")]) == 0

        def records(formats: tuple[Format, ...]) -> Callable[[], None]:
            def run() -> None:
                shutil.rmtree(out, ignore_errors=True)
                request = ExportRequest(
                    database=database,
                    site="bench",
                    table="t1",
                    game="three-card-poker",
                    start=start,
                    end=end,
                    zone=ZoneInfo("America/New_York"),
                    formats=formats,
                    out=out,
                    generator="bench",
                )
                export_records(request, key)

            return run

        cases: list[tuple[str, Callable[[], None]]] = [
            ("journal export --format csv (baseline)", baseline),
            ("records --format csv", records(("csv",))),
            ("records --format csv,jsonl,pdf", records(("csv", "jsonl", "pdf"))),
        ]
        base = None
        print(f"{'':<40} {'min s':>7} {'median':>7} {'max':>7} {'ratio':>6} {'size MB':>8}")
        for label, run in cases:
            times = timed(run, runs)
            median = statistics.median(times)
            base = base or median
            print(
                f"{label:<40} {min(times):>7.2f} {median:>7.2f} {max(times):>7.2f} "
                f"{median / base:>6.2f} {size(out) / 1e6:>8.1f}"
            )
        pdf = out / "report.pdf"
        print(f"report.pdf: {pdf.stat().st_size / 1e3:.0f} kB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=600, help="about 16 hours of play")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    main(args.rounds, args.runs)

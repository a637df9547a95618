"""`tablectl journal export` (a time range, JSON lines or CSV) and `journal tail -f`."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tablectl import cli
from tablectl.store.journal import Store, canonical_json

TABLECTL = Path(sys.executable).with_name("tablectl")
HOURS = [datetime(2024, 5, 1, h, 0, tzinfo=UTC) for h in (10, 11, 12)]


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    """Three rows, journaled at 10:00, 11:00 and 12:00 UTC on 1 May 2024."""
    times = iter(HOURS)
    store = Store(tmp_path / "tablectl.sqlite3", boot_id="b1", clock=lambda: next(times))
    for n, hour in enumerate(HOURS, start=1):
        store.commit("{}", [("round.opened", {"round_id": n, "at": hour.hour})])
    store.close()
    return tmp_path


@pytest.fixture
def new_york() -> Iterator[None]:
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def export(journal: Path, *argv: str) -> int:
    return cli.main(["journal", "export", "--data-dir", str(journal), *argv])


def test_export_a_time_range_as_json_lines(
    journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert export(journal, "--since", "2024-05-01T10:30Z", "--until", "2024-05-01T12:00Z") == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["seq"] for r in rows] == [2]  # since inclusive, until exclusive
    assert rows[0]["data"] == {"round_id": 2, "at": 11}
    assert rows[0]["ts"] == "2024-05-01T11:00:00.000Z" and rows[0]["boot_id"] == "b1"
    assert "exported 1 rows (seq 2..2)" in err

    assert export(journal) == 0  # everything up to now
    assert len(capsys.readouterr().out.splitlines()) == 3


def test_times_without_a_zone_are_local(
    journal: Path, new_york: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # 06:30 and 08:00 in New York (EDT, UTC-4) are 10:30 and 12:00 UTC.
    assert export(journal, "--since", "2024-05-01T06:30", "--until", "2024-05-01T08:00") == 0
    assert [json.loads(line)["seq"] for line in capsys.readouterr().out.splitlines()] == [2]


def test_export_csv_to_a_file_keeps_what_the_hashes_cover(
    journal: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.csv"
    assert export(journal, "--format", "csv", "--output", str(target)) == 0
    assert capsys.readouterr().out == ""
    rows = list(csv.DictReader(io.StringIO(target.read_text())))
    assert [r["seq"] for r in rows] == ["1", "2", "3"]
    assert rows[1]["data"] == canonical_json({"round_id": 2, "at": 11})
    assert [r["prev_hash"] for r in rows[1:]] == [r["hash"] for r in rows[:-1]]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "2024-05-02", "--until", "2024-05-01"], "is not before --until"),
        (["--since", "last tuesday"], "give a time such as 2024-05-01"),
        (["--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_export_errors_are_json_under_json(
    journal: Path, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert export(journal, *argv, "--json") == 2
    reply = json.loads(capsys.readouterr().out)
    assert reply["ok"] is False and message in reply["error"]


async def test_tail_follows_new_rows(journal: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        str(TABLECTL),
        "journal",
        "tail",
        "-f",
        "-n",
        "1",
        "--data-dir",
        str(journal),
        "--json",
        stdout=asyncio.subprocess.PIPE,
        # Ctrl-C as at a terminal: a suite started in the background (`make test &`, nohup)
        # ignores SIGINT, and Python then leaves it ignored in its children too.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(30):
            assert json.loads(await proc.stdout.readline())["seq"] == 3
            store = Store(journal / "tablectl.sqlite3", boot_id="b2")
            store.commit("{}", [("round.opened", {"round_id": 4})])
            store.close()
            row = json.loads(await proc.stdout.readline())
            assert row["seq"] == 4 and row["data"] == {"round_id": 4}
            proc.send_signal(signal.SIGINT)  # Ctrl-C ends it quietly
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

"""The SQLite store: atomic commits, seq never reused, tamper-evident chain, forward-only acks."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl.core.effects import MeterContribution, MeterReading
from tablectl.mqtt.contract import envelope_json
from tablectl.store.journal import JournalReader, JournalRow, StepCommit, Store
from tablectl.store.page_cache import READER_KIB, WRITER_KIB


def test_commit_appends_rows_and_state_together(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    rows = store.commit('{"n": 1}', [("a", {"x": 1}), ("b", {"y": 2})])
    assert [r.seq for r in rows] == [1, 2]
    assert store.get("table_state") == '{"n": 1}'
    assert store.rows_after(1) == rows[1:]
    (first,) = store.reader().outbox_after(0, limit=1)
    envelope = json.loads(
        envelope_json(
            type_=first.type,
            event_id=first.event_id,
            site="s",
            table="t",
            boot_id=first.boot_id,
            seq=first.seq,
            ts=first.ts,
            replay=False,
            data_json=first.data_json,
        )
    )
    assert (envelope["event_id"], envelope["seq"], envelope["data"]) == (
        rows[0].event_id,
        1,
        {"x": 1},
    )


def test_a_failed_commit_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    store.commit("{}", [("a", {})])
    with pytest.raises(TypeError):
        store.commit('{"half": true}', [("ok", {}), ("bad", {"x": object()})])
    assert store.last_seq == 1 and store.get("table_state") == "{}"
    assert [r.type for r in store.rows_after(0)] == ["a"]
    assert store.commit("{}", [("c", {})])[0].seq == 2


def test_seq_continues_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    store = Store(path, boot_id="b1")
    store.commit("{}", [("a", {})])
    store.close()
    again = Store(path, boot_id="b2")
    row = again.commit("{}", [("b", {})])[0]
    assert row.seq == 2 and row.boot_id == "b2"
    assert again.verify_chain() is None


def test_an_edited_row_breaks_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite3"
    store = Store(path, boot_id="b1")
    store.commit("{}", [("jackpot.hit", {"amount_cents": 100}), ("x", {}), ("y", {})])
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("""UPDATE journal SET data = '{"amount_cents":100000}' WHERE seq = 1""")
    assert Store(path, boot_id="b2").verify_chain() == 1


def test_durability_pragmas(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_each_connection_the_store_keeps_open_has_a_bounded_page_cache(tmp_path: Path) -> None:
    """SQLite keeps a connection's page cache at its high-water mark until it closes (2,000
    KiB by default): the daemon's long-lived connections are held to what their work needs
    (store/page_cache.py; issue 29, flat memory)."""
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    readers = [store.reader(), JournalReader(store.path)]
    cache_kib = [-int(store._db.execute("PRAGMA cache_size").fetchone()[0])]
    cache_kib += [-int(r._db.execute("PRAGMA cache_size").fetchone()[0]) for r in readers]
    assert cache_kib == [WRITER_KIB, READER_KIB, READER_KIB]
    assert sum(cache_kib) < 2_000  # together, less than one connection's default


def test_acks_only_move_forward_and_never_past_the_journal(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    store.commit("{}", [("a", {}), ("b", {}), ("c", {})])
    assert store.record_acks({"pgs": 2, "audit": 1}) == {"pgs": 2, "audit": 1}
    assert store.record_acks({"pgs": 1, "audit": 9}) == {}  # backwards; past the journal
    assert store.acks() == {"pgs": 2, "audit": 1}
    store.close()
    assert Store(tmp_path / "t.sqlite3", boot_id="b2").acks() == {"pgs": 2, "audit": 1}


def test_journal_cli_verifies_and_tails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tablectl import cli

    from .conftest import EXAMPLE_CONFIG

    config = tmp_path / "table.toml"
    data_dir = tmp_path / "data"
    config.write_text(
        EXAMPLE_CONFIG.read_text().replace(
            'data_dir = "/var/lib/tablectl"', f'data_dir = "{data_dir}"'
        )
    )
    assert cli.main(["journal", "verify", "--config", str(config)]) == 1  # nothing yet
    store = Store(data_dir / "tablectl.sqlite3", boot_id="b1")
    store.commit("{}", [("round.opened", {"round_id": 1}), ("wager.accepted", {"seat": 2})])
    store.close()
    assert cli.main(["journal", "verify", "--config", str(config)]) == 0
    assert "intact, 2 rows" in capsys.readouterr().out
    assert cli.main(["journal", "tail", "--config", str(config), "-n", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["type"] == "wager.accepted"
    with sqlite3.connect(data_dir / "tablectl.sqlite3") as db:
        db.execute("DELETE FROM journal WHERE seq = 1")
    assert cli.main(["journal", "verify", "--config", str(config)]) == 1
    assert "does not chain at seq 2" in capsys.readouterr().err


def test_a_rows_meter_is_read_through_its_typed_record(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    reading = MeterReading(meter_id="tcp-prog", meter_cents=100_145, meter_carry=2_500)
    contribution = MeterContribution(
        round_id=1,
        seat=2,
        wager_cents=100,
        rate_bp=1450,
        contribution_ten_thousandths_cent=145_000,
        meter=reading,
    )
    store.commit(
        "{}",
        [
            (MeterContribution.TYPE, contribution.model_dump(mode="json")),
            # A record of a type that never changes a meter is not one, whatever its text.
            ("wager.rejected", {"round_id": 1, "seat": 3, "reason": '"meter":{', "rule": "x"}),
        ],
    )
    first, second = store.reader().outbox_after(0, limit=2)
    assert first.meter_reading() == reading
    assert second.meter_reading() is None
    assert store.reader().last_meter_row("tcp-prog") == (1, first.ts, 100_145)


def test_a_row_carries_its_data_as_stored(tmp_path: Path) -> None:
    """data_json is the `data` column's text exactly: what the hash covers, and what is
    published without reading the row back."""
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    data = {"b": [1, 2], "a": "é", "amount_cents": 10**15 + 1}
    (row,) = store.commit("{}", [("x", data)])
    (stored,) = store._db.execute("SELECT data FROM journal WHERE seq = 1").fetchone()
    assert row.data_json == stored == '{"a":"\\u00e9","amount_cents":1000000000000001,"b":[1,2]}'
    assert json.loads(row.data_json) == row.data == data
    assert store.rows_between(1, 1) == [row] == store.rows_after(0)
    assert store.reader().rows_between(1, 1) == [row]


def test_rows_are_handed_on_once_durable_before_the_mark_is_written(tmp_path: Path) -> None:
    """on_durable runs in the committing thread after SQLite's COMMIT: the rows are on disk
    and readers see them, while the mark still holds the commit before; the mark's record
    of the commit is written before commit_steps returns."""
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    store.commit("{}", [("a", {})])
    before = store.mark().record
    reader = store.reader()
    seen: list[tuple[list[list[int]], int, list[int], int | None, str | None]] = []

    def on_durable(rows: list[list[JournalRow]]) -> None:
        record = store.mark().record
        with sqlite3.connect(tmp_path / "t.sqlite3") as other:  # on disk, not in this one
            (gen,) = other.execute(
                "SELECT value FROM kv WHERE key = 'journal.commit_gen'"
            ).fetchone()
        seen.append(
            (
                [[r.seq for r in step] for step in rows],
                store.last_seq,
                [r.seq for r in reader.outbox_after(1, limit=10)],
                None if record is None else record.next.seq,
                gen,
            )
        )

    steps = [
        StepCommit("{}", [("b", {}), ("c", {})]),
        StepCommit("{}", []),
        StepCommit("{}", [("d", {})]),
    ]
    rows = store.commit_steps(steps, on_durable=on_durable)
    assert before is not None and before.gen == 1
    assert seen == [([[2, 3], [], [4]], 4, [2, 3, 4], 1, "2")]
    assert [[r.seq for r in step] for step in rows] == [[2, 3], [], [4]]
    after = store.mark().record
    assert after is not None and after.gen == 2 and after.next == store.head
    assert after.base == before.next and after.trailing


def test_a_failing_hand_off_still_leaves_the_commit_marked(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")

    def on_durable(rows: list[list[JournalRow]]) -> None:
        raise RuntimeError("the loop is gone")

    with pytest.raises(RuntimeError, match="the loop is gone"):
        store.commit_steps([StepCommit("{}", [("a", {})])], on_durable=on_durable)
    record = store.mark().record
    assert store.last_seq == 1 and record is not None and record.next == store.head
    assert store.commit("{}", [("b", {})])[0].seq == 2


def test_a_commit_that_changes_nothing_writes_no_mark(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    store.commit("{}", [("a", {})], kv={"device.shoe.cursor": "1:1"})
    record = store.mark().record
    store.commit_steps([StepCommit("{}", [], None, {"device.shoe.cursor": "1:1"})])
    assert store.mark().record == record and store.get("journal.commit_gen") == "1"
    store.commit_steps([StepCommit("{}", [], None, {"device.shoe.cursor": "1:2"})])
    moved = store.mark().record
    assert moved is not None and moved.gen == 2 and store.get("journal.commit_gen") == "2"


def test_a_fault_point_can_be_named_for_a_whole_process(tmp_path: Path) -> None:
    """TABLECTL_FAULT_POINT=journal:POINT kills a process (a daemon) in its store's commit."""
    code = (
        "import sys; from pathlib import Path; from tablectl.store.journal import Store\n"
        "store = Store(Path(sys.argv[1]), boot_id='b1')\n"
        "store.commit('{}', [('a', {})]); store.commit('{}', [('b', {})]); sys.exit(3)\n"
    )
    path = tmp_path / "t.sqlite3"
    env = {**os.environ, "TABLECTL_FAULT_POINT": "journal:committed#2"}
    ran = subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=False)
    assert ran.returncode == -signal.SIGKILL
    store = Store(path, boot_id="b2")
    record = store.mark().record
    assert store.last_seq == 2 and record is not None and record.next.seq == 1
    assert store.get("journal.commit_gen") == "2"

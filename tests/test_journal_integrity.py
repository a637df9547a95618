"""A journal that proves it is whole (issue 16, item 3): every tamper an audit tried is found
by `journal verify` or refuses the daemon's start, naming the check; what can be mended
honestly is mended by a journaled `journal recover`, the rest stays refused; a crash at any
point of a commit never looks like tampering; old journals still verify."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tablectl import cli
from tablectl.config import load_config
from tablectl.core.events import ShuffleCompleted, ShuffleStarted
from tablectl.core.table import TableState, step
from tablectl.service.dispatcher import journal_entries, journal_input
from tablectl.service.replay import replay
from tablectl.service.startup import StartupError, open_journal
from tablectl.store.chain import JournalHead, row_digest, row_hash
from tablectl.store.integrity import (
    Accept,
    Check,
    VerifyReport,
    check_integrity,
    verify_journal,
)
from tablectl.store.journal import (
    HandedMark,
    JournalReader,
    JournalRow,
    StepCommit,
    Store,
    utc_now,
)
from tablectl.store.mark import SLOT, MarkRecord, legacy_handed_path, mark_path, read_mark
from tablectl.util import instance_lock

from .conftest import EXAMPLE_CONFIG
from .test_replay import session

TABLECTL = Path(sys.executable).with_name("tablectl")
CURSOR = "device.shuffler.cursor"


@dataclass
class Table:
    config: Path

    @property
    def db(self) -> Path:
        return load_config(self.config).storage.database

    def sql(self, statement: str, *params: object) -> None:
        with contextlib.closing(sqlite3.connect(self.db)) as db, db:
            db.execute(statement, params)

    def last_seq(self) -> int:
        with contextlib.closing(sqlite3.connect(self.db)) as db:
            return int(db.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])


def journal_play(
    store: Store, rounds: int, seed: int, cursor_boot: int = 5, *, commits: int | None = None
) -> None:
    """Play a session through the core, as the daemon journals it: each input with its
    rows and state, a shuffler report with the device's cursor (commits: only that many
    of its inputs, one commit each)."""
    rules = load_config(EXAMPLE_CONFIG).rules()
    saved = store.get("table_state")
    state = TableState.model_validate_json(saved) if saved else TableState.initial(rules)
    cursor = int((store.get(CURSOR) or "0:0").split(":")[1])
    for event in list(session(rules, rounds, seed))[:commits]:
        state, effects = step(rules, state, event)
        kv = None
        if isinstance(event, ShuffleStarted | ShuffleCompleted):
            cursor += 1
            kv = {CURSOR: f"{cursor_boot}:{cursor}"}
        store.commit(state.model_dump_json(), journal_entries(effects), journal_input(event), kv)


def new_table(tmp_path: Path) -> Table:
    """A table whose journal has not been opened yet."""
    data = tmp_path / "data"
    config = tmp_path / "table.toml"
    config.write_text(
        EXAMPLE_CONFIG.read_text()
        .replace('data_dir = "/var/lib/tablectl"', f'data_dir = "{data}"')
        .replace('backend = "auto"', 'backend = "mock"')
    )
    return Table(config)


def make_table(tmp_path: Path, seed: int = 7) -> Table:
    """A table that has played a few rounds: its rows, inputs, a device cursor, an
    acknowledgement from its backend (pgs) and rows handed to a broker."""
    table = new_table(tmp_path)
    store = Store(table.db, boot_id="b1")
    journal_play(store, rounds=3, seed=seed)
    store.record_acks({"pgs": store.last_seq - 2})
    handed = store.handed_mark()
    handed.advance(store.last_seq - 1)
    handed.close()
    store.close()
    return table


def verify(table: Table, capsys: pytest.CaptureFixture[str]) -> tuple[int, VerifyReport]:
    code = cli.main(["journal", "verify", "--config", str(table.config), "--json"])
    return code, VerifyReport.model_validate_json(capsys.readouterr().out)


def at_start(table: Table) -> set[Check]:
    """The checks the daemon's start-up refuses on (the one call in Daemon.run)."""
    with contextlib.closing(Store(table.db, boot_id="start")) as store:
        return {p.check for p in check_integrity(store, ["pgs"])}


def recover(
    table: Table, capsys: pytest.CaptureFixture[str], *accept: str
) -> tuple[int, dict[str, object]]:
    argv = ["journal", "recover", "--config", str(table.config), "--by", "T9", "--json"]
    for what in accept:
        argv += ["--accept", what]
    code = cli.main(argv)
    return code, json.loads(capsys.readouterr().out)


def remove_database(table: Table) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{table.db}{suffix}").unlink(missing_ok=True)


# --- the tamper cases --------------------------------------------------------------------


def ack_past_the_end(table: Table) -> None:
    table.sql("UPDATE acks SET seq = 999999 WHERE backend_id = 'pgs'")


def ack_of_an_unknown_backend(table: Table) -> None:
    table.sql("INSERT INTO acks VALUES ('rogue', 3)")


def zero_length_database(table: Table) -> None:
    remove_database(table)
    table.db.touch()


def database_deleted(table: Table) -> None:
    remove_database(table)


def rolled_back(table: Table) -> None:
    """A copy of the database from earlier put back, consistently (the mark is today's)."""
    copy = table.db.with_name("earlier.sqlite3")
    shutil.copy(table.db, copy)
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        journal_play(store, rounds=1, seed=99)
    remove_database(table)
    shutil.copy(copy, table.db)


def backup(table: Table, name: str) -> Path:
    """A consistent copy of the database (SQLite's online backup)."""
    copy = table.db.with_name(name)
    with (
        contextlib.closing(sqlite3.connect(table.db)) as db,
        contextlib.closing(sqlite3.connect(copy)) as to,
    ):
        db.backup(to)
    return copy


def last_commit_taken_away(table: Table) -> None:
    """The database as it was before its last commit put back, the table at rest (the mark
    is today's). Written after its commit, the mark has seen that commit land."""
    copy = backup(table, "before.sqlite3")
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        store.commit(store.get("table_state") or "", [("x", {})], None, {CURSOR: "6:1"})
    remove_database(table)
    shutil.copy(copy, table.db)


def mark_two_commits_old(table: Table) -> None:
    """The mark put back from a copy taken two commits ago (no crash leaves that)."""
    copy = mark_path(table.db).read_bytes()
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        journal_play(store, rounds=1, seed=99, commits=2)
    mark_path(table.db).write_bytes(copy)


def tail_deleted(table: Table) -> None:
    last = table.last_seq()
    table.sql("DELETE FROM journal WHERE seq > ?", last - 3)


def tail_and_its_inputs_deleted(table: Table) -> None:
    last = table.last_seq()
    table.sql("DELETE FROM journal WHERE seq > ?", last - 3)
    table.sql("DELETE FROM inputs WHERE last_seq > ? OR first_seq > ?", last - 3, last - 3)


def boot_id_edited(table: Table) -> None:
    table.sql("UPDATE journal SET boot_id = 'forged' WHERE seq = 5")


def boot_id_of_the_last_row_edited(table: Table) -> None:
    table.sql("UPDATE journal SET boot_id = 'forged' WHERE seq = ?", table.last_seq())


def cursor_edited(table: Table) -> None:
    table.sql("UPDATE kv SET value = '5:999' WHERE key = ?", CURSOR)


def cursor_made_garbage(table: Table) -> None:
    table.sql("UPDATE kv SET value = 'x' WHERE key = ?", CURSOR)


def state_edited(table: Table) -> None:
    with contextlib.closing(sqlite3.connect(table.db)) as db, db:
        (saved,) = db.execute("SELECT value FROM kv WHERE key = 'table_state'").fetchone()
        state = json.loads(saved)
        state["meter"]["cents"] += 100_000
        db.execute(
            "UPDATE kv SET value = ? WHERE key = 'table_state'",
            (json.dumps(state, separators=(",", ":")),),
        )


def input_edited(table: Table) -> None:
    with contextlib.closing(sqlite3.connect(table.db)) as db, db:
        seq, data = db.execute(
            "SELECT input_seq, data FROM inputs WHERE type = 'chip_sensed' LIMIT 1"
        ).fetchone()
        forged = json.loads(data)
        forged["seat"] = forged["seat"] % 7 + 1
        db.execute("UPDATE inputs SET data = ? WHERE input_seq = ?", (json.dumps(forged), seq))


def input_state_hash_edited(table: Table) -> None:
    table.sql("UPDATE inputs SET state_hash = ? WHERE input_seq = 7", "0" * 64)


def database_replaced(table: Table) -> None:
    """Another table's journal (its own mark left behind) in this one's place."""
    (table.config.parent / "other").mkdir()
    other = make_table(table.config.parent / "other", seed=8)
    remove_database(table)
    shutil.copy(other.db, table.db)


def mark_deleted(table: Table) -> None:
    mark_path(table.db).unlink()


def mark_made_garbage(table: Table) -> None:
    with mark_path(table.db).open("r+b") as f:
        f.write(b"x" * (2 * SLOT))


def handed_past_the_end(table: Table) -> None:
    mark = HandedMark(mark_path(table.db))
    mark.advance(999_999)
    mark.close()


def formula_downgraded(table: Table) -> None:
    table.sql("UPDATE journal SET hash_v = 1 WHERE seq = ?", table.last_seq())


def forged_row_appended(table: Table) -> None:
    """A row added past the end, its hash computed as the store would."""
    with contextlib.closing(sqlite3.connect(table.db)) as db, db:
        seq, prev = db.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        args = (prev, seq + 1, "0192-forged", "2024-05-01T10:00:00.000Z", "b1", "x", "{}")
        db.execute(
            "INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?, ?, 2)",
            (seq + 1, *args[2:], prev, row_digest(2, *args)),
        )


@dataclass(frozen=True)
class Tamper:
    act: Callable[[Table], None]
    check: Check
    accept: tuple[str, ...] = ()  # () : nothing here can mend it
    at_start: bool = True  # the daemon refuses to start on it (else `verify` finds it)
    recovers: bool = True  # with accept given: recover mends it (else replay refuses)


TAMPERS = [
    Tamper(ack_past_the_end, Check.ACKS, ("acks",)),
    Tamper(ack_of_an_unknown_backend, Check.ACKS, ("acks",)),
    Tamper(zero_length_database, Check.MARK),
    Tamper(database_deleted, Check.MARK),
    Tamper(rolled_back, Check.MARK),
    Tamper(last_commit_taken_away, Check.MARK),
    Tamper(mark_two_commits_old, Check.MARK, ("mark",)),
    Tamper(tail_deleted, Check.MARK),
    Tamper(tail_and_its_inputs_deleted, Check.MARK),
    Tamper(boot_id_edited, Check.CHAIN, at_start=False),
    Tamper(boot_id_of_the_last_row_edited, Check.CHAIN),
    Tamper(cursor_edited, Check.CURSORS, ("cursors",)),
    Tamper(cursor_made_garbage, Check.CURSORS, ("cursors",)),
    Tamper(state_edited, Check.STATE, ("state",)),
    Tamper(input_edited, Check.INPUTS, at_start=False),
    Tamper(input_state_hash_edited, Check.INPUTS, at_start=False),
    Tamper(database_replaced, Check.MARK),
    Tamper(mark_deleted, Check.MARK, ("mark",)),
    Tamper(mark_made_garbage, Check.MARK, ("mark",)),
    Tamper(handed_past_the_end, Check.HANDED, ("handed",)),
    Tamper(formula_downgraded, Check.CHAIN),
    Tamper(forged_row_appended, Check.MARK, ("mark",), recovers=False),
]


def test_a_table_as_played_passes_every_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = make_table(tmp_path)
    code, report = verify(table, capsys)
    assert code == 0 and report.ok, report.error
    assert [c.check for c in report.checks] == list(Check)
    assert report.rows == table.last_seq() > 50 and report.acked == {"pgs": report.rows - 2}
    assert report.handed == report.rows - 1
    assert "every column covered" in report.checks[0].detail
    assert at_start(table) == set()
    assert cli.main(["journal", "verify", "--config", str(table.config)]) == 0
    assert "intact" in capsys.readouterr().out


@pytest.mark.parametrize("tamper", TAMPERS, ids=lambda t: t.act.__name__)
def test_every_tamper_is_found_named_and_mended_only_where_honest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tamper: Tamper
) -> None:
    table = make_table(tmp_path)
    tamper.act(table)
    code, report = verify(table, capsys)
    assert code == 1 and not report.ok
    failed = {p.check for p in report.problems}
    assert tamper.check in failed, report.problems
    assert not next(c for c in report.checks if c.check is tamper.check).ok
    assert report.error is not None
    if tamper.at_start:
        assert tamper.check in at_start(table)
    mendable = {p.accept for p in report.problems}
    if not tamper.accept:
        assert None in mendable  # nothing here may paper over it
        code, reply = recover(table, capsys, "mark")
        assert code == 1 and "cannot be recovered here" in str(reply["error"])
        return
    assert mendable == set(tamper.accept), report.problems
    named = [(p.check, p.subject) for p in report.problems]
    assert len(named) == len(set(named)), report.problems  # each finding said once
    code, reply = recover(table, capsys, *tamper.accept)
    if not tamper.recovers:
        assert code == 1 and "replay" in str(reply["error"]), reply
        return
    assert code == 0, reply
    code, report = verify(table, capsys)
    assert code == 0, report.problems
    assert at_start(table) == set()
    with contextlib.closing(JournalReader(table.db)) as reader:
        result = replay(reader)
        assert result.identical, result.difference
        (row,) = reader.rows_between(reader.last_seq, reader.last_seq)
    assert row.type == "journal.recovered" and row.data["by"].startswith("T9 (")
    assert row.data["accepted"] == list(tamper.accept) and row.data["problems"]
    assert reply["done"] == row.data["done"] and row.data["done"]


def test_recovery_puts_back_what_the_last_commit_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = make_table(tmp_path)
    with contextlib.closing(sqlite3.connect(table.db)) as db:
        (cursor,) = db.execute("SELECT value FROM kv WHERE key = ?", (CURSOR,)).fetchone()
    cursor_edited(table)
    ack_past_the_end(table)
    code, reply = recover(table, capsys, "cursors")
    assert code == 1 and "add --accept acks" in str(reply["error"])  # every problem, or none
    code, reply = recover(table, capsys, "cursors", "acks", "state")
    assert code == 1 and "--accept state: no check failed that it mends" in str(reply["error"])
    code, reply = recover(table, capsys, "cursors", "acks")
    assert code == 0, reply
    with contextlib.closing(sqlite3.connect(table.db)) as db:
        assert db.execute("SELECT value FROM kv WHERE key = ?", (CURSOR,)).fetchone() == (cursor,)
        assert db.execute("SELECT * FROM acks").fetchall() == []  # sent every row again
    assert f"{CURSOR} set back from 5:999 to {cursor}" in reply["done"]  # type: ignore[operator]


def test_recovery_waits_for_the_daemon_to_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = make_table(tmp_path)
    ack_past_the_end(table)
    with instance_lock.held(load_config(table.config).storage.run_lock, "tablectl run"):
        code, reply = recover(table, capsys, "acks")
    assert code == 1 and "stop it first" in str(reply["error"])


def test_the_daemon_refuses_to_start_naming_the_check_and_the_way_on(
    tmp_path: Path,
) -> None:
    table = make_table(tmp_path)
    config = load_config(table.config)

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TABLECTL), "run", "--config", str(table.config)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    with socket.socket(socket.AF_UNIX) as sim:  # the simulated table preflight looks for
        sim.bind(str(config.simulator_socket))
        ack_past_the_end(table)
        ran = run()
        assert ran.returncode == 1, ran.stderr
        assert "[acks] backend 'pgs' acknowledged through seq 999999" in ran.stderr
        assert "tablectl journal recover --by ID --accept acks" in ran.stderr
        zero_length_database(table)
        ran = run()
    assert ran.returncode == 1, ran.stderr
    assert "[mark] the journal ends at seq 0" in ran.stderr
    # The handed seq too: no mark vouches for this journal's end any more.
    assert "cannot mend [handed, mark]" in ran.stderr and "Traceback" not in ran.stderr


# --- a crash never looks like tampering ---------------------------------------------------


def _crash_in_commit(table: Table, point: str) -> int:
    """A child process commits one step and is killed -9 at `point` of the commit path;
    the seq the step would have taken. Its rows are handed on as soon as they are durable,
    as the daemon hands them to the relay (the handed seq moves before the mark is written).
    """
    before = table.last_seq()
    pid = os.fork()
    if pid == 0:  # the child: no test machinery, only the store
        try:
            store = Store(table.db, boot_id="crash")
            handed = store.handed_mark()

            def kill(reached: str) -> None:
                if reached == point:
                    os.kill(os.getpid(), signal.SIGKILL)

            def hand_on(rows: list[list[JournalRow]]) -> None:
                handed.advance(rows[-1][-1].seq)

            store.fault_point = kill
            state = store.get("table_state") or ""
            step = StepCommit(state, [("x", {})], None, {CURSOR: "6:1"})
            store.commit_steps([step], on_durable=hand_on)
        finally:
            os._exit(3)  # the fault point was never reached
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return before + 1


def newest_slot(table: Table) -> int:
    """The slot (0 or 1) of the mark's newest readable record."""
    record = read_mark(table.db).record
    assert record is not None
    raw = mark_path(table.db).read_bytes()
    (slot,) = [
        n for n in (0, 1) if f'"gen":{record.gen},'.encode() in raw[n * SLOT : (n + 1) * SLOT]
    ]
    return slot


def tear_newest_slot(table: Table) -> None:
    """A power cut that tore the mark's newest slot mid-write: the other is then the newest."""
    record = read_mark(table.db).record
    with mark_path(table.db).open("r+b") as f:
        f.seek(newest_slot(table) * SLOT + 100)
        f.write(b"\0" * 200)
    after = read_mark(table.db)
    assert after.record != record and after.damaged


def commit_gen(table: Table) -> int:
    with contextlib.closing(sqlite3.connect(table.db)) as db:
        (value,) = db.execute("SELECT value FROM kv WHERE key = 'journal.commit_gen'").fetchone()
    return int(value)


# Kills in one commit, or in two in a row (the second store opens on what the first left);
# "torn:" tears the slot the mark was writing at the kill. Every kill at "committed" or past
# it leaves that commit's rows.
CRASHES = [
    ("rows-written",),
    ("committed",),  # the database one commit past the mark
    ("mark-written",),
    ("torn:mark-written",),  # one commit past the slot before the torn one
    ("committed", "mark-caught-up"),  # the commit the mark lacked, recorded; no new one
    ("committed", "torn:mark-caught-up"),
    ("committed", "rows-written"),
    ("committed", "committed"),  # one past the record the second store caught up with
    ("committed", "mark-written"),
    ("torn:mark-written", "committed"),
]


@pytest.mark.parametrize("crashes", CRASHES, ids=lambda c: "+".join(c))
def test_a_kill_at_any_point_of_a_commit_leaves_a_journal_that_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], crashes: tuple[str, ...]
) -> None:
    table = make_table(tmp_path)
    expected = table.last_seq()
    for crash in crashes:
        point = crash.removeprefix("torn:")
        seq = _crash_in_commit(table, point)
        if crash.startswith("torn:"):
            tear_newest_slot(table)
        if point in ("committed", "mark-written"):
            expected = seq
        assert table.last_seq() == expected  # every commit that returned from COMMIT is there
    record = read_mark(table.db).record
    assert record is not None and record.trailing
    if commit_gen(table) == record.gen + 1:  # one commit past the mark, as the crash left it
        assert record.next.seq < expected and read_mark(table.db).handed == expected
    else:
        assert commit_gen(table) == record.gen and record.next.seq == expected
    code, report = verify(table, capsys)
    assert code == 0, report.problems
    assert at_start(table) == set()
    with contextlib.closing(Store(table.db, boot_id="after")) as store:  # the table goes on
        journal_play(store, rounds=1, seed=3)
    code, report = verify(table, capsys)
    assert code == 0, report.problems
    record = read_mark(table.db).record
    assert record is not None and record.next.seq == table.last_seq()


@pytest.mark.parametrize("crash", ["committed", "torn:mark-written"])
def test_a_kill_in_a_journals_first_commit_leaves_one_that_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], crash: str
) -> None:
    """No record yet, or the first one torn: the database is one commit past an empty
    journal, its first commit (generation 1)."""
    table = new_table(tmp_path)
    with contextlib.closing(Store(table.db, boot_id="b1")):
        pass
    assert _crash_in_commit(table, crash.removeprefix("torn:")) == 1
    if crash.startswith("torn:"):
        tear_newest_slot(table)
    mark = read_mark(table.db)
    assert mark.record is None and mark.damaged == crash.startswith("torn:")
    assert mark.handed == 1 == table.last_seq() and commit_gen(table) == 1
    code, report = verify(table, capsys)
    assert code == 0, report.problems
    assert "one commit past its mark" in report.checks[2].detail
    assert at_start(table) == set()
    with contextlib.closing(Store(table.db, boot_id="after")) as store:
        journal_play(store, rounds=1, seed=3)
    assert verify(table, capsys)[0] == 0
    table.sql("UPDATE kv SET value = '2' WHERE key = 'journal.commit_gen'")
    mark_path(table.db).write_bytes(b"\0" * (3 * SLOT))  # emptied: more than one commit
    assert at_start(table) == {Check.MARK}


def test_a_database_one_commit_past_its_mark_is_accepted_only_as_that(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The commit landed and was handed on; its record was not written. The database's
    commit generation and both chains say it is the one commit after the mark's record."""
    table = make_table(tmp_path)
    seq = _crash_in_commit(table, "committed")
    record = read_mark(table.db).record
    assert record is not None and record.next.seq == seq - 1
    assert commit_gen(table) == record.gen + 1 and read_mark(table.db).handed == seq
    code, report = verify(table, capsys)
    assert code == 0 and report.rows == seq, report.problems
    assert "one commit past its mark" in report.checks[2].detail
    cursors = next(c for c in report.checks if c.check is Check.CURSORS)
    assert cursors.detail == f"{CURSOR} 6:1"  # the commit generation is not a cursor
    # Its rows handed on, then a handed seq past the end: every commit is there, so the
    # handed seq is wrong, and may be set back.
    handed_past_the_end(table)
    code, report = verify(table, capsys)
    assert code == 1 and [p.accept for p in report.problems] == [Accept.HANDED]
    assert "one commit past its mark, and no commit reached it" in report.problems[0].message
    code, reply = recover(table, capsys, "handed")
    assert code == 0, reply
    assert verify(table, capsys)[0] == 0


def test_one_commit_past_needs_its_commit_generation_and_the_chains(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database past the mark that does not say it is the one commit after it is not
    taken for a crash: a commit generation that is not the record's + 1, or rows under the
    record's end that are not the ones it recorded."""
    table = make_table(tmp_path)
    _crash_in_commit(table, "committed")
    table.sql("UPDATE kv SET value = '999' WHERE key = 'journal.commit_gen'")
    code, report = verify(table, capsys)
    assert code == 1 and [p.check for p in report.problems] == [Check.MARK]
    assert "the mark is older than the journal" in (report.error or "")
    assert Check.MARK in at_start(table)
    table.sql("DELETE FROM kv WHERE key = 'journal.commit_gen'")
    assert Check.MARK in at_start(table)
    record = read_mark(table.db).record
    assert record is not None
    table.sql("INSERT INTO kv VALUES ('journal.commit_gen', ?)", str(record.gen + 1))
    assert at_start(table) == set()
    # The chain no longer runs through the record's end.
    table.sql("UPDATE journal SET hash = ? WHERE seq = ?", "f" * 64, record.next.seq)
    code, report = verify(table, capsys)
    assert code == 1 and "are not the ones the mark announced" in str(report.problems)


def test_two_commits_past_the_mark_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mark put back from a copy two commits old: no crash leaves that (a commit waits for
    the record of the one before). `recover --accept mark` writes it again once replay
    explains every row. One commit old is what a crash leaves, and passes."""
    table = make_table(tmp_path)
    copy = mark_path(table.db).read_bytes()
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        journal_play(store, rounds=1, seed=5, commits=1)
    assert at_start(table) == set()
    one_old = mark_path(table.db).read_bytes()
    mark_path(table.db).write_bytes(copy)
    assert verify(table, capsys)[0] == 0 and at_start(table) == set()
    mark_path(table.db).write_bytes(one_old)
    with contextlib.closing(Store(table.db, boot_id="b3")) as store:
        journal_play(store, rounds=1, seed=6, commits=1)
    mark_path(table.db).write_bytes(copy)
    code, report = verify(table, capsys)
    assert code == 1 and [(p.check, p.accept) for p in report.problems] == [
        (Check.MARK, Accept.MARK)
    ]
    record = read_mark(table.db).record
    assert record is not None and commit_gen(table) == record.gen + 2
    assert f"commit {record.gen + 2}; the mark's last commit is {record.gen}" in (
        report.error or ""
    )
    assert at_start(table) == {Check.MARK}
    code, reply = recover(table, capsys, "mark")
    assert code == 0, reply
    assert verify(table, capsys)[0] == 0 and at_start(table) == set()


def test_commits_of_cursors_alone_past_the_mark_are_not_put_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two commits that wrote only a device's cursor (refused reports), past a mark put back:
    the rows and inputs are the mark's, but the journal went on. The mark is older; the
    cursors stay (putting them back would take the device's events again)."""
    table = make_table(tmp_path)
    copy = mark_path(table.db).read_bytes()
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        state = store.get("table_state") or ""
        for n in (1, 2):
            store.commit_steps([StepCommit(state, [], None, {CURSOR: f"6:{n}"})])
    mark_path(table.db).write_bytes(copy)
    code, report = verify(table, capsys)
    assert code == 1 and [(p.check, p.accept) for p in report.problems] == [
        (Check.MARK, Accept.MARK)
    ], report.problems
    code, reply = recover(table, capsys, "mark")
    assert code == 0, reply
    with contextlib.closing(Store(table.db, boot_id="b3")) as store:
        assert store.get(CURSOR) == "6:2"
    assert verify(table, capsys)[0] == 0


def test_a_handed_seq_past_the_end_at_rest_says_what_cannot_be_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the end the mark recorded, a handed seq past it is wrong, or the one commit after
    it, kept from its record by a crash, went out and was then taken away: the finding says
    both, and when to accept."""
    table = make_table(tmp_path)
    handed_past_the_end(table)
    code, report = verify(table, capsys)
    assert code == 1 and [(p.check, p.accept) for p in report.problems] == [
        (Check.HANDED, Accept.HANDED)
    ]
    message = report.problems[0].message
    assert "the handed seq is wrong, or a commit after it that a crash kept" in message
    assert f"accept only if no backend holds a row past seq {table.last_seq()}" in message


def test_the_last_commit_taken_away_at_rest_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the mark written after its commit, a database at the base of the newest record
    lost that commit: no crash leaves it there. (Written before it, as older tablectls did,
    this looked like a kill between the mark and the commit and went unseen.)"""
    table = make_table(tmp_path)
    last_commit_taken_away(table)
    code, report = verify(table, capsys)
    assert code == 1 and [(p.check, p.accept) for p in report.problems] == [(Check.MARK, None)]
    assert "committed rows are missing" in (report.error or "")
    assert at_start(table) == {Check.MARK}


def test_verify_beside_a_running_writer_sees_no_tampering(tmp_path: Path) -> None:
    """The daemon commits while a technician verifies: the mark is read before and after
    the database's snapshot, so a commit in between is never taken for a lost tail."""
    table = make_table(tmp_path)
    store = Store(table.db, boot_id="live")
    state = store.get("table_state") or ""
    stop = threading.Event()

    def writer() -> None:
        while not stop.is_set():
            store.commit(state, [("x", {})], None, {CURSOR: f"7:{store.last_seq}"})

    thread = threading.Thread(target=writer)
    first = store.last_seq
    thread.start()
    reports: list[VerifyReport] = []
    try:
        with contextlib.closing(JournalReader(table.db)) as reader:
            # Until the writer has committed 20 times meanwhile (a bound, not a timing).
            while len(reports) < 30 or store.last_seq < first + 20:
                reports.append(verify_journal(reader, ["pgs"], full=False))
                assert len(reports) < 10_000
    finally:
        stop.set()
        thread.join()
        store.close()
    assert all(r.ok for r in reports), [r.error for r in reports if not r.ok]


def test_verify_in_the_middle_of_a_commit_sees_no_tampering(tmp_path: Path) -> None:
    """In the transaction, after SQLite's commit (the mark not yet written) and after the
    mark: each passes, and sees the rows once SQLite has committed them."""
    table = make_table(tmp_path)
    seen: dict[str, VerifyReport] = {}
    with (
        contextlib.closing(Store(table.db, boot_id="live")) as store,
        contextlib.closing(JournalReader(table.db)) as reader,
    ):

        def look(point: str) -> None:
            seen[point] = verify_journal(reader, ["pgs"], full=False)

        store.fault_point = look
        state = store.get("table_state") or ""
        last = store.commit(state, [("x", {})], None, {CURSOR: "8:1"})[0].seq
    assert {p: r.ok for p, r in seen.items()} == {
        "rows-written": True,
        "committed": True,
        "mark-written": True,
    }
    rows = (seen["rows-written"].rows, seen["committed"].rows, seen["mark-written"].rows)
    assert rows == (last - 1, last, last)
    assert "one commit past its mark" in seen["committed"].checks[2].detail


# --- old journals --------------------------------------------------------------------------


def make_old(table: Table, handed: int) -> None:
    """The journal as a tablectl before formula 2 and the mark left it: every row hashed
    with formula 1 (no boot_id), no input hashes, the handed seq in its own file."""
    with contextlib.closing(sqlite3.connect(table.db)) as db, db:
        prev = "0" * 64
        rows = db.execute("SELECT seq, event_id, ts, type, data FROM journal ORDER BY seq")
        for seq, event_id, ts, type_, data in rows.fetchall():
            digest = row_hash(prev, seq, event_id, ts, type_, data)
            db.execute(
                "UPDATE journal SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, digest, seq)
            )
            prev = digest
        db.execute("ALTER TABLE journal DROP COLUMN hash_v")
        db.execute("ALTER TABLE inputs DROP COLUMN hash")
    mark_path(table.db).unlink()
    legacy_handed_path(table.db).write_text(str(handed).rjust(20))


def test_an_old_journal_verifies_and_goes_on_with_formula_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = make_table(tmp_path)
    last = table.last_seq()
    make_old(table, handed=last - 1)
    code, report = verify(table, capsys)  # read only: nothing of it changes
    assert code == 0, report.problems
    assert "formula 1" in report.checks[0].detail and report.handed == last - 1
    assert "no mark yet" in report.checks[2].detail
    assert at_start(table) == set()
    with contextlib.closing(Store(table.db, boot_id="new")) as store:
        journal_play(store, rounds=1, seed=4)
    assert not legacy_handed_path(table.db).exists()  # the mark holds it now
    code, report = verify(table, capsys)
    assert code == 0, report.problems
    assert f"every column covered from seq {last + 1}" in report.checks[0].detail
    assert report.handed == last - 1
    with contextlib.closing(JournalReader(table.db)) as reader:
        assert replay(reader).identical
    boot_id_edited(table)  # a row of formula 1 never covered its boot_id: unseen, as documented
    assert verify(table, capsys)[0] == 0
    boot_id_of_the_last_row_edited(table)  # one of formula 2 did
    assert verify(table, capsys)[0] == 1


def test_an_old_journal_emptied_behind_its_handed_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit's case: a zero-length database while tablectl.sqlite3.handed says rows
    went out. No mark yet, so the handed seq is the witness."""
    table = make_table(tmp_path)
    make_old(table, handed=13_058)
    zero_length_database(table)
    code, report = verify(table, capsys)
    assert code == 1 and {p.check for p in report.problems} == {Check.HANDED}
    assert "rows through seq 13058 were handed to a broker" in (report.error or "")
    assert report.problems[0].accept is None
    assert at_start(table) == {Check.HANDED}


def write_old_record(
    table: Table, slot: int, gen: int, base: JournalHead, next_: JournalHead
) -> None:
    """A commit record as tablectls before the trailing mark wrote it, before SQLite
    committed: no `trailing`."""
    payload = json.dumps(
        {"gen": gen, "base": base.to_json(), "next": next_.to_json()},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    digest = hashlib.sha256(payload).hexdigest().encode()
    line = b"tablectl-mark 1 " + digest + b" " + payload + b"\n"
    with mark_path(table.db).open("r+b") as f:
        f.seek(slot * SLOT)
        f.write(line.ljust(SLOT, b"\0"))


def test_a_record_written_before_its_commit_still_reads_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mark an older tablectl left (written before SQLite committed): the database holds
    its base or its next, and a handed seq within the commit it announced means that commit
    was lost. The first commit after the upgrade, killed before its own record, leaves the
    database one commit past either; anything else is refused as before."""
    table = make_table(tmp_path)
    older = backup(table, "older.sqlite3")
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        state = store.get("table_state") or ""
        store.commit(state, [("x", {})], None, {CURSOR: "6:1"})
        before = backup(table, "before.sqlite3")
        base = store.head
        store.commit(state, [("y", {}), ("z", {})], None, {CURSOR: "6:2"})
        next_ = store.head
    record = read_mark(table.db).record
    assert record == MarkRecord(record.gen if record else 0, base, next_, trailing=True)
    write_old_record(table, newest_slot(table), record.gen, base, next_)
    assert read_mark(table.db).record == MarkRecord(record.gen, base, next_, trailing=False)
    assert verify(table, capsys)[0] == 0  # at its next
    remove_database(table)
    shutil.copy(before, table.db)  # at its base: an old kill between its mark and commit
    code, report = verify(table, capsys)
    assert code == 0 and report.rows == base.seq < next_.seq, report.problems
    assert at_start(table) == set()
    mark = mark_path(table.db).read_bytes()
    handed_mark = HandedMark(mark_path(table.db))
    handed_mark.advance(next_.seq)  # ... but the announced commit's rows went out
    handed_mark.close()
    code, report = verify(table, capsys)
    assert code == 1 and [(p.check, p.accept) for p in report.problems] == [(Check.HANDED, None)]
    assert "committed rows were lost" in report.problems[0].message
    mark_path(table.db).write_bytes(mark)
    seq = _crash_in_commit(table, "committed")  # the upgrade's first commit, unrecorded
    assert table.last_seq() == seq and commit_gen(table) == record.gen + 1
    code, report = verify(table, capsys)
    assert code == 0, report.problems
    assert "one commit past its mark" in report.checks[2].detail
    with contextlib.closing(Store(table.db, boot_id="new")) as store:
        journal_play(store, rounds=1, seed=4)
    assert verify(table, capsys)[0] == 0
    newest = read_mark(table.db).record
    assert newest is not None and newest.trailing and newest.gen > record.gen + 1
    # A database older than what the old record vouched for is refused as it always was.
    remove_database(table)
    shutil.copy(older, table.db)
    write_old_record(table, newest_slot(table), newest.gen + 1, base, next_)
    code, report = verify(table, capsys)
    assert code == 1 and "committed rows are missing" in (report.error or "")


def test_a_long_key_value_is_checked_by_its_hash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key-value of any size commits (the mark keeps a long one by its hash) and is
    checked like a cursor; the mark cannot give it back, so recovery refuses."""
    table = make_table(tmp_path)
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        state = store.get("table_state") or ""
        store.commit(state, [("x", {})], None, {"device.shoe.note": "n" * 10_000})
    assert verify(table, capsys)[0] == 0
    table.sql("UPDATE kv SET value = ? WHERE key = 'device.shoe.note'", "m" * 10_000)
    code, report = verify(table, capsys)
    assert code == 1 and [p.check for p in report.problems] == [Check.CURSORS]
    code, reply = recover(table, capsys, "cursors")
    assert code == 1 and "holds only the hash" in str(reply["error"])


def _page_overwritten(db: Path) -> None:
    with db.open("r+b") as f:  # a page of the journal's table area turned to noise
        f.seek(4096 * 3)
        f.write(b"\xde\xad" * 2048)


@pytest.mark.parametrize(
    "damage",
    [
        lambda db: os.truncate(db, db.stat().st_size // 2),
        _page_overwritten,
        lambda db: db.write_text("not a database\n"),
    ],
    ids=["truncated", "page-overwritten", "replaced-by-text"],
)
def test_a_damaged_database_is_named_with_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Callable[[Path], None]
) -> None:
    """SQLite's own words ("database disk image is malformed") said nothing a technician
    could act on: every reader of the journal and the daemon's start say that the file is
    damaged, that nothing was written to it, and that the way out is the database that
    matches the mark, from a backup."""
    table = make_table(tmp_path)
    for suffix in ("-wal", "-shm"):
        Path(f"{table.db}{suffix}").unlink(missing_ok=True)
    damage(table.db)
    before = table.db.read_bytes()
    for verb in ("verify", "tail", "export", "replay"):
        code = cli.main(["journal", verb, "--config", str(table.config), "--json"])
        out = capsys.readouterr().out
        if verb != "verify" and code == 0:
            continue  # it read nothing of the damage (an index only verify reads)
        error = json.loads(out)["error"]
        assert code == 1 and "is damaged (SQLite: " in error and "a backup" in error, verb
    cfg = load_config(table.config)
    with pytest.raises(StartupError) as refused:
        open_journal(
            cfg,
            cfg.rules(),
            "three-card-poker",
            boot_id="b2",
            clock=utc_now,
            verify_before_start_rows=10_000,
        )
    assert "is damaged (SQLite: " in str(refused.value) and "a backup" in str(refused.value)
    assert table.db.read_bytes() == before  # nothing was written to it

"""The durable store: table state (meters, round), the core's inputs and the event journal.

Each step of the core is one transaction (WAL, synchronous=FULL) holding the input, the new
state snapshot and the journal rows it produced, so a power cut leaves either all of a step
or none of it, and `tablectl journal replay` can rebuild the state from the inputs. The
journal is also the MQTT outbox: rows carry a per-table `seq` that is never reused. Each
row's hash chains to the previous one and each input's to the previous input (`chain.py`),
so an edited or deleted row or input is detectable; the mark beside the database
(`mark.py`), written after each commit, makes a lost tail, a rollback or a replaced database
detectable too (`integrity.py`).

A commit is SQLite's COMMIT (its fsync: the one a step waits for before it may be published),
then the mark's record of it (a second fdatasync, in the same thread, before the next commit
may begin). `commit_steps(on_durable=...)` hands the rows on between the two, so nothing but
SQLite's fsync stands between a step and its publication; each commit writes its generation
(`journal.commit_gen`) with its rows, so a crash between the two leaves a database exactly
one commit past the mark, which the checks tell from any other.

Group commit: steps that arrive together are written in one transaction, so they share one
fsync (`commit_steps`); each keeps its own input, rows, state hash and key-values. Each
backend's acknowledged seq is written without an fsync of its own: it reaches the disk with
the next commit or checkpoint, and losing it to a power cut only means rows are sent again.
The highest seq ever handed to a broker (`HandedMark`) is kept in the mark, written before
the rows are handed over, so rows sent again after a crash say `replay`.
Readers (the relay, status, the CLI) use their own read-only connection (`JournalReader`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tablectl.core.effects import RECORD_TYPES, MeterReading, Record
from tablectl.store.chain import (
    COMMIT_GEN,
    ROW_HASH_V,
    TABLE_STATE,
    JournalHead,
    columns,
    input_digest,
    read_head,
    row_digest,
    text_hash,
    walk_rows,
)
from tablectl.store.chain import GENESIS_HASH as GENESIS_HASH  # imported from here before
from tablectl.store.chain import row_hash as row_hash
from tablectl.store.mark import HandedMark as HandedMark
from tablectl.store.mark import (
    JournalMark,
    MarkReading,
    legacy_handed_path,
    mark_path,
    read_mark,
)
from tablectl.store.page_cache import READER_KIB, WRITER_KIB, bound_page_cache
from tablectl.util.faultpoint import fault_point
from tablectl.util.ids import uuid7_texts

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    seq       INTEGER PRIMARY KEY,
    event_id  TEXT NOT NULL UNIQUE,
    ts        TEXT NOT NULL,
    boot_id   TEXT NOT NULL,
    type      TEXT NOT NULL,
    data      TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL,
    hash_v    INTEGER NOT NULL DEFAULT 1  -- the formula of `hash` (store/chain.py)
);
-- The last row of a type (status: since when a fault stands) without scanning the journal
-- back to its start when there is none.
CREATE INDEX IF NOT EXISTS journal_type_seq ON journal (type, seq);
-- Each registered backend's end-to-end acknowledgement (docs/mqtt.md: ack/{backend_id}).
CREATE TABLE IF NOT EXISTS acks (
    backend_id TEXT PRIMARY KEY,
    seq        INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
-- Every input the core stepped on, the hash of the state it left, and the journal rows
-- (first_seq..last_seq, or none) it produced: what replay needs.
CREATE TABLE IF NOT EXISTS inputs (
    input_seq  INTEGER PRIMARY KEY,
    ts         TEXT NOT NULL,
    boot_id    TEXT NOT NULL,
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    state_hash TEXT NOT NULL,
    first_seq  INTEGER,
    last_seq   INTEGER,
    hash       TEXT  -- the input chain (store/chain.py); none on inputs from before it
);
"""
# The records that can change a meter: those whose type says which meter it leaves.
METER_RECORDS: dict[str, type[Record]] = {
    name: cls for name, cls in RECORD_TYPES.items() if cls.meter_reading is not Record.meter_reading
}


@dataclass(frozen=True, slots=True)
class JournalRow:
    """A journal row: data decoded, and data_json, the JSON text of it exactly as the `data`
    column holds it (what the row's hash covers, and what is published)."""

    seq: int
    event_id: str
    ts: str
    boot_id: str
    type: str
    data: dict[str, Any]
    data_json: str


def _journal_row(r: Sequence[Any]) -> JournalRow:
    """A row from `SELECT seq, event_id, ts, boot_id, type, data`."""
    return JournalRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[5])


def _verify_chain(db: sqlite3.Connection) -> int | None:
    """The first seq whose hash does not chain, or None when the journal is intact."""
    broken = walk_rows(db).broken
    return None if broken is None else broken.at


def _migrate(db: sqlite3.Connection) -> None:
    """Columns added since a journal was made; no row is rewritten (old rows keep formula 1
    and inputs from before the input chain keep no hash: store/chain.py)."""
    if "hash_v" not in columns(db, "journal"):
        db.execute("ALTER TABLE journal ADD COLUMN hash_v INTEGER NOT NULL DEFAULT 1")
    if "hash" not in columns(db, "inputs"):
        db.execute("ALTER TABLE inputs ADD COLUMN hash TEXT")


def _inputs(db: sqlite3.Connection) -> Iterator[InputRow]:
    cur = db.execute(
        "SELECT input_seq, ts, type, data, state_hash, first_seq, last_seq "
        "FROM inputs ORDER BY input_seq"
    )
    for r in cur:
        yield InputRow(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6])


def _rows_between(db: sqlite3.Connection, first_seq: int, last_seq: int) -> list[JournalRow]:
    cur = db.execute(
        "SELECT seq, event_id, ts, boot_id, type, data FROM journal "
        "WHERE seq BETWEEN ? AND ? ORDER BY seq",
        (first_seq, last_seq),
    )
    return [_journal_row(r) for r in cur]


def _get(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def open_read_only(path: Path, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """A reader's own connection (SQLite `mode=ro`): it never writes, and WAL gives it a
    consistent snapshot. A reader needs no more than read access: a member of the journal's
    group reads it with the daemon running or stopped."""
    uri = path.resolve().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=check_same_thread)
    try:
        db.execute("SELECT 1 FROM journal LIMIT 1").fetchall()
        return db
    except sqlite3.OperationalError:
        db.close()
        if Path(f"{path}-wal").exists():
            raise
    # The daemon is stopped and left no WAL, so nothing is writing the file; a reader that
    # may not write the directory cannot create the -shm a WAL reader needs: read it as is.
    return sqlite3.connect(
        f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=check_same_thread
    )


# SQLite's names for a file that is not a whole database (sqlite3.Error.sqlite_errorname).
_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")


def damaged(exc: sqlite3.Error) -> bool:
    """SQLite found the file is not a whole database (cut short, a page overwritten)."""
    return str(getattr(exc, "sqlite_errorname", "")).startswith(_DAMAGED)


def unreadable(path: Path, exc: sqlite3.Error) -> str:
    """Why the journal at path cannot be opened or read, and what a technician does next:
    one line for every command that reads it and for the daemon's start."""
    name = getattr(exc, "sqlite_errorname", "")
    if damaged(exc):
        # Nothing here mends a damaged file: a table that began a new journal would lose its
        # meters and hand out seqs its backends hold (docs/design.md, the journal's checks).
        return (
            f"the journal {path} is damaged (SQLite: {exc}); nothing was written to it. "
            f"Keep a copy of {path.parent} as it is, then put back the database that matches "
            f"its mark ({mark_path(path).name}) from a backup and check it with "
            f"`tablectl journal verify --data-dir {path.parent}`"
        )
    if name.startswith("SQLITE_BUSY"):
        return (
            f"the journal {path} is held by another writer (SQLite: {exc}): is another "
            "tablectl running on it? (`tablectl status`)"
        )
    if name.startswith("SQLITE_CANTOPEN"):
        return (
            f"cannot open the journal {path} (SQLite: {exc}): does {path.parent} exist, and "
            "may this user read it and its -wal and -shm files?"
        )
    return f"cannot read the journal {path}: {exc}"


def utc_now() -> datetime:
    """The system's clock: a store on it stamps its commits the quick way (`_CommitTime`)."""
    return datetime.now(UTC)


def journal_ts(when: datetime) -> str:
    """The journal's own timestamp format (UTC, milliseconds, Z): compares as text."""
    utc = when.astimezone(UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _CommitTime:
    """A commit's time: its `ts` (as `journal_ts` writes it) and Unix milliseconds (its
    event ids'). The system clock is read as an integer and each second's text made once:
    a datetime made, converted and formatted was about 25 us of a cold commit."""

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self._second = -1
        self._second_text = ""  # "YYYY-MM-DDTHH:MM:SS." of self._second

    def __call__(self) -> tuple[str, int]:
        if self._clock is not utc_now:  # a clock of a test's or a tool's
            now = self._clock()
            return journal_ts(now), int(now.timestamp() * 1000)
        unix_ms = time.time_ns() // 1_000_000
        second, ms = divmod(unix_ms, 1000)
        if second != self._second:
            self._second = second
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
        return f"{self._second_text}{ms:03d}Z", unix_ms


# `json.dumps(data, sort_keys=True, separators=(",", ":"))`, with its encoder made once.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical_json(data: object) -> str:
    return _CANONICAL.encode(data)


def state_hash(state_json: str) -> str:
    return text_hash(state_json)


@dataclass(frozen=True, slots=True)
class StepInput:
    """One core input as journaled: its name and data."""

    type: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class StepCommit:
    """What one core step writes: its input, journal rows, the state it left, and key-values
    that must change with it (a device's event cursor, say)."""

    state_json: str
    entries: Sequence[tuple[str, dict[str, Any]]]
    step_input: StepInput | None = None
    kv: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class InputRow:
    input_seq: int
    ts: str
    type: str
    data: dict[str, Any]
    state_hash: str
    first_seq: int | None
    last_seq: int | None


def _fault(point: str) -> None:
    """Where a test stops the process (kill -9) in the commit path, in order:
    "mark-caught-up" (a commit the mark lacked, recorded before the next one begins),
    "rows-written" (the transaction holds the rows, SQLite has not committed), "committed"
    (SQLite's COMMIT returned and `on_durable` was called; the mark not written),
    "mark-written" (both on disk). A test sets `Store.fault_point`, or names a point for a
    whole daemon as `TABLECTL_FAULT_POINT=journal:committed` (util/faultpoint.py; `#N`: the
    N-th time it is reached); unset, each is one comparison."""
    fault_point("journal", point)


OnDurable = Callable[[list[list[JournalRow]]], None]
# Takes the writing of a commit's mark record, to run it before the store's next commit.
MarkLater = Callable[[Callable[[], None]], None]


class Store:
    """One table's database.

    Written from one journal thread, one transaction at a time. Readers on the event loop
    use `reader()`, a connection of their own bounded by the last durable commit. Opening it
    writes nothing a commit would: whether the journal is whole is for
    `integrity.check_integrity` to say before anything commits on it.
    """

    def __init__(
        self,
        path: Path,
        *,
        boot_id: str,
        clock: Callable[[], datetime] = utc_now,
        durable: bool = True,
    ) -> None:
        """durable=False: no fsync per commit, for journals simulators make (tests,
        benchmarks); a table's journal is always durable."""
        # Not readable by others: the directory 0750, the database (and its -wal, -shm) 0640.
        path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640))
        self._path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        bound_page_cache(self._db, WRITER_KIB)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before we light a seat or publish (nothing is lost).
        self._synchronous = "FULL" if durable else "OFF"
        self._db.execute(f"PRAGMA synchronous={self._synchronous}")
        self._db.executescript(SCHEMA)
        _migrate(self._db)
        self._boot_id = boot_id
        self._now = _CommitTime(clock)
        self._mark = JournalMark(mark_path(path), durable=durable)
        self._mark.take_legacy_handed(legacy_handed_path(path))
        self._head: JournalHead = read_head(self._db)
        self._head_gen = self._head.commit_gen  # kept with the head: read at every commit
        self.fault_point: Callable[[str], None] = _fault
        self.commits = 0  # transactions, and the steps they held: the group-commit ratio
        self.steps_committed = 0

    def close(self) -> None:
        self._db.close()
        self._mark.close()

    @property
    def path(self) -> Path:
        return self._path

    @property
    def last_seq(self) -> int:
        return self._head.seq

    @property
    def head(self) -> JournalHead:
        """What the database held at open, or after this store's last commit."""
        return self._head

    def mark(self) -> MarkReading:
        return self._mark.read()

    def get(self, key: str) -> str | None:
        return _get(self._db, key)

    def commit(
        self,
        state_json: str,
        entries: Sequence[tuple[str, dict[str, Any]]],
        step_input: StepInput | None = None,
        kv: Mapping[str, str] | None = None,
    ) -> list[JournalRow]:
        """Append one step's input, rows and new state, atomically and durably.

        kv: keys written in the same transaction (a device's event cursor: the event is
        acknowledged to the device only once this commit returned)."""
        return self.commit_steps([StepCommit(state_json, entries, step_input, kv)])[0]

    def commit_steps(
        self,
        steps: Sequence[StepCommit],
        *,
        on_durable: OnDurable | None = None,
        mark_later: MarkLater | None = None,
    ) -> list[list[JournalRow]]:
        """Append several steps in one transaction (one fsync, then one of the mark); each
        step's rows, in order.

        Nothing of it is visible to readers bounded by `last_seq` until it is on disk.
        on_durable(rows), the same rows as returned, is called in this thread as soon as
        SQLite's COMMIT has returned -- the rows are on disk, `head` and `last_seq` (and so
        every reader's bound) include them -- and before the mark's record of the commit is
        written and fdatasynced; this returns after that. If on_durable raises, the mark is
        written all the same and the exception is raised from here (the commit stands).

        mark_later(write): the mark's record is not written here but handed over as `write`,
        for the caller to run before any other commit of this store begins (a commit made on
        the event loop hands it to the journal thread, so the loop does not wait for the
        mark's fdatasync too). Until it runs the database is one commit past the mark, as
        when a crash comes between the two.
        """
        return self._commit(steps, on_durable=on_durable, mark_later=mark_later)

    def commit_recovery(
        self,
        step: StepCommit,
        *,
        drop_acks: Sequence[str] = (),
        drop_kv: Sequence[str] = (),
    ) -> list[JournalRow]:
        """A technician's journal recovery (`tablectl journal recover`): its step, and in the
        same transaction the acknowledgements and key-values it drops (the step's kv sets
        those it puts back). The mark is written from this journal from now on."""
        return self._commit([step], drop_acks=drop_acks, drop_kv=drop_kv)[0]

    def set_handed(self, seq: int) -> None:
        """A recovery's: the handed seq set back to the journal's end."""
        self._mark.set_handed(seq)

    def _commit(
        self,
        steps: Sequence[StepCommit],
        *,
        drop_acks: Sequence[str] = (),
        drop_kv: Sequence[str] = (),
        on_durable: OnDurable | None = None,
        mark_later: MarkLater | None = None,
    ) -> list[list[JournalRow]]:
        self._catch_up()
        # Everything the commit writes is made first, and written in one statement per table
        # (the journal thread's CPU per commit: each statement and call costs, cold).
        out: list[list[JournalRow]] = []
        journal_rows: list[tuple[object, ...]] = []
        input_rows: list[tuple[object, ...]] = []
        head, boot_id = self._head, self._boot_id
        seq, prev = head.seq, head.hash
        input_seq, input_prev = head.input_seq, head.input_hash
        kv: dict[str, str | None] = dict.fromkeys(drop_kv)
        ts, unix_ms = self._now()
        event_ids = iter(uuid7_texts(unix_ms, sum(len(s.entries) for s in steps)))
        digest_of_state: str | None = None  # the last step's state hash: the one stored
        for step in steps:
            rows: list[JournalRow] = []
            for type_, data in step.entries:
                seq += 1
                event_id = next(event_ids)
                data_json = canonical_json(data)
                digest = row_digest(ROW_HASH_V, prev, seq, event_id, ts, boot_id, type_, data_json)
                journal_rows.append(
                    (seq, event_id, ts, boot_id, type_, data_json, prev, digest, ROW_HASH_V)
                )
                rows.append(JournalRow(seq, event_id, ts, boot_id, type_, data, data_json))
                prev = digest
            digest_of_state = state_hash(step.state_json)
            if step.step_input is not None:
                input_seq += 1
                link = (
                    input_seq,
                    ts,
                    boot_id,
                    step.step_input.type,
                    canonical_json(step.step_input.data),
                    digest_of_state,
                    rows[0].seq if rows else None,
                    rows[-1].seq if rows else None,
                )
                input_prev = input_digest(input_prev, *link)
                input_rows.append((*link, input_prev))
            if step.kv:
                kv.update(step.kv)
            out.append(rows)
        # The commit's generation: past every gen the mark or the database holds
        # (`_catch_up` made them one). A commit that changes nothing has none.
        gen = max(self._mark.gen, self._head_gen or 0) + 1
        after = head.after(
            seq=seq,
            hash_=prev,
            input_seq=input_seq,
            input_hash=input_prev,
            state_hash=digest_of_state,
            kv=kv,
            gen=gen,
        )
        # What kv holds after the commit: the steps' keys, the state, the generation (in
        # this same transaction: the mark's record of the commit has this gen, so a database
        # one commit past the mark says so).
        puts = {key: value for key, value in kv.items() if value is not None}
        if steps:
            puts[TABLE_STATE] = steps[-1].state_json
        if after is not head:
            puts[COMMIT_GEN] = str(gen)
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for key in drop_kv:
                db.execute("DELETE FROM kv WHERE key = ?", (key,))
            for backend in drop_acks:
                db.execute("DELETE FROM acks WHERE backend_id = ?", (backend,))
            if journal_rows:
                db.executemany(
                    "INSERT INTO journal (seq, event_id, ts, boot_id, type, data, "
                    "prev_hash, hash, hash_v) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    journal_rows,
                )
            if input_rows:
                db.executemany(
                    "INSERT INTO inputs (input_seq, ts, boot_id, type, data, state_hash, "
                    "first_seq, last_seq, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    input_rows,
                )
            if puts:
                db.executemany(
                    "INSERT INTO kv(key, value) VALUES(?, ?) "
                    "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    puts.items(),
                )
            self.fault_point("rows-written")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        # On disk: readers bounded by the head may read it, and it may be handed on.
        self._head = after
        if after is not head:
            self._head_gen = gen
        self.commits += 1
        self.steps_committed += len(steps)
        try:
            if on_durable is not None:
                on_durable(out)
            self.fault_point("committed")
        finally:
            if after is not head:
                # The mark trails the commit (mark.py): until this is on disk the database
                # is one commit past the mark's newest record, and no other commit begins.
                write = functools.partial(self._write_mark, gen, head, after)
                if mark_later is None:
                    write()
                else:
                    mark_later(write)
        return out

    def _write_mark(self, gen: int, base: JournalHead, next_: JournalHead) -> None:
        if gen > self._mark.gen:  # else a commit began first and caught the mark up
            self._mark.write(gen, base, next_)
            self.fault_point("mark-written")

    def _catch_up(self) -> None:
        """The database holds a commit the mark has no record of (a crash came between that
        commit and its record, or the mark was put back or written again): its head is
        recorded as it stands before another commit begins, so a crash in the next one
        never leaves the database two commits past the mark."""
        held = self._head_gen
        if held is not None and held > self._mark.gen:
            self._mark.write(held, self._head, self._head)
            self.fault_point("mark-caught-up")

    def _write_lightly(self, statements: Sequence[tuple[str, tuple[object, ...]]]) -> None:
        """Delivery bookkeeping: one transaction without an fsync of its own (WAL,
        synchronous=NORMAL). It is on disk after the next commit or checkpoint; a power cut
        before then costs a re-send, never an event."""
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    self._db.execute(sql, params)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        finally:
            self._db.execute(f"PRAGMA synchronous={self._synchronous}")

    def inputs(self) -> Iterator[InputRow]:
        """Every journaled input, in the order the core stepped on them."""
        return _inputs(self._db)

    def rows_between(self, first_seq: int, last_seq: int) -> list[JournalRow]:
        return _rows_between(self._db, first_seq, last_seq)

    def rows_after(self, seq: int, limit: int = 100) -> list[JournalRow]:
        """Committed rows after seq: never one of a commit still in progress."""
        cur = self._db.execute(
            "SELECT seq, event_id, ts, boot_id, type, data FROM journal "
            "WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (seq, self._head.seq, limit),
        )
        return [_journal_row(r) for r in cur]

    def verify_chain(self) -> int | None:
        """The first seq whose hash does not chain, or None when the journal is intact."""
        return _verify_chain(self._db)

    def acks(self) -> dict[str, int]:
        """Each backend's acknowledged seq, as last written."""
        cur = self._db.execute("SELECT backend_id, seq FROM acks")
        return {str(b): int(q) for b, q in cur}

    def record_acks(self, acks: Mapping[str, int]) -> dict[str, int]:
        """Backends acknowledged every row up to their seq. Acks only move forward and never
        past the journal; what was written is returned."""
        known = self.acks()
        moved = {b: q for b, q in acks.items() if known.get(b, 0) < q <= self._head.seq}
        if moved:
            self._write_lightly(
                [
                    (
                        "INSERT INTO acks(backend_id, seq) VALUES(?, ?) ON CONFLICT(backend_id) "
                        "DO UPDATE SET seq = max(seq, excluded.seq)",
                        (b, q),
                    )
                    for b, q in moved.items()
                ]
            )
        return moved

    def handed_mark(self) -> HandedMark:
        return HandedMark(mark_path(self._path))

    def reader(self) -> JournalReader:
        """A read-only connection of its own that sees only what this writer has committed."""
        return JournalReader(self._path, bound=lambda: self._head.seq)


def meter_reading(type_: str, data_json: str) -> MeterReading | None:
    """The meter a row leaves, read through its typed record (None for the rows of a type
    that never changes one, decoded only for those that can)."""
    record = METER_RECORDS.get(type_)
    return None if record is None else record.model_validate_json(data_json).meter_reading()


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A journal row as the relay publishes it: its data still as the stored JSON text."""

    seq: int
    event_id: str
    ts: str
    boot_id: str
    type: str
    data_json: str

    def meter_reading(self) -> MeterReading | None:
        return meter_reading(self.type, self.data_json)


class JournalReader:
    """Reads the journal on a read-only connection (WAL: a consistent snapshot per query).

    bound: the last seq a query may return -- the writer's last durable commit -- so nothing
    is read before it is on disk. Without a writer in this process, every row is durable.
    """

    def __init__(self, path: Path, *, bound: Callable[[], int] | None = None) -> None:
        self.path = path
        self._db = open_read_only(path, check_same_thread=False)
        bound_page_cache(self._db, READER_KIB)
        if not columns(self._db, "journal"):
            # A database without tables (a zero-length file is one) reads as an empty
            # journal: its tables in this connection's own temporary schema.
            self._db.executescript(SCHEMA.replace("CREATE TABLE", "CREATE TEMP TABLE"))
        self._bound = bound or self._max_seq

    def mark(self) -> MarkReading:
        """The mark beside the database, as it is now."""
        return read_mark(self.path)

    def close(self) -> None:
        self._db.close()

    def _max_seq(self) -> int:
        return int(self._db.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])

    @property
    def last_seq(self) -> int:
        return self._bound()

    def outbox_after(self, seq: int, limit: int) -> list[OutboxRow]:
        """Durable rows after seq, in order, at most limit."""
        cur = self._db.execute(
            "SELECT seq, event_id, ts, boot_id, type, data FROM journal "
            "WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (seq, self._bound(), limit),
        )
        return [OutboxRow(*r) for r in cur]

    def ts_of(self, seq: int) -> str | None:
        row = self._db.execute("SELECT ts FROM journal WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0])

    def last_meter_row(self, meter_id: str) -> tuple[int, str, int] | None:
        """The seq, ts and amount (cents) of the last durable row that changed this meter."""
        row = self._db.execute(
            "SELECT seq, ts, json_extract(data, '$.meter.meter_cents') FROM journal "
            "WHERE seq <= ? AND type IN (SELECT value FROM json_each(?)) "
            "AND json_extract(data, '$.meter.meter_id') = ? "
            "ORDER BY seq DESC LIMIT 1",
            (self._bound(), json.dumps(sorted(METER_RECORDS)), meter_id),
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]), int(row[2]))

    def acks(self) -> dict[str, int]:
        cur = self._db.execute("SELECT backend_id, seq FROM acks")
        return {str(b): int(q) for b, q in cur}

    # What `journal verify` and `journal replay` read, without ever writing (Store has the
    # same, on the writer's connection).

    def verify_chain(self) -> int | None:
        return _verify_chain(self._db)

    def inputs(self) -> Iterator[InputRow]:
        return _inputs(self._db)

    def rows_between(self, first_seq: int, last_seq: int) -> list[JournalRow]:
        return _rows_between(self._db, first_seq, last_seq)

    def get(self, key: str) -> str | None:
        return _get(self._db, key)

    def last_row(
        self, types: Sequence[str], where: Mapping[str, str | int | bool]
    ) -> tuple[int, str, dict[str, Any]] | None:
        """The seq, time and data of the last durable row of one of these types whose data
        holds these values (what recorded a fault that stands: `status` says since when)."""
        if not types:
            return None
        clauses = [f"type IN ({','.join('?' * len(types))})", "seq <= ?"]
        params: list[object] = [*types, self._bound()]
        for key, value in where.items():
            if not key.isidentifier():
                raise ValueError(f"not a field name: {key!r}")
            clauses.append(f"json_extract(data, '$.{key}') = ?")
            params.append(int(value) if isinstance(value, bool) else value)
        row = self._db.execute(
            f"SELECT seq, ts, data FROM journal WHERE {' AND '.join(clauses)} "  # noqa: S608 -- names checked above, values bound
            "ORDER BY seq DESC LIMIT 1",
            params,
        ).fetchone()
        return None if row is None else (int(row[0]), str(row[1]), json.loads(row[2]))

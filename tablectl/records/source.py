"""Reading the journal for records and game pace: one read-only snapshot, never the writer's.

A `JournalSnapshot` is one read transaction on a connection of its own (`open_read_only`):
with the daemon running, WAL gives every query in it the same consistent view, so an export's
rows, meters before the period and power-ups agree with each other and with the first/last seq
its manifest names; with the daemon stopped, the file is read as it is. Nothing here writes.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tablectl.core.effects import MeterReading
from tablectl.core.events import PowerUp, TableRules
from tablectl.store.chain import hash_v_column
from tablectl.store.journal import journal_ts, open_read_only


@dataclass(frozen=True, slots=True)
class Entry:
    """One journal row as stored: its data as the hashed JSON text and parsed."""

    seq: int
    event_id: str
    ts: str  # UTC, ISO 8601 with milliseconds and Z
    boot_id: str
    type: str
    data_json: str
    prev_hash: str
    hash: str
    data: dict[str, Any]
    hash_v: int = 1  # the formula of hash (store/chain.py)


@dataclass(frozen=True, slots=True)
class EventRow:
    """A journal row as game pace reads it: where it is, when, what."""

    seq: int
    ts: str
    type: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MeterAt:
    """The last row before a time that left a meter at an amount."""

    seq: int
    ts: str
    reading: MeterReading


@dataclass(frozen=True, slots=True)
class PowerUpInput:
    """A journaled power-up: the table's rules (its parameters) from that start on.

    rules is None when this code cannot read them (a journal from another version); raw has
    them as journaled either way."""

    input_seq: int
    ts: str
    rules: TableRules | None
    raw: dict[str, Any]


_ENTRY_COLUMNS = "seq, event_id, ts, boot_id, type, data, prev_hash, hash"  # and the formula


class JournalSnapshot:
    """Queries that all see the same committed journal (one read transaction)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def entries(self, start_ts: str, end_ts: str) -> Iterator[Entry]:
        """Rows with start_ts <= ts < end_ts, in seq order, streamed (not all in memory)."""
        cur = self._db.execute(
            f"SELECT {_ENTRY_COLUMNS}, {hash_v_column(self._db)} FROM journal "  # noqa: S608 - fixed column names
            "WHERE ts >= ? AND ts < ? ORDER BY seq",
            (start_ts, end_ts),
        )
        for seq, event_id, ts, boot_id, type_, data, prev_hash, digest, hash_v in cur:
            yield Entry(
                int(seq),
                event_id,
                ts,
                boot_id,
                type_,
                data,
                prev_hash,
                digest,
                json.loads(data),
                int(hash_v),
            )

    def rows_after(
        self, after_seq: int, start_ts: str, end_ts: str, types: Collection[str]
    ) -> list[EventRow]:
        """Rows of these types after after_seq with start_ts <= ts, in seq order, up to (not
        including) the first at or after end_ts: what a reader that has read up to after_seq
        has not read yet (the primary key finds them; the rows before are not touched)."""
        marks = ", ".join("?" * len(types))
        cur = self._db.execute(
            f"SELECT seq, ts, type, data FROM journal WHERE seq > ? AND ts >= ? "  # noqa: S608 - placeholders only
            f"AND type IN ({marks}) ORDER BY seq",
            (after_seq, start_ts, *types),
        )
        out = []
        for seq, ts, type_, data in cur:
            if ts >= end_ts:
                break
            out.append(EventRow(int(seq), ts, type_, json.loads(data)))
        return out

    def last_seq(self) -> int:
        return int(self._db.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])

    def meters_before(self, ts: str) -> dict[str, MeterAt]:
        """Each meter as the last row before ts left it (the amount a period opens with)."""
        cur = self._db.execute(
            "SELECT max(seq), json_extract(data, '$.meter.meter_id') AS meter_id FROM journal "
            "WHERE ts < ? AND meter_id IS NOT NULL GROUP BY meter_id",
            (ts,),
        )
        found: dict[str, MeterAt] = {}
        for seq, _meter_id in cur.fetchall():
            row_ts, data = self._db.execute(
                "SELECT ts, json_extract(data, '$.meter') FROM journal WHERE seq = ?", (seq,)
            ).fetchone()
            reading = MeterReading.model_validate_json(data)
            found[reading.meter_id] = MeterAt(int(seq), row_ts, reading)
        return found

    def power_ups(self, end_ts: str) -> list[PowerUpInput]:
        """Every power-up before end_ts, in order: the parameters and when they took effect."""
        cur = self._db.execute(
            "SELECT input_seq, ts, data FROM inputs WHERE type = ? AND ts < ? ORDER BY input_seq",
            (PowerUp.TYPE, end_ts),
        )
        out = []
        for input_seq, ts, data in cur:
            raw = json.loads(data)
            try:
                rules: TableRules | None = PowerUp.model_validate(raw).rules
            except ValidationError:
                rules = None
            out.append(PowerUpInput(int(input_seq), ts, rules, raw))
        return out


@contextlib.contextmanager
def snapshot(database: Path) -> Iterator[JournalSnapshot]:
    """A read-only snapshot of a table's journal; sqlite3.Error if it cannot be read."""
    db = open_read_only(database)
    db.isolation_level = None  # transactions as written below, none implied
    try:
        db.execute("BEGIN")  # deferred: the first read fixes the snapshot every query sees
        yield JournalSnapshot(db)
    finally:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        db.close()


def read_entries(database: Path, start: datetime, end: datetime) -> list[Entry]:
    """The rows with start <= ts < end, from one snapshot (game pace reads hours, not months)."""
    with snapshot(database) as snap:
        return list(snap.entries(journal_ts(start), journal_ts(end)))


def read_rows_after(
    database: Path, after_seq: int, start: datetime, end: datetime, types: Collection[str]
) -> list[EventRow]:
    """`JournalSnapshot.rows_after` from one snapshot: what game pace has not read yet."""
    with snapshot(database) as snap:
        return snap.rows_after(after_seq, journal_ts(start), journal_ts(end), sorted(types))

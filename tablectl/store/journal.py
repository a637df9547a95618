"""The durable store: table state (meters, round), the core's inputs and the event journal.

Each step of the core is one transaction (WAL, synchronous=FULL) holding the input, the new
state snapshot and the journal rows it produced, so a power cut leaves either all of a step
or none of it, and `tablectl journal replay` can rebuild the state from the inputs. The
journal is also the MQTT outbox: rows carry a per-table `seq` that is never reused, and each
row's hash chains to the previous one so that an edited or deleted row is detectable.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tablectl.util.ids import uuid7

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    seq       INTEGER PRIMARY KEY,
    event_id  TEXT NOT NULL UNIQUE,
    ts        TEXT NOT NULL,
    boot_id   TEXT NOT NULL,
    type      TEXT NOT NULL,
    data      TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
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
    last_seq   INTEGER
);
"""
GENESIS_HASH = "0" * 64


@dataclass(frozen=True, slots=True)
class JournalRow:
    seq: int
    event_id: str
    ts: str
    boot_id: str
    type: str
    data: dict[str, Any]

    def envelope(self, site: str, table: str, *, replay: bool) -> dict[str, Any]:
        """The MQTT event envelope (docs/mqtt.md)."""
        return {
            "v": 1,
            "type": self.type,
            "event_id": self.event_id,
            "site": site,
            "table": table,
            "boot_id": self.boot_id,
            "seq": self.seq,
            "ts": self.ts,
            "replay": replay,
            "data": self.data,
        }


def _row_hash(prev_hash: str, seq: int, event_id: str, ts: str, type_: str, data: str) -> str:
    text = "\x1f".join((prev_hash, str(seq), event_id, ts, type_, data))
    return hashlib.sha256(text.encode()).hexdigest()


def _utc_now() -> datetime:
    return datetime.now(UTC)


def canonical_json(data: object) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def state_hash(state_json: str) -> str:
    return hashlib.sha256(state_json.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class StepInput:
    """One core input as journaled: its name and data."""

    type: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class InputRow:
    input_seq: int
    ts: str
    type: str
    data: dict[str, Any]
    state_hash: str
    first_seq: int | None
    last_seq: int | None


class Store:
    """One table's database.

    The daemon commits from one journal thread while its event loop reads; SQLite in
    serialized mode (sqlite3.threadsafety == 3) makes one connection safe to share, and
    readers only ever see rows up to the last completed commit.
    """

    def __init__(
        self, path: Path, *, boot_id: str, clock: Callable[[], datetime] = _utc_now
    ) -> None:
        # Not readable by others: the directory 0750, the database (and its -wal, -shm) 0640.
        path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o640))
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk before we light a seat or publish (nothing is lost).
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        self._boot_id = boot_id
        self._clock = clock
        last = self._db.execute(
            "SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        self._last_seq: int = int(last[0]) if last else 0
        self._last_hash: str = str(last[1]) if last else GENESIS_HASH
        row = self._db.execute("SELECT max(input_seq) FROM inputs").fetchone()
        self._last_input_seq: int = int(row[0] or 0)

    def close(self) -> None:
        self._db.close()

    @property
    def last_seq(self) -> int:
        return self._last_seq

    def get(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO kv(key, value) VALUES(?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def commit(
        self,
        state_json: str,
        entries: Sequence[tuple[str, dict[str, Any]]],
        step_input: StepInput | None = None,
        kv: Mapping[str, str] | None = None,
    ) -> list[JournalRow]:
        """Append the input, its journal rows and the new state, atomically and durably.

        kv: keys written in the same transaction (a device's event cursor: the event is
        acknowledged to the device only once this commit returned)."""
        rows: list[JournalRow] = []
        seq, prev = self._last_seq, self._last_hash
        now = self._clock()
        ts = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        unix_ms = int(now.timestamp() * 1000)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for type_, data in entries:
                seq += 1
                event_id = str(uuid7(unix_ms))
                data_json = canonical_json(data)
                digest = _row_hash(prev, seq, event_id, ts, type_, data_json)
                self._db.execute(
                    "INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (seq, event_id, ts, self._boot_id, type_, data_json, prev, digest),
                )
                rows.append(JournalRow(seq, event_id, ts, self._boot_id, type_, data))
                prev = digest
            input_seq = self._last_input_seq
            if step_input is not None:
                input_seq += 1
                self._db.execute(
                    "INSERT INTO inputs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        input_seq,
                        ts,
                        self._boot_id,
                        step_input.type,
                        canonical_json(step_input.data),
                        state_hash(state_json),
                        rows[0].seq if rows else None,
                        rows[-1].seq if rows else None,
                    ),
                )
            self.put("table_state", state_json)
            for key, value in (kv or {}).items():
                self.put(key, value)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._last_seq, self._last_hash = seq, prev
        self._last_input_seq = input_seq
        return rows

    def inputs(self) -> Iterator[InputRow]:
        """Every journaled input, in the order the core stepped on them."""
        cur = self._db.execute(
            "SELECT input_seq, ts, type, data, state_hash, first_seq, last_seq "
            "FROM inputs ORDER BY input_seq"
        )
        for r in cur:
            yield InputRow(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6])

    def rows_between(self, first_seq: int, last_seq: int) -> list[JournalRow]:
        cur = self._db.execute(
            "SELECT seq, event_id, ts, boot_id, type, data FROM journal "
            "WHERE seq BETWEEN ? AND ? ORDER BY seq",
            (first_seq, last_seq),
        )
        return [JournalRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in cur]

    def rows_after(self, seq: int, limit: int = 100) -> list[JournalRow]:
        """Committed rows after seq: never one of a commit still in progress."""
        cur = self._db.execute(
            "SELECT seq, event_id, ts, boot_id, type, data FROM journal "
            "WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            (seq, self._last_seq, limit),
        )
        return [JournalRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in cur]

    def verify_chain(self) -> int | None:
        """The first seq whose hash does not chain, or None when the journal is intact."""
        prev, expected_seq = GENESIS_HASH, 1
        cur = self._db.execute(
            "SELECT seq, event_id, ts, type, data, prev_hash, hash FROM journal ORDER BY seq"
        )
        for seq, event_id, ts, type_, data, prev_hash, digest in cur:
            if seq != expected_seq or prev_hash != prev:
                return int(seq)
            if _row_hash(prev, seq, event_id, ts, type_, data) != digest:
                return int(seq)
            prev, expected_seq = digest, seq + 1
        return None

    @property
    def acked_through_seq(self) -> int:
        return int(self.get("acked_through_seq") or 0)

    def record_ack(self, seq: int) -> bool:
        """A backend acknowledged every row up to seq. Acks only move forward."""
        if seq <= self.acked_through_seq or seq > self._last_seq:
            return False
        self.put("acked_through_seq", str(seq))
        return True

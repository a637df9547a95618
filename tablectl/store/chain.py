"""The journal's two hash chains and its head: what a commit leaves, as the mark records it.

Rows. Each row's hash covers the previous row's hash and the row's own columns. Which
columns is the row's `hash_v`: formula 1 (rows journaled before the chain covered them all)
takes seq, event_id, ts, type and data; formula 2 takes every column, boot_id included, and
its own number. Rows are never rewritten to a newer formula: a journal verifies row by row
with the formula each row names, and once a row uses 2 no later row may use 1.

Inputs. Each input's hash covers the previous input's hash and every column of the input:
its data, the hash of the state it left and the rows it produced. Inputs journaled before
this chain existed have no stored hash; the chain runs through them all the same (from the
first input), so the first stored hash vouches for every input before it.

The head is the end of both chains plus what else a commit writes (the table state's hash and
the key-values: each device's event cursor, and the commit's generation, `journal.commit_gen`).
The mark (`mark.py`) records the head each commit left, once it is on disk, and the integrity
checks (`integrity.py`) compare it with the database.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

GENESIS_HASH = "0" * 64
ROW_HASH_V = 2  # the formula rows are hashed with now
INPUT_CHAIN = "input/1"  # the input chain's formula, named in every link
TABLE_STATE = "table_state"  # the key-value holding the state (covered by its hash)
# The key-value each commit writes its generation to: the gen of the mark's record of it.
COMMIT_GEN = "journal.commit_gen"


def row_hash(prev_hash: str, seq: int, event_id: str, ts: str, type_: str, data: str) -> str:
    """Formula 1: a row's fields (data as the stored JSON text) and the previous row's hash,
    without its boot_id. Rows journaled before formula 2 keep it."""
    text = "\x1f".join((prev_hash, str(seq), event_id, ts, type_, data))
    return hashlib.sha256(text.encode()).hexdigest()


def row_digest(
    version: int,
    prev_hash: str,
    seq: int,
    event_id: str,
    ts: str,
    boot_id: str,
    type_: str,
    data: str,
) -> str:
    """A row's link in the chain by the formula it names; ValueError for one unknown."""
    if version == 1:
        return row_hash(prev_hash, seq, event_id, ts, type_, data)
    if version == 2:
        text = "\x1f".join(("2", prev_hash, str(seq), event_id, ts, boot_id, type_, data))
        return hashlib.sha256(text.encode()).hexdigest()
    raise ValueError(f"no row hash formula {version}")


def input_digest(
    prev_hash: str,
    input_seq: int,
    ts: str,
    boot_id: str,
    type_: str,
    data: str,
    state_hash: str,
    first_seq: int | None,
    last_seq: int | None,
) -> str:
    """An input's link in the input chain: every column of it and the previous link."""
    rows = "" if first_seq is None or last_seq is None else f"{first_seq}-{last_seq}"
    text = "\x1f".join(
        (INPUT_CHAIN, prev_hash, str(input_seq), ts, boot_id, type_, data, state_hash, rows)
    )
    return hashlib.sha256(text.encode()).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


KV_PLAIN_MAX = 80  # longer key-values are kept in the head by their hash (the mark stays small)
KV_HASHED = "sha256:"


def kv_seen(value: str) -> str:
    """A key-value as the head keeps it: as it is (a device cursor), or its hash if long."""
    return value if len(value) <= KV_PLAIN_MAX else KV_HASHED + text_hash(value)


@dataclass(frozen=True, slots=True)
class JournalHead:
    """What the journal holds after a commit: its last row and that row's hash, its last input
    and the input chain's hash there, the hash of the stored table state (None: none stored)
    and the other key-values, sorted (each device's event cursor)."""

    seq: int = 0
    hash: str = GENESIS_HASH
    input_seq: int = 0
    input_hash: str = GENESIS_HASH
    state_hash: str | None = None
    kv: tuple[tuple[str, str], ...] = ()

    @property
    def values(self) -> dict[str, str]:
        return dict(self.kv)

    def rows_and_inputs(self) -> tuple[int, str, int, str]:
        return self.seq, self.hash, self.input_seq, self.input_hash

    @property
    def commit_gen(self) -> int | None:
        """The generation of the commit that left this head (None: written by a tablectl
        before the trailing mark, or not a number)."""
        value = self.values.get(COMMIT_GEN)
        if value is None or not (value.isascii() and value.isdigit()) or len(value) > 18:
            return None
        return int(value)

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "hash": self.hash,
            "input_seq": self.input_seq,
            "input_hash": self.input_hash,
            "state_hash": self.state_hash,
            "kv": dict(self.kv),
        }

    @classmethod
    def from_json(cls, data: object) -> JournalHead:
        """ValueError for anything but a head as `to_json` writes it."""
        if not isinstance(data, dict):
            raise ValueError("a head is an object")
        seq, input_seq = data.get("seq"), data.get("input_seq")
        hashes = (data.get("hash"), data.get("input_hash"))
        state, kv = data.get("state_hash"), data.get("kv")
        if not (isinstance(seq, int) and isinstance(input_seq, int) and seq >= 0):
            raise ValueError("seq and input_seq are numbers")
        if not all(isinstance(h, str) for h in hashes) or not isinstance(state, str | None):
            raise ValueError("hashes are text")
        if not isinstance(kv, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in kv.items()
        ):
            raise ValueError("kv maps text to text")
        return cls(seq, str(hashes[0]), input_seq, str(hashes[1]), state, tuple(sorted(kv.items())))

    def after(
        self,
        *,
        seq: int,
        hash_: str,
        input_seq: int,
        input_hash: str,
        state_hash: str | None,
        kv: Mapping[str, str | None],
        gen: int | None = None,
    ) -> JournalHead:
        """The head a commit leaves: state_hash, the stored state's hash (None: unchanged);
        kv sets keys (None: removes one). A commit that changes nothing leaves this very head
        (`is`); one that does is the commit of generation gen, if given (COMMIT_GEN set)."""
        values = dict(self.kv)
        for key, value in kv.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = kv_seen(value)
        state = self.state_hash if state_hash is None else state_hash
        pairs = tuple(sorted(values.items()))
        if (seq, hash_, input_seq, input_hash, state, pairs) == (
            self.seq,
            self.hash,
            self.input_seq,
            self.input_hash,
            self.state_hash,
            self.kv,
        ):
            return self
        if gen is not None:  # the head built once, with it
            values[COMMIT_GEN] = kv_seen(str(gen))
            pairs = tuple(sorted(values.items()))
        return JournalHead(seq, hash_, input_seq, input_hash, state, pairs)


def columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")}


def hash_v_column(db: sqlite3.Connection) -> str:
    """The row's formula, as a column expression (a journal no tablectl with formula 2 has
    opened has no such column: its rows are all formula 1)."""
    return "hash_v" if "hash_v" in columns(db, "journal") else "1"


def _input_hash(db: sqlite3.Connection) -> str:
    return "hash" if "hash" in columns(db, "inputs") else "NULL"


@dataclass(frozen=True, slots=True)
class ChainBreak:
    """Where a chain stops holding: the seq (or input) and why."""

    at: int
    why: str


@dataclass(frozen=True, slots=True)
class RowWalk:
    rows: int
    formula_2_from: int | None  # the first row hashed with formula 2, if any
    broken: ChainBreak | None


def walk_rows(db: sqlite3.Connection) -> RowWalk:
    """Every row, in order: contiguous seqs from 1, each hashing (by its formula) to its
    stored hash and chaining to the row before."""
    prev, expected, newest, count = GENESIS_HASH, 1, 1, 0
    formula_2_from: int | None = None
    cur = db.execute(
        "SELECT seq, event_id, ts, boot_id, type, data, prev_hash, hash, "  # noqa: S608 -- a fixed expression
        f"{hash_v_column(db)} FROM journal ORDER BY seq"
    )
    for seq, event_id, ts, boot_id, type_, data, prev_hash, digest, version in cur:
        if seq != expected:
            why = f"it follows seq {expected - 1}: rows are missing between them"
            return RowWalk(count, formula_2_from, ChainBreak(seq, why))
        if prev_hash != prev:
            why = "its prev_hash is not the hash of the row before"
            return RowWalk(count, formula_2_from, ChainBreak(seq, why))
        if version < newest:
            why = f"it is hashed with formula {version}, after rows hashed with {newest}"
            return RowWalk(count, formula_2_from, ChainBreak(seq, why))
        try:
            ok = row_digest(version, prev, seq, event_id, ts, boot_id, type_, data) == digest
        except ValueError as exc:
            return RowWalk(count, formula_2_from, ChainBreak(seq, str(exc)))
        if not ok:
            why = "it does not match its hash (a column was edited)"
            return RowWalk(count, formula_2_from, ChainBreak(seq, why))
        if version >= 2 and formula_2_from is None:
            formula_2_from = seq
        prev, expected, newest, count = digest, seq + 1, version, count + 1
    return RowWalk(count, formula_2_from, None)


@dataclass(frozen=True, slots=True)
class InputWalk:
    inputs: int
    head: str  # the chain's hash at the last input walked
    broken: ChainBreak | None


def _input_links(db: sqlite3.Connection, through: int | None) -> Iterator[tuple[Any, ...]]:
    limit = "" if through is None else f"WHERE input_seq <= {int(through)} "
    return db.execute(
        "SELECT input_seq, ts, boot_id, type, data, state_hash, first_seq, last_seq, "  # noqa: S608 -- fixed expressions, an int
        f"{_input_hash(db)} FROM inputs {limit}ORDER BY input_seq"
    )


def walk_inputs(db: sqlite3.Connection, *, through: int | None = None) -> InputWalk:
    """Every input (through an input_seq), in order: contiguous from 1, each stored hash the
    chain's; only inputs before the first stored hash may have none (journaled before the
    chain). The rows each names must come in order."""
    prev, expected, count, stored_seen, last_row = GENESIS_HASH, 1, 0, False, 0
    for seq, ts, boot_id, type_, data, state, first, last, stored in _input_links(db, through):
        if seq != expected:
            why = f"it follows input {expected - 1}: inputs are missing between them"
            return InputWalk(count, prev, ChainBreak(seq, why))
        digest = input_digest(prev, seq, ts, boot_id, type_, data, state, first, last)
        if stored is None and stored_seen:
            why = "it has no hash, after inputs that have one"
            return InputWalk(count, prev, ChainBreak(seq, why))
        if stored is not None and stored != digest:
            why = "it does not match its hash (a column was edited)"
            return InputWalk(count, prev, ChainBreak(seq, why))
        if first is not None and (first <= last_row or last is None or last < first):
            why = f"it names rows {first}..{last}, out of order"
            return InputWalk(count, prev, ChainBreak(seq, why))
        stored_seen = stored_seen or stored is not None
        last_row = last if last is not None else last_row
        prev, expected, count = digest, seq + 1, count + 1
    return InputWalk(count, prev, None)


def read_head(db: sqlite3.Connection) -> JournalHead:
    """The head as the database holds it now (its stored hashes, not recomputed; inputs from
    before the chain are walked once for theirs)."""
    last = db.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    inp = db.execute(
        f"SELECT input_seq, {_input_hash(db)} FROM inputs ORDER BY input_seq DESC LIMIT 1"  # noqa: S608 -- a fixed expression
    ).fetchone()
    input_seq, input_hash = (0, GENESIS_HASH) if inp is None else (int(inp[0]), inp[1])
    if input_hash is None:  # journaled before the chain: its hash is computed
        input_hash = walk_inputs(db).head
    kv = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM kv")}
    state = kv.pop(TABLE_STATE, None)
    kv = {k: kv_seen(v) for k, v in kv.items()}
    return JournalHead(
        seq=int(last[0]) if last else 0,
        hash=str(last[1]) if last else GENESIS_HASH,
        input_seq=input_seq,
        input_hash=str(input_hash),
        state_hash=None if state is None else text_hash(state),
        kv=tuple(sorted(kv.items())),
    )


def input_hash_at(db: sqlite3.Connection, input_seq: int) -> str | None:
    """The input chain's hash at input_seq (GENESIS at 0), or None when there is no such
    input."""
    if input_seq == 0:
        return GENESIS_HASH
    row = db.execute(
        f"SELECT {_input_hash(db)} FROM inputs WHERE input_seq = ?",  # noqa: S608 -- a fixed expression
        (input_seq,),
    ).fetchone()
    if row is None:
        return None
    if row[0] is not None:
        return str(row[0])
    walk = walk_inputs(db, through=input_seq)
    return walk.head if walk.inputs == input_seq else None


def row_hash_at(db: sqlite3.Connection, seq: int) -> str | None:
    if seq == 0:
        return GENESIS_HASH
    row = db.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
    return None if row is None else str(row[0])


def tail_break(db: sqlite3.Connection) -> ChainBreak | None:
    """The last row and the last input, recomputed from their columns (what start-up checks
    of the chains; `journal verify` walks them whole)."""
    rows = db.execute(
        "SELECT seq, event_id, ts, boot_id, type, data, prev_hash, hash, "  # noqa: S608 -- a fixed expression
        f"{hash_v_column(db)} FROM journal ORDER BY seq DESC LIMIT 2"
    ).fetchall()
    if rows:
        seq, event_id, ts, boot_id, type_, data, prev_hash, digest, version = rows[0]
        before = rows[1][7] if len(rows) > 1 else GENESIS_HASH
        expected_before = seq - 1 if len(rows) > 1 else 0
        if (len(rows) > 1 and rows[1][0] != expected_before) or prev_hash != before:
            return ChainBreak(seq, "the last row does not chain to the one before")
        try:
            ok = row_digest(version, prev_hash, seq, event_id, ts, boot_id, type_, data) == digest
        except ValueError as exc:
            return ChainBreak(seq, f"the last row: {exc}")
        if not ok:
            return ChainBreak(seq, "the last row does not match its hash (a column was edited)")
    return None


def input_tail_break(db: sqlite3.Connection) -> ChainBreak | None:
    """The last input, recomputed from its columns and the stored hash before it."""
    if "hash" not in columns(db, "inputs"):
        return None
    last = db.execute(
        "SELECT input_seq, ts, boot_id, type, data, state_hash, first_seq, last_seq, hash "
        "FROM inputs ORDER BY input_seq DESC LIMIT 1"
    ).fetchone()
    if last is None or last[8] is None:
        return None
    prev = input_hash_at(db, int(last[0]) - 1)
    if prev is None or input_digest(prev, *last[:8]) != last[8]:
        why = "the last input does not match its hash (a column was edited)"
        return ChainBreak(int(last[0]), why)
    return None

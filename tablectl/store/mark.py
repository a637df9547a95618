"""The journal's mark: a small file beside the database that says where the journal ended at
its last commit, so that a database truncated, emptied, rolled back or replaced is found
(`integrity.py`); and the highest seq ever handed to a broker.

`tablectl.sqlite3.mark` is three 4 KiB slots, rewritten in place and never grown (so an
fdatasync writes one block and no metadata):

- Slots 0 and 1 take turns holding a commit record `{gen, base, next}`: the head the journal
  had before a commit (base) and the head the commit left (next). The mark trails the
  commit: SQLite commits first (its own fsync, the only one between a step and its
  publication), then the store writes the record into the slot the last write did not use
  and fdatasyncs it, before the next commit may begin (one journal thread does both, in
  order). Each commit also writes its generation into the database (`journal.commit_gen`,
  the record's gen, in the same transaction). So at any crash the database holds the next
  of the newest readable record, or exactly one commit past it: its commit_gen is the
  record's gen + 1 and its chains run through next (the commit landed; its record did not,
  or was torn by a power cut, in which case the other slot, one write older, is the newest
  readable). At rest it holds next and nothing else, so taking away the last commit is seen.
  A record written to catch up -- after a crash kept a commit from its record, the next
  commit first writes the database's head as it stands -- has base = next.
- Records of a tablectl before the trailing mark (no `"trailing": true`) were written before
  SQLite committed: the database then holds their base or their next (a crash between them
  left base). They are read so until the first commit rewrites the mark.
- Slot 2 holds the highest seq handed to a broker, as 20 digits (`HandedMark`): written before
  rows leave, without an fsync. It is never past the database's end: rows are handed only
  once their commit is on disk, which may be before that commit's record is (the one
  unmarked commit).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from tablectl.store.chain import JournalHead

SLOT = 4096
HANDED_AT = 2 * SLOT
SIZE = 3 * SLOT
MAGIC = b"tablectl-mark 1 "
HANDED_WIDTH = 20  # digits: a fixed-size record, rewritten in place


def mark_path(database: Path) -> Path:
    return database.with_name(database.name + ".mark")


def legacy_handed_path(database: Path) -> Path:
    """Where tablectl kept the handed seq before the mark held it (read once, then removed)."""
    return database.with_name(database.name + ".handed")


@dataclass(frozen=True, slots=True)
class MarkRecord:
    """One commit as the mark holds it: the head before (base) and after (next).

    trailing: written after the commit (this tablectl): the database holds next, or one
    commit past it. Not trailing: written before it (a tablectl before the trailing mark):
    the database holds base or next."""

    gen: int
    base: JournalHead
    next: JournalHead
    trailing: bool

    def held(self) -> tuple[JournalHead, ...]:
        """The heads this record says the database may end at, but for the one commit past
        them that a crash may leave (next first)."""
        return (self.next,) if self.trailing else (self.next, self.base)


@dataclass(frozen=True, slots=True)
class MarkReading:
    """The mark as read. record: the newest readable commit record (None: none written yet,
    or none readable); damaged: a slot holds something that is not a record; handed: the
    highest seq handed to a broker; exists: the file is there."""

    record: MarkRecord | None
    damaged: bool
    handed: int
    exists: bool


NO_MARK = MarkReading(None, damaged=False, handed=0, exists=False)


_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def head_json(head: JournalHead) -> str:
    """A head as a record holds it: its JSON, keys sorted, compact."""
    return _COMPACT.encode(head.to_json())


def _slot_bytes(gen: int, base_json: str, next_json: str, *, trailing: bool) -> bytes:
    """A record's slot: MAGIC, the payload's sha256, the payload -- `json.dumps` of {base,
    gen, next, trailing} with its keys sorted, compact -- and zeros. The payload is put
    together around the heads' JSON (the same bytes: its keys sort so), so a head encoded
    for one record (its next) is not encoded again for the next (its base)."""
    extra = ',"trailing":true' if trailing else ""  # absent: written before its commit
    payload = f'{{"base":{base_json},"gen":{gen:d},"next":{next_json}{extra}}}'.encode()
    line = b"%s%s %s\n" % (MAGIC, hashlib.sha256(payload).hexdigest().encode(), payload)
    if len(line) > SLOT:
        raise ValueError(f"a mark record of {len(line)} bytes does not fit a {SLOT}-byte slot")
    return line.ljust(SLOT, b"\0")


def _encode(record: MarkRecord) -> bytes:
    return _slot_bytes(
        record.gen, head_json(record.base), head_json(record.next), trailing=record.trailing
    )


def _decode(raw: bytes) -> tuple[MarkRecord | None, bool]:
    """(the record, or None; whether the slot is damaged). An empty slot is not damaged."""
    if not raw.strip(b"\0"):
        return None, False
    line, _, _ = raw.partition(b"\n")
    if not line.startswith(MAGIC):
        return None, True
    digest, _, payload = line[len(MAGIC) :].partition(b" ")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        return None, True  # torn by a power cut, or edited
    try:
        data = json.loads(payload)
        gen, trailing = data["gen"], data.get("trailing", False)
        if not isinstance(gen, int) or not isinstance(trailing, bool):
            raise ValueError("gen is a number, trailing true or false")
        base, next_ = JournalHead.from_json(data["base"]), JournalHead.from_json(data["next"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, True
    return MarkRecord(gen, base, next_, trailing), False


def _handed(raw: bytes) -> int:
    text = raw.decode("ascii", "replace").strip(" \0")
    return int(text) if text.isdigit() else 0


def _slots(fd: int) -> list[tuple[MarkRecord | None, bool]]:
    return [_decode(os.pread(fd, SLOT, n * SLOT)) for n in (0, 1)]


def _newest(found: list[tuple[MarkRecord | None, bool]]) -> int | None:
    """The slot of the newest readable record (the highest gen), if any."""
    readable = [(record.gen, n) for n, (record, _) in enumerate(found) if record is not None]
    return max(readable)[1] if readable else None


def _read(fd: int) -> MarkReading:
    found = _slots(fd)
    slot = _newest(found)
    newest = None if slot is None else found[slot][0]
    damaged = any(bad for _, bad in found)
    return MarkReading(newest, damaged, _handed(os.pread(fd, HANDED_WIDTH, HANDED_AT)), True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    """The mark file for writing, made (0640, zeroed, on disk with its directory entry) if it
    is not there or shorter than its slots."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    size = os.fstat(fd).st_size
    if size < SIZE:
        os.pwrite(fd, b"\0" * (SIZE - size), size)
        os.fsync(fd)
        _fsync_dir(path)
    return fd


def read_mark(database: Path) -> MarkReading:
    """The mark beside a database, read only (the CLI's verify); a handed seq still in the
    file of an older tablectl counts too."""
    legacy = read_legacy_handed(legacy_handed_path(database))
    try:
        fd = os.open(mark_path(database), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return MarkReading(None, damaged=False, handed=legacy, exists=False)
    try:
        reading = _read(fd)
    finally:
        os.close(fd)
    if legacy > reading.handed:
        return MarkReading(reading.record, reading.damaged, legacy, reading.exists)
    return reading


def read_legacy_handed(path: Path) -> int:
    try:
        return _handed(path.read_bytes()[:HANDED_WIDTH])
    except FileNotFoundError:
        return 0


class JournalMark:
    """The store's handle on the mark: it writes a commit record after each commit."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        """durable=False: no fdatasync (journals that need not survive a power cut)."""
        self.path = path
        self._durable = durable
        self._fd = _open(path)
        found = _slots(self._fd)
        slot = _newest(found)
        record = None if slot is None else found[slot][0]
        self._gen = record.gen if record else 0
        # The slot the newest readable record is in: the next write takes the other one.
        self._slot = 1 if slot is None else slot
        self._last: tuple[JournalHead, str] | None = None  # the newest record's next, as JSON

    @property
    def gen(self) -> int:
        """The gen of the newest record written or read (0: none)."""
        return self._gen

    def close(self) -> None:
        os.close(self._fd)

    def read(self) -> MarkReading:
        return _read(self._fd)

    def write(self, gen: int, base: JournalHead, next_: JournalHead) -> None:
        """Record a commit from base to next_ that is on disk, as commit gen (past every
        gen written before), into the slot the newest record is not in: on disk when this
        returns. A write torn by a power cut leaves the other slot the newest readable."""
        if gen <= self._gen:
            raise ValueError(f"mark gen {gen} after gen {self._gen}: gens only go up")
        # A commit's base is the head the commit before it left: its JSON was made then.
        last = self._last
        base_json = last[1] if last is not None and last[0] is base else head_json(base)
        next_json = head_json(next_)
        slot = 1 - self._slot
        os.pwrite(self._fd, _slot_bytes(gen, base_json, next_json, trailing=True), slot * SLOT)
        if self._durable:
            os.fdatasync(self._fd)
        self._gen, self._slot = gen, slot
        self._last = (next_, next_json)

    def set_handed(self, seq: int) -> None:
        """Set the handed seq (moving it back is a recovery's), on disk when this returns."""
        os.pwrite(self._fd, str(seq).rjust(HANDED_WIDTH).encode(), HANDED_AT)
        os.fsync(self._fd)

    def take_legacy_handed(self, legacy: Path) -> None:
        """An older tablectl kept the handed seq in a file of its own: it moves into the mark,
        which is then the one place for it."""
        seq = read_legacy_handed(legacy)
        if not legacy.exists():
            return
        if seq > self.read().handed:
            self.set_handed(seq)
        with contextlib.suppress(FileNotFoundError):
            legacy.unlink()
        _fsync_dir(legacy)


class HandedMark:
    """The highest seq ever handed to a broker: slot 2 of the journal's mark.

    Written (no fsync) before rows go to the broker, so it survives a crash of the daemon; it
    costs a pwrite, not a transaction behind the next commit's fsync. A power cut may lose
    the last writes: rows re-sent then can say replay=false although a broker had them
    (consumers deduplicate on seq either way).
    """

    def __init__(self, path: Path) -> None:
        self._fd = _open(path)
        self.seq = _handed(os.pread(self._fd, HANDED_WIDTH, HANDED_AT))

    def advance(self, seq: int) -> None:
        if seq > self.seq:
            os.pwrite(self._fd, str(seq).rjust(HANDED_WIDTH).encode(), HANDED_AT)
            self.seq = seq

    def close(self) -> None:
        os.close(self._fd)

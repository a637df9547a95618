"""The journal's mark: a small file beside the database that says what the journal held at its
last commit, so that a database truncated, emptied, rolled back or replaced is found
(`integrity.py`); and the highest seq ever handed to a broker.

`tablectl.sqlite3.mark` is three 4 KiB slots, rewritten in place and never grown (so an
fdatasync writes one block and no metadata):

- Slots 0 and 1 take turns holding a commit record `{gen, base, next}`. Before SQLite commits,
  the store writes the head the journal has (base) and the head the commit will leave (next)
  into the slot the last write did not use, and fdatasyncs it; only then does SQLite commit.
  So the database holds the base or the next of the newest record and nothing else: a crash
  before the SQLite commit leaves base, after it next. A slot torn by a power cut fails its
  checksum; the other, one write older, then names what the database holds (the torn write's
  commit never began).
- Slot 2 holds the highest seq handed to a broker, as 20 digits (`HandedMark`): written before
  rows leave, without an fsync. It is never past the journal: rows are handed only once their
  commit (and so its mark) is on disk.

Written before the commit, the mark may name one commit the database lacks (a crash came
between them) and never lags behind the database: a commit cannot land that the mark did not
announce. Taking away the last commit is what such a crash looks like, so that one loss goes
unseen; any other rollback, truncation or replacement does not.
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
    """One commit as the mark announced it: the head before (base) and after (next)."""

    gen: int
    base: JournalHead
    next: JournalHead


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


def _encode(record: MarkRecord) -> bytes:
    payload = json.dumps(
        {"gen": record.gen, "base": record.base.to_json(), "next": record.next.to_json()},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    line = MAGIC + hashlib.sha256(payload).hexdigest().encode() + b" " + payload + b"\n"
    if len(line) > SLOT:
        raise ValueError(f"a mark record of {len(line)} bytes does not fit a {SLOT}-byte slot")
    return line.ljust(SLOT, b"\0")


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
        gen = data["gen"]
        if not isinstance(gen, int):
            raise ValueError("gen is a number")
        base, next_ = JournalHead.from_json(data["base"]), JournalHead.from_json(data["next"])
    except (ValueError, KeyError, TypeError):
        return None, True
    return MarkRecord(gen, base, next_), False


def _handed(raw: bytes) -> int:
    text = raw.decode("ascii", "replace").strip(" \0")
    return int(text) if text.isdigit() else 0


def _read(fd: int) -> MarkReading:
    found = [_decode(os.pread(fd, SLOT, n * SLOT)) for n in (0, 1)]
    records = [r for r, _ in found if r is not None]
    newest = max(records, key=lambda r: r.gen, default=None)
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
    """The store's handle on the mark: it writes a commit record before each commit."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        """durable=False: no fdatasync (journals that need not survive a power cut)."""
        self.path = path
        self._durable = durable
        self._fd = _open(path)
        record = _read(self._fd).record
        self._gen = record.gen if record else 0

    def close(self) -> None:
        os.close(self._fd)

    def read(self) -> MarkReading:
        return _read(self._fd)

    def write(self, base: JournalHead, next_: JournalHead) -> None:
        """Announce a commit from base to next_: on disk when this returns."""
        gen = self._gen + 1
        os.pwrite(self._fd, _encode(MarkRecord(gen, base, next_)), (gen % 2) * SLOT)
        if self._durable:
            os.fdatasync(self._fd)
        self._gen = gen

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

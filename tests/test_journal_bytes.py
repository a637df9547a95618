"""The bytes a commit writes -- rows, inputs, key-values, the mark -- are the bytes tablectl has
always written, however its commit path is made cheaper (issue 15): a journal is verified and
replayed by their hashes, and the mark is read by versions before and after.

GOLDEN holds digests of what the store of commit fe394c4 (before the journal thread's CPU was
cut) wrote for `write_journal` below, event ids and clock fixed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel, ConfigDict

from tablectl.core.compat import later
from tablectl.store import journal
from tablectl.store.chain import JournalHead
from tablectl.store.journal import StepCommit, StepInput, Store, journal_ts
from tablectl.store.mark import SLOT, MarkRecord, _encode, mark_path
from tablectl.util.ids import uuid7, uuid7_texts

T0 = datetime(2026, 12, 5, 3, 0, 39, 14_000, tzinfo=UTC)
# Text a record may carry that JSON escapes: non-ASCII, quotes, a backslash, a control char.
AWKWARD = 'café "Ünïcødé" \\ \t ☃ \U0001f0a1'


def event_ids() -> Iterator[str]:
    """Event ids in UUIDv7's layout, the same on every run."""
    for n in itertools.count(1):
        yield f"01a24425-83e6-7{n % 4096:03x}-8{n % 4096:03x}-{n:012x}"


def write_journal(module: ModuleType, path: Path) -> None:
    """Commits of every kind, through `module` (tablectl.store.journal, of this tablectl or
    another): a group commit of two steps (rows of nested, awkward data), one with a
    key-value and no input, one with nothing, one with an input and no rows, one with a long
    key-value (the head keeps its hash), one that changes nothing, and a technician's
    recovery that drops acknowledgements and key-values."""
    times = (T0 + timedelta(milliseconds=7 * n + 0.4 * (n % 3)) for n in itertools.count())
    store = module.Store(path, boot_id="b-01", clock=lambda: next(times))
    commit, inp = module.StepCommit, module.StepInput
    nested = {
        "text": AWKWARD,
        "list": [3, None, True, False, {"z": 1, "a": [{"b": "c"}]}],
        "big": 2**70,
        "neg": -1,
        "empty": {},
        "rule": "649a.2(c)(2)",
    }
    store.commit_steps(
        [
            commit(
                '{"phase":"betting","round_id":1}',
                [("round.opened", {"round_id": 1}), ("note", nested)],
                inp("shuffle_completed", {"card_count": 52, "by": AWKWARD}),
                {"device.shuffler.cursor": "2138704926:1"},
            ),
            commit(
                '{"phase":"locked","round_id":1}',
                [("round.locked", {"round_id": 1, "seats": [1, 2], "cause": "lockout-button"})],
                inp("lockout_pressed", {"at_ns": 1_000_000_000, "undecided_seats": []}),
            ),
        ]
    )
    store.commit('{"phase":"locked","round_id":1,"n":2}', [], None, {"device.shoe.cursor": "9:9"})
    store.commit_steps([])
    store.commit('{"phase":"locked"}', [], inp("settle", {"hands": {"1": "2c7d9h"}}))
    store.commit('{"phase":"locked"}', [], None, {"link.cursor": "x" * 200})
    store.commit('{"phase":"locked"}', [], None, {"link.cursor": "x" * 200})  # no change
    store.record_acks({"backend-1": 3})
    store.commit_recovery(
        commit('{"phase":"closed"}', [("journal.recovered", {"by": AWKWARD})], inp("power_up", {})),
        drop_acks=["backend-1"],
        drop_kv=["device.shoe.cursor", "device.shuffler.cursor"],
    )
    store.close()


def stored(path: Path) -> dict[str, str]:
    """The sha256 of every table's rows, in order, and of the mark file."""
    db = sqlite3.connect(path)
    try:
        digests = {
            table: hashlib.sha256(
                json.dumps(db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()).encode()  # noqa: S608 -- fixed names
            ).hexdigest()
            for table in ("journal", "inputs", "kv", "acks")
        }
    finally:
        db.close()
    digests["mark"] = hashlib.sha256(mark_path(path).read_bytes()).hexdigest()
    return digests


GOLDEN = {
    "journal": "c3b32451d13778e010e4cb0ef25e8fc84af331606a82300ac79f02e6194bb2f0",
    "inputs": "3f9467f058701aeb949e2384324742bbfb0efdff2ceec77d2c139777034441b8",
    "kv": "ea8600ca41ae115b3bfcf54aa88eb893e61ca13a3e74dac8c4bd9d32b092823a",
    "acks": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945",
    "mark": "1bf46d9222185cd908ecb21f3aad0a2aec3dc15aacd8aae883a5fafd77e038dd",
}


def test_a_journal_is_written_with_the_bytes_it_always_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = event_ids()
    monkeypatch.setattr(journal, "uuid7_texts", lambda ms, n: [next(ids) for _ in range(n)])
    write_journal(journal, tmp_path / "tablectl.sqlite3")
    assert stored(tmp_path / "tablectl.sqlite3") == GOLDEN


def test_a_commits_event_ids_are_uuid7s_of_its_millisecond() -> None:
    ms = 0x01A2442583E6
    texts = uuid7_texts(ms, 64)
    assert len(set(texts)) == 64
    for text in texts:
        u = uuid.UUID(text)
        assert str(u) == text  # lower case, dashed as str(UUID) writes it
        assert u.version == 7 and u.variant == uuid.RFC_4122 and u.int >> 80 == ms
        assert text[:14] == str(uuid7(ms))[:14]
    # 74 random bits each: every one of them varies across the ids.
    randoms = [uuid.UUID(t).int & ((0xFFF << 64) | ((1 << 62) - 1)) for t in texts]
    assert all(any(r >> bit & 1 for r in randoms) for bit in [*range(62), *range(64, 76)])
    assert uuid7_texts(ms, 0) == []


def test_a_commits_time_from_the_system_clock_is_written_as_journal_ts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = journal._CommitTime(journal.utc_now)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for ns in (
        1_796_440_542_975_123_456,
        1_796_440_542_999_999_999,
        1_796_440_543_000_000_000,  # the next second: its text made anew
        1_796_440_543_001_000_000,
        1_796_440_542_000_000_001,  # back a second (the clock set back)
        1_798_761_599_999_999_999,  # a year's last ms
        1_798_761_600_000_000_000,
    ):
        monkeypatch.setattr(time, "time_ns", lambda ns=ns: ns)
        ts, unix_ms = now()
        assert unix_ms == ns // 1_000_000
        assert ts == journal_ts(epoch + timedelta(microseconds=ns // 1000))


def test_a_commits_time_from_a_given_clock_is_that_clocks() -> None:
    when = datetime(2026, 12, 5, 4, 0, 39, 14_999, tzinfo=UTC)
    ts, unix_ms = journal._CommitTime(lambda: when)()
    assert (ts, unix_ms) == ("2026-12-05T04:00:39.014Z", int(when.timestamp() * 1000))


def _encode_as_before(record: MarkRecord) -> bytes:
    """A mark record as tablectl encoded it before its heads were encoded once each."""
    fields: dict[str, object] = {
        "gen": record.gen,
        "base": record.base.to_json(),
        "next": record.next.to_json(),
    }
    if record.trailing:
        fields["trailing"] = True
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    line = b"tablectl-mark 1 " + hashlib.sha256(payload).hexdigest().encode() + b" "
    return (line + payload + b"\n").ljust(SLOT, b"\0")


HEADS = [
    JournalHead(),
    JournalHead(7, "a" * 64, 5, "b" * 64, "c" * 64, (("journal.commit_gen", "12"),)),
    JournalHead(
        2**40, "d" * 64, 0, "e" * 64, None, (("a", AWKWARD), ('k"\\', "v"), ("z", "sha256:f"))
    ),
]


@pytest.mark.parametrize("trailing", [True, False])
@pytest.mark.parametrize(("base", "next_"), list(itertools.product(HEADS, HEADS)))
def test_a_mark_record_is_encoded_as_before(
    base: JournalHead, next_: JournalHead, trailing: bool
) -> None:
    record = MarkRecord(123, base, next_, trailing)
    assert _encode(record) == _encode_as_before(record)


def test_the_marks_slots_hold_the_records_as_before(tmp_path: Path) -> None:
    """Each record's base is the head the one before left (its JSON made once, then): the
    slots hold each record as it was encoded before, every time."""
    store = Store(tmp_path / "tablectl.sqlite3", boot_id="b-01")
    for n in range(5):
        before = store.head
        store.commit_steps(
            [StepCommit(f'{{"n":{n}}}', [("note", {"n": n})], StepInput("x", {"n": n}), None)]
        )
        at = n % 2 * SLOT  # the first record takes slot 0, then they take turns
        slot = mark_path(tmp_path / "tablectl.sqlite3").read_bytes()[at : at + SLOT]
        assert slot == _encode_as_before(MarkRecord(n + 1, before, store.head, trailing=True))
    store.close()


class _Inner(BaseModel):
    model_config = ConfigDict(frozen=True)
    x: int = 0


class _Grown(BaseModel):
    model_config = ConfigDict(frozen=True)
    a: int
    inner: _Inner = later(_Inner())
    seats: tuple[int, ...] = later(())


def test_a_field_added_later_is_left_out_while_it_holds_its_default() -> None:
    default = _Grown.model_fields["inner"].default
    assert _Grown(a=1).inner is default
    for same in (_Grown(a=1), _Grown(a=1, inner=_Inner()), _Grown(a=1, inner=default)):
        assert same.model_dump_json() == '{"a":1}'
    moved = _Grown(a=1, inner=_Inner(x=2), seats=(3,))
    assert moved.model_dump_json() == '{"a":1,"inner":{"x":2},"seats":[3]}'

"""Whether a journal is whole: what the daemon checks before it starts on one
(`check_integrity`), and what `tablectl journal verify` checks in full (`verify_journal`).

The checks, each named in what they report:

- chain: each row hashes (by the formula it names) to its stored hash and chains to the row
  before (store/chain.py). At start-up the last row; `verify` walks every row.
- inputs: the input chain likewise, and no input names rows the journal no longer holds.
- mark: the database ends where the mark says the last commit left it (store/mark.py): its
  last row and hash, its last input and the input chain's hash there. The mark trails the
  commit, so a crash may leave the database exactly one commit past its newest record: that
  commit's generation (`journal.commit_gen`) is the record's gen + 1 and both chains run
  through the record's next. Nothing else past it, and nothing short of it, passes (records
  of a tablectl before the trailing mark, written before their commit, vouch for their base
  too).
- handed: no seq past the journal's end was handed to a broker (rows of the one commit past
  the mark may have been: they were on disk).
- acks: acknowledgements only from the backends in mqtt.backends, never past the journal.
- cursors: each device's event cursor is the one the last commit wrote, and reads as one.
- state: the stored table state is the state the last input left and the last commit wrote.

`replay` re-runs the inputs through the core; nothing here does. The start-up check reads the
last row and input, so it stays fast on a year of rows; `verify` walks both chains once.

A problem says whether `tablectl journal recover --accept WHAT` can honestly mend it (`Accept`)
or not: rows or inputs that are gone or rewritten cannot be made up, and a table that went on
past them would hand out seqs its backends already hold.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from tablectl.store.chain import (
    COMMIT_GEN,
    ChainBreak,
    JournalHead,
    RowWalk,
    columns,
    input_hash_at,
    input_tail_break,
    read_head,
    row_hash_at,
    tail_break,
    walk_inputs,
    walk_rows,
)
from tablectl.store.journal import SCHEMA, JournalReader, Store
from tablectl.store.mark import MarkReading, MarkRecord, mark_path, read_mark

CURSOR_KEY = re.compile(r"^device\.[a-z0-9_-]+\.cursor$")
CURSOR_VALUE = re.compile(r"^[0-9]{1,10}:[0-9]{1,10}$")
SNAPSHOT_TRIES = 50  # verify on a running daemon: reads until no commit came in between


class Check(StrEnum):
    CHAIN = "chain"
    INPUTS = "inputs"
    MARK = "mark"
    HANDED = "handed"
    ACKS = "acks"
    CURSORS = "cursors"
    STATE = "state"
    PAGES = "pages"  # SQLite's own check of every page (PRAGMA quick_check)


class Accept(StrEnum):
    """What `tablectl journal recover --accept` may do, each journaled with who asked."""

    MARK = "mark"
    ACKS = "acks"
    CURSORS = "cursors"
    HANDED = "handed"
    STATE = "state"


ACCEPT_DOES: dict[Accept, str] = {
    Accept.MARK: "write the mark again from this journal (only if both chains verify whole)",
    Accept.ACKS: "drop acknowledgements from backends not in mqtt.backends or past the "
    "journal's end (those backends are sent every row again)",
    Accept.CURSORS: "put each device cursor back as the last commit wrote it (the mark)",
    Accept.HANDED: "set the handed seq back to the journal's last seq",
    Accept.STATE: "rebuild the stored table state by replaying the journaled inputs",
}

RESTORE = (
    "nothing here can bring it back: put back the database that the mark names (a backup); "
    "a table that went on from here would hand out seqs its backends already hold"
)


class IntegrityProblem(BaseModel):
    """One failed check: what was found, and whether `journal recover --accept` mends it."""

    model_config = ConfigDict(frozen=True)

    check: Check
    message: str
    accept: Accept | None = None  # None: nothing here can; see the message
    subject: str | None = None  # the backend or key-value it concerns, if one

    def text(self) -> str:
        return f"[{self.check}] {self.message}"


class CheckResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    check: Check
    ok: bool
    detail: str


class VerifyReport(BaseModel):
    """`tablectl journal verify --json`."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    database: str
    rows: int
    inputs: int
    acked: dict[str, int]
    handed: int
    checks: list[CheckResult]
    problems: list[IntegrityProblem]
    error: str | None = None  # the first problem, as every --json error says it


# --- the checks -------------------------------------------------------------------------


def _problem(
    check: Check, message: str, accept: Accept | None = None, subject: str | None = None
) -> IntegrityProblem:
    return IntegrityProblem(check=check, message=message, accept=accept, subject=subject)


def _legacy(db: sqlite3.Connection) -> bool:
    """Nothing in the journal was written by a tablectl that keeps the mark: its last row is
    of formula 1 and its last input has no stored hash (or it is empty)."""
    if "hash_v" in columns(db, "journal"):
        last = db.execute("SELECT hash_v FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
        if last is not None and last[0] >= 2:
            return False
    if "hash" in columns(db, "inputs"):
        last = db.execute("SELECT hash FROM inputs ORDER BY input_seq DESC LIMIT 1").fetchone()
        if last is not None and last[0] is not None:
            return False
    return True


def _lost(head: JournalHead, latest: JournalHead) -> str:
    if head.seq < latest.seq or head.input_seq < latest.input_seq:
        found = (
            f"the journal ends at seq {head.seq} (input {head.input_seq}); its last commit, "
            f"as the mark announced it, ended at seq {latest.seq} (input "
            f"{latest.input_seq}): committed rows are missing (truncated, emptied or rolled "
            "back)"
        )
    else:
        found = (
            f"the journal's rows or inputs through seq {latest.seq} (input "
            f"{latest.input_seq}) are not the ones the mark announced: the database was "
            "replaced or rewritten"
        )
    return f"{found}; {RESTORE}"


def _extends(db: sqlite3.Connection, head: JournalHead, at: JournalHead) -> bool:
    """The database's chains run through `at`: its last row and input are `at`'s or past
    them, with `at`'s hashes there."""
    return (
        head.seq >= at.seq
        and head.input_seq >= at.input_seq
        and row_hash_at(db, at.seq) == at.hash
        and input_hash_at(db, at.input_seq) == at.input_hash
    )


# What a mark without a record stands for: the empty journal, before its first commit.
NOTHING = MarkRecord(0, JournalHead(), JournalHead(), trailing=True)


def _first_commit(db: sqlite3.Connection, head: JournalHead, mark: MarkReading) -> MarkReading:
    """A mark with no readable record beside a journal of one commit, the first: that
    commit's record was not written, or torn (the slot it went to is then damaged). It
    reads as NOTHING's record, which the database is one commit past."""
    if mark.record is None and one_past(db, head, NOTHING) is not None:
        return MarkReading(NOTHING, mark.damaged, mark.handed, mark.exists)
    return mark


def one_past(db: sqlite3.Connection, head: JournalHead, record: MarkRecord) -> JournalHead | None:
    """The head of the record that the database is exactly one commit past (a crash came
    between that commit and its record), or None: the database's commit generation is the
    record's gen + 1 and its chains run through that head."""
    if head.commit_gen != record.gen + 1:
        return None
    return next((at for at in record.held() if _extends(db, head, at)), None)


def _kv_problems(head: JournalHead, wrote: JournalHead) -> list[IntegrityProblem]:
    """The rows and inputs are those of a commit the mark recorded: its state and key-values
    (its commit generation among them) must be too."""
    found = []
    if head.state_hash != wrote.state_hash:
        found.append(
            _problem(
                Check.STATE,
                "the stored table state is not the one the last commit wrote (the mark "
                "holds its hash)",
                Accept.STATE,
            )
        )
    mine, theirs = head.values, wrote.values
    for key in sorted(set(mine) | set(theirs)):
        if mine.get(key) != theirs.get(key):
            found.append(
                _problem(
                    Check.CURSORS,
                    f"{key} is {mine.get(key, 'missing')}; the last commit wrote "
                    f"{theirs.get(key, 'none')} (the mark)",
                    Accept.CURSORS,
                    key,
                )
            )
    return found


def matching_commit(head: JournalHead, record: MarkRecord) -> JournalHead | None:
    """The head the mark's record holds whose rows and inputs the journal holds (next first;
    base only in a record written before its commit), or None. The one commit past the mark
    that a crash may leave has no record: None then too (its key-values are vouched by no
    mark)."""
    for wrote in record.held():
        if head.rows_and_inputs() == wrote.rows_and_inputs():
            return wrote
    return None


def _against_mark(
    db: sqlite3.Connection, head: JournalHead, record: MarkRecord
) -> list[IntegrityProblem]:
    if head in record.held() or one_past(db, head, record) is not None:
        return []
    # Commits the mark has no record of, more than the one a crash leaves: the mark is
    # older, even if they wrote no rows (device cursors, say: not to be put back then).
    past = head.commit_gen is not None and head.commit_gen > record.gen
    wrote = matching_commit(head, record)
    if wrote is not None and not past:
        return _kv_problems(head, wrote)
    latest = record.next
    if any(_extends(db, head, at) for at in (record.held() if past else (latest,))):
        return [
            _problem(
                Check.MARK,
                f"the journal goes on past the last commit its mark announced (seq "
                f"{latest.seq}, input {latest.input_seq}) to seq {head.seq} (input "
                f"{head.input_seq}{_gens(head, record)}): the mark is older than the journal "
                "(put back from a copy, or an older tablectl wrote the journal since)",
                Accept.MARK,
            )
        ]
    return [_problem(Check.MARK, _lost(head, latest))]


def _gens(head: JournalHead, record: MarkRecord) -> str:
    """The commit generations, which say how far past the mark the database is."""
    held = "none" if head.commit_gen is None else str(head.commit_gen)
    return f", commit {held}; the mark's last commit is {record.gen}"


def _state_problem(db: sqlite3.Connection, head: JournalHead) -> IntegrityProblem | None:
    last = db.execute(
        "SELECT input_seq, state_hash FROM inputs ORDER BY input_seq DESC LIMIT 1"
    ).fetchone()
    if last is None or head.state_hash is None or last[1] == head.state_hash:
        return None
    return _problem(
        Check.STATE,
        f"the stored table state is not the state input {last[0]} left (its state hash)",
        Accept.STATE,
    )


def _rows_named_past_end(db: sqlite3.Connection, head: JournalHead) -> IntegrityProblem | None:
    last = db.execute(
        "SELECT input_seq, last_seq FROM inputs WHERE last_seq IS NOT NULL "
        "ORDER BY input_seq DESC LIMIT 1"
    ).fetchone()
    if last is None or last[1] <= head.seq:
        return None
    return _problem(
        Check.INPUTS,
        f"input {last[0]} journaled rows through seq {last[1]}; the journal ends at seq "
        f"{head.seq}: rows were removed; {RESTORE}",
    )


def _ack_problems(
    db: sqlite3.Connection, head: JournalHead, backends: Sequence[str] | None, vouched: bool
) -> list[IntegrityProblem]:
    found = []
    for backend, seq in db.execute("SELECT backend_id, seq FROM acks ORDER BY backend_id"):
        if backends is not None and backend not in backends:
            listed = ", ".join(backends) or "none"
            found.append(
                _problem(
                    Check.ACKS,
                    f"the journal holds an acknowledgement from backend {backend!r} (through "
                    f"seq {seq}), which mqtt.backends ({listed}) does not list",
                    Accept.ACKS,
                    backend,
                )
            )
        elif seq > head.seq:
            said = (
                f"backend {backend!r} acknowledged through seq {seq}; the journal ends at "
                f"seq {head.seq}"
            )
            if vouched:
                found.append(_problem(Check.ACKS, said, Accept.ACKS, backend))
            else:
                found.append(
                    _problem(
                        Check.ACKS,
                        f"{said}, and no mark shows the journal whole: rows past seq "
                        f"{head.seq} may have been lost; {RESTORE}",
                        subject=backend,
                    )
                )
    return found


def _rolled_back(db: sqlite3.Connection) -> IntegrityProblem | None:
    """The table found a registered backend's acknowledgement past the journal's end while it
    ran (core/journal_checks.py) and no technician has accepted it since: the journal was put
    back from an older copy, which its mark, copied with it, cannot show."""
    row = db.execute(
        "SELECT CASE WHEN json_valid(value) THEN json_extract(value, '$.rolled_back') END "
        "FROM kv WHERE key = 'table_state'"
    ).fetchone()
    if row is None or row[0] is None:
        return None
    found = json.loads(row[0])
    backend, acked, last = found["backend_id"], found["acked_through_seq"], found["last_seq"]
    return _problem(
        Check.ACKS,
        f"backend {backend!r} acknowledged through seq {acked} while this journal ended at seq "
        f"{last} (journaled as a rollback): the database and its mark were put back from an "
        f"older copy, and its seqs past {last} are rows that backend holds with other content; "
        f"put back the newest copy of both from a backup. Accept only if that backend's "
        "acknowledgement was wrong and has been withdrawn (its retained ack cleared): "
        "otherwise it is found again at the next start",
        Accept.ACKS,
        backend,
    )


def _cursor_form_problems(
    head: JournalHead, mark: MarkReading, known: set[str | None]
) -> list[IntegrityProblem]:
    """A cursor that does not read as one (the daemon could not take it), unless the mark's
    comparison already named it."""
    found = []
    for key, value in head.kv:
        if CURSOR_KEY.match(key) and not CURSOR_VALUE.match(value) and key not in known:
            wrote = None if mark.record is None else matching_commit(head, mark.record)
            found.append(
                _problem(
                    Check.CURSORS,
                    f"{key} is {value!r}, not a device cursor (boot:event)"
                    + ("" if wrote else f"; no mark holds the one committed: {RESTORE}"),
                    Accept.CURSORS if wrote else None,
                    key,
                )
            )
    return found


def _problems(
    db: sqlite3.Connection,
    head: JournalHead,
    mark: MarkReading,
    backends: Sequence[str] | None,
    database: Path,
) -> list[IntegrityProblem]:
    """Everything but the chains' walk: the mark, handed, acks, cursors and state."""
    found: list[IntegrityProblem] = []
    where = mark_path(database)
    mark = _first_commit(db, head, mark)
    vouched = False  # a mark shows the journal ends where its last commit left it
    if mark.record is None:
        if mark.damaged:
            found.append(
                _problem(
                    Check.MARK,
                    f"the mark {where} holds no readable commit record (edited or damaged): "
                    f"whether rows past seq {head.seq} were lost cannot be told here (accept "
                    "only a journal known whole, e.g. no backend holds a row past it)",
                    Accept.MARK,
                )
            )
        elif not _legacy(db):
            found.append(
                _problem(
                    Check.MARK,
                    f"the mark {where} holds no commit (deleted, or emptied), though this "
                    f"journal was written with one: whether rows past seq {head.seq} were "
                    "lost cannot be told here (accept only a journal known whole, e.g. no "
                    "backend holds a row past it)",
                    Accept.MARK,
                )
            )
    else:
        against = _against_mark(db, head, mark.record)
        found += against
        vouched = not any(p.check is Check.MARK for p in against)
    if mark.handed > head.seq:
        found.append(_handed_problem(db, head, mark, vouched))
    if (named := _rows_named_past_end(db, head)) is not None:
        found.append(named)
    found += _ack_problems(db, head, backends, vouched)
    if (rolled := _rolled_back(db)) is not None:
        found.append(rolled)
    found += _cursor_form_problems(head, mark, {p.subject for p in found})
    state = _state_problem(db, head)
    if state is not None and not any(p.check is Check.STATE for p in found):
        found.append(state)
    return found


def _handed_problem(
    db: sqlite3.Connection, head: JournalHead, mark: MarkReading, vouched: bool
) -> IntegrityProblem:
    """Rows past the journal's end were handed to a broker. The handed seq is written once a
    commit is on disk, which may be before the mark's record of it (the one commit past the
    mark a crash may leave). A record written before its commit (older tablectls) announced
    it: within the commit the journal lacks, that commit landed, was sent, and is gone; past
    what it announced, the handed seq is wrong. A trailing record names no commit to come:
    past it, either the handed seq is wrong or the one commit after it that a crash kept
    from its record was taken away, which cannot be told here; with the database one commit
    past the mark, every commit is there and the handed seq is wrong."""
    said = (
        f"rows through seq {mark.handed} were handed to a broker; the journal ends at seq "
        f"{head.seq}"
    )
    record = mark.record
    if vouched and record is not None and mark.handed > record.next.seq:
        if not record.trailing:
            return _problem(
                Check.HANDED,
                f"{said}, and no commit the mark announced reached it: the handed seq is wrong",
                Accept.HANDED,
            )
        if one_past(db, head, record) is not None:
            return _problem(
                Check.HANDED,
                f"{said}, one commit past its mark, and no commit reached it: the handed seq "
                "is wrong",
                Accept.HANDED,
            )
        return _problem(
            Check.HANDED,
            f"{said}, where its mark's last commit left it: the handed seq is wrong, or a "
            f"commit after it that a crash kept from the mark was taken away (accept only "
            f"if no backend holds a row past seq {head.seq})",
            Accept.HANDED,
        )
    return _problem(Check.HANDED, f"{said}: committed rows were lost; {RESTORE}")


def _broken(check: Check, broken: ChainBreak) -> IntegrityProblem:
    if check is Check.CHAIN:
        lead = f"the journal does not chain at seq {broken.at}"
    else:
        lead = f"the inputs do not chain at input {broken.at}"
    return _problem(check, f"{lead}: {broken.why}; {RESTORE}")


def check_integrity(store: Store, backends: Sequence[str]) -> list[IntegrityProblem]:
    """What keeps the daemon from starting on this journal ([] when it may): the mark, the
    last row and input, handed, acks, cursors and state. Read only; before any commit."""
    db = store._db
    found = [
        _broken(check, broken)
        for check, broken in ((Check.CHAIN, tail_break(db)), (Check.INPUTS, input_tail_break(db)))
        if broken is not None
    ]
    return found + _problems(db, store.head, store.mark(), backends, store.path)


def chain_problems(db: sqlite3.Connection) -> list[IntegrityProblem]:
    """Every page read by SQLite and both hash chains walked whole (what start-up's tail
    check cannot see: a damaged page of an index, a row or input edited in the middle). Read
    only; on a running daemon's journal too (a reader's own connection): rows committed
    meanwhile are walked as well."""
    if (damaged := page_problem(db)) is not None:
        return [damaged]  # the chains' walk would only meet the damage again
    return [
        _broken(check, walk.broken)
        for check, walk in ((Check.CHAIN, walk_rows(db)), (Check.INPUTS, walk_inputs(db)))
        if walk.broken is not None
    ]


def page_problem(db: sqlite3.Connection) -> IntegrityProblem | None:
    """SQLite's check of every page of the file (quick_check: each b-tree and index whole,
    without matching every index entry to its row). The chains say whether the rows were
    rewritten; this says whether the file holds them at all: a damaged page of an index the
    chains' walk never reads would otherwise surface later, mid-shift, in a query by type."""
    try:
        found = [str(r[0]) for r in db.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:
        found = [str(exc)]
    if found == ["ok"]:
        return None
    said = " ".join(" ".join(found).split())  # SQLite's lines, as one
    return _problem(Check.PAGES, f"the file is damaged (SQLite: {said}); {RESTORE}")


def refusal(problems: Sequence[IntegrityProblem]) -> str:
    """Why the daemon does not start, and what a technician can do: one line."""
    found = "; ".join(p.text() for p in problems)
    stuck = [p for p in problems if p.accept is None]
    if stuck:
        return (
            f"the journal fails its integrity checks: {found}. `tablectl journal recover` "
            f"cannot mend [{', '.join(sorted({p.check for p in stuck}))}]"
        )
    accepts = " ".join(f"--accept {a}" for a in sorted({p.accept for p in problems if p.accept}))
    return (
        f"the journal fails its integrity checks: {found}. A technician who has looked into "
        f"it may go on with `tablectl journal recover --by ID {accepts}` (journaled, with who)"
    )


def verify_journal(
    reader: JournalReader, backends: Sequence[str] | None, *, full: bool = True
) -> VerifyReport:
    """Every check, the chains walked whole (full=False: their last links, as at start-up).
    backends None: which backends are registered is not known (no config)."""
    db = reader._db
    for _ in range(SNAPSHOT_TRIES):
        before = reader.mark()  # handed from here: never past the snapshot taken after it
        db.execute("BEGIN")
        head = read_head(db)
        after = reader.mark()
        if after.record == before.record:
            break
        db.execute("ROLLBACK")  # a commit came in between: read again
    else:
        db.execute("BEGIN")
        head, after = read_head(db), reader.mark()
    mark = MarkReading(after.record, after.damaged, before.handed, after.exists)
    try:
        return _report(db, reader.path, head, mark, backends, full=full)
    finally:
        db.execute("ROLLBACK")


def verify_missing(database: Path, backends: Sequence[str] | None) -> VerifyReport | None:
    """No database at all: what the checks say of it when a mark (or a handed seq) shows
    there was one; None when nothing says a journal was ever here."""
    mark = read_mark(database)
    if not mark.exists and mark.handed == 0:
        return None
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.executescript(SCHEMA)
        return _report(db, database, JournalHead(), mark, backends, full=True)


def _report(
    db: sqlite3.Connection,
    database: Path,
    head: JournalHead,
    mark: MarkReading,
    backends: Sequence[str] | None,
    *,
    full: bool,
) -> VerifyReport:
    problems: list[IntegrityProblem] = []
    if full and (damaged := page_problem(db)) is not None:
        problems.append(damaged)
    rows: RowWalk | None = walk_rows(db) if full else None
    inputs = walk_inputs(db) if full else None
    row_break = rows.broken if rows else tail_break(db)
    input_break = inputs.broken if inputs else input_tail_break(db)
    if row_break is not None:
        problems.append(_broken(Check.CHAIN, row_break))
    if input_break is not None:
        problems.append(_broken(Check.INPUTS, input_break))
    problems += _problems(db, head, mark, backends, database)
    acked = {str(b): int(q) for b, q in db.execute("SELECT backend_id, seq FROM acks")}
    ok_detail = {
        Check.PAGES: "every page reads whole (SQLite quick_check)"
        if full
        else "not read (`tablectl journal verify` reads every page)",
        Check.CHAIN: _chain_detail(head, rows),
        Check.INPUTS: f"{head.input_seq} inputs chain"
        + ("" if full else " (the last one checked)"),
        Check.MARK: _mark_detail(db, head, mark),
        Check.HANDED: f"handed to a broker through seq {mark.handed}",
        Check.ACKS: (", ".join(f"{b} through seq {q}" for b, q in sorted(acked.items())) or "none")
        + ("" if backends is not None else " (registered backends not checked: give --config)"),
        Check.CURSORS: ", ".join(f"{k} {v}" for k, v in head.kv if k != COMMIT_GEN) or "none",
        Check.STATE: "the state the last input left"
        if head.state_hash is not None
        else "no state stored",
    }
    failed = {p.check: p for p in reversed(problems)}  # the first problem of each check
    checks = [
        CheckResult(
            check=check,
            ok=check not in failed,
            detail=failed[check].message if check in failed else ok_detail[check],
        )
        for check in Check
    ]
    return VerifyReport(
        ok=not problems,
        database=str(database),
        rows=head.seq,
        inputs=head.input_seq,
        acked=acked,
        handed=mark.handed,
        checks=checks,
        problems=problems,
        error=problems[0].text() if problems else None,
    )


def _chain_detail(head: JournalHead, rows: RowWalk | None) -> str:
    if rows is None:
        return f"{head.seq} rows; the last one checked"
    if rows.formula_2_from is None:
        return f"{rows.rows} rows chain (formula 1: journaled before boot ids were covered)"
    if rows.formula_2_from == 1:
        return f"{rows.rows} rows chain, every column covered"
    return (
        f"{rows.rows} rows chain; every column covered from seq {rows.formula_2_from} "
        "(the rows before it were journaled with formula 1, boot ids uncovered)"
    )


def _mark_detail(db: sqlite3.Connection, head: JournalHead, mark: MarkReading) -> str:
    mark = _first_commit(db, head, mark)
    if mark.record is None:
        return "no mark yet (journaled by a tablectl before the mark; its next commit writes one)"
    where = f"seq {head.seq}, input {head.input_seq}"
    if one_past(db, head, mark.record) is not None:
        return (
            f"the journal ends one commit past its mark ({where}; commit {head.commit_gen}): "
            "the commit is on disk, its record was not written (a crash came between them); "
            "the next commit records it first"
        )
    return f"the journal ends where its last commit left it ({where})"

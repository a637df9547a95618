"""`tablectl journal`: verify that the journal is whole, read (and follow) the last rows,
export a time range, replay the inputs. These read the database itself, so they work with the
daemon stopped; reading needs the `tablectl` group (the database is 0640 in a 0750 directory).
`journal recover` is the one that writes: a technician's journaled acceptance of what a
failed check allows to mend (store/integrity.py), with the daemon stopped."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import pwd
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    When,
    WholeNumber,
    config_path,
    describe,
    fail,
    path_arg,
    person,
)
from tablectl.config import ConfigError, TableConfig, load_config
from tablectl.store.chain import KV_HASHED, hash_v_column
from tablectl.store.integrity import (
    ACCEPT_DOES,
    Accept,
    IntegrityProblem,
    VerifyReport,
    matching_commit,
    verify_journal,
    verify_missing,
)
from tablectl.store.journal import (
    JournalReader,
    StepCommit,
    Store,
    canonical_json,
    journal_ts,
    open_read_only,
    unreadable,
)
from tablectl.util import instance_lock
from tablectl.util.bounds import Limit
from tablectl.util.files import permission_advice
from tablectl.util.instance_lock import InstanceLocked

FOLLOW_POLL_S = 0.5  # how often `tail -f` looks for new rows
# hash_v: the formula of hash (store/chain.py); 2 covers every column, boot_id included.
EXPORT_FIELDS = ("seq", "event_id", "ts", "boot_id", "type", "data", "prev_hash", "hash", "hash_v")


# A time ago (--since 30d) reaches back at most this far: longer than any journal a table PC
# keeps here, and short of the dates Python can hold (99999999999d overflowed); an earlier
# time is given as a date.
AGO_MOST = timedelta(days=3660)
EXPORT_TIME = When(AGO_MOST, "the most a time ago reaches back; give a date for earlier")
# How many rows `tail -n` prints at most: more is an export (`journal export`).
TAIL_ROWS = WholeNumber(
    "a number of rows", Limit(1, 100_000, "the most `tail` prints; journal export for more")
)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    journal = sub.add_parser("journal", help="read the table's event journal (daemon may run)")
    journal_sub = journal.add_subparsers(dest="journal_verb", required=True)
    verify = journal_sub.add_parser(
        "verify",
        help="check the journal is whole: hash chains, mark, acks, cursors, handed seq, state, "
        "pages (exit 1 names the check)",
    )
    tail = journal_sub.add_parser("tail", help="the last journal rows (-f: and new ones)")
    tail.add_argument(
        "-n", type=TAIL_ROWS, default=20, help="how many rows (1 to 100,000; default 20)"
    )
    tail.add_argument(
        "-f", "--follow", action="store_true", help="keep printing rows as they are journaled"
    )
    export = journal_sub.add_parser(
        "export", help="every row in a time range, as JSON lines or CSV, with its hashes"
    )
    export.add_argument(
        "--since", type=EXPORT_TIME, help="from this time on (inclusive); default: the start"
    )
    export.add_argument(
        "--until", type=EXPORT_TIME, help="before this time (exclusive); default: now"
    )
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument("--output", "-o", type=path_arg, help="write here instead of stdout")
    replay = journal_sub.add_parser(
        "replay",
        help="rebuild the state from the journaled inputs with this code; exit 1 at the "
        "first seq that differs",
    )
    for sp in (verify, tail, export, replay):
        # verify takes both: the config says which backends are registered, --data-dir which
        # copy of the data to check (a backup, say).
        where = sp if sp is verify else sp.add_mutually_exclusive_group()
        where.add_argument("--config", type=path_arg, help="the table's config (finds its data)")
        where.add_argument("--data-dir", type=path_arg, help="the table's data directory")
        sp.add_argument("--json", action="store_true", help="JSON output, errors included")
        sp.set_defaults(handler=_journal)
    recover = journal_sub.add_parser(
        "recover",
        help="the daemon refused a journal that failed its checks: mend what --accept names "
        "(journaled, with who); the daemon stopped",
    )
    recover.add_argument("--by", required=True, type=person, help="the technician (an employee id)")
    recover.add_argument(
        "--accept",
        required=True,
        action="append",
        type=Accept,
        choices=list(Accept),
        help="what to mend (repeat for several): "
        + "; ".join(f"{a}: {does}" for a, does in ACCEPT_DOES.items()),
    )
    recover.add_argument("--config", type=path_arg, help="the table's config (finds its data)")
    recover.add_argument("--json", action="store_true", help="JSON output, errors included")
    recover.set_defaults(handler=_recover)


def _database(args: argparse.Namespace) -> Path:
    if args.data_dir:
        return Path(args.data_dir) / "tablectl.sqlite3"
    return load_config(config_path(args)).storage.database


def _backends(args: argparse.Namespace) -> list[str] | None:
    """The registered backends, when a config is at hand: --config, or with --data-dir alone
    the default config ($TABLECTL_CONFIG, /etc/tablectl/table.toml) if its data directory is
    that one. None: not known (the acks are then checked only against the journal)."""
    if not args.data_dir or args.config:
        return list(load_config(config_path(args)).mqtt.backends)
    at_hand = config_path(args)
    try:
        config = load_config(at_hand)
    except (ConfigError, OSError):
        return None
    if config.storage.data_dir.resolve() != Path(args.data_dir).resolve():
        return None
    return list(config.mqtt.backends)


def _rows(db: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    names = [hash_v_column(db) if f == "hash_v" else f for f in EXPORT_FIELDS]
    cur = db.execute(
        f"SELECT {', '.join(names)} FROM journal WHERE {where} ORDER BY seq",  # noqa: S608 - fixed column names
        params,
    )
    for r in cur:
        row = dict(zip(EXPORT_FIELDS, r, strict=True))
        row["data"] = json.loads(row["data"])
        yield row


def _journal(args: argparse.Namespace) -> int:
    path = _database(args)
    try:
        path.stat()
    except FileNotFoundError:
        gone = verify_missing(path, _backends(args)) if args.journal_verb == "verify" else None
        if gone is not None:  # its mark says there was a journal here
            return _verified_report(args, gone, path)
        return fail(
            args,
            f"no journal at {path}: the daemon creates it when it first runs "
            "(sudo systemctl start tablectl); --config or --data-dir name another table's",
            EXIT_REFUSED,
        )
    except PermissionError:
        return fail(args, permission_advice(path), EXIT_REFUSED)
    if args.journal_verb in ("tail", "export"):
        try:
            if args.journal_verb == "tail":
                return _tail(args, path)
            db = open_read_only(path)
            try:
                return _export(args, db, path)
            finally:
                db.close()
        except sqlite3.Error as exc:
            return fail(args, unreadable(path, exc), EXIT_REFUSED)
    # Read-only (SQLite mode=ro): a member of the journal's group verifies and replays it with
    # the daemon running or stopped, and nothing here can change it.
    try:
        store = JournalReader(path)
    except sqlite3.Error as exc:
        return fail(args, unreadable(path, exc), EXIT_REFUSED)
    try:
        if args.journal_verb == "verify":
            return _verify(args, store, path)
        return _replay(args, store, path)
    except sqlite3.Error as exc:
        return fail(args, unreadable(path, exc), EXIT_REFUSED)
    finally:
        store.close()


def _print_row(args: argparse.Namespace, row: dict[str, Any]) -> None:
    if args.json:
        shown = {k: row[k] for k in ("seq", "event_id", "ts", "type", "data")}
        print(json.dumps(shown), flush=True)
    else:
        print(f"{row['seq']:>8} {row['ts']} {row['type']:<22} {describe(row['data'])}", flush=True)


def _tail(args: argparse.Namespace, path: Path) -> int:
    with contextlib.closing(open_read_only(path)) as db:
        (last,) = db.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()
        seq = max(0, int(last) - args.n)
        for row in _rows(db, "seq > ?", (seq,)):
            _print_row(args, row)
            seq = row["seq"]
    if not args.follow:
        return EXIT_OK
    try:
        while True:
            time.sleep(FOLLOW_POLL_S)
            # A new connection each time: the daemon may have started since (see open_read_only).
            with contextlib.closing(open_read_only(path)) as db:
                for row in _rows(db, "seq > ?", (seq,)):
                    _print_row(args, row)
                    seq = row["seq"]
    except KeyboardInterrupt:
        return EXIT_OK


def _export(args: argparse.Namespace, db: sqlite3.Connection, path: Path) -> int:
    since = journal_ts(EXPORT_TIME.at(args.since)) if args.since else ""
    until = journal_ts(EXPORT_TIME.at(args.until) if args.until else datetime.now(UTC))
    if since and since >= until:
        return fail(args, f"--since {since} is not before --until {until}", EXIT_BAD_INPUT)
    try:
        out: IO[str] = (
            open(args.output, "w", newline="", encoding="utf-8")  # noqa: SIM115 - closed below
            if args.output
            else sys.stdout
        )
    except OSError as exc:
        return fail(args, f"cannot write {args.output}: {exc.strerror}", EXIT_REFUSED)
    count, first, last = 0, None, None
    try:
        writer = csv.DictWriter(out, EXPORT_FIELDS) if args.format == "csv" else None
        if writer:
            writer.writeheader()
        for row in _rows(db, "ts >= ? AND ts < ?", (since, until)):
            if writer:
                writer.writerow({**row, "data": canonical_json(row["data"])})  # as hashed
            else:
                out.write(json.dumps(row, sort_keys=True) + "\n")
            count += 1
            first = first or row["seq"]
            last = row["seq"]
    finally:
        if out is not sys.stdout:
            out.close()
    span = f"seq {first}..{last}" if count else "no rows"
    print(
        f"exported {count} rows ({span}) from {path}, {since or 'the start'} to {until}",
        file=sys.stderr,
    )
    return EXIT_OK


def _verify(args: argparse.Namespace, store: JournalReader, path: Path) -> int:
    return _verified_report(args, verify_journal(store, _backends(args)), path)


def _verified_report(args: argparse.Namespace, report: VerifyReport, path: Path) -> int:
    if args.json:
        print(report.model_dump_json())
        return EXIT_OK if report.ok else EXIT_REFUSED
    for check in report.checks:
        print(f"  {check.check:<8} {'ok' if check.ok else 'FAILED':<6} {check.detail}")
    if report.ok:
        acked = ", ".join(f"{b} through seq {q}" for b, q in sorted(report.acked.items()))
        print(f"journal {path}: intact, {report.rows} rows, acknowledged: {acked or 'none'}")
        return EXIT_OK
    print(f"tablectl: journal {path} fails: {_found(report.problems)}", file=sys.stderr)
    print(_what_next(report.problems), file=sys.stderr)
    return EXIT_REFUSED


def _found(problems: list[IntegrityProblem]) -> str:
    return "; ".join(p.text() for p in problems)


def _what_next(problems: list[IntegrityProblem]) -> str:
    stuck = sorted({p.check for p in problems if p.accept is None})
    if stuck:
        return f"tablectl: `journal recover` cannot mend [{', '.join(stuck)}]"
    accepts = " ".join(f"--accept {a}" for a in sorted({p.accept for p in problems if p.accept}))
    return (
        "tablectl: a technician who has looked into it may go on with "
        f"`tablectl journal recover --by ID {accepts}` (the daemon stopped; journaled)"
    )


def _replay(args: argparse.Namespace, store: JournalReader, path: Path) -> int:
    from tablectl.service.replay import replay

    result = replay(store)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": result.identical,
                    "inputs": result.inputs,
                    "rows": result.rows,
                    "first_difference": result.difference,
                    "input_seq": result.input_seq,
                    "seq": result.seq,
                }
            )
        )
    elif result.identical:
        print(
            f"journal {path}: {result.inputs} inputs replayed, {result.rows} rows and the "
            "state identical"
        )
    else:
        print(f"tablectl: replay differs: {result.difference}")
    return EXIT_OK if result.identical else EXIT_REFUSED


def _recover(args: argparse.Namespace) -> int:
    """Mend what the technician accepts of a journal that failed its checks, and journal it
    (`journal.recovered`). Only what can be mended honestly is offered (store/integrity.py):
    lost or rewritten rows and inputs stay refused."""
    config = load_config(config_path(args))
    database = config.storage.database
    if not database.exists():
        return fail(args, f"no journal at {database}: nothing to recover", EXIT_REFUSED)
    try:
        # The daemon's own lock: never while it runs, and it cannot start meanwhile.
        with instance_lock.held(config.storage.run_lock, "tablectl run"):
            store = Store(database, boot_id=str(uuid.uuid4()))
            try:
                return _recover_stopped(args, config, store)
            finally:
                store.close()
    except InstanceLocked as exc:
        return fail(args, f"{exc}: stop it first (sudo systemctl stop tablectl)", EXIT_REFUSED)
    except (OSError, sqlite3.Error) as exc:
        return fail(args, f"cannot recover the journal {database}: {exc}", EXIT_REFUSED)


def _recover_stopped(args: argparse.Namespace, config: TableConfig, store: Store) -> int:
    from tablectl.core.events import JournalRecovered
    from tablectl.core.table import Rejected, TableState, step
    from tablectl.service.dispatcher import journal_entries, journal_input

    backends = list(config.mqtt.backends)
    report = _verified(store, backends, full=True)
    if report.ok:
        return fail(args, f"journal {store.path} passes every check: nothing to recover", EXIT_OK)
    problems, accepted = report.problems, set(args.accept)
    if stuck := [p for p in problems if p.accept is None]:
        return fail(args, f"cannot be recovered here: {_found(stuck)}", EXIT_REFUSED)
    needed = {p.accept for p in problems if p.accept is not None}
    if missing := sorted(needed - accepted):
        given = " ".join(f"--accept {a}" for a in missing)
        return fail(args, f"{_found(problems)}; to mend it add {given}", EXIT_REFUSED)
    if extra := sorted(accepted - needed):
        why = f"--accept {', '.join(extra)}: no check failed that it mends"
        return fail(args, why, EXIT_REFUSED)
    mending = _mending(store, accepted, backends)
    if isinstance(mending, str):
        return fail(args, mending, EXIT_REFUSED)
    rules = config.rules()
    by = f"{args.by} ({pwd.getpwuid(os.getuid()).pw_name})"
    event = JournalRecovered(
        accepted=tuple(sorted(accepted)),
        problems=tuple(p.text() for p in problems),
        done=tuple(mending.done),
        by=by,
    )
    try:
        saved = mending.state_json
        state = TableState.model_validate_json(saved) if saved else TableState.initial(rules)
        state, effects = step(rules, state, event)
    except (ValueError, Rejected) as exc:
        why = f"the stored table state cannot be taken ({exc}): add --accept state"
        return fail(args, why, EXIT_REFUSED)
    commit = StepCommit(
        state.model_dump_json(), journal_entries(effects), journal_input(event), mending.put_back
    )
    rows = store.commit_recovery(commit, drop_acks=mending.drop_acks, drop_kv=mending.drop_kv)
    if mending.handed_to is not None:
        store.set_handed(mending.handed_to)
    after = _verified(store, backends, full=False)
    if not after.ok:
        return fail(args, f"recovered, yet it still fails: {_found(after.problems)}", EXIT_REFUSED)
    if args.json:
        print(json.dumps({"ok": True, "seq": rows[0].seq, "by": by, "done": mending.done}))
    else:
        done = "; ".join(mending.done)
        print(f"journal {store.path} recovered by {by} (seq {rows[0].seq}): {done}")
    return EXIT_OK


def _verified(store: Store, backends: list[str], *, full: bool) -> VerifyReport:
    reader = store.reader()
    try:
        return verify_journal(reader, backends, full=full)
    finally:
        reader.close()


@dataclass
class _Mending:
    """What a recovery changes, and how its record says so."""

    state_json: str | None
    done: list[str] = field(default_factory=list)
    drop_acks: list[str] = field(default_factory=list)
    put_back: dict[str, str] = field(default_factory=dict)
    drop_kv: list[str] = field(default_factory=list)
    handed_to: int | None = None


def _rolled_back(state_json: str | None) -> tuple[str, int] | None:
    """The rollback the stored state says the table found: (backend, its acked seq)."""
    try:
        state = {} if state_json is None else json.loads(state_json)
    except ValueError:
        return None  # a state that does not read: --accept state rebuilds it
    found = state.get("rolled_back") if isinstance(state, dict) else None
    if not isinstance(found, dict):
        return None
    return str(found["backend_id"]), int(found["acked_through_seq"])


def _mending(store: Store, accepted: set[Accept], backends: list[str]) -> _Mending | str:
    """What each accepted remedy does to this journal, or why it cannot."""
    from tablectl.service.replay import STORED_STATE_DIFFERS, replay

    head = store.head
    mending = _Mending(store.get("table_state"))
    if Accept.STATE in accepted:
        result = replay(store)
        if result.difference not in (None, STORED_STATE_DIFFERS) or result.state_json is None:
            return f"replay does not rebuild the state: {result.difference or 'no inputs'}"
        mending.state_json = result.state_json
        mending.done.append(f"the table state rebuilt by replaying {result.inputs} inputs")
    if Accept.ACKS in accepted:
        if (rolled := _rolled_back(mending.state_json)) is not None:
            mending.done.append(
                f"backend {rolled[0]!r}'s acknowledgement through seq {rolled[1]}, past the "
                "journal's end, accepted as wrong (the table publishes and plays again)"
            )
        for backend, seq in sorted(store.acks().items()):
            if backend not in backends or seq > head.seq:
                mending.drop_acks.append(backend)
                mending.done.append(
                    f"dropped the acknowledgement of backend {backend!r} through seq {seq}"
                )
    if Accept.CURSORS in accepted:
        record = store.mark().record
        wrote = None if record is None else matching_commit(head, record)
        if wrote is None:
            return "no mark holds the key-values the last commit wrote"
        mine, theirs = head.values, wrote.values
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) == theirs.get(key):
                continue
            if theirs.get(key, "").startswith(KV_HASHED):
                return f"{key}: the mark holds only the hash of what the last commit wrote"
            if key in theirs:
                mending.put_back[key] = theirs[key]
            else:
                mending.drop_kv.append(key)
            was, now = mine.get(key, "none"), theirs.get(key, "none")
            mending.done.append(f"{key} set back from {was} to {now}")
    if Accept.MARK in accepted:
        # The chains verify; the rows past the mark must also be what the inputs give.
        result = replay(store)
        if result.difference not in (None, STORED_STATE_DIFFERS):
            return f"replay differs, so the mark is not written again: {result.difference}"
        mending.done.append(
            f"the mark written again from the journal (seq {head.seq}, input {head.input_seq})"
        )
    if Accept.HANDED in accepted:
        mending.handed_to = head.seq
        mending.done.append(f"the handed seq set back from {store.mark().handed} to {head.seq}")
    return mending

"""`tablectl journal`: verify the hash chain, read (and follow) the last rows, export a time
range, replay the inputs. These read the database itself, so they work with the daemon
stopped; reading needs the `tablectl` group (the database is 0640 in a 0750 directory)."""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import re
import sqlite3
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import IO, Any

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    config_path,
    describe,
    fail,
    path_arg,
)
from tablectl.config import load_config
from tablectl.store.chain import hash_v_column
from tablectl.store.journal import JournalReader, canonical_json, journal_ts, open_read_only
from tablectl.util.files import permission_advice

FOLLOW_POLL_S = 0.5  # how often `tail -f` looks for new rows
# hash_v: the formula of hash (store/chain.py); 2 covers every column, boot_id included.
EXPORT_FIELDS = ("seq", "event_id", "ts", "boot_id", "type", "data", "prev_hash", "hash", "hash_v")
_RELATIVE = re.compile(r"^-?(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def point_in_time(text: str, zone: tzinfo | None = None) -> datetime:
    """--since/--until: ISO 8601 (no zone: this machine's local time, or `zone`'s), today,
    yesterday, now, or a time ago: 30m, 2h, 7d (also --since=-2h, as journalctl writes it)."""
    now = datetime.now(zone) if zone else datetime.now().astimezone()
    word = text.strip().lower()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if word == "now":
        return now
    if word == "today":
        return midnight
    if word == "yesterday":
        return midnight - timedelta(days=1)
    if match := _RELATIVE.match(word):
        return now - timedelta(**{_UNITS[match[2]]: int(match[1])})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a time such as 2024-05-01, 2024-05-01T14:30, "
            "2024-05-01T14:30:00Z, today, yesterday, now, 2h (ago)"
        ) from None
    if when.tzinfo is not None:
        return when
    return when.replace(tzinfo=zone) if zone else when.astimezone()


def rows_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of rows") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: give a number of rows, at least 1")
    return n


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    journal = sub.add_parser("journal", help="read the table's event journal (daemon may run)")
    journal_sub = journal.add_subparsers(dest="journal_verb", required=True)
    verify = journal_sub.add_parser("verify", help="check the hash chain: no row edited or lost")
    tail = journal_sub.add_parser("tail", help="the last journal rows (-f: and new ones)")
    tail.add_argument("-n", type=rows_count, default=20, help="how many rows (at least 1)")
    tail.add_argument(
        "-f", "--follow", action="store_true", help="keep printing rows as they are journaled"
    )
    export = journal_sub.add_parser(
        "export", help="every row in a time range, as JSON lines or CSV, with its hashes"
    )
    export.add_argument(
        "--since", type=point_in_time, help="from this time on (inclusive); default: the start"
    )
    export.add_argument(
        "--until", type=point_in_time, help="before this time (exclusive); default: now"
    )
    export.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    export.add_argument("--output", "-o", type=path_arg, help="write here instead of stdout")
    replay = journal_sub.add_parser(
        "replay",
        help="rebuild the state from the journaled inputs with this code; exit 1 at the "
        "first seq that differs",
    )
    for sp in (verify, tail, export, replay):
        where = sp.add_mutually_exclusive_group()
        where.add_argument("--config", type=path_arg, help="the table's config (finds its data)")
        where.add_argument("--data-dir", type=path_arg, help="the table's data directory")
        sp.add_argument("--json", action="store_true", help="JSON output, errors included")
        sp.set_defaults(handler=_journal)


def _database(args: argparse.Namespace) -> Path:
    if args.data_dir:
        return Path(args.data_dir) / "tablectl.sqlite3"
    return load_config(config_path(args)).storage.database


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
            return fail(args, f"cannot read the journal {path}: {exc}", EXIT_REFUSED)
    # Read-only (SQLite mode=ro): a member of the journal's group verifies and replays it with
    # the daemon running or stopped, and nothing here can change it.
    try:
        store = JournalReader(path)
    except sqlite3.Error as exc:
        return fail(args, f"cannot read the journal {path}: {exc}", EXIT_REFUSED)
    try:
        if args.journal_verb == "verify":
            return _verify(args, store, path)
        return _replay(args, store, path)
    except sqlite3.Error as exc:
        return fail(args, f"cannot read the journal {path}: {exc}", EXIT_REFUSED)
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
    since = journal_ts(args.since) if args.since else ""
    until = journal_ts(args.until or datetime.now(UTC))
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
    broken = store.verify_chain()
    if broken is not None:
        return fail(
            args,
            f"journal {path} does not chain at seq {broken}: a row was edited, removed or inserted",
            EXIT_REFUSED,
        )
    if args.json:
        print(json.dumps({"ok": True, "rows": store.last_seq, "acked": store.acks()}))
    else:
        acked = ", ".join(f"{b} through seq {q}" for b, q in sorted(store.acks().items()))
        print(f"journal {path}: intact, {store.last_seq} rows, acknowledged: {acked or 'none'}")
    return EXIT_OK


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

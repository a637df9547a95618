"""`tablectl journal`: verify the hash chain, read the last rows, replay the inputs."""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path

from tablectl.cli.common import EXIT_BAD_INPUT, EXIT_OK, EXIT_REFUSED, config_path, fail
from tablectl.config import load_config
from tablectl.store.journal import Store


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    journal = sub.add_parser("journal", help="read the table's event journal (daemon may run)")
    journal_sub = journal.add_subparsers(dest="journal_verb", required=True)
    verify = journal_sub.add_parser("verify", help="check the hash chain: no row edited or lost")
    tail = journal_sub.add_parser("tail", help="the last journal rows")
    tail.add_argument("-n", type=int, default=20, help="how many rows (at least 1)")
    replay = journal_sub.add_parser(
        "replay",
        help="rebuild the state from the journaled inputs with this code; exit 1 at the "
        "first seq that differs",
    )
    for sp in (verify, tail, replay):
        where = sp.add_mutually_exclusive_group()
        where.add_argument("--config", type=Path, help="the table's config (finds its data)")
        where.add_argument("--data-dir", type=Path, help="the table's data directory")
        sp.add_argument("--json", action="store_true")
        sp.set_defaults(handler=_journal)


def _database(args: argparse.Namespace) -> Path:
    if args.data_dir:
        return Path(args.data_dir) / "tablectl.sqlite3"
    return load_config(config_path(args)).storage.database


def _journal(args: argparse.Namespace) -> int:
    if args.journal_verb == "tail" and args.n < 1:
        return fail(args, f"-n {args.n}: give a number of rows, at least 1", EXIT_BAD_INPUT)
    path = _database(args)
    if not path.exists():
        return fail(args, f"no journal at {path}", EXIT_REFUSED)
    try:
        store = Store(path, boot_id="cli")
    except sqlite3.Error as exc:
        return fail(args, f"cannot open the journal {path}: {exc}", EXIT_REFUSED)
    try:
        if args.journal_verb == "verify":
            return _verify(args, store, path)
        if args.journal_verb == "replay":
            return _replay(args, store, path)
        for row in store.rows_after(max(0, store.last_seq - args.n), limit=args.n):
            if args.json:
                print(
                    json.dumps(
                        {
                            "seq": row.seq,
                            "event_id": row.event_id,
                            "ts": row.ts,
                            "type": row.type,
                            "data": row.data,
                        }
                    )
                )
            else:
                brief = " ".join(f"{k}={v}" for k, v in row.data.items())
                print(f"{row.seq:>8} {row.ts} {row.type:<22} {brief}")
        return EXIT_OK
    finally:
        store.close()


def _verify(args: argparse.Namespace, store: Store, path: Path) -> int:
    broken = store.verify_chain()
    if broken is not None:
        return fail(
            args,
            f"journal {path} does not chain at seq {broken}: a row was edited, removed or inserted",
            EXIT_REFUSED,
        )
    if args.json:
        print(json.dumps({"ok": True, "rows": store.last_seq, "acked": store.acked_through_seq}))
    else:
        print(
            f"journal {path}: intact, {store.last_seq} rows, "
            f"acknowledged through seq {store.acked_through_seq}"
        )
    return EXIT_OK


def _replay(args: argparse.Namespace, store: Store, path: Path) -> int:
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

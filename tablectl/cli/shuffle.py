"""`tablectl shuffle`: the shuffle-integrity monitor for a technician and a floor supervisor.

`report` reads what the monitor kept beside the journal (figures and p-values per deck use,
never a card: docs/shuffle-integrity.md); `acknowledge` answers a SHUFFLE SUSPECT through the
running daemon (journaled, with who gave it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sqlite3

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    config_path,
    fail,
    path_arg,
    person,
    socket_args,
)
from tablectl.cli.control import send_command
from tablectl.cli.journal import EXPORT_TIME
from tablectl.config import load_config


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    shuffle = sub.add_parser(
        "shuffle", help="shuffle integrity: is each deck randomly intermixed (649a.5(a))?"
    )
    shuffle_sub = shuffle.add_subparsers(dest="shuffle_verb", required=True)
    rep = shuffle_sub.add_parser(
        "report",
        help="per deck and shuffler: each test's uses, alarms, smallest p-value and a verdict",
    )
    rep.add_argument(
        "--since",
        type=EXPORT_TIME,
        default="8h",
        metavar="TIME",
        help="from this time (default 8h: 8 hours ago)",
    )
    rep.add_argument(
        "--config",
        type=path_arg,
        help="the table's config (default $TABLECTL_CONFIG or /etc/tablectl/table.toml)",
    )
    rep.add_argument("--json", action="store_true", help="JSON output, errors included")
    rep.set_defaults(handler=_report)
    ack = shuffle_sub.add_parser(
        "acknowledge",
        help="a floor supervisor answers a SHUFFLE SUSPECT: play on, or take the shuffler out",
    )
    action = ack.add_mutually_exclusive_group()
    action.add_argument(
        "--out-of-service",
        action="store_true",
        help="take the shuffler out of service: no deck is shuffled until --in-service",
    )
    action.add_argument(
        "--in-service",
        action="store_true",
        help="the shuffler was repaired or replaced: it shuffles again",
    )
    ack.add_argument("--by", required=True, type=person, help="the floor supervisor")
    socket_args(ack, sends=("shuffle-acknowledge",))
    ack.set_defaults(handler=send_command)


def _report(args: argparse.Namespace) -> int:
    # The service's modules are loaded by the verbs that use them: every other verb starts
    # without them.
    from tablectl.service.shuffle_monitor import database, report

    config = load_config(config_path(args))
    try:
        since = EXPORT_TIME.at(args.since)
    except argparse.ArgumentTypeError as exc:
        return fail(args, f"--since: {exc}", EXIT_BAD_INPUT)
    path = database(config.storage.data_dir)
    if not path.exists():
        return fail(
            args,
            f"no shuffle-integrity data at {path}: the daemon writes it once a shoe has dealt "
            "a round ([shuffle_integrity] enabled, a [shoe] section)",
            EXIT_REFUSED,
        )
    try:
        decks = report(path, int(since.timestamp() * 1000))
    except sqlite3.Error as exc:
        return fail(args, f"cannot read {path}: {exc}", EXIT_REFUSED)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "table": config.table.table_id,
                    "since": since.isoformat(),
                    "decks": [dataclasses.asdict(d) for d in decks],
                },
                sort_keys=True,
            )
        )
        return EXIT_OK
    print(f"table {config.table.table_id}: shuffle integrity since {since.isoformat()}")
    if not decks:
        print("  no deck dealt by the shoe in this period")
    for deck in decks:
        print(
            f"\ndeck {deck.deck}  shuffler {deck.shuffler or '-'}  {deck.uses} uses  "
            f"{deck.alarms} alarms\n  verdict: {deck.verdict}"
        )
        for t in deck.tests:
            print(
                f"    {t.test:<15} smallest p {t.smallest_p:8.2g} (level {t.alpha:g})  "
                f"alarms {t.alarms}  {t.figure}"
            )
    return EXIT_OK

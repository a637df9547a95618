"""`tablectl link`: the floor's link controller and its PostgreSQL ledger.

run (the service), migrate (the schema), apply (a config's link parameters, while the link
is closed), open / close (a link in or out of operation), verify (the hash chain and every
meter to the ten-thousandth of a cent), report (per table and level), schema (the contract).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    fail,
    matching,
    path_arg,
    text,
)
from tablectl.mqtt.contract import ID_PATTERN

if TYPE_CHECKING:
    from tablectl.link.config import LinkConfig
    from tablectl.link.ledger import Connection


def default_link_config() -> Path:
    return Path(os.environ.get("TABLECTL_LINK_CONFIG", "/etc/tablectl/link.toml"))


def _config_arg(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--config",
        type=path_arg,
        default=None,
        help="the controller's config (default $TABLECTL_LINK_CONFIG or /etc/tablectl/link.toml)",
    )


@text
def _moment(text: str) -> datetime:
    """A date (midnight UTC) or an ISO 8601 time (UTC unless it says otherwise)."""
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime(day.year, day.month, day.day, tzinfo=UTC)
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a date (2026-12-01) or a time (2026-12-01T14:00:00Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    link = sub.add_parser("link", help="the floor's link controller and its PostgreSQL ledger")
    verbs = link.add_subparsers(dest="link_verb", required=True)
    run = verbs.add_parser("run", help="run a link controller (any number may run at once)")
    _config_arg(run)
    run.set_defaults(handler=_run, quiet_logs=False)
    migrate = verbs.add_parser("migrate", help="bring the ledger's schema up to date")
    _config_arg(migrate)
    migrate.add_argument("--json", action="store_true")
    migrate.set_defaults(handler=_ledger_verb(_migrate, schema=False))
    apply = verbs.add_parser(
        "apply", help="write the config's links to the ledger (a link's only while closed)"
    )
    _config_arg(apply)
    apply.add_argument("--json", action="store_true")
    apply.set_defaults(handler=_ledger_verb(_apply))
    for name, operating in (("open", True), ("close", False)):
        verb = verbs.add_parser(
            name,
            help="put a link in operation" if operating else "take a link out of operation",
        )
        _config_arg(verb)
        verb.add_argument("link_id", type=matching("a link id", ID_PATTERN))
        verb.add_argument("--json", action="store_true")
        verb.set_defaults(handler=_ledger_verb(functools.partial(_operate, operating=operating)))
    verify = verbs.add_parser(
        "verify", help="check the hash chain and every meter; exit 1 naming what failed"
    )
    _config_arg(verify)
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(handler=_ledger_verb(_verify))
    report = verbs.add_parser("report", help="per-table, per-level figures for a period")
    _config_arg(report)
    report.add_argument("--from", dest="start", type=_moment, required=True, metavar="WHEN")
    report.add_argument("--to", dest="end", type=_moment, required=True, metavar="WHEN")
    report.add_argument("--format", choices=("csv", "json"), default="csv")
    report.set_defaults(handler=_ledger_verb(_report))
    schema = verbs.add_parser("schema", help="the link contract as an AsyncAPI 3 document")
    where = schema.add_mutually_exclusive_group()
    where.add_argument("--write", type=path_arg, metavar="FILE", help="write it to FILE")
    where.add_argument("--check", type=path_arg, metavar="FILE", help="exit 1 unless FILE matches")
    schema.set_defaults(handler=_schema)


def _load(args: argparse.Namespace) -> LinkConfig:
    from tablectl.link.config import load_link_config

    return load_link_config(Path(args.config) if args.config else default_link_config())


def _run(args: argparse.Namespace) -> int:
    from tablectl.link.controller import StartupError, serve

    config = _load(args)
    try:
        asyncio.run(serve(config))
    except StartupError as exc:
        return fail(args, str(exc), EXIT_BAD_INPUT if exc.bad_config else EXIT_REFUSED)
    return EXIT_OK


Work = Callable[[argparse.Namespace, "Connection", "LinkConfig"], Awaitable[int]]


def _ledger_verb(work: Work, *, schema: bool = True) -> Callable[[argparse.Namespace], int]:
    return lambda args: _with_ledger(args, work, schema=schema)


def _with_ledger(args: argparse.Namespace, work: Work, *, schema: bool = True) -> int:
    """Connect to the config's ledger, check its schema, run `work`; errors are one line."""
    import psycopg

    from tablectl.link import ledger

    config = _load(args)

    async def main() -> int:
        db = config.database
        conn = await ledger.connect(
            db.conninfo,
            application_name=f"tablectl-link-{args.link_verb}",
            connect_timeout_s=db.connect_timeout_s,
            statement_timeout_ms=max(db.statement_timeout_ms, 600_000),
        )
        try:
            if schema:
                await ledger.check_schema(conn)
            return await work(args, conn, config)
        finally:
            await conn.close()

    try:
        return asyncio.run(main())
    except ledger.LedgerError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    except (psycopg.OperationalError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return fail(args, f"cannot reach the ledger (database.conninfo): {first}", EXIT_REFUSED)


def _print(args: argparse.Namespace, text: str, data: dict[str, Any]) -> None:
    print(json.dumps({"ok": True, **data}) if getattr(args, "json", False) else text)


def _who() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


async def _migrate(args: argparse.Namespace, conn: Connection, config: LinkConfig) -> int:
    from tablectl.link import ledger

    applied = await ledger.migrate(conn, by=f"tablectl link migrate ({_who()})")
    version = await ledger.schema_version(conn)
    text = (
        f"applied {', '.join(applied)}; the ledger's schema is at version {version}"
        if applied
        else f"up to date: the ledger's schema is at version {version}"
    )
    _print(args, text, {"applied": applied, "schema_version": version})
    return EXIT_OK


async def _apply(args: argparse.Namespace, conn: Connection, config: LinkConfig) -> int:
    from tablectl.link import ledger

    results = []
    for definition in config.definitions():
        try:
            applied = await ledger.apply_definition(conn, definition, by=f"apply ({_who()})")
        except ledger.LedgerError as exc:
            return fail(args, str(exc), EXIT_REFUSED)
        results.append(applied)
        if not args.json:
            print(f"link {applied.link_id}: {applied.outcome} (parameters version "
                  f"{applied.parameters_version})")  # fmt: skip
    if args.json:
        print(json.dumps({"ok": True, "links": [r.__dict__ for r in results]}))
    return EXIT_OK


async def _operate(
    args: argparse.Namespace, conn: Connection, config: LinkConfig, *, operating: bool
) -> int:
    from tablectl.link import ledger

    changed = await ledger.set_operating(conn, args.link_id, operating, by=f"{_who()}")
    word = "in operation" if operating else "closed"
    text = f"link {args.link_id}: {word}" + ("" if changed else " already")
    _print(args, text, {"link_id": args.link_id, "operating": operating, "changed": changed})
    return EXIT_OK


async def _verify(args: argparse.Namespace, conn: Connection, config: LinkConfig) -> int:
    from dataclasses import asdict

    from tablectl.link.audit import verify

    result = await verify(conn)
    meters = {
        link: {level: asdict(t) for level, t in levels.items()}
        for link, levels in result.links.items()
    }
    if args.json:
        print(json.dumps({"ok": result.ok, "events": result.events, "failures": result.failures,
                          "meters": meters}))  # fmt: skip
    elif result.ok:
        print(
            f"ok: {result.events} events on {len(result.links)} link(s); every hash chains and "
            "every meter = initial + contributions + resets - awards, to 1/10,000 cent"
        )
    else:
        for failure in result.failures:
            print(f"FAILED: {failure}", file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_REFUSED


async def _report(args: argparse.Namespace, conn: Connection, config: LinkConfig) -> int:
    from tablectl.link.audit import report_csv, report_json, report_rows

    if args.end <= args.start:
        return fail(args, "--to must be after --from", EXIT_BAD_INPUT)
    rows = await report_rows(conn, args.start, args.end)
    sys.stdout.write(report_csv(rows) if args.format == "csv" else report_json(rows) + "\n")
    return EXIT_OK


def _schema(args: argparse.Namespace) -> int:
    from tablectl.link.contract import link_asyncapi_document

    text = json.dumps(link_asyncapi_document(), indent=2) + "\n"
    if args.write:
        try:
            args.write.write_text(text)
        except OSError as exc:
            return fail(args, f"cannot write {args.write}: {exc.strerror}", EXIT_REFUSED)
        print(f"{args.write}: written")
        return EXIT_OK
    if args.check:
        try:
            current = args.check.read_text()
        except OSError as exc:
            return fail(args, f"cannot read {args.check}: {exc.strerror}", EXIT_REFUSED)
        if current != text:
            return fail(
                args,
                f"{args.check} differs from the link contract in the code; regenerate it: "
                f"tablectl link schema --write {args.check}",
                EXIT_REFUSED,
            )
        print(f"{args.check}: matches the code")
        return EXIT_OK
    sys.stdout.write(text)
    return EXIT_OK

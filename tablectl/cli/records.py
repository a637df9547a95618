"""`tablectl records` (a period's record set, signed; `verify`; `key`) and `tablectl pace`.

Both read the journal on a read-only connection of their own, so they work with the daemon
running or stopped; like `journal export` they need the `tablectl` group (the database is
0640 in a 0750 directory) and no role on the control socket. Signing an export needs the
table's key, readable only by the table's user: `sudo -u tablectl tablectl records ...`.
docs/records.md says what each file holds.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from datetime import datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    When,
    WordList,
    config_path,
    fail,
    path_arg,
    printable,
)
from tablectl.cli.journal import AGO_MOST
from tablectl.config import TableConfig, load_config
from tablectl.records.zones import duration_text, report_zone
from tablectl.store.journal import unreadable
from tablectl.util.money import dollars

if TYPE_CHECKING:  # the records modules load cryptography and pydantic models: when used
    from tablectl.records.export import Format
    from tablectl.records.pace import Durations, Pace, PaceFigures

FORMATS = WordList("a format", ("csv", "jsonl", "pdf"))
DEFAULT_FORMATS: list[Format] = ["csv", "pdf"]
RECORDS_TIME = When(AGO_MOST, "the most a time ago reaches back; give a date for earlier")
# Game pace is read shift by shift: a month of shifts at most (93 at three a day; 12,000
# lines once came of --since 99999h). A longer period is the record set's (`records`).
PACE_MOST = timedelta(days=31)
PACE_TIME = When(PACE_MOST, "the longest window pace reports; `tablectl records` for longer")
ZONE = printable("an IANA time zone name", 64)


def _where(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--config",
        type=path_arg,
        help="the table's config (default $TABLECTL_CONFIG or /etc/tablectl/table.toml)",
    )
    sp.add_argument(
        "--tz",
        type=ZONE,
        metavar="ZONE",
        help="show local times in this IANA zone (default records.time_zone, else this "
        "machine's); times given without a zone are in it too",
    )
    sp.add_argument("--json", action="store_true", help="JSON output, errors included")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    records = sub.add_parser(
        "records",
        help="the regulator's record set for a period, signed (verify, key: see below)",
        description="Write a period's records (meters, contributions, hits, resets, voided "
        "rounds, device and deck events, parameter changes, control actions, the journal "
        "rows) as CSV, JSON lines and/or a PDF report, with a manifest signed by the "
        "table's key. `records verify DIR` checks an export; `records key` prints the "
        "table's public key (--init makes the key, once).",
    )
    records.add_argument(
        "--from",
        dest="start",
        type=RECORDS_TIME,
        metavar="TIME",
        help="from this time on (inclusive): 2024-06-01, 2024-06-01T06:00, yesterday, 8h",
    )
    records.add_argument(
        "--to",
        dest="end",
        type=RECORDS_TIME,
        metavar="TIME",
        help="until this time (exclusive); default: now",
    )
    records.add_argument(
        "--format",
        type=FORMATS,
        action="append",
        metavar="FORMATS",
        help="csv, jsonl, pdf, or several: csv,pdf (default csv,pdf)",
    )
    records.add_argument("--out", type=path_arg, metavar="DIR", help="a new or empty directory")
    _where(records)
    records.set_defaults(handler=_export, records_verb=None)
    records_sub = records.add_subparsers(dest="records_verb", required=False)
    verify = records_sub.add_parser(
        "verify", help="check an export: signature, every file's SHA-256, the journal chain"
    )
    verify.add_argument("directory", type=path_arg, metavar="DIR")
    verify.add_argument(
        "--public-key",
        type=path_arg,
        metavar="FILE",
        help="the table's public key (PEM, from `tablectl records key`); default: the key "
        "the manifest carries, which proves only that the export was not changed",
    )
    verify.add_argument("--json", action="store_true", help="JSON output, errors included")
    verify.set_defaults(handler=_verify)
    key = records_sub.add_parser(
        "key",
        help="print the table's public key (PEM), as the table's user (sudo -u tablectl); "
        "--init makes the key, once",
    )
    key.add_argument("--init", action="store_true", help="make the table's key (never replaced)")
    where = key.add_mutually_exclusive_group()
    where.add_argument("--config", type=path_arg, help="the table's config (finds its key)")
    where.add_argument(
        "--key-file", type=path_arg, metavar="PATH", help="the key itself (install scripts)"
    )
    key.add_argument("--json", action="store_true", help="JSON output, errors included")
    key.set_defaults(handler=_key)

    pace = sub.add_parser(
        "pace",
        help="game pace from the journal: rounds and hands per hour, times, blocked time",
    )
    pace.add_argument(
        "--since",
        type=PACE_TIME,
        default="8h",
        metavar="TIME",
        help="from this time (default 8h: 8 hours ago; at most 31 days before --until)",
    )
    pace.add_argument(
        "--until", type=PACE_TIME, default="now", metavar="TIME", help="to this time (default now)"
    )
    _where(pace)
    pace.set_defaults(handler=_pace)


def _generator() -> str:
    try:
        return f"tablectl {version('tablectl')}"
    except PackageNotFoundError:
        return "tablectl (unknown version)"


def _zone(args: argparse.Namespace, config: TableConfig) -> ZoneInfo:
    try:
        return ZoneInfo(args.tz) if args.tz else report_zone(config.records.time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(
            f"--tz {args.tz!r}: not a time zone name of the IANA database, e.g. America/New_York"
        ) from None


def _period(zone: ZoneInfo, start: str, end: str) -> tuple[datetime, datetime]:
    return RECORDS_TIME.at(start, zone), RECORDS_TIME.at(end, zone)


# --- records ------------------------------------------------------------------------------


def _export(args: argparse.Namespace) -> int:
    from tablectl.records.export import ExportError, ExportRequest, export_records
    from tablectl.records.signing import SigningError, load_key

    if args.start is None or args.out is None:
        return fail(
            args,
            "records needs --from TIME and --out DIR (and --to TIME; default now); "
            "or a verb: verify, key",
            EXIT_BAD_INPUT,
        )
    config = load_config(config_path(args))
    try:
        zone = _zone(args, config)
        start, end = _period(zone, args.start, args.end or "now")
    except argparse.ArgumentTypeError as exc:
        return fail(args, str(exc), EXIT_BAD_INPUT)
    if start >= end:
        return fail(args, f"--from {start} is not before --to {end}", EXIT_BAD_INPUT)
    formats = tuple(dict.fromkeys(f for group in args.format or [DEFAULT_FORMATS] for f in group))
    database = config.storage.database
    if not database.exists():
        return fail(args, f"no journal at {database}", EXIT_REFUSED)
    try:
        key = load_key(config.signing_key)
    except SigningError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    request = ExportRequest(
        database=database,
        site=config.table.site_id,
        table=config.table.table_id,
        game=config.game.name,
        start=start,
        end=end,
        zone=zone,
        formats=formats,
        out=args.out,
        generator=_generator(),
    )
    try:
        done = export_records(request, key)
    except ExportError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    except sqlite3.Error as exc:
        return fail(args, unreadable(database, exc), EXIT_REFUSED)
    except OSError as exc:
        return fail(args, f"cannot write {exc.filename or args.out}: {exc.strerror}", EXIT_REFUSED)
    manifest, summary = done.manifest, done.summary
    if summary.unknown_types:
        kinds = ", ".join(f"{t} ({n})" for t, n in sorted(summary.unknown_types.items()))
        print(
            f"tablectl: rows of types this version does not know are in other-events: {kinds}",
            file=sys.stderr,
        )
    money = [
        {
            "movement": m.label,
            "record": m.record.TYPE,
            "amount_field": m.amount,
            "records": t.records,
            "amount": t.amount,  # in the amount field's unit: cents, or ten-thousandths
            "sheet": m.sheet.value,
            "column": m.column,
            "kind": m.kind,
        }
        for m, t in summary.money.items()
    ]
    if args.json:
        out = {"ok": True, "out": str(args.out), "manifest": manifest.model_dump()}
        print(json.dumps({**out, "money": money}))
        return EXIT_OK
    span = manifest.journal
    rows = f"seq {span.first_seq}..{span.last_seq}" if span.rows else "no rows"
    print(
        f"{args.out}: {len(manifest.files)} files for {manifest.site}/{manifest.table}, "
        f"{manifest.period.start_local} to {manifest.period.end_local} "
        f"({manifest.period.time_zone})"
    )
    print(
        f"  journal {rows} ({span.rows} rows); {len(summary.hits)} hits, "
        f"{len(summary.voided)} voided rounds, {len(summary.device_events)} device events, "
        f"{len(summary.parameter_changes)} parameter changes"
    )
    days = summary.days.values()
    print(
        f"  wagered {dollars(sum(d.wagered_cents for d in days))}, returned "
        f"{dollars(sum(d.returned_cents for d in days))}, paid on wagers "
        f"{dollars(sum(d.paid_cents for d in days))}, Envy Bonuses "
        f"{dollars(sum(d.envy_cents for d in days))} ({sum(d.envy_bonuses for d in days)}); "
        "every amount by movement in the PDF's Money table, and in --json"
    )
    for meter in summary.meters:
        state = "reconciles" if meter.reconciles else "DOES NOT RECONCILE"
        print(
            f"  meter {meter.meter_id}: {dollars(meter.opening_cents)} -> "
            f"{dollars(meter.closing_cents)}, {meter.contributions} contributions, "
            f"{meter.hits} paid; {state}"
        )
    print(f"  signed: manifest.json, manifest.sig (key {manifest.key_fingerprint})")
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from tablectl.records.signing import SigningError, load_public_key, verify_export

    trusted = None
    if args.public_key:
        try:
            trusted = load_public_key(Path(args.public_key).read_bytes(), str(args.public_key))
        except OSError as exc:
            return fail(args, f"cannot read {args.public_key}: {exc.strerror}", EXIT_BAD_INPUT)
        except SigningError as exc:
            return fail(args, str(exc), EXIT_BAD_INPUT)
    if not Path(args.directory).is_dir():
        return fail(args, f"{args.directory} is not a directory", EXIT_BAD_INPUT)
    result = verify_export(Path(args.directory), trusted)
    if not result.ok:
        first = result.problems[0]
        if args.json:
            print(
                json.dumps(
                    {
                        "ok": False,
                        "error": f"{Path(args.directory) / first.file}: {first.message}",
                        "problems": [
                            {"file": p.file, "message": p.message} for p in result.problems
                        ],
                    }
                )
            )
        else:
            for p in result.problems:
                print(f"tablectl: {Path(args.directory) / p.file}: {p.message}", file=sys.stderr)
        return EXIT_REFUSED
    manifest = result.manifest
    assert manifest is not None
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "key_fingerprint": result.key_fingerprint,
                    "key_given": result.key_given,
                    "files": len(manifest.files),
                    "period": manifest.period.model_dump(),
                    "table": manifest.table,
                    "journal": manifest.journal.model_dump(),
                }
            )
        )
        return EXIT_OK
    print(
        f"{args.directory}: intact: {len(manifest.files)} files of {manifest.site}/"
        f"{manifest.table}, {manifest.period.start_utc} to {manifest.period.end_utc}, "
        f"journal seq {manifest.journal.first_seq}..{manifest.journal.last_seq}"
    )
    if result.key_given:
        print(f"  signed by the given key {result.key_fingerprint}")
    else:
        print(
            f"  signed by the key the manifest carries, {result.key_fingerprint}: give "
            "--public-key TABLE.pub to check it is the table's"
        )
    return EXIT_OK


def _key(args: argparse.Namespace) -> int:
    from tablectl.records.signing import (
        SigningError,
        create_key,
        fingerprint,
        load_key,
        public_pem,
    )

    path = Path(args.key_file) if args.key_file else load_config(config_path(args)).signing_key
    try:
        private = create_key(path) if args.init else load_key(path)
    except SigningError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    public = private.public_key()
    pem, print_ = public_pem(public), fingerprint(public)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "path": str(path),
                    "created": bool(args.init),
                    "public_key": pem,
                    "fingerprint": print_,
                }
            )
        )
        return EXIT_OK
    sys.stdout.write(pem)
    made = "made" if args.init else "at"
    print(f"tablectl: the table's signing key {made} {path}; {print_}", file=sys.stderr)
    return EXIT_OK


# --- pace ---------------------------------------------------------------------------------


def _pace(args: argparse.Namespace) -> int:
    from tablectl.records.pace import compute_pace, pace_reads_from
    from tablectl.records.source import read_entries

    config = load_config(config_path(args))
    try:
        zone = _zone(args, config)
        start, end = _period(zone, args.since, args.until)
    except argparse.ArgumentTypeError as exc:
        return fail(args, str(exc), EXIT_BAD_INPUT)
    if start >= end:
        return fail(args, f"--since {start} is not before --until {end}", EXIT_BAD_INPUT)
    if end - start > PACE_MOST:
        return fail(
            args,
            f"--since {start} to --until {end}: pace reports at most {PACE_MOST.days} days "
            f"({PACE_TIME.source})",
            EXIT_BAD_INPUT,
        )
    database = config.storage.database
    if not database.exists():
        return fail(args, f"no journal at {database}", EXIT_REFUSED)
    starts = config.records.shift_starts
    rolling = timedelta(minutes=config.records.pace_rolling_minutes)
    try:
        rows = read_entries(database, pace_reads_from(start, end, zone, starts, rolling), end)
    except sqlite3.Error as exc:
        return fail(args, unreadable(database, exc), EXIT_REFUSED)
    pace = compute_pace(rows, start=start, end=end, zone=zone, shift_starts=starts, rolling=rolling)
    if args.json:
        print(
            json.dumps({"ok": True, "table": config.table.table_id, **pace.model_dump(mode="json")})
        )
        return EXIT_OK
    print(render_pace(pace, config.table.table_id, zone))
    return EXIT_OK


def _span(ms: int | None) -> str:
    return "-" if ms is None else duration_text(ms)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _mean(d: Durations) -> str:
    return _span(d.mean_ms)


def _line(label: str, f: PaceFigures) -> str:
    return (
        f"{label:<22} {f.rounds:>6} {_rate(f.rounds_per_hour):>6} {f.hands:>6} "
        f"{_rate(f.hands_per_hour):>6} {f.rounds_voided:>6} {_mean(f.betting):>8} "
        f"{_mean(f.deal):>7} {_mean(f.decision):>8} {_mean(f.shuffle):>8} {_span(f.blocked_ms):>8}"
    )


def render_pace(pace: Pace, table: str, zone: ZoneInfo) -> str:
    def local(ts: str) -> str:
        return datetime.fromisoformat(ts).astimezone(zone).strftime("%Y-%m-%d %H:%M")

    w = pace.window
    lines = [
        f"table {table}: game pace {local(w.start_utc)} to {local(w.end_utc)} ({zone.key})",
        f"{'':<22} {'rounds':>6} {'/hour':>6} {'hands':>6} {'/hour':>6} {'voided':>6} "
        f"{'betting':>8} {'deal':>7} {'decision':>8} {'shuffle':>8} {'blocked':>8}",
        _line(f"window ({w.hours:.1f} h)", w),
        _line(f"last {round(pace.rolling.hours * 60)} min", pace.rolling),
    ]
    for shift in pace.shifts:
        begins = datetime.fromisoformat(shift.start_local)
        ends = datetime.fromisoformat(shift.end_local)
        lines.append(_line(f"shift {begins:%a %H:%M}-{ends:%H:%M}", shift.figures))
    lines.append("times are means (--json: count, mean, median and max, in ms)")
    causes = [b for b in w.blocked if b.ms]
    if causes:
        lines.append(
            "blocked in the window: "
            + ", ".join(f"{b.cause} {_span(b.ms)} ({b.episodes}x)" for b in causes)
        )
    else:
        lines.append("blocked in the window: never")
    return "\n".join(lines)

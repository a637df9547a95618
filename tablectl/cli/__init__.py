"""`tablectl`: run the daemon, check a config, read status, act as the dealer, run the demo.

Every verb prints for people, takes --json where scripts read it, and exits non-zero with a
clear message on failure: 2 for bad input (config, arguments), 1 when the daemon refuses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tablectl.config import ConfigError, load_config
from tablectl.control import client as control
from tablectl.util import logs

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tablectl", description=__doc__)
    p.add_argument(
        "--log-level", default=None, help="DEBUG, INFO, WARNING (default INFO; demo WARNING)"
    )
    sub = p.add_subparsers(dest="verb", required=True)

    run = sub.add_parser("run", help="run the daemon for one table")
    run.add_argument("--config", type=Path, required=True)

    cfg = sub.add_parser("config", help="configuration tools")
    cfg_sub = cfg.add_subparsers(dest="config_verb", required=True)
    check = cfg_sub.add_parser("check", help="validate a table config against the rules")
    check.add_argument("file", type=Path)

    def socket_args(sp: argparse.ArgumentParser) -> None:
        where = sp.add_mutually_exclusive_group(required=True)
        where.add_argument("--config", type=Path, help="the table's config (finds its socket)")
        where.add_argument("--socket", type=Path, help="the daemon's control socket")
        sp.add_argument("--json", action="store_true", help="print the reply as JSON")

    status = sub.add_parser("status", help="what the running daemon is doing")
    socket_args(status)

    dealer = sub.add_parser("dealer", help="dealer actions sent to the running daemon")
    dealer_sub = dealer.add_subparsers(dest="dealer_verb", required=True)
    settle = dealer_sub.add_parser("settle", help="enter the shown hands and settle the round")
    settle.add_argument(
        "--hand",
        action="append",
        default=[],
        metavar="SEAT=CARDS",
        help="a seat's three cards, e.g. 3=AsKsQs (repeat per seat)",
    )
    settle.add_argument("--fold", action="append", type=int, default=[], metavar="SEAT")
    socket_args(settle)
    void = dealer_sub.add_parser("void", help="void the round; every wager is returned")
    void.add_argument(
        "reason", help="shoe-jam, cards-face-up, wrong-card-count, dealer-card-exposed"
    )
    socket_args(void)
    for name, text in (
        ("new-deck", "a new deck replaces one that miscounted (649a.5(b))"),
        ("reshuffle", "the shuffler fault is cleared: reshuffle (649a.13(e))"),
    ):
        socket_args(dealer_sub.add_parser(name, help=text))

    journal = sub.add_parser("journal", help="read the table's event journal (daemon may run)")
    journal_sub = journal.add_subparsers(dest="journal_verb", required=True)
    verify = journal_sub.add_parser("verify", help="check the hash chain: no row edited or lost")
    verify.add_argument("--config", type=Path, required=True)
    tail = journal_sub.add_parser("tail", help="the last journal rows")
    tail.add_argument("--config", type=Path, required=True)
    tail.add_argument("-n", type=int, default=20)
    tail.add_argument("--json", action="store_true")

    pay = sub.add_parser("paytable", help="paytable tools")
    pay_sub = pay.add_subparsers(dest="paytable_verb", required=True)
    rep = pay_sub.add_parser(
        "report",
        help="hand counts, probabilities, return and house edge, by exhaustive enumeration",
    )
    rep.add_argument(
        "--game", required=True, help="three-card-poker, ultimate-texas-holdem, let-it-ride"
    )
    rep.add_argument("--wager", required=True, help="e.g. pair-plus, ante-play, trips, base")
    rep.add_argument("--paytable", required=True, help="the paytable's letter, e.g. A")
    rep.add_argument("--json", action="store_true")

    simulate = sub.add_parser("simulate", help="run a device simulator for a daemon to talk to")
    sim_sub = simulate.add_subparsers(dest="device", required=True)
    shuffler = sim_sub.add_parser("shuffler", help="the card shuffler, on a pty or TCP")
    shuffler.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help='serve on TCP (daemon: port = "socket://HOST:PORT"); default: a new pseudo-terminal',
    )
    shuffler.add_argument(
        "--cards", type=int, default=52, help="cards in its deck (51: a miscount)"
    )

    demo = sub.add_parser("demo", help="run the daemon on simulated devices with a backend")
    demo.add_argument("--rounds", type=int, default=6)
    demo.add_argument("--config", type=Path, default=Path("config/demo.toml"))
    return p


def _socket_path(args: argparse.Namespace) -> Path:
    if args.socket:
        return Path(args.socket)
    return load_config(args.config).storage.socket_path


def _print_status(data: dict[str, Any]) -> None:
    meter = data["meter"]
    print(
        f"table {data['table']} ({data['site']})  round {data['round_id']}  "
        f"phase {data['phase']}  accepting wagers: {'yes' if data['accepting_wagers'] else 'no'}"
    )
    print(f"  meter {meter['meter_id']}: ${meter['cents'] // 100:,}.{meter['cents'] % 100:02d}")
    wagers = ", ".join(f"seat {s}" for s in data["wagers"]) or "none"
    print(f"  wagers: {wagers}")
    print(
        f"  deck ready: {data['deck_ready']}  blocked: {data['blocked'] or 'no'}  "
        f"shuffler fault: {data['shuffler_fault'] or 'none'}"
    )
    sh = data["shuffler"]
    print(
        f"  shuffler: link {sh['link']} on {sh['port']}  state {sh['state']}  "
        f"bad frames {sh.get('bad_crc', 0) + sh.get('bad_header', 0)}  "
        f"retransmits {sh.get('retransmits', 0)}  bytes dropped {sh.get('bytes_dropped', 0)}"
    )
    mq = data["mqtt"]
    print(
        f"  mqtt: {'connected' if mq['connected'] else 'disconnected'} {mq['broker']}  "
        f"journal seq {data['journal']['last_seq']}  published {mq['published_through_seq']}  "
        f"acked {mq['acked_through_seq']}"
    )
    if data["counters"]:
        print("  counters: " + ", ".join(f"{k}={v}" for k, v in sorted(data["counters"].items())))


def _request(args: argparse.Namespace) -> dict[str, Any]:
    if args.verb == "status":
        return {"cmd": "status"}
    if args.dealer_verb == "settle":
        hands = {}
        for item in args.hand:
            seat, sep, cards = item.partition("=")
            if not sep or not seat.isdigit():
                raise ValueError(f"--hand {item!r}: write SEAT=CARDS, e.g. 3=AsKsQs")
            hands[seat] = cards
        return {"cmd": "settle", "hands": hands, "folded": args.fold}
    if args.dealer_verb == "void":
        return {"cmd": "void", "reason": args.reason}
    return {"cmd": args.dealer_verb}


def _talk(args: argparse.Namespace) -> int:
    try:
        request = _request(args)
        reply = control.call(_socket_path(args), request)
    except ValueError as exc:
        print(f"tablectl: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except control.ControlClientError as exc:
        print(f"tablectl: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if not reply["ok"]:
        print(f"tablectl: refused: {reply['error']}", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(json.dumps(reply["data"], indent=2, sort_keys=True))
    else:
        _print_status(reply["data"])
    return EXIT_OK


async def _simulate_shuffler(args: argparse.Namespace) -> int:
    from tablectl.simulators.shuffler import ShufflerSimulator

    sim = ShufflerSimulator()
    while len(sim.deck) > max(0, args.cards):
        sim.remove_card()
    if args.listen:
        host, _, port = args.listen.rpartition(":")
        server = await sim.serve_tcp(host or "127.0.0.1", int(port))
        print(f"shuffler simulator on socket://{args.listen}", flush=True)
        async with server:
            await server.serve_forever()
    else:
        print(f"shuffler simulator on {sim.open_pty()}", flush=True)
        await asyncio.Event().wait()
    return EXIT_OK


def _journal(args: argparse.Namespace) -> int:
    from tablectl.store.journal import Store

    path = load_config(args.config).storage.database
    if not path.exists():
        print(f"tablectl: no journal at {path}", file=sys.stderr)
        return EXIT_REFUSED
    store = Store(path, boot_id="cli")
    try:
        if args.journal_verb == "verify":
            broken = store.verify_chain()
            if broken is not None:
                print(
                    f"tablectl: journal {path} does not chain at seq {broken}: a row was "
                    "edited, removed or inserted",
                    file=sys.stderr,
                )
                return EXIT_REFUSED
            print(
                f"journal {path}: intact, {store.last_seq} rows, "
                f"acknowledged through seq {store.acked_through_seq}"
            )
            return EXIT_OK
        rows = store.rows_after(max(0, store.last_seq - args.n), limit=args.n)
        for row in rows:
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


def _paytable_report(args: argparse.Namespace) -> int:
    from tablectl.analysis.report import ReportError, report

    try:
        result = report(args.game, args.wager, args.paytable)
    except ReportError as exc:
        print(f"tablectl: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    data = result.as_json()
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    print(
        f"{data['game']} {data['wager']}, paytable {data['paytable']} ({data['rule']}): "
        f"{data['hands']:,} hands enumerated"
    )
    print(f"  {'hand':<52} {'count':>13} {'probability':>12} {'pays':>14} {'return':>10}")
    for c in data["categories"]:
        print(
            f"  {c['hand']:<52} {c['count']:>13,} {c['probability']:>12.8f} {c['pays']:>14} "
            f"{c['return']:>+10.6f}"
        )
    print(
        f"  expected return {data['expected_return']:+.6f} per unit; "
        f"house edge {data['house_edge']:.4%}"
    )
    if "element_of_risk" in data:
        print(f"  element of risk {data['element_of_risk']:.4%}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.verb in ("run", "demo"):
        logs.configure(args.log_level or ("WARNING" if args.verb == "demo" else "INFO"))
    try:
        if args.verb == "config":
            config = load_config(args.file)
            print(
                f"{args.file}: ok ({config.table.game}, table {config.table.table_id}, "
                f"{config.table.seats} seats, paytable {config.progressive.paytable})"
            )
            return EXIT_OK
        if args.verb == "simulate":
            return asyncio.run(_simulate_shuffler(args))
        if args.verb == "journal":
            return _journal(args)
        if args.verb == "paytable":
            return _paytable_report(args)
        if args.verb == "run":
            from tablectl.service.daemon import Daemon, StartupError

            config = load_config(args.config)
            try:
                asyncio.run(Daemon(config).serve())
            except StartupError as exc:
                print(f"tablectl: {exc}", file=sys.stderr)
                return EXIT_REFUSED
            return EXIT_OK
        if args.verb == "demo":
            from tablectl.simulators import demo

            load_config(args.config)  # fail before starting anything
            return demo.main(args.rounds, args.config)
        return _talk(args)
    except ConfigError as exc:
        print(f"{exc.path}: {len(exc.errors)} error(s)", file=sys.stderr)
        for line in exc.errors:
            print(f"  {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

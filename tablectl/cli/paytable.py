"""`tablectl paytable report`: exact hand counts, return and house edge of a paytable."""

from __future__ import annotations

import argparse
import json

from tablectl.cli.common import EXIT_BAD_INPUT, EXIT_OK, fail, printable


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # The choices come from the reports that exist, so the help never offers one that is
    # refused (`--wager base` is Let It Ride's).
    from tablectl.analysis.report import REPORTS

    games = sorted({game for game, _ in REPORTS})
    wagers = "; ".join(
        f"{game}: {', '.join(sorted(w for g, w in REPORTS if g == game))}" for game in games
    )
    pay = sub.add_parser("paytable", help="paytable tools")
    pay_sub = pay.add_subparsers(dest="paytable_verb", required=True)
    rep = pay_sub.add_parser(
        "report",
        help="hand counts, probabilities, return and house edge, by exhaustive enumeration",
    )
    # Text, not argparse choices: the report's own refusal says more (`--wager blind`: why
    # the Blind has no report of its own).
    rep.add_argument(
        "--game", required=True, type=printable("a game", 32), help=f"one of: {', '.join(games)}"
    )
    rep.add_argument(
        "--wager", required=True, type=printable("a wager", 32), help=f"by game: {wagers}"
    )
    rep.add_argument(
        "--paytable",
        required=True,
        type=printable("a paytable's name", 16),
        help="the paytable's letter, e.g. A",
    )
    rep.add_argument("--json", action="store_true")
    rep.set_defaults(handler=_report)


def _report(args: argparse.Namespace) -> int:
    from tablectl.analysis.report import ReportError, report

    try:
        result = report(args.game, args.wager, args.paytable)
    except ReportError as exc:
        return fail(args, str(exc), EXIT_BAD_INPUT)
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

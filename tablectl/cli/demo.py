"""`tablectl demo`: the daemon on simulated devices, a scripted dealer and players, a backend."""

from __future__ import annotations

import argparse
from pathlib import Path

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_REFUSED,
    WholeNumber,
    fail,
    mixing_arg,
    path_arg,
)
from tablectl.config import load_config
from tablectl.core.games import GAME_NAMES
from tablectl.util.bounds import Limit

# The demo plays a few rounds for people to watch; a long run is `tablectl simulate table`.
DEMO_ROUNDS = WholeNumber("rounds", Limit(1, 1000, "the most the demo plays"))


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="run the daemon on simulated devices with a backend")
    demo.add_argument("--game", choices=GAME_NAMES, default="three-card-poker")
    demo.add_argument("--rounds", type=DEMO_ROUNDS, default=6, help="1 to 1000 (default 6)")
    demo.add_argument(
        "--config",
        type=path_arg,
        help="a table config (default: config/GAME.toml of this checkout)",
    )
    demo.add_argument(
        "--keep", type=path_arg, metavar="DIR", help="keep the table's data here (journal replay)"
    )
    demo.add_argument("--json", action="store_true", help="end with one line of JSON: the summary")
    demo.add_argument(
        "--mixing",
        type=mixing_arg,
        metavar="'HOW'",
        help="the bad shuffler from round 5 on, as `simulate table --mixing` takes it, each "
        "alarm acknowledged as it comes (default: round 5 on fair, the last round a repeat)",
    )
    demo.set_defaults(handler=_demo, quiet_logs=True)


def _demo(args: argparse.Namespace) -> int:
    from tablectl.simulators import demo

    path = args.config or Path("config") / f"{args.game}.toml"
    config = load_config(path)  # fail before starting anything
    if config.game.name != args.game:
        return fail(args, f"{path} is a {config.game.name} table, not {args.game}", EXIT_BAD_INPUT)
    if args.mixing is not None and args.rounds < demo.BAD_FROM_ROUND:
        return fail(
            args,
            f"--mixing deals from round {demo.BAD_FROM_ROUND} (the scripted hands come first): "
            f"--rounds {demo.BAD_FROM_ROUND} or more",
            EXIT_BAD_INPUT,
        )
    if args.mixing is not None and not config.shuffle_integrity.enabled:
        return fail(
            args,
            f"--mixing: {path} turns the shuffle-integrity monitor off "
            "([shuffle_integrity] enabled = false): no alarm could come",
            EXIT_BAD_INPUT,
        )
    try:
        return demo.main(
            config, rounds=args.rounds, keep=args.keep, as_json=args.json, mixing=args.mixing
        )
    except demo.ShufflerFailed as exc:
        return fail(args, str(exc), EXIT_REFUSED)

"""`tablectl demo`: the daemon on simulated devices, a scripted dealer and players, a backend."""

from __future__ import annotations

import argparse
from pathlib import Path

from tablectl.cli.common import EXIT_BAD_INPUT, fail, path_arg
from tablectl.config import load_config
from tablectl.core.games import GAME_NAMES


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="run the daemon on simulated devices with a backend")
    demo.add_argument("--game", default="three-card-poker", help=", ".join(GAME_NAMES))
    demo.add_argument("--rounds", type=int, default=6)
    demo.add_argument(
        "--config",
        type=path_arg,
        help="a table config (default: config/GAME.toml of this checkout)",
    )
    demo.add_argument(
        "--keep", type=path_arg, metavar="DIR", help="keep the table's data here (journal replay)"
    )
    demo.add_argument("--json", action="store_true", help="end with one line of JSON: the summary")
    demo.set_defaults(handler=_demo, quiet_logs=True)


def _demo(args: argparse.Namespace) -> int:
    from tablectl.simulators import demo

    if args.game not in GAME_NAMES:
        return fail(
            args, f"unknown game {args.game!r}; one of {', '.join(GAME_NAMES)}", EXIT_BAD_INPUT
        )
    if args.rounds < 1:
        return fail(args, "--rounds: at least 1", EXIT_BAD_INPUT)
    path = args.config or Path("config") / f"{args.game}.toml"
    config = load_config(path)  # fail before starting anything
    if config.game.name != args.game:
        return fail(args, f"{path} is a {config.game.name} table, not {args.game}", EXIT_BAD_INPUT)
    return demo.main(config, rounds=args.rounds, keep=args.keep, as_json=args.json)

"""`tablectl`: run the daemon, check a config, read status, act as dealer or floorperson,
read and replay the journal, report on paytables, simulate devices, run the demo.

Every verb prints for people, takes --json where scripts read it, and exits non-zero with a
clear message on failure: 2 for bad input (config, arguments), 1 when the daemon refuses.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from tablectl.cli import control, demo, journal, paytable, run, simulate, test
from tablectl.cli.common import EXIT_BAD_INPUT
from tablectl.config import ConfigError
from tablectl.util import logs

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _log_level(text: str) -> str:
    level = text.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r}: one of {', '.join(LOG_LEVELS)}")
    return level


def parser() -> argparse.ArgumentParser:
    # --log-level is accepted before or after the verb.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--log-level",
        type=_log_level,
        default=argparse.SUPPRESS,
        help="DEBUG, INFO, WARNING, ERROR (default INFO; demo WARNING)",
    )
    p = argparse.ArgumentParser(prog="tablectl", description=__doc__, parents=[common])
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="verb", required=True)
    for module in (run, control, journal, paytable, simulate, test, demo):
        module.add_parsers(sub)
    for leaf in _leaf_parsers(p):
        leaf.add_argument(
            "--log-level", type=_log_level, default=argparse.SUPPRESS, help="see tablectl -h"
        )
    return p


def _leaf_parsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    leaves = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                leaves.extend(_leaf_parsers(child) or [child])
    return leaves


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tablectl")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    quiet = getattr(args, "quiet_logs", True)
    logs.configure(getattr(args, "log_level", None) or ("WARNING" if quiet else "INFO"))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except ConfigError as exc:
        if getattr(args, "json", False):
            import json

            print(json.dumps({"ok": False, "error": str(exc), "errors": exc.errors}))
        else:
            print(f"{exc.path}: {len(exc.errors)} error(s)", file=sys.stderr)
            for line in exc.errors:
                print(f"  {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

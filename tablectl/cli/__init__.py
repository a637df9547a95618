"""`tablectl`: run the daemon, check a config, read status, watch events, list devices, act
as dealer or floorperson, read, export and replay the journal, report on paytables, simulate
devices, run the demo.

Every verb prints for people, takes --json where scripts read it (errors then come as JSON on
stdout too), and exits non-zero with a clear message on failure: 2 for bad input (config,
arguments), 1 when the daemon refuses or cannot be reached.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any, NoReturn

from tablectl.cli import run
from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REFUSED,
    config_path,
    fail,
    text,
)
from tablectl.config import ConfigError, load_config
from tablectl.util import logs
from tablectl.util.files import permission_advice

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
GLOBAL_OPTION_HELP = "see tablectl -h"  # --log-level, repeated on every verb


@text
def _log_level(text: str) -> str:
    level = text.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r}: one of {', '.join(LOG_LEVELS)}")
    return level


class UsageError(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so --json can report a usage error as JSON."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


@functools.cache
def parser() -> argparse.ArgumentParser:
    """The whole command line (built once: argparse parsers can be reused)."""
    # Each verb's module, imported here rather than at the top: `tablectl run` builds the
    # parser of its own verbs alone (`_parser_for`), and the daemon imports none of the
    # others' modules (the records' PDF, the link controller's PostgreSQL and web sign...),
    # which start-up would pay for (bench/startup.py; tests/test_startup_imports.py).
    from tablectl.cli import (
        control,
        demo,
        devices,
        journal,
        link,
        mqtt,
        paytable,
        records,
        reference,
        shuffle,
        simulate,
        test,
        watch,
    )

    p = _top_parser(
        run,
        control,
        watch,
        devices,
        journal,
        records,
        mqtt,
        link,
        paytable,
        shuffle,
        simulate,
        test,
        demo,
    )
    p.epilog = reference.roles_epilog(p)  # from the verbs just defined: it cannot drift
    return p


def _top_parser(*modules: ModuleType) -> argparse.ArgumentParser:
    """The command line with the verbs of modules (each has `add_parsers`), in that order."""
    # --log-level is accepted before or after the verb.
    common = _Parser(add_help=False)
    common.add_argument(
        "--log-level",
        type=_log_level,
        choices=LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="DEBUG, INFO, WARNING, ERROR (default INFO; demo WARNING)",
    )
    p = _Parser(
        prog="tablectl",
        description=__doc__,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = p.add_subparsers(dest="verb", required=True)
    for module in modules:
        module.add_parsers(sub)
    for sp in _subparsers(p):  # verb groups too: `tablectl config --log-level X check`
        sp.add_argument(
            "--log-level",
            type=_log_level,
            choices=LOG_LEVELS,
            default=argparse.SUPPRESS,
            help=GLOBAL_OPTION_HELP,
        )
    return p


def _verb_word(argv: list[str]) -> str | None:
    """The verb argv names, when only --log-level (and its value) comes before it; None when
    another option does (-h, --version, a mistyped one: the whole command line answers)."""
    words = iter(argv)
    for word in words:
        if word == "--log-level":
            next(words, None)
        elif word.startswith("--log-level="):
            continue
        elif word.startswith("-"):
            return None
        else:
            return word
    return None


@functools.cache
def _run_parser() -> argparse.ArgumentParser:
    """The command line of `tablectl run` (and `config check`) alone: the same definitions
    as in the whole one, without importing every other verb's module."""
    return _top_parser(run)


def _parser_for(argv: list[str]) -> argparse.ArgumentParser:
    """The parser for argv: `run`'s alone when argv names it, else the whole command line
    (a usage error, help or --version included)."""
    if _verb_word(argv) in ("run", "config"):
        return _run_parser()
    return parser()


def _subparsers(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every verb and verb group below p (`tablectl config --log-level X check` works too)."""
    found = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += [child, *_subparsers(child)]
    return found


def _what(exc: BaseException) -> str:
    """An exception on one line; a group names what it holds (a report can say which)."""
    if isinstance(exc, BaseExceptionGroup):
        return f"{type(exc).__name__}: " + "; ".join(_what(e) for e in exc.exceptions)
    where = exc.__traceback__
    while where is not None and where.tb_next is not None:
        where = where.tb_next
    at = (
        f" at {where.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{where.tb_lineno}"
        if where
        else ""
    )
    return f"{type(exc).__name__}: {exc}{at}"


def _deepest_verb(p: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The parser of the verb argv names, as deep as its words go (p when none)."""
    words = iter(argv)
    for word in words:
        below = {
            name: child
            for action in p._actions
            if isinstance(action, argparse._SubParsersAction)
            for name, child in action.choices.items()
        }
        if word in below:
            p = below[word]
    return p


def _outside_the_table(args: argparse.Namespace, verb: argparse.ArgumentParser) -> str | None:
    """A seat past the table's own (table.seats), where its config is known: the config the
    verb would read (not a --socket alone, whose daemon checks). The message, or None."""
    given: list[tuple[argparse.Action, list[Any]]] = []
    for action in verb._actions:
        value = getattr(args, action.dest, None)
        if getattr(action.type, "per_table", False) and value not in (None, []):
            repeated = isinstance(action, argparse._AppendAction)  # --seat 1 --seat 3
            given.append((action, value if repeated else [value]))
    if not given or getattr(args, "socket", None):
        return None
    path = config_path(args)
    try:
        seats = load_config(path).table.seats
    except (ConfigError, OSError):
        return None  # the verb says what is wrong with it, as it would without seats
    for action, values in given:
        for item in values:
            for seat in action.type.seats_in(item):  # type: ignore[union-attr]
                if seat > seats:
                    name = "/".join(action.option_strings) or action.metavar or action.dest
                    return (
                        f"argument {name}: seat {seat}: this table has seats 1 to {seats} "
                        f"(table.seats in {path})"
                    )
    return None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tablectl")
    except PackageNotFoundError:
        return "unknown"


def _standard_descriptors_open() -> None:
    """A closed stdin, stdout or stderr (`<&-`) becomes /dev/null: otherwise the next file,
    socket or pty opened takes its number, and reading commands or printing would use it."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main(argv: list[str] | None = None) -> int:
    _standard_descriptors_open()
    argv = sys.argv[1:] if argv is None else argv
    try:
        top = _parser_for(argv)
        args = top.parse_args(argv)
        verb = _deepest_verb(top, argv)
        if (outside := _outside_the_table(args, verb)) is not None:
            verb.error(outside)
    except UsageError as exc:
        # argparse reports arguments no verb took (`status --bogus`) on the top parser: show
        # the usage of the verb that was typed instead.
        where = _deepest_verb(exc.parser, argv)
        if "--json" in argv:
            print(json.dumps({"ok": False, "error": str(exc), "usage": where.format_usage()}))
        else:
            where.print_usage(sys.stderr)
            print(f"{where.prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    quiet = getattr(args, "quiet_logs", True)
    logs.configure(getattr(args, "log_level", None) or ("WARNING" if quiet else "INFO"))
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except ConfigError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": str(exc), "errors": exc.errors}))
        else:
            count = len(exc.errors)
            print(f"{exc.path}: {count} error{'' if count == 1 else 's'}", file=sys.stderr)
            for line in exc.errors:
                print(f"  {line}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PermissionError as exc:  # a file or directory this user may not use: say whose it is
        return fail(args, permission_advice(exc.filename), EXIT_REFUSED)
    except sqlite3.Error as exc:  # a database its command did not name (it names its own)
        from tablectl.store.journal import damaged  # only on this path: not every verb's

        if damaged(exc):
            why = (
                f"a database is damaged (SQLite: {exc}); nothing was written to it: keep a copy "
                "of the data directory as it is; `tablectl journal verify` says whether it is "
                "the journal"
            )
        else:  # e.g. a read-only file system, or a file another user owns
            why = (
                f"the journal cannot be used: {exc}; run this as the tablectl user "
                "(sudo -u tablectl tablectl ...) on a writable file system"
            )
        return fail(args, why, EXIT_REFUSED)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `tablectl journal export | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a message, not a traceback
        message = f"internal error: {_what(exc)} (please report it)"
        if getattr(args, "json", False):
            print(json.dumps({"ok": False, "error": message}))
        else:
            print(f"tablectl: {message}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())

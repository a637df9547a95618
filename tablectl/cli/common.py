"""What every verb shares: exit codes, how to reach the daemon, printing for people and scripts."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tablectl.config import load_config
from tablectl.control import client
from tablectl.util import logs

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in tablectl, reported as one line
DEFAULT_CONFIG = Path("/etc/tablectl/table.toml")
M = TypeVar("M", bound=BaseModel)


def default_config() -> Path:
    """$TABLECTL_CONFIG, else /etc/tablectl/table.toml."""
    return Path(os.environ.get("TABLECTL_CONFIG", DEFAULT_CONFIG))


def path_arg(text: str) -> Path:
    """A file or directory argument; a usage error (not a traceback) for what no path is."""
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a path")
    return Path(text)


# Refused as arguments (exit 2, naming the option) before anything reaches the daemon: a
# request the daemon would refuse as malformed never needs a daemon to be refused.
SEATS_AT_MOST = 7  # the control protocol's seat range (control/protocol.py `Seat`)


def person(text: str) -> str:
    """An employee id (--by): 1 to 64 printable characters."""
    given = text.strip()
    if not 1 <= len(given) <= 64 or not given.isprintable():
        raise argparse.ArgumentTypeError(f"{text!r}: an employee id, 1 to 64 printable characters")
    return given


def printable(what: str, most: int) -> Callable[[str], str]:
    """An argument of free text: `what`, 1 to `most` printable characters."""

    def parse(text: str) -> str:
        if not 1 <= len(text) <= most or not text.isprintable():
            raise argparse.ArgumentTypeError(f"{text!r}: {what}, 1 to {most} printable characters")
        return text

    parse.__name__ = what.replace(" ", "_")
    return parse


def matching(what: str, pattern: str) -> Callable[[str], str]:
    """An identifier argument: `what`, matching `pattern` (as the config and the contract
    spell it)."""
    compiled = re.compile(pattern)

    def parse(text: str) -> str:
        if not compiled.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{text!r}: {what}, matching {pattern}")
        return text

    parse.__name__ = what.replace(" ", "_")
    return parse


def at_least_zero(text: str) -> int:
    """A whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number, 0 or more")
    return int(text)


def finite(*, above: float | None = None, at_least: float | None = None) -> Callable[[str], float]:
    """A finite number (never inf or nan), above or at least a bound."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if (
            not math.isfinite(value)
            or (above is not None and value <= above)
            or (at_least is not None and value < at_least)
        ):
            bound = f"above {above:g}" if above is not None else f"{at_least:g} or more"
            raise argparse.ArgumentTypeError(f"{text!r}: a finite number, {bound}")
        return value

    return parse


def seat_arg(text: str) -> int:
    """A seat number: a whole number from 1 to 7."""
    try:
        seat = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a seat is a whole number") from None
    if not 1 <= seat <= SEATS_AT_MOST:
        raise argparse.ArgumentTypeError(f"{text!r}: a seat is 1 to {SEATS_AT_MOST}")
    return seat


def seat_list(text: str) -> list[int]:
    """Seats separated by commas, e.g. 1,3,5."""
    return [seat_arg(part) for part in text.split(",")]


def config_arg(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--config",
        type=path_arg,
        default=None,
        help="the table's config (default $TABLECTL_CONFIG or /etc/tablectl/table.toml)",
    )


def socket_args(sp: argparse.ArgumentParser, *, sends: tuple[str, ...]) -> None:
    """--config/--socket/--json for a verb that asks the daemon; `sends`: the control commands
    it sends, from which its roles follow (cli/reference.py: -h, README, man page)."""
    sp.set_defaults(sends=sends)
    where = sp.add_mutually_exclusive_group()
    where.add_argument("--config", type=path_arg, help="the table's config (finds its socket)")
    where.add_argument("--socket", type=path_arg, help="the daemon's control socket")
    sp.add_argument("--json", action="store_true", help="print the reply as JSON")


def config_path(args: argparse.Namespace) -> Path:
    config = getattr(args, "config", None)
    return Path(config) if config else default_config()


def socket_path(args: argparse.Namespace) -> Path:
    if getattr(args, "socket", None):
        return Path(args.socket)
    return load_config(config_path(args)).storage.socket_path


def fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Say what went wrong: on stderr for people, as JSON on stdout under --json."""
    if getattr(args, "json", False):
        print(json.dumps({"ok": False, "error": message}))
    else:
        # Under systemd this line is the journal's: an error (sd-daemon(3) priority 3).
        mark = "<3>" if logs.stderr_is_journal() else ""
        print(f"{mark}tablectl: {message}", file=sys.stderr)
    return code


def call(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any] | int:
    """Send a request to the daemon: its data, or the exit code after saying why not."""
    try:
        reply = client.call(socket_path(args), request)
    except client.ControlClientError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    if not reply.get("ok"):
        return fail(args, f"refused: {reply.get('error')}", EXIT_REFUSED)
    data = reply.get("data")
    return data if isinstance(data, dict) else {"data": data}


def read_reply(args: argparse.Namespace, data: dict[str, Any], model: type[M]) -> M | int:
    """A reply's data as the typed model it is (tablectl/status.py, control/protocol.py), or
    the exit code after saying what in it this tablectl cannot read."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return fail(
            args,
            f"the daemon's {model.__name__} reply is not what this tablectl reads (another "
            f"version?): {where + ': ' if where else ''}{first['msg']}",
            EXIT_REFUSED,
        )


def cents(amount: int | None) -> str:
    if amount is None:
        return "-"
    return f"${amount // 100:,}.{amount % 100:02d}"


def yes_no(value: object) -> str:
    return "yes" if value else "no"


def human(value: object) -> str:
    """A value as a person reads it: yes/no, not True/False; '-' for nothing."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return yes_no(value)
    if isinstance(value, list | tuple):
        return ",".join(human(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def describe(data: dict[str, Any]) -> str:
    """A journal row's data on one line: key=value, amounts in dollars."""
    parts = []
    for key, value in data.items():
        if key.endswith("_cents") and isinstance(value, int) and not isinstance(value, bool):
            parts.append(f"{key.removesuffix('_cents')}={cents(value)}")
        else:
            parts.append(f"{key}={human(value)}")
    return " ".join(parts)


def host_port(text: str) -> tuple[str, int]:
    """HOST:PORT for argparse (a clear usage error, not a traceback)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r}: write HOST:PORT, e.g. 127.0.0.1:7001")
    return host or "127.0.0.1", int(port)

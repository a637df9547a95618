"""What every verb shares: exit codes, how to reach the daemon, printing for people and scripts."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from tablectl.config import load_config
from tablectl.control import client
from tablectl.control.protocol import SEATS_MOST
from tablectl.util import logs
from tablectl.util.bounds import Limit

if TYPE_CHECKING:
    from tablectl.simulators.shuffler import Mixing

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2
EXIT_INTERNAL = 70  # EX_SOFTWARE: a bug in tablectl, reported as one line
DEFAULT_CONFIG = Path("/etc/tablectl/table.toml")
M = TypeVar("M", bound=BaseModel)


def default_config() -> Path:
    """$TABLECTL_CONFIG, else /etc/tablectl/table.toml."""
    return Path(os.environ.get("TABLECTL_CONFIG", DEFAULT_CONFIG))


# --- argument types ------------------------------------------------------------------------
# Every argument that takes a value has a type, refused at parse time (exit 2, naming the
# option) before anything reaches the daemon: a number is bounded (WholeNumber, Number, When,
# each naming its limit and where the limit comes from); anything else is declared `text`.
# tests/test_cli.py walks every parser, so a new `type=int` or an untyped option fails it.

_TEXT_TYPES: set[object] = set()
P = TypeVar("P", bound=Callable[..., object])


def text(parse: P) -> P:
    """Declare an argument type that takes text (a path, a name, an id), not a number."""
    _TEXT_TYPES.add(parse)
    return parse


def is_text(kind: object) -> bool:
    """A type declared `text`, or words (WordList): no number to bound."""
    return kind in _TEXT_TYPES or isinstance(kind, WordList)


@text
def mixing_arg(words: str) -> Mixing:
    """How a simulated shuffler mixes (simulators/shuffler.py, Mixing.parse)."""
    from tablectl.simulators.shuffler import Mixing

    try:
        return Mixing.parse(words.split())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{words!r}: {exc}") from None


@text
def path_arg(text: str) -> Path:
    """A file or directory argument; a usage error (not a traceback) for what no path is."""
    if not text or "\x00" in text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a path")
    return Path(text)


@dataclass(frozen=True)
class WholeNumber:
    """A whole number within `limit` (a count, a seat, an amount)."""

    what: str
    limit: Limit
    per_table: bool = False  # a seat: also within table.seats, where the config is known

    def __call__(self, text: str) -> int:
        try:
            return self.limit.whole(text, self.what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def seats_in(self, value: int) -> list[int]:
        return [value]


@dataclass(frozen=True)
class Number:
    """A decimal number within `limit` (seconds, a rate); never inf, nan or an exponent."""

    what: str
    limit: Limit

    def __call__(self, text: str) -> float:
        try:
            return self.limit.number(text, self.what)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


# 649a.2(a): seven betting positions, the most any game here has; the table's own count
# (table.seats) is checked too where its config is known (cli/__init__.py).
SEAT_LIMIT = Limit(1, SEATS_MOST, "649a.2(a), the most betting positions of any game")
SEAT = WholeNumber("a seat", SEAT_LIMIT, per_table=True)


@dataclass(frozen=True)
class SeatList:
    """Seats separated by commas, e.g. 1,3,5, each named once."""

    limit: Limit = SEAT_LIMIT
    per_table: bool = True

    def __call__(self, text: str) -> list[int]:
        seats = [SEAT(part) for part in text.split(",")]
        twice = sorted({s for s in seats if seats.count(s) > 1})
        if twice:
            raise argparse.ArgumentTypeError(f"{text!r}: seat {twice[0]} is named twice")
        return seats

    def seats_in(self, value: list[int]) -> list[int]:
        return value


SEATS = SeatList()


PORT_LIMIT = Limit(1, 65535, "a TCP port")


@dataclass(frozen=True)
class HostPort:
    """HOST:PORT (HOST defaults to 127.0.0.1)."""

    limit: Limit = PORT_LIMIT

    def __call__(self, text: str) -> tuple[str, int]:
        host, sep, port = text.rpartition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"{text!r}: write HOST:PORT, e.g. 127.0.0.1:7001")
        try:
            number = self.limit.whole(port, "the port")
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"{exc}; write HOST:PORT, e.g. 127.0.0.1:7001"
            ) from None
        return host or "127.0.0.1", number


HOST_PORT = HostPort()

_AGO = re.compile(r"-?([0-9]{1,19})([smhd])")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _span(delta: timedelta) -> str:
    """A bound as a person writes it: 31 days, 36 hours, 90 minutes."""
    seconds = int(delta.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count:,} {unit}{'' if count == 1 else 's'}"
    return f"{seconds:,} seconds"


@dataclass(frozen=True)
class When:
    """A point in time as a person writes it: ISO 8601 (without a zone: the report's zone,
    else this machine's), today, yesterday, now, or a time ago (30m, 2h, 7d; also -2h, as
    journalctl writes it) of at most `most`. As a type it returns the text, checked; `at`
    places it in a zone."""

    most: timedelta
    source: str

    @property
    def limit(self) -> Limit:
        """The time ago it takes, in seconds."""
        return Limit(0, int(self.most.total_seconds()), self.source)

    def __call__(self, text: str) -> str:
        self.at(text)
        return text

    def ago(self, text: str) -> timedelta | None:
        """A time ago written as 30m, 2h, 7d, within the bound; None: not a time ago."""
        match = _AGO.fullmatch(text.strip().lower())
        if match is None:
            return None
        seconds = int(match[1]) * _UNIT_S[match[2]]
        if seconds > self.limit.high:
            raise argparse.ArgumentTypeError(
                f"{text!r}: a time ago is at most {_span(self.most)} ({self.source})"
            )
        return timedelta(seconds=seconds)

    def at(self, text: str, zone: tzinfo | None = None) -> datetime:
        now = datetime.now(zone) if zone else datetime.now().astimezone()
        word = text.strip().lower()
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        if word == "now":
            return now
        if word == "today":
            return midnight
        if word == "yesterday":
            return midnight - timedelta(days=1)
        if (ago := self.ago(text)) is not None:
            return now - ago
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: give a time such as 2024-05-01, 2024-05-01T14:30, "
                "2024-05-01T14:30:00Z, today, yesterday, now, 2h (ago)"
            ) from None
        try:  # 0001-01-01 in a zone west of UTC is before the first time Python has
            placed = (
                when if when.tzinfo else when.replace(tzinfo=zone) if zone else when.astimezone()
            )
            placed.astimezone(UTC)
        except (OverflowError, ValueError):  # naive .astimezone(): "year 0 is out of range"
            raise argparse.ArgumentTypeError(f"{text!r}: no time a journal holds") from None
        return placed


@text
def person(text: str) -> str:
    """An employee id (--by): 1 to 64 printable characters."""
    given = text.strip()
    if not 1 <= len(given) <= 64 or not given.isprintable():
        raise argparse.ArgumentTypeError(f"{text!r}: an employee id, 1 to 64 printable characters")
    return given


def printable(what: str, most: int) -> Callable[[str], str]:
    """An argument of free text: `what`, 1 to `most` printable characters."""

    @text
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

    @text
    def parse(text: str) -> str:
        if not compiled.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{text!r}: {what}, matching {pattern}")
        return text

    parse.__name__ = what.replace(" ", "_")
    return parse


@dataclass(frozen=True)
class WordList:
    """One or more of `words`, separated by commas (csv,pdf); shells complete them."""

    what: str
    words: tuple[str, ...]

    def __call__(self, text: str) -> list[str]:
        chosen = [name.strip() for name in text.split(",") if name.strip()]
        for name in chosen:
            if name not in self.words:
                raise argparse.ArgumentTypeError(
                    f"{name!r}: {self.what}, one or more of {', '.join(self.words)}"
                )
        if not chosen:
            raise argparse.ArgumentTypeError(f"{text!r}: name {self.what}: {', '.join(self.words)}")
        return chosen


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

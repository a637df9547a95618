"""The command line: no input ends in a traceback; --json means JSON, errors included."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tablectl import cli
from tablectl.cli.common import EXIT_BAD_INPUT, HostPort, When, is_text
from tablectl.cli.control import SeatHand
from tablectl.util.bounds import Limit

from .conftest import EXAMPLE_CONFIG

TABLECTL = Path(sys.executable).with_name("tablectl")


def leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every verb that runs something, with the words that reach it."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                below = leaves(child, (*path, name))
                # A verb whose subcommands are optional is a verb of its own too (`devices`).
                own = not below or any(
                    isinstance(a, argparse._SubParsersAction) and not a.required
                    for a in child._actions
                )
                found.extend([((*path, name), child)] if own else [])
                found.extend(below)
    return found


VERBS = leaves(cli.parser())
VALUE_FREE = (argparse._StoreTrueAction, argparse._HelpAction, argparse._VersionAction)
GARBAGE = "\x00garbage"
# A valid value for each argument a verb cannot run without, so that in each case below the
# one garbage argument is the reason for the refusal, not a missing neighbour.
VALID = {
    "reason": "shoe-jam",
    "hit_id": "12-5",
    "device": "shuffler",
    "serial_number": "SN-1",
    "link_id": "floor-a",
    "directory": "/nonexistent/records",
    "--by": "T1",
    "--accept": "mark",
    "--from": "2026-12-01",
    "--to": "2026-12-02",
    "--out": "/nonexistent/out",
    "--game": "three-card-poker",
    "--wager": "pair-plus",
    "--paytable": "A",
    "--tables": "2",
    "--link": "floor-a",
    "deck_id": "D17",
    "driver": "reference",
}
# Verbs that need an argument argparse cannot mark required (one of two forms).
ALSO_NEEDED: dict[tuple[str, ...], tuple[str, ...]] = {("records",): ("--from", "--out")}


def _name(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else action.dest


def _is_garbage(action: argparse.Action, value: str) -> bool:
    """Whether `value` is no value of the option: its type refuses it, or it is a number the
    verb checks for range after parsing. Text it takes (an employee id "-1", a link id
    "1e999999") is a value, not garbage."""
    if action.choices:
        return value not in action.choices
    kind: Any = action.type
    if kind is None or is_text(kind):
        return False
    try:
        parsed = kind(value)
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return True
    return not isinstance(parsed, str)


def _needed(verb: tuple[str, ...], parser: argparse.ArgumentParser) -> list[argparse.Action]:
    also = ALSO_NEEDED.get(verb, ())
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction)
        and (
            (not a.option_strings and a.nargs in (None, 1))
            or a.required
            or set(a.option_strings) & set(also)
        )
    ]


def _valid(action: argparse.Action, skip: argparse.Action | None = None) -> list[str]:
    if action is skip:
        return []
    value = VALID[_name(action)]
    return [value] if not action.option_strings else [action.option_strings[-1], value]


@dataclass(frozen=True)
class Case:
    argv: list[str]
    reason: str  # the refusal names this: the argument given as garbage

    @property
    def id(self) -> str:
        return " ".join(self.argv).replace("\x00", "NUL")


def garbage_for(verb: tuple[str, ...], parser: argparse.ArgumentParser) -> list[Case]:
    """Each case: the verb with valid required arguments and exactly one garbage argument."""
    needed = _needed(verb, parser)

    def with_(bad: list[str], instead_of: argparse.Action | None = None) -> list[str]:
        return [*verb, *(w for a in needed for w in _valid(a, instead_of)), *bad]

    cases = [Case(with_(["--no-such-option"]), "unrecognized arguments: --no-such-option")]
    positionals = [a for a in parser._actions if not a.option_strings]
    if not positionals:
        cases.append(Case(with_([GARBAGE]), "unrecognized arguments:"))
    elif isinstance(positionals[0], argparse._SubParsersAction):  # optional verbs (devices)
        cases.append(Case(with_([GARBAGE]), "invalid choice: '\\x00garbage'"))
    else:
        first = positionals[0]
        cases.append(Case(with_([GARBAGE], first), f"argument {first.metavar or first.dest}: "))
    for action in parser._actions:
        if isinstance(action, VALUE_FREE) or not action.option_strings:
            continue
        option = action.option_strings[-1]
        # Every argument is typed (test_every_argument_is_bounded_or_text): argparse names it.
        named = option
        cases.append(Case(with_([option, GARBAGE], action), named))
        every_name = "/".join(action.option_strings)
        cases.append(Case(with_([option], action), f"argument {every_name}: expected one"))
        # Out of range and odd numbers, where a value is parsed (never where any text is
        # accepted: `demo --keep -1` would rightly run the demo).
        odd = [v for v in ("-1", "1e999999") if _is_garbage(action, v)]
        cases += [Case(with_([option, v], action), named) for v in odd]
    return cases


def _takes_json(argv: list[str]) -> bool:
    return any(
        verb == tuple(argv[: len(verb)]) and "--json" in p._option_string_actions
        for verb, p in VERBS
    )


CASES = [case for verb, parser in VERBS for case in garbage_for(verb, parser)]


@pytest.fixture
def unreachable_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default config: a table whose daemon is not running and whose data is empty."""
    config = tmp_path / "table.toml"
    config.write_text(
        EXAMPLE_CONFIG.read_text()
        .replace('"/var/lib/tablectl"', f'"{tmp_path / "data"}"')
        .replace('"/run/tablectl/control.sock"', f'"{tmp_path / "c.sock"}"')
    )
    monkeypatch.setenv("TABLECTL_CONFIG", str(config))
    return config


def test_every_verb_is_covered() -> None:
    names = {" ".join(verb) for verb, _ in VERBS}
    assert {"run", "status", "watch", "devices", "journal export", "shuffler count"} <= names
    assert len(CASES) > 100


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
@pytest.mark.usefixtures("unreachable_table")
def test_garbage_arguments_are_refused_for_what_they_are(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each case is bad input (exit 2) and the message names the bad argument: none is
    refused for another reason, such as no daemon listening (exit 1)."""
    code = cli.main(case.argv)
    out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT, (code, out, err)
    assert "Traceback" not in out + err and case.reason in out + err, (case.reason, out, err)

    code = cli.main([*case.argv, "--json"])
    out, err = capsys.readouterr()
    assert code == EXIT_BAD_INPUT, (code, out, err)
    replies = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert replies and replies[-1]["ok"] is False, out
    if _takes_json(case.argv):  # else --json is refused itself, as an unknown option
        assert case.reason in replies[-1]["error"], (case.reason, out)


@pytest.mark.parametrize(
    "argv",
    [
        ["--log-level", "bogus", "run"],
        ["run", "--log-level", "bogus"],
        ["simulate", "shuffler", "--listen", "garbage"],
        ["journal", "tail", "-n", "-5"],
        ["status", "--socket", "/nonexistent/sock", "--json"],
    ],
)
def test_the_installed_command_never_prints_a_traceback(
    argv: list[str], unreachable_table: Path
) -> None:
    proc = subprocess.run(
        [str(TABLECTL), *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode in (1, 2)
    assert "Traceback" not in proc.stderr + proc.stdout
    if "--json" in argv:
        assert json.loads(proc.stdout)["ok"] is False


def test_version_and_log_level_anywhere(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("tablectl ")
    for argv in (
        ["--log-level", "debug", "config", "check", str(EXAMPLE_CONFIG)],
        ["config", "check", str(EXAMPLE_CONFIG), "--log-level", "error"],
        ["config", "--log-level", "warning", "check", str(EXAMPLE_CONFIG)],
    ):
        assert cli.main(argv) == 0, argv


def test_the_default_config_comes_from_the_environment(
    unreachable_table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["config", "check", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["file"] == str(unreachable_table)


def test_help_groups_the_daemons_commands_by_role(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())  # the verbs as a person types them
    assert "technician (group tablectl-technician): status, dealer shoe-out-of-order" in out
    assert "devices, devices accept, devices reset-link, shuffler count, shuffler self-test" in out
    assert "dealer (group tablectl-dealer): status, dealer settle, dealer deal" in out
    assert "floorperson (group tablectl-floor): status, floor validate, floor document" in out


def _parsers(p: argparse.ArgumentParser, path: str = "tablectl") -> list[tuple[str, Any]]:
    """Every parser below p (verb groups too), with the words that reach it."""
    found: list[tuple[str, Any]] = [(path, p)]
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _parsers(child, f"{path} {name}")
    return found


VALUED = [
    (f"{where} {_name(action)}", action)
    for where, parser in _parsers(cli.parser())
    for action in parser._actions
    if action.nargs != 0 and not isinstance(action, (argparse._SubParsersAction, *VALUE_FREE))
]
BOUNDED = [(name, action) for name, action in VALUED if hasattr(action.type, "limit")]


def test_every_argument_is_bounded_or_text() -> None:
    """Each argument that takes a value has choices, a type declared text (cli/common.py
    `text`: a path, a name, an id) or a bounded type: a new `type=int`, `type=float` or an
    untyped option fails here until it says its limit and where the limit comes from."""
    assert len(VALUED) > 60 and len(BOUNDED) > 15
    for name, action in VALUED:
        if action.choices:
            continue
        limit = getattr(action.type, "limit", None)
        assert isinstance(limit, Limit) or is_text(action.type), (
            f"{name}: give it a bounded type (WholeNumber, Number, When: cli/common.py) or "
            f"declare its type text; it has {action.type!r}"
        )
        if isinstance(limit, Limit):
            assert limit.source and limit.low <= limit.high, name


def _written(kind: object, number: float | str) -> str:
    """A number as the argument writes it (SEAT=CARDS, HOST:PORT, a time ago)."""
    shown = str(int(number)) if isinstance(number, int | float) and number % 1 == 0 else str(number)
    if isinstance(kind, SeatHand):
        return f"{shown}=AsKsQs"
    if isinstance(kind, HostPort):
        return f"127.0.0.1:{shown}"
    if isinstance(kind, When):
        return f"{shown}s"
    return shown


@pytest.mark.parametrize(("name", "action"), BOUNDED, ids=[name for name, _ in BOUNDED])
def test_each_bound_is_held_and_named_at_parse_time(name: str, action: argparse.Action) -> None:
    """Its limits are accepted; past them it is refused as argparse refuses (exit 2), naming
    the limit and where it comes from; inf, nan, exponents and the like are refused too."""
    kind: Any = action.type
    limit: Limit = kind.limit
    for fine in (limit.low + 0.5 if limit.low_open else limit.low, limit.high):
        kind(_written(kind, fine))
    past = [limit.high + 1, *([limit.low] if limit.low_open else [])]
    if not isinstance(kind, When):  # -1s is a time ago too, as journalctl writes it
        past.append(limit.low - 1)
    for number in past:
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            kind(_written(kind, number))
        assert limit.source in str(refused.value), (name, number, str(refused.value))
    # Digits of other scripts (Arabic-Indic, fullwidth) are digits to int(), not to a person
    # reading the command back in a log.
    for odd in ("1e9", "nan", "inf", "0x10", "1_0", "99999999999999999999999", "\u0665", "\uff15"):
        with pytest.raises(argparse.ArgumentTypeError):
            kind(_written(kind, odd))
    if not isinstance(kind, When):  # " 5s" is a time ago as a person types it
        with pytest.raises(argparse.ArgumentTypeError):
            kind(_written(kind, " 5"))


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["dealer", "stub-count", "99999999999"],
            "argument N: '99999999999': the cards the count shows in the deck: 0 to 104 "
            "(52 a whole deck, 649a.8(g)",
        ),
        (
            ["pace", "--since", "99999h"],
            "argument --since: '99999h': a time ago is at most 31 days",
        ),
        (["journal", "export", "--since", "99999999999d"], "at most 3,660 days"),
        (["journal", "tail", "-n", "0"], "argument -n: '0': a number of rows: 1 to 100,000"),
        (["dealer", "deal", "--seat", "8"], "a seat: 1 to 7 (649a.2(a)"),
        (["test", "sensors", "--seats", "1,3,1"], "seat 1 is named twice"),
        (["test", "shoe", "--timeout", "601"], "more than 0 and at most 600"),
        (["test", "shoe", "--cards", "53"], "'53': cards of a test deal: 1 to 52"),
        (["simulate", "floor", "--tables", "2", "--link", "a", "--seats", "8"], "1 to 7"),
        (["simulate", "table", "--shuffle-ms", "1e9"], "a whole number, 0 to 600,000"),
        (["simulate", "shuffler", "--listen", "127.0.0.1:0"], "the port: 1 to 65,535"),
        (["demo", "--rounds", "1001"], "'1001': rounds: 1 to 1,000 (the most the demo plays)"),
        (["demo", "--rounds", "4", "--mixing", "cut"], "--mixing deals from round 5"),
    ],
)
def test_numbers_past_their_limit_are_usage_errors(
    argv: list[str], said: str, unreachable_table: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's cases among them: exit 2 before any daemon is asked, naming the limit."""
    assert cli.main(argv) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"error: {said}" in err or said in err, err


def test_a_date_before_the_first_time_python_has_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0001-01-01 without a zone, on a machine west of UTC, is before datetime's first
    moment: refused as a time no journal holds, not as "invalid When(most=...) value"."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        for kind in (When(timedelta(days=31), "pace"), When(timedelta(days=3660), "records")):
            with pytest.raises(argparse.ArgumentTypeError, match="no time a journal holds"):
                kind("0001-01-01")
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_seat_past_the_table_s_own_is_refused_where_its_config_is_known(
    unreachable_table: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example table has 6 seats: seat 7 is a usage error naming table.seats and the
    file, for --config and the default config alike; with --socket alone the daemon judges."""
    for argv in (
        ["dealer", "deal", "--seat", "7"],
        ["dealer", "settle", "--hand", "7=AsKsQs", "--config", str(unreachable_table)],
        ["dealer", "clear-fault", "--seat", "7"],
        ["test", "sensors", "--seats", "1,7"],
    ):
        assert cli.main(argv) == EXIT_BAD_INPUT, argv
        err = capsys.readouterr().err
        assert f"seat 7: this table has seats 1 to 6 (table.seats in {unreachable_table})" in err
    assert cli.main(["dealer", "deal", "--seat", "6"]) == 1  # in range: no daemon to ask
    assert "no tablectl daemon is listening" in capsys.readouterr().err
    assert cli.main(["dealer", "deal", "--seat", "7", "--socket", str(tmp_path / "s")]) == 1

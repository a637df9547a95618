"""The command line: no input ends in a traceback; --json means JSON, errors included."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tablectl import cli
from tablectl.cli.common import EXIT_BAD_INPUT, path_arg

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
    if action.type in (None, str, path_arg):
        return False
    try:
        parsed = action.type(value)  # type: ignore[operator]
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return True
    return not isinstance(parsed, str)


# Where the refusal is not argparse's and names the value, not the option: the real reason.
REASONS = {
    ("records", "--from"): "give a time such as",
    ("records", "--to"): "give a time such as",
    ("pace", "--since"): "give a time such as",
    ("pace", "--until"): "give a time such as",
    ("paytable", "report", "--game"): "unknown game '\\x00garbage'",
    ("paytable", "report", "--wager"): "unknown wager '\\x00garbage'",
    ("paytable", "report", "--paytable"): "unknown paytable '\\x00garbage'",
    ("demo", "--game"): "unknown game '\\x00garbage'",
}


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
        named = REASONS.get((*verb, option), option)
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

"""The command line: no input ends in a traceback; --json means JSON, errors included."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tablectl import cli
from tablectl.cli.common import EXIT_INTERNAL, path_arg

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


def garbage_for(verb: tuple[str, ...], parser: argparse.ArgumentParser) -> list[list[str]]:
    cases = [[*verb, "--no-such-option"], [*verb, "\x00garbage"]]
    for action in parser._actions:
        if isinstance(action, VALUE_FREE) or not action.option_strings:
            continue
        option = action.option_strings[-1]
        cases.append([*verb, option, "\x00garbage"])
        cases.append([*verb, option])  # the value missing
        # Out of range and odd numbers, where a value is parsed (never where any path is
        # accepted: `demo --keep -1` would rightly run the demo).
        if action.type not in (None, str, path_arg) or action.choices:
            cases += [[*verb, option, v] for v in ("-1", "1e999999")]
    return cases


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


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c).replace("\x00", "NUL") for c in CASES])
@pytest.mark.usefixtures("unreachable_table")
def test_garbage_arguments_end_in_a_message_not_a_traceback(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code in (1, 2), (code, out, err)
    assert "Traceback" not in out + err and (out + err).strip()

    code = cli.main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code in (1, 2) and code != EXIT_INTERNAL, (code, out, err)
    replies = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert replies and replies[-1]["ok"] is False and replies[-1]["error"], out


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

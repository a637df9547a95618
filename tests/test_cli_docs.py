"""The docs made from the code cannot drift: the role table (README, `tablectl -h`), the man
page and the shell completion come from the argparse definitions; the architecture diagram
from its dot source."""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import subprocess
import sys

import pytest

from tablectl.cli import main, parser
from tablectl.cli.reference import ROLES_BY_COMMAND, verbs, verbs_by_role
from tablectl.control.protocol import COMMANDS, Role

from .conftest import REPO

sys.path.insert(0, str(REPO / "packaging"))
cli_docs = importlib.import_module("cli_docs")


def test_every_verb_that_asks_the_daemon_says_what_it_sends() -> None:
    """A new verb with --socket but no `sends` would be missing from every role table."""
    for verb in verbs(parser()):
        if verb.talks_to_daemon:
            assert verb.sends, f"{verb.name}: socket_args(sp, sends=(...)) names no command"
            assert set(verb.sends) <= set(COMMANDS), verb.name
        else:
            assert not verb.sends, verb.name


def test_every_control_command_is_sent_by_some_verb() -> None:
    sent = {cmd for verb in verbs(parser()) for cmd in verb.sends}
    assert sent == set(ROLES_BY_COMMAND)


def test_a_verb_belongs_to_the_roles_that_may_send_all_it_sends() -> None:
    table = {role: {v.name for v in vs} for role, vs in verbs_by_role(parser()).items()}
    assert "test sensors" in table[Role.TECHNICIAN] and "test sensors" not in table[Role.DEALER]
    assert "dealer settle" in table[Role.DEALER] and "dealer settle" not in table[Role.FLOORPERSON]
    assert "floor validate" in table[Role.FLOORPERSON]
    assert all("status" in names for names in table.values())


def test_the_readme_role_table_is_the_code_s() -> None:
    text = (REPO / "README.md").read_text()
    assert cli_docs.readme_with_roles(text) == text, (
        "README.md's role table drifted from the code: make docs"
    )


def test_tablectl_help_lists_every_role_and_verb(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["-h"])
    out = " ".join(capsys.readouterr().out.split())
    for role, allowed in verbs_by_role(parser()).items():
        assert f"{role.value} (group tablectl-" in out
        for verb in allowed:
            assert verb.name in out, verb.name


def test_the_man_page_has_every_verb_and_option_and_groff_reads_it_cleanly() -> None:
    page = cli_docs.manpage("9.9", date=None)
    assert page.startswith(".TH TABLECTL 1 ")
    for verb in verbs(parser()):
        assert f".SS {cli_docs._roff(verb.name)}\n" in page, verb.name
        for action in verb.parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert cli_docs._roff(option) in page, (verb.name, option)
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed (make debian-tools)")
    proc = subprocess.run(
        [groff, "-man", "-ww", "-z", "-t"],
        input=page,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_completion_offers_every_verb(shell: str) -> None:
    script = cli_docs.completion(shell)
    for verb in verbs(parser()):
        for word in verb.words:
            assert word in script, (shell, verb.name)
    assert "--log-level" in script and "--config" in script
    checker = shutil.which(shell)
    if checker is not None:  # the shell parses what we ship
        proc = subprocess.run(
            [checker, "-n"], input=script, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr


def test_the_man_page_shows_commands_in_bold_not_in_backticks() -> None:
    """The help texts write a command as Markdown code (`tablectl records key`): the page
    shows it in bold, as man pages do, and no backtick is left."""
    page = cli_docs.manpage("9.9", date=None)
    assert "`" not in page
    assert "\\fBtablectl records key\\fR" in page


def _bash_offers(words: list[str]) -> set[str]:
    """What bash's completion offers for the last of words (tablectl's first)."""
    bash = shutil.which("bash")
    assert bash is not None
    line = " ".join(words)
    probe = (
        cli_docs.completion("bash")
        + f"\nCOMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
        + f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; _shtab_tablectl; "
        + 'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run([bash], input=probe, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def _valued_options() -> list[tuple[list[str], str, tuple[str, ...]]]:
    """(the words of a verb, an option, the values it takes) for every option with values."""
    found = []
    for words, p in [([], parser()), *((v.words, v.parser) for v in verbs(parser()))]:
        for action in p._actions:
            if not action.option_strings or action.help == cli_docs.GLOBAL_OPTION_HELP:
                continue
            values = action.choices or getattr(action.type, "words", None)
            if values:
                found.append((list(words), action.option_strings[-1], tuple(map(str, values))))
    return found


def test_bash_offers_the_values_of_every_option_that_has_them() -> None:
    """--format (csv,jsonl,pdf; several with commas), --log-level, --game, --accept ..."""
    valued = _valued_options()
    options = {option for _, option, _ in valued}
    assert {"--format", "--log-level", "--game", "--accept"} <= options
    for words, option, values in valued:
        offered = _bash_offers(["tablectl", *words, option, ""])
        assert set(values) <= offered, (words, option, offered)
    assert _bash_offers(["tablectl", "records", "--format", "csv,"]) == {"csv,jsonl", "csv,pdf"}
    assert _bash_offers(["tablectl", "records", "--format", "p"]) == {"pdf"}


def test_bash_completes_a_verb_group() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = cli_docs.completion("bash")
    probe = (
        script
        + "\nCOMP_WORDS=(tablectl journal ''); COMP_CWORD=2; COMP_LINE='tablectl journal ';"
        + ' COMP_POINT=${#COMP_LINE}; _shtab_tablectl; echo "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run([bash], input=probe, capture_output=True, text=True, check=False)
    offered = set(proc.stdout.split())
    assert {"verify", "tail", "export", "replay"} <= offered, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz is not installed")
@pytest.mark.parametrize("diagram", ["architecture", "layers"])
def test_the_diagrams_are_drawn_from_their_source(diagram: str) -> None:
    dot = shutil.which("dot")
    assert dot is not None
    drawn = subprocess.run(
        [dot, "-Tsvg", str(REPO / f"docs/{diagram}.dot")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def body(svg: str) -> str:  # the drawing, not the line naming graphviz's version
        return re.sub(r"<!-- Generated by graphviz[^>]*-->", "", svg)

    committed = (REPO / f"docs/{diagram}.svg").read_text()
    assert body(drawn) == body(committed), f"docs/{diagram}.svg is stale: make docs"

"""The command line as data: every verb, what it sends to the daemon, which role may run it.

One source for `tablectl -h`'s role table, the README's (a test compares them), the man page
and the shell completion (packaging/cli_docs.py): a verb added to the argparse definitions
appears in all of them without an edit here. A verb that talks to the daemon names the
control commands it sends (`socket_args(sp, sends=...)`); its roles are those allowed to send
every one of them (control/protocol.py, `ROLES`).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass

from tablectl.config import AccessSection
from tablectl.control.access import groups_for
from tablectl.control.protocol import EVERY_ROLE, REQUEST_TYPES, Role, commands


@dataclass(frozen=True, slots=True)
class Verb:
    words: tuple[str, ...]  # ("dealer", "settle")
    parser: argparse.ArgumentParser
    help: str

    @property
    def name(self) -> str:
        return " ".join(self.words)

    @property
    def sends(self) -> tuple[str, ...]:
        """The control commands it sends; () for a verb that does not talk to the daemon."""
        return tuple(self.parser.get_default("sends") or ())

    @property
    def talks_to_daemon(self) -> bool:
        return any("--socket" in a.option_strings for a in self.parser._actions)

    @property
    def roles(self) -> frozenset[Role]:
        """The roles that may run it: each may send every command it sends."""
        allowed = set(EVERY_ROLE)
        for cmd in self.sends:
            allowed &= ROLES_BY_COMMAND.get(cmd, frozenset())
        return frozenset(allowed)


ROLES_BY_COMMAND: dict[str, frozenset[Role]] = {
    cmd: model.ROLES for model in REQUEST_TYPES for cmd in commands(model)
}


def subparsers(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """The verbs directly below parser: (name, its parser, its one-line help)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:  # an alias names the same parser again
                    seen.add(id(child))
                    yield name, child, helps.get(name, "")


def verbs(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Iterator[Verb]:
    """Every verb that does something (the leaves: `dealer settle`, not `dealer`), in order."""
    for name, child, text in subparsers(parser):
        below = any(True for _ in subparsers(child))
        if not below or child.get_default("handler") is not None:  # `devices` and `devices accept`
            yield Verb((*words, name), child, text)
        if below:
            yield from verbs(child, (*words, name))


def verbs_by_role(parser: argparse.ArgumentParser) -> dict[Role, list[Verb]]:
    table: dict[Role, list[Verb]] = {role: [] for role in Role}
    for verb in verbs(parser):
        if verb.sends:
            for role in Role:
                if role in verb.roles:
                    table[role].append(verb)
    return table


def local_verbs(parser: argparse.ArgumentParser) -> list[Verb]:
    """Verbs that do not ask the daemon: they read files or run something themselves."""
    return [verb for verb in verbs(parser) if not verb.talks_to_daemon]


def _defaults(role: Role) -> str:
    return ", ".join(groups_for(AccessSection(), role))


def roles_epilog(parser: argparse.ArgumentParser) -> str:
    """`tablectl -h`'s table: each role, the group that holds it, the verbs it may run."""

    def block(head: str, names: list[str]) -> list[str]:
        return [
            f"  {head}",
            textwrap.fill(
                ", ".join(names),
                78,
                initial_indent=" " * 4,
                subsequent_indent=" " * 4,
                break_on_hyphens=False,
            ),
        ]

    lines = ["who may do what (the daemon checks your groups; [access] in the config):"]
    for role, allowed in verbs_by_role(parser).items():
        lines += block(f"{role.value} (group {_defaults(role)}):", [v.name for v in allowed])
    lines.append("  root and the daemon's own user hold every role")
    lines += block(
        "no role (files this user can read; the journal needs group tablectl):",
        [v.name for v in local_verbs(parser)],
    )
    return "\n".join(lines)


def role_table_markdown(parser: argparse.ArgumentParser) -> str:
    """The README's table (between its `roles` markers), from the same definitions."""
    rows = ["| role | may run | group (default) |", "| --- | --- | --- |"]
    for role, allowed in verbs_by_role(parser).items():
        names = ", ".join(f"`{v.name}`" for v in allowed)
        rows.append(f"| {role.value} | {names} | `{_defaults(role)}` |")
    local = ", ".join(f"`{v.name}`" for v in local_verbs(parser))
    rows.append(f"| (none) | {local} | files this user can read |")
    return "\n".join(rows) + "\n"

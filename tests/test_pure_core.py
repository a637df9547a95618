"""The pure core stays pure: what it may import is an allow-list (.importlinter, `allowed`,
tools/import_contracts.py), it never reads the clock, keeps no module-level state, and
`lint-imports` checks the installed view when typed from the repository's root."""

from __future__ import annotations

import ast
import configparser
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import grimp
import pydantic
import pytest
from pydantic import BaseModel

from tablectl.core.events import PowerUp
from tablectl.core.table import Rejected, TableState, step

from .conftest import REPO
from .test_table_core import tcp, uth

CONFIG = REPO / ".importlinter"


def _contracts() -> ModuleType:
    """tools/import_contracts.py, as lint-imports loads it from the repository's root."""
    spec = importlib.util.spec_from_file_location(
        "import_contracts", REPO / "tools" / "import_contracts.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def _pure_contract() -> dict[str, list[str]]:
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    section = parser["importlinter:contract:pure-core"]
    assert section["type"] == "allowed"
    return {key: section[key].split() for key in ("source_modules", "allowed_modules")} | {
        "allowed_external": section["allowed_external"].split()
    }


def _check(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """The pure-core contract of .importlinter, checked on `graph`: what it refuses."""
    contract_type = _contracts().AllowedContract
    options = _pure_contract()
    contract = contract_type(
        name="pure", session_options={"root_packages": ["tablectl"]}, contract_options=options
    )
    check = contract.check(graph, verbose=False)
    return [(r.importer, r.imported) for r in check.metadata["refused"]]


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    """Every module the contract names, and these imports (an external one is squashed)."""
    graph = grimp.ImportGraph()
    for name in {m for key in ("source_modules", "allowed_modules") for m in _pure_contract()[key]}:
        graph.add_module(name)
    for importer, imported in imports:
        for name in (importer, imported):
            if name not in graph.modules:
                graph.add_module(name, is_squashed=not name.startswith("tablectl"))
        graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="")
    return graph


def test_the_core_may_import_the_pure_standard_library_and_pydantic() -> None:
    graph = _graph(
        ("tablectl.core", "functools"),
        ("tablectl.core", "pydantic"),
        ("tablectl.core", "tablectl.util.frozen"),
        ("tablectl.link.book", "tablectl.link.terms"),
    )
    assert _check(graph) == []


@pytest.mark.parametrize(
    "module", ["random", "uuid", "time", "os", "asyncio", "sqlite3", "secrets"]
)
def test_a_module_off_the_list_breaks_the_contract(module: str) -> None:
    """Nobody had to forbid it: it is simply not on the list."""
    assert _check(_graph(("tablectl.core", module))) == [("tablectl.core", module)]


def test_an_impure_module_reached_through_tablectl_breaks_the_contract() -> None:
    """A helper of tablectl off the list (util/ids.py draws random bits), and one on the list
    that starts importing what the core may not: both are refused where they happen."""
    refused = _check(
        _graph(
            ("tablectl.rules", "tablectl.util.ids"),
            ("tablectl.core", "tablectl.util.frozen"),
            ("tablectl.util.frozen", "time"),
        )
    )
    assert refused == [("tablectl.rules", "tablectl.util.ids"), ("tablectl.util.frozen", "time")]


def test_lint_imports_checks_the_installed_view_from_the_repository_root() -> None:
    """A newcomer types `lint-imports` at the root: the root's tablectl/ holds drivers/ and
    simulators/ (links to the top-level folders), so it reads what is installed."""
    for name in ("drivers", "simulators"):
        link = REPO / "tablectl" / name
        assert link.is_symlink() and link.resolve() == REPO / name, name
    done = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Contracts: (\d+) kept, 0 broken", done.stdout), done.stdout
    assert "pure core" in done.stdout and "KEPT" in done.stdout


def _pure_files() -> list[Path]:
    files: list[Path] = []
    for module in _pure_contract()["allowed_modules"]:
        path = REPO / Path(*module.split("."))
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path.with_suffix(".py")]
    return files


CLOCK_READS = {"now", "today", "utcnow", "time", "time_ns", "monotonic", "perf_counter"}


def test_the_pure_modules_never_read_the_clock() -> None:
    """`datetime` is on the list for its arithmetic; time comes in with the inputs."""
    found = []
    for path in _pure_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in CLOCK_READS
            ):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.func.attr}()")
    assert found == []


def test_the_pure_modules_keep_no_module_level_state() -> None:
    """No `global` rebinding: a step's result depends on its inputs alone (a memo of a pure
    function, functools' cache on frozen keys, is not state)."""
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in _pure_files()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Global | ast.Nonlocal)
    ]
    assert found == []


def test_pydantic_is_the_major_version_util_frozen_was_written_for() -> None:
    """util/frozen.py builds instances as pydantic 2 does, writing the four attributes of a
    BaseModel instance; pyproject.toml pins pydantic below 3 for it."""
    major = int(pydantic.VERSION.split(".")[0])
    slots = BaseModel.__slots__
    expected = ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__")
    assert major == 2 and slots == expected, (
        f"pydantic {pydantic.VERSION} keeps {slots} on a model instance, not {expected}: "
        "util/frozen.py (`_instance`) writes those attributes itself and would build broken "
        "models. Re-check it against this pydantic's BaseModel (and tests/test_typed_updates.py) "
        "before moving the pin in pyproject.toml."
    )

    class Probe(BaseModel):  # what util/frozen.py's `_Shape` reads of a model class
        x: int = 1

    for name in ("__pydantic_decorators__", "__private_attributes__", "model_fields"):
        assert hasattr(Probe, name), f"pydantic {pydantic.VERSION}: no {name} on a model class"


def test_the_game_memo_lives_on_the_rules_and_follows_their_game() -> None:
    """The game is built once per rules object (no module keeps it), stays out of the rules'
    JSON, equality and hash, and a copy given another game steps with that game."""
    rules = tcp()
    assert rules.table_game is rules.table_game  # built once
    again = tcp()
    assert rules == again and hash(rules) == hash(again)
    assert rules.model_dump_json() == again.model_dump_json()  # with and without its memo
    other = rules.model_copy(update={"game": uth("2019").game})
    state, _ = step(other, TableState.initial(other), PowerUp(rules=other))
    assert state.game == "ultimate-texas-holdem" == other.table_game.name
    with pytest.raises(Rejected, match="ultimate-texas-holdem table, not three-card-poker"):
        step(rules, state, PowerUp(rules=rules))

"""The suite's own rules, checked on its source (a test that cannot fail is a defect):

- every function written inside a test is used: an inner `async def t(...)` never handed to
  the runner is a test whose body never runs;
- every test can fail: it asserts, raises, expects an exception (pytest.raises, fail, warns),
  or calls a helper of the suite that does;
- no test sleeps on the wall clock and then asserts, without waiting on anything, that
  nothing changed: it waits for an explicit event, or runs on the virtual clock
  (tablectl.util.clock.run_virtual), where a sleep is exact.

Each rule is shown to fire on a small example first, so the check itself can fail.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
EXPECTS = {"raises", "fail", "warns", "deprecated_call"}  # pytest's, as pytest.X
VIRTUAL_CLOCK = "run_virtual"


def _tests(tree: ast.Module) -> Iterator[FunctionNode]:
    """Module-level test functions and the test methods of Test classes, as pytest collects."""
    for node in tree.body:
        if isinstance(node, FunctionNode) and node.name.startswith("test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (
                f for f in node.body if isinstance(f, FunctionNode) and f.name.startswith("test")
            )


def _called(node: ast.AST) -> set[str]:
    """The names called within node: f(...) and x.f(...) both give f."""
    names = set()
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            if isinstance(call.func, ast.Name):
                names.add(call.func.id)
            elif isinstance(call.func, ast.Attribute):
                names.add(call.func.attr)
    return names


def _checks_directly(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Assert | ast.Raise):
            return True
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "pytest"
            and n.func.attr in EXPECTS
        ):
            return True
    return False


def _closure(functions: dict[str, list[FunctionNode]], seed: set[str]) -> set[str]:
    """The functions that reach one of `seed` by calls, seed included (by name)."""
    found = set(seed)
    while True:
        more = {
            name
            for name, defs in functions.items()
            if name not in found and any(_called(d) & found for d in defs)
        }
        if not more:
            return found
        found |= more


class Suite:
    """What the rules need to know about a set of test modules' source."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.trees = {name: ast.parse(text, name) for name, text in sources.items()}
        functions: dict[str, list[FunctionNode]] = {}
        for tree in self.trees.values():
            for node in ast.walk(tree):
                if isinstance(node, FunctionNode):
                    functions.setdefault(node.name, []).append(node)
        checking = {name for name, defs in functions.items() if any(map(_checks_directly, defs))}
        # A helper that asserts, or calls one that does, can fail the test that calls it.
        self.checking = _closure(functions, checking)
        self.virtual = _closure(functions, {VIRTUAL_CLOCK})

    def each_test(self) -> Iterator[tuple[str, FunctionNode]]:
        for name, tree in self.trees.items():
            for test in _tests(tree):
                yield f"{name}::{test.name}", test

    def unused_inner_functions(self) -> list[str]:
        found = []
        for where, test in self.each_test():
            methods = {
                id(f)
                for cls in ast.walk(test)
                if isinstance(cls, ast.ClassDef)
                for f in cls.body
                if isinstance(f, FunctionNode)
            }
            loaded = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(test) if isinstance(n, ast.Attribute)
            }
            found += [
                f"{where}: {inner.name} (line {inner.lineno}) is never used"
                for inner in ast.walk(test)
                if isinstance(inner, FunctionNode)
                and inner is not test
                and id(inner) not in methods
                and inner.name not in loaded
            ]
        return found

    def tests_that_cannot_fail(self) -> list[str]:
        return [
            f"{where}: asserts nothing and calls nothing that does"
            for where, test in self.each_test()
            if not _checks_directly(test) and not (_called(test) & self.checking)
        ]

    def sleeps_then_asserts(self) -> list[str]:
        found = []
        for where, test in self.each_test():
            if _called(test) & self.virtual:
                continue  # on the virtual clock a sleep is exact
            for block in _blocks(test):
                for i, stmt in enumerate(block):
                    if _wall_clock_sleep(stmt):
                        after = next((s for s in block[i + 1 :] if _waits_or_asserts(s)), None)
                        if isinstance(after, ast.Assert) and not _awaits(after):
                            found.append(
                                f"{where}: line {stmt.lineno} sleeps, then line {after.lineno} "
                                "asserts without waiting for anything"
                            )
        return found


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    for n in ast.walk(node):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(n, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _awaits(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Await) for n in ast.walk(node))


def _waits_or_asserts(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Assert) or _awaits(stmt)


def _wall_clock_sleep(stmt: ast.stmt) -> bool:
    """`await asyncio.sleep(x)` or `time.sleep(x)` for an x other than 0 (a turn of the loop)."""
    if not isinstance(stmt, ast.Expr):
        return False
    call = stmt.value.value if isinstance(stmt.value, ast.Await) else stmt.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return False
    if call.func.attr != "sleep" or not isinstance(call.func.value, ast.Name):
        return False
    if call.func.value.id not in ("asyncio", "time"):
        return False
    return not (call.args and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0)


@functools.cache
def the_suite() -> Suite:
    return Suite({path.name: path.read_text() for path in sorted(TESTS.glob("*.py"))})


# --- each rule fires on what it forbids ------------------------------------------------

NEVER_RUNS = """
def test_body_never_runs():
    async def t(b):
        assert b.ok
    print("no runner")
"""
ASSERTS_NOTHING = """
def helper(x):
    return x + 1

def test_cannot_fail():
    helper(1)
"""
SLEEPS_THEN_ASSERTS = """
async def test_nothing_changed(table):
    await table.settle()
    await asyncio.sleep(0.3)
    assert table.phase is CLOSED
"""
FINE = """
def check(x):
    assert x

class Chatter:
    def receive(self, data): ...

async def test_fine(table):
    class Device:
        def attach(self): ...
    async def t(b):
        await asyncio.sleep(1)  # virtual
        assert b.ok
    run_virtual(t(table))
    check(table)

async def test_waits(table):
    await asyncio.sleep(0.05)
    table.press()
    assert await table.event() == 1  # an assert that waits for an event
    await asyncio.sleep(0)  # a turn of the loop
    assert table.ok
"""


@pytest.mark.parametrize(
    ("source", "rule", "expected"),
    [
        (NEVER_RUNS, Suite.unused_inner_functions, ["x.py::test_body_never_runs: t (line 3)"]),
        (ASSERTS_NOTHING, Suite.tests_that_cannot_fail, ["x.py::test_cannot_fail: asserts"]),
        (SLEEPS_THEN_ASSERTS, Suite.sleeps_then_asserts, ["x.py::test_nothing_changed: line 4"]),
        (FINE, Suite.unused_inner_functions, []),
        (FINE, Suite.tests_that_cannot_fail, []),
        (FINE, Suite.sleeps_then_asserts, []),
    ],
)
def test_each_rule_finds_what_it_forbids(source: str, rule: object, expected: list[str]) -> None:
    assert callable(rule)
    found = rule(Suite({"x.py": source}))
    assert len(found) == len(expected), found
    for message, start in zip(found, expected, strict=True):
        assert message.startswith(start), message


# --- the suite keeps them ----------------------------------------------------------------


def test_every_function_written_in_a_test_is_used() -> None:
    assert the_suite().unused_inner_functions() == []


def test_every_test_can_fail() -> None:
    assert the_suite().tests_that_cannot_fail() == []


def test_no_test_sleeps_on_the_wall_clock_then_asserts_that_nothing_changed() -> None:
    assert the_suite().sleeps_then_asserts() == []

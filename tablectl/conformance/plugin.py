"""The conformance kit as a pytest plugin, for a driver package's own tests.

    # conftest.py of the driver package
    pytest_plugins = ["tablectl.conformance.plugin"]

    # test_conformance.py
    from tablectl.conformance.plugin import test_driver_conformance  # noqa: F401

    pytest --tablectl-driver=asciishuffler

Each scenario is one test (`test_driver_conformance[count-51]`, `[shoe-jam-by-event]`, ...);
a scenario the driver declares unsupported (`Driver.unsupported`) is skipped with its reason,
one of a role the driver does not fill (a shuffler-only driver's shoe scenarios) is skipped
as not applying, and a failure says what the table did instead.
"""

from __future__ import annotations

import asyncio

import pytest

from tablectl.conformance.kit import SCENARIOS, applies, driver_named, run_scenario


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tablectl-driver",
        default=None,
        help="the installed tablectl driver the conformance scenarios run against",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "conformance_scenario" in metafunc.fixturenames:
        metafunc.parametrize("conformance_scenario", [s.name for s in SCENARIOS])


@pytest.fixture
def tablectl_driver(request: pytest.FixtureRequest) -> str:
    """The driver under test: --tablectl-driver, or override this fixture."""
    name = request.config.getoption("--tablectl-driver")
    if not isinstance(name, str):
        pytest.fail("name the driver: pytest --tablectl-driver=NAME (or override the fixture)")
    return name


def check_scenario(driver: str, name: str) -> None:
    """Run one scenario; skip it if the driver declares it unsupported, fail with why."""
    scenario = next(s for s in SCENARIOS if s.name == name)
    if not applies(driver_named(driver), scenario):
        pytest.skip(f"{driver} drives no {scenario.role}: {name} does not apply")
    result = asyncio.run(run_scenario(driver, scenario))
    if result.outcome == "skip":
        pytest.skip(f"{driver} does not support {name}: {result.detail}")
    if result.outcome == "fail":
        pytest.fail(f"{name}: expected {result.expected}; {result.detail}", pytrace=False)


def test_driver_conformance(tablectl_driver: str, conformance_scenario: str) -> None:
    """One hostile scenario against the driver and its simulator (tablectl.conformance.kit)."""
    check_scenario(tablectl_driver, conformance_scenario)

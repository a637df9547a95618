"""The driver conformance kit (tablectl/conformance/kit.py) on the reference shuffler driver:
every scenario passes; a driver's declared gaps are skipped by name; a driver that misses a
jam shown only in its device's status fails the scenario that says so; `tablectl test driver`
prints the report and exits by it. (The example package's run: tests/test_example_driver.py.)"""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from typing import Any

import pytest
from tablectl.drivers import reference_driver
from tablectl.drivers.api import DriverContext
from tablectl.drivers.reference.messages import Status
from tablectl.drivers.registry import connector_for
from tablectl.drivers.shuffler.reference import ReferenceShuffler

from tablectl.conformance import kit

from .test_service import TABLECTL


async def test_the_reference_shuffler_passes_every_scenario() -> None:
    results = await kit.run_all("reference")
    assert [r.scenario for r in results] == [s.name for s in kit.SCENARIOS]
    assert {r.scenario: r.detail for r in results if r.outcome != "pass"} == {}
    report = kit.report("reference", results)
    assert f"{len(results)} of {len(results)} passed" in report
    assert report.count("| pass |") == len(results)


async def test_a_declared_gap_is_skipped_by_name_and_only_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gaps = {"seq-wrap": "its firmware resets the link at the wrap"}
    monkeypatch.setattr(
        reference_driver, "DRIVER", replace(reference_driver.DRIVER, unsupported=gaps)
    )
    results = await kit.run_all("reference", only=["seq-wrap", "count-51"])
    assert [(r.scenario, r.outcome) for r in results] == [
        ("count-51", "pass"),
        ("seq-wrap", "skip"),
    ]
    assert "| seq-wrap |" in kit.report("reference", results)
    assert "skipped: its firmware resets the link at the wrap" in kit.report("reference", results)


class BlindToStatus(ReferenceShuffler):
    """A driver that hears faults only as events: a jam shown only in STATUS goes unseen."""

    def _fault_in_status(self, status: Status, *, connected: bool) -> None:
        return None


def blind(settings: Any, context: DriverContext) -> BlindToStatus:
    connector = connector_for(settings.port, baudrate=settings.baudrate)
    return BlindToStatus(connector, context.emit, settings.link(), context.cursor)


async def test_a_driver_blind_to_a_status_only_jam_fails_that_scenario(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kit, "GUARD_S", 3.0)  # the jam is never seen: fail sooner
    monkeypatch.setattr(
        reference_driver, "DRIVER", replace(reference_driver.DRIVER, shuffler=blind)
    )
    results = await kit.run_all("reference", only=["jam-by-event", "jam-by-status-only"])
    outcomes = {r.scenario: r.outcome for r in results}
    assert outcomes == {"jam-by-event": "pass", "jam-by-status-only": "fail"}
    failed = next(r for r in results if r.outcome == "fail")
    assert "never shuffler-fault shown" in failed.detail
    assert "**FAIL**: never shuffler-fault shown" in kit.report("reference", results)


def test_tablectl_test_driver_prints_the_report_and_exits_by_it(tmp_path: Any) -> None:
    out = tmp_path / "conformance.md"
    one = ["--scenario", "count-53", "--json", "--markdown", str(out)]
    ran = subprocess.run(
        [str(TABLECTL), "test", "driver", "reference", *one],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    reply = json.loads(ran.stdout)
    assert reply["ok"] is True and [r["outcome"] for r in reply["results"]] == ["pass"]
    assert "| count-53 | a count of 53: no round opens" in out.read_text()
    unknown = subprocess.run(
        [str(TABLECTL), "test", "driver", "acme"], capture_output=True, text=True, check=False
    )
    assert unknown.returncode == 2
    assert "unknown driver 'acme'; one of reference" in unknown.stderr

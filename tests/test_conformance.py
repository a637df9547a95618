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
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.shuffler.reference import ReferenceShuffler

from tablectl.conformance import kit

from .test_service import TABLECTL


async def test_the_reference_driver_passes_every_scenario_of_both_roles() -> None:
    results = await kit.run_all("reference")
    assert [r.scenario for r in results] == [s.name for s in kit.SCENARIOS]
    assert {r.scenario: r.detail for r in results if r.outcome != "pass"} == {}
    assert {r.role for r in results} == {"shuffler", "shoe"}
    report = kit.report("reference", results)
    assert "`reference` (shuffler, shoe)" in report
    assert f"{len(results)} of {len(results)} passed" in report
    assert report.count("| pass |") == len(results)
    assert "| shoe | shoe-jam-by-status-only | the shoe jams mid-deal" in report


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


class ShoeBlindToStatus(ReferenceShoe):
    """A shoe driver that hears faults only as events: a jam shown only in STATUS is unseen."""

    def _fault_in_status(self, status: Status, *, connected: bool) -> None:
        return None


def blind_shoe(settings: Any, context: DriverContext) -> ShoeBlindToStatus:
    connector = connector_for(settings.port, baudrate=settings.baudrate)
    return ShoeBlindToStatus(connector, context.emit, settings.link(), context.cursor)


async def test_a_shoe_driver_blind_to_a_status_only_jam_fails_that_scenario(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shoe's scenarios can fail: the jam shown only in STATUS is never seen, so the
    round is never voided and no fault is shown."""
    monkeypatch.setattr(kit, "GUARD_S", 3.0)  # the jam is never seen: fail sooner
    monkeypatch.setattr(
        reference_driver, "DRIVER", replace(reference_driver.DRIVER, shoe=blind_shoe)
    )
    only = ["shoe-jam-by-event", "shoe-jam-by-status-only"]
    results = await kit.run_all("reference", only=only)
    outcomes = {r.scenario: r.outcome for r in results}
    assert outcomes == {"shoe-jam-by-event": "pass", "shoe-jam-by-status-only": "fail"}
    failed = next(r for r in results if r.outcome == "fail")
    assert "never shoe-fault shown" in failed.detail


async def test_a_declared_shoe_gap_is_skipped_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    gaps = {"shoe-unread-card": "its reader reports no unread card: it stops instead"}
    monkeypatch.setattr(
        reference_driver, "DRIVER", replace(reference_driver.DRIVER, unsupported=gaps)
    )
    results = await kit.run_all("reference", only=["shoe-unread-card", "shoe-garbage-frames"])
    assert [(r.scenario, r.role, r.outcome) for r in results] == [
        ("shoe-unread-card", "shoe", "skip"),
        ("shoe-garbage-frames", "shoe", "pass"),
    ]


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


def test_the_event_id_maximum_is_the_drivers_own() -> None:
    """A device stopped at an event refused with the largest id its driver declares
    (Driver.event_id_max) is offered a power cycle; below it, a link reset. The table holds
    no protocol's maximum of its own (was: the reference protocol's, in service/faults.py)."""
    from tablectl.drivers.api import DEFAULT_EVENT_ID_MAX

    from tablectl.core.events import DeviceEventsRefused
    from tablectl.core.table import step
    from tablectl.service.faults import table_faults
    from tablectl.status import BrokerLink

    from .test_table_core import RULES, opened, run

    state, _ = run(opened())
    refused = DeviceEventsRefused(
        device="shuffler", boot_id=7, event_id=999, expected_event_id=5, kind=1
    )
    state, _ = step(RULES, state, refused)
    broker = BrokerLink(connected=True, broker="127.0.0.1:1883")

    def shown(maxima: dict[str, int] | None) -> Any:
        faults = table_faults(state, shoe=False, devices={}, broker=broker, event_id_max=maxima)
        return next(f for f in faults if f.what == "events-refused")

    wraps_at_999 = shown({"shuffler": 999})  # a driver whose ids stop at 999
    assert wraps_at_999.command is None and "cannot go on from 999" in wraps_at_999.cause
    assert wraps_at_999.remedy.startswith("power the shuffler off and on")
    default = shown(None)  # the API's default maximum: 999 is far below it
    assert default.command == "tablectl devices reset-link shuffler --by ID"
    assert DEFAULT_EVENT_ID_MAX == reference_driver.DRIVER.event_id_max == 0xFFFF_FFFF

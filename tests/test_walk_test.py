"""`tablectl test sensors` and `tablectl test lockout` against a running table."""

from __future__ import annotations

import asyncio
import json

import pytest
from tablectl.drivers.gpio.table_io import SensorInput

from tablectl import cli
from tablectl.core.events import ChipSensed
from tablectl.core.table import Phase

from .conftest import SimulatedTable


async def locked_out(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    table.inputs.press_lockout()
    await table.daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 10)


async def test_the_sensor_walk_test_reports_each_seat_and_the_resolution(
    table: SimulatedTable, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = str(table.config.storage.socket_path)
    args = ["test", "sensors", "--socket", sock, "--seats", "1,2,4", "--timeout", "2"]
    await table.wait_phase(Phase.BETTING)
    refused = await asyncio.to_thread(cli.main, args)
    assert refused == 1
    assert "taking bets: press the lock-out" in capsys.readouterr().err

    await locked_out(table)
    walk = asyncio.create_task(asyncio.to_thread(cli.main, [*args, "--json", "--by", "T1"]))
    await table.daemon.wait_until(lambda s: s.sensor_test == "sensors", 10)
    gpio = table.daemon.gpio
    assert gpio is not None and gpio.test_listener is not None
    to_test, seat_3_seen = gpio.test_listener, asyncio.Event()

    def listener(event: SensorInput) -> None:
        to_test(event)
        if isinstance(event, ChipSensed) and event.seat == 3:
            seat_3_seen.set()

    gpio.test_listener = listener
    table.inputs.place_chip(3)  # a chip on seat 3 before seat 1 is asked for (wiring?)
    await asyncio.wait_for(seat_3_seen.wait(), 10)
    lit = asyncio.Event()
    table.inputs.on_lamp = lambda seat, on: lit.set() if on else None
    lamps = []
    for seat in (1, 2):
        lit.clear()
        table.inputs.place_chip(seat)
        await asyncio.wait_for(lit.wait(), 10)  # the walk test lit the seat's lamp
        lamps.append(table.inputs.light_is_on(seat))
        table.inputs.remove_chip(seat)
    assert await walk == 1  # one seat failed
    report = json.loads(capsys.readouterr().out)
    assert lamps == [True, True] and not table.inputs.light_is_on(3)
    assert [(r["seat"], r["passed"]) for r in report["results"]] == [
        (1, True),
        (2, True),
        (4, False),
    ]
    assert report["results"][0]["also_seen_on"] == [3]
    assert report["results"][2]["reason"] == "no chip seen on seat 4 in 2 s"
    assert report["resolution_ns"] == 1 and report["backend"] == "mock"
    # No wager was taken; the result is journaled and the table is released.
    assert table.state.wagers == {} and table.state.sensor_test is None
    await table.wait_backend_caught_up()
    (ended,) = [e["data"] for e in table.backend.events.values() if e["type"] == "gpio.test_ended"]
    assert ended["passed"] == [1, 2] and ended["failed"] == [4]
    assert ended["by"].startswith("T1 (")


async def test_the_lockout_test_reports_the_press(
    table: SimulatedTable, capsys: pytest.CaptureFixture[str]
) -> None:
    await locked_out(table)
    sock = str(table.config.storage.socket_path)
    walk = asyncio.create_task(
        asyncio.to_thread(cli.main, ["test", "lockout", "--socket", sock, "--timeout", "10"])
    )
    await table.daemon.wait_until(lambda s: s.sensor_test == "lockout", 10)
    ignored = table.state.counters.lockout_presses_ignored
    await asyncio.sleep(table.config.gpio.lockout_debounce_ms / 1000)  # a new press, no bounce
    table.inputs.press_lockout()
    assert await walk == 0
    out = capsys.readouterr().out
    assert "lock-out: passed; edge resolution 1 ns (kernel timestamps)" in out
    # The test took the press: the core never saw it (a press on a locked round is counted).
    await table.daemon.wait_until(lambda s: s.sensor_test is None, 10)
    assert table.state.phase is Phase.LOCKED
    assert table.state.counters.lockout_presses_ignored == ignored

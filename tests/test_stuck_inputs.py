"""The lock-out rule, stuck inputs and chips resting before a round opens, on a whole table:
the daemon, the simulated table's GPIO, the shuffler on a pty, Mosquitto, SQLite, the CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tablectl.simulators.broker import PrivateBroker

from tablectl import cli
from tablectl.config import load_config
from tablectl.core.table import Phase

from .conftest import EXAMPLE_CONFIG, SimulatedTable, simulated_table

HOLD_MAX_MS = 500


@pytest.fixture
async def table(broker: PrivateBroker, tmp_path: Path) -> AsyncIterator[SimulatedTable]:
    gpio = load_config(EXAMPLE_CONFIG).gpio.model_copy(
        update={"backend": "mock", "chip_present_ms": 40, "lockout_hold_max_ms": HOLD_MAX_MS}
    )
    async with simulated_table(broker, tmp_path / "data", gpio=gpio) as t:
        yield t


def events_of(table: SimulatedTable, type_: str) -> list[dict[str, object]]:
    return [e["data"] for e in table.backend.events.values() if e["type"] == type_]


async def cli_call(table: SimulatedTable, *args: str) -> int:
    sock = str(table.config.storage.socket_path)
    return await asyncio.to_thread(cli.main, [*args, "--socket", sock])


async def test_a_touch_before_the_edge_and_a_chip_after_it_is_no_wager(
    table: SimulatedTable,
) -> None:
    """The hole of issue 14: the touch opened a debounce episode the late chip joined."""
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1)
    decided = asyncio.create_task(table.until_decided(3))
    await asyncio.sleep(0)
    table.inputs.place_chip(3)
    table.inputs.remove_chip(3)  # a touch, well within the 40 ms a chip takes to rest
    table.inputs.press_lockout()
    table.inputs.place_chip(3)  # a chip after "no more bets"
    await decided
    await table.daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 10)
    assert table.state.wagers == {1: 100}
    await table.wait_backend_caught_up()
    assert events_of(table, "wager.rejected") == [
        {"round_id": 1, "seat": 3, "reason": "after-lockout", "rule": "649a.2(c)(2)"}
    ]


async def test_a_chip_resting_before_the_round_opens_is_one_event(table: SimulatedTable) -> None:
    """Decided once: accepted when the round opens, or refused when lifted before."""
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1)
    await table.lock()
    assert (await table.dealer(cmd="settle", hands={"1": "AsKsQs"}, by="D1"))["ok"]
    assert table.state.phase is Phase.CLOSED and table.state.hits_pending  # the table holds
    await table.place_wagers(4, 6)  # placed while the table is closed
    lifted = asyncio.create_task(table.daemon.wait_until(lambda s: s.waiting == (4,), 10))
    table.inputs.remove_chip(6)
    await lifted
    await table.validate_hits()
    await table.daemon.wait_until(lambda s: s.round_id == 2 and s.wagers == {4: 100}, 10)
    await table.wait_backend_caught_up()
    seat_4 = [
        (e["type"], e["data"]["round_id"])
        for e in table.backend.events.values()
        if e["type"].startswith("wager.") and e["data"].get("seat") == 4
    ]
    assert seat_4 == [("wager.accepted", 2)]
    assert [d for d in events_of(table, "wager.rejected") if d["seat"] == 6] == [
        {"round_id": 1, "seat": 6, "reason": "table-closed", "rule": "649a.2(c)(2)"}
    ]


async def test_a_held_lockout_keeps_the_table_closed_and_is_a_fault_cleared_with_who(
    table: SimulatedTable, capsys: pytest.CaptureFixture[str]
) -> None:
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(2)
    table.inputs.hold_lockout()  # "no more bets", and the button stays down
    await table.daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 10)
    table.inputs.remove_chip(2)
    assert (await table.dealer(cmd="settle", hands={"2": "2c7d9h"}))["ok"]
    await table.daemon.wait_until(lambda s: bool(s.stuck_inputs), 10)
    assert table.state.phase is Phase.CLOSED and table.state.deck_ready  # round 2 waits
    capsys.readouterr()
    assert await cli_call(table, "status") == 0
    text = capsys.readouterr().out
    assert "STUCK INPUT [gpio]" in text
    assert "lock-out button still down when the next round would open (since round 1)" in text
    assert "free the button: `tablectl dealer clear-fault --lockout --by ID`" in text
    assert await cli_call(table, "devices", "--json") == 0
    gpio = json.loads(capsys.readouterr().out)["devices"]["gpio"]
    (fault,) = gpio["faults"]
    assert (fault["what"], fault["stops"]) == ("stuck-input", "rounds")
    assert fault["command"] == "tablectl dealer clear-fault --lockout --by ID"
    assert fault["seq"] is not None  # since the row that journaled it

    assert await cli_call(table, "dealer", "clear-fault", "--lockout", "--by", "T042") == 1
    assert "still reads pressed" in capsys.readouterr().err
    table.inputs.release_lockout()
    await table.daemon.wait_until(lambda s: not s.lockout_held, 10)
    assert table.state.phase is Phase.CLOSED  # released, not cleared
    assert await cli_call(table, "dealer", "clear-fault", "--lockout", "--by", "T042") == 0
    await table.wait_phase(Phase.BETTING)
    await table.wait_backend_caught_up()
    (stuck,) = events_of(table, "gpio.input_stuck")
    assert (stuck["input"], stuck["cause"], stuck["round_id"]) == (
        "lock-out-button",
        "not-released",
        1,
    )
    (cleared,) = events_of(table, "gpio.input_stuck_cleared")
    assert cleared["cause"] == "not-released" and str(cleared["by"]).startswith("T042 (")


async def test_a_sensor_stuck_high_is_found_its_seat_refused_and_cleared_with_who(
    table: SimulatedTable, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sensor that reads a chip round after round would place a wager and a meter
    contribution every round: its second round's betting finds it stuck."""
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(2, 5)
    table.inputs.press_lockout()
    await table.daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 10)
    table.inputs.remove_chip(2)  # collected; seat 5's sensor keeps reading a chip
    assert (await table.dealer(cmd="settle", hands={"2": "2c7d9h", "5": "3c8d4h"}))["ok"]
    await table.daemon.wait_until(lambda s: s.round_id == 2 and bool(s.stuck_inputs), 10)
    assert table.state.wagers == {} and not table.inputs.light_is_on(5)
    capsys.readouterr()
    assert await cli_call(table, "status", "--json") == 0
    # Only the stuck sensor's fault is this test's (a loaded machine may add a late edge's).
    faults = json.loads(capsys.readouterr().out)["faults"]
    (stuck,) = [f for f in faults if f["device"] == "gpio" and "seat 5 sensor" in f["cause"]]
    assert stuck["cause"] == (
        "seat 5 sensor occupied through more rounds than gpio.sensor_stuck_rounds (since round 2)"
    )
    assert stuck["stops"] == "seat" and stuck["seq"] is not None
    assert stuck["command"] == "tablectl dealer clear-fault --seat 5 --by ID"

    await table.place_wagers(1)  # the other seats play on
    assert table.state.wagers == {1: 100}
    assert await cli_call(table, "dealer", "clear-fault", "--seat", "5", "--by", "T7") == 1
    assert "seat 5's sensor still reads occupied" in capsys.readouterr().err
    removed = asyncio.create_task(table.daemon.wait_until(lambda s: 5 not in s.occupied, 10))
    table.inputs.remove_chip(5)  # the technician repairs the sensor
    await removed
    assert await cli_call(table, "dealer", "clear-fault", "--seat", "5", "--by", "T7") == 0
    await table.place_wagers(5)
    assert table.state.wagers == {1: 100, 5: 100}
    await table.wait_backend_caught_up()
    (cleared,) = events_of(table, "gpio.input_stuck_cleared")
    assert cleared["seat"] == 5 and str(cleared["by"]).startswith("T7 (")

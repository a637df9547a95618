"""No silent stall: a shuffle or deal a device took and never completed is a journaled fault
with its cause and the command that clears it (core/stalls.py, service/waits.py).

649a.13(e): "If an automated card shuffling device is being used and the device jams, stops
shuffling during a shuffle or fails to complete a shuffle cycle, the cards shall be
reshuffled." 649a.13(f): a shoe that "stops dealing cards or fails to deal all cards during a
round of play": the round is void, every wager returned. 649a.5(b): a shuffler that reveals
an incorrect number of cards: the deck is removed from the table.

The reproductions drive the simulated shuffler over a real pseudo-terminal; the waits are
timed on an injected clock the test moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from tablectl.drivers.reference.messages import MAX_EVENT_ID
from tablectl.drivers.reference.shuffler_codec import EventKind, ShufflerState
from tablectl.simulators.broker import PrivateBroker

from tablectl.core import effects as rec
from tablectl.core.events import (
    CommandStalled,
    DealRequested,
    DeviceEventsRefused,
    LockoutPressed,
    ReshuffleRequested,
    ShuffleCompleted,
    ShuffleStarted,
)
from tablectl.core.table import Phase, Rejected, step
from tablectl.service.faults import table_faults
from tablectl.service.replay import replay
from tablectl.service.waits import MISMATCH_GRACE_S, WaitWatch
from tablectl.status import BrokerLink, FaultView, Stops

from .conftest import SimulatedTable, simulated_table
from .test_table_core import RULES, chip, opened, records, run

BROKER = BrokerLink(connected=True, broker="127.0.0.1:1883")


class Clock:
    """The waits' monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def faults(table: SimulatedTable) -> dict[str, FaultView]:
    return {f.what: f for f in table.daemon.faults()}


async def _settled_round_one(table: SimulatedTable, clock: Clock) -> None:
    """Round 1 open, the other deck shuffled and its events all taken."""
    table.daemon.supervisor.waits.clock = clock
    await table.wait_phase(Phase.BETTING)
    await table.until_shuffler_has_nothing_left()


async def _until_the_shuffler_says(table: SimulatedTable, state: str, count: int) -> None:
    """Until the shuffler's STATUS, as the table last polled it, says this."""

    def says() -> bool:
        seen = table.daemon.supervisor.health()["shuffler"]
        return bool(seen["state"] == state and seen["card_count"] == count)

    await _until(says)


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 -- the simulator's state is a plain attribute
            await asyncio.sleep(0.01)


async def _stall_found(table: SimulatedTable, clock: Clock) -> None:
    """The watch sees the shuffler say it is ready; after the grace, a stall is journaled."""
    table.daemon.clocks.check_waits()  # the disagreement is seen now ...
    clock.now += MISMATCH_GRACE_S
    table.daemon.clocks.check_waits()  # ... and has lasted the grace
    await table.daemon.wait_until(lambda s: s.shuffler_fault == "stalled", 10)


async def test_a_shuffler_restarted_keeping_its_boot_id_is_a_stall_not_silence(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    """It restarts its event ids at 1 under the boot id the table acknowledged events of, and
    drops its own new events on that old acknowledgement: it shuffles, counts 51 and says
    READY, and nothing of it reaches the table. Once the shuffler's READY has outlasted the
    grace, the stall is journaled: a shuffler fault (649a.13(e)) and, from the count its
    STATUS shows, a miscount (649a.5(b)); status says why and what clears each."""
    clock = Clock()
    async with simulated_table(broker, tmp_path / "data") as table:
        await _settled_round_one(table, clock)
        table.sim.reboot(keep_boot_id=True)
        table.sim.remove_card()
        assert (await table.dealer(cmd="void", reason="wrong-card-count", by="d1"))["ok"]
        await table.daemon.wait_until(lambda s: s.round_id == 2, 10)
        await _until_the_shuffler_says(table, "ready", 51)
        assert table.sim.state is ShufflerState.READY
        shown = await table.status()
        (wait,) = shown.waits
        assert (wait.device, wait.awaited, wait.device_reports) == ("shuffler", "shuffle", "ready")
        assert wait.card_count == 51 and wait.disagrees

        await _stall_found(table, clock)
        found = faults(table)
        stalled = found["shuffler-fault"]
        assert "says it is ready with 51 cards" in stalled.cause
        assert "never reached the table" in stalled.cause
        assert stalled.remedy.startswith("power the shuffler off and on")
        assert stalled.command == "tablectl dealer reshuffle --by ID"
        assert stalled.rule == "649a.13(e)" and stalled.since is not None
        miscount = found["deck-miscount"]
        assert "counted 51" in miscount.cause and miscount.stops is Stops.ROUNDS

        # What clears it: a real power cycle, a whole deck, and the two commands named.
        table.sim.reboot()
        table.sim.load_full_deck()
        assert (await table.dealer(cmd="void", reason="wrong-card-count", by="d1"))["ok"]
        assert (await table.dealer(cmd="new-deck", by="d1"))["ok"]
        assert (await table.dealer(cmd="reshuffle", by="d1"))["ok"]
        await table.daemon.wait_until(lambda s: s.round_id == 3, 10)
        assert table.state.phase is Phase.BETTING

        store = table.daemon.store
        assert store is not None
        (row,) = [r for r in store.rows_after(0, limit=1000) if r.type == "device.stalled"]
        assert row.data["reported"] == "ready" and row.data["card_count"] == 51
        assert row.data["awaited"] == "shuffle" and row.data["rule"] == "649a.13(e)"
        replayed = await table.daemon.in_journal_thread(lambda: replay(store))
        assert replayed.identical, replayed.difference


async def test_a_completion_sent_under_an_id_already_taken_is_a_stall(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    """The shuffler re-sends a completion of 52 under the id of the other deck's completion:
    the table takes it for a replay (or the shuffler drops it on the acknowledgement of that
    id), and the shuffle it asked for never completes. The stall says so; a reshuffle on a
    shuffler that numbers its events right plays on."""
    clock = Clock()
    async with simulated_table(broker, tmp_path / "data") as table:
        await _settled_round_one(table, clock)
        completions = [
            event.event_id
            for boot, event in table.sim.history
            if boot == table.sim.boot_id and event.kind == EventKind.SHUFFLE_COMPLETE
        ]
        table.sim.lies.reuse_id_next_event = completions[-1]
        table.sim.lies.reuse_kind = EventKind.SHUFFLE_COMPLETE
        assert (await table.dealer(cmd="void", reason="wrong-card-count", by="d1"))["ok"]
        await table.daemon.wait_until(lambda s: s.round_id == 2, 10)
        await _until(lambda: table.sim.shuffles == 3)
        await _until_the_shuffler_says(table, "ready", 52)
        await _until(lambda: not table.sim.events)

        await _stall_found(table, clock)
        stalled = faults(table)["shuffler-fault"]
        assert "says it is ready with 52 cards" in stalled.cause
        assert "deck-miscount" not in faults(table)  # 52: no miscount
        assert table.state.stalls["shuffler"].reported == "ready"

        assert (await table.dealer(cmd="void", reason="wrong-card-count", by="d1"))["ok"]
        assert (await table.dealer(cmd="reshuffle", by="d1"))["ok"]
        await table.daemon.wait_until(lambda s: s.round_id == 3, 10)
        assert table.state.stalls == {} and table.state.shuffler_fault is None


async def test_a_shuffle_that_never_ends_is_a_stall_after_the_configured_time(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    clock = Clock()
    async with simulated_table(broker, tmp_path / "data") as table:
        await _settled_round_one(table, clock)
        table.sim.shuffle_ms = 10**9  # it shuffles for ever
        assert (await table.dealer(cmd="void", reason="wrong-card-count", by="d1"))["ok"]
        await table.daemon.wait_until(lambda s: s.round_id == 2 and s.shuffle_started, 10)
        await _until_the_shuffler_says(table, "shuffling", 52)
        table.daemon.clocks.check_waits()
        clock.now += table.config.shuffler.stall_timeout_s - 1
        table.daemon.clocks.check_waits()
        assert table.state.shuffler_fault is None  # not yet
        clock.now += 1
        table.daemon.clocks.check_waits()
        await table.daemon.wait_until(lambda s: s.shuffler_fault == "stalled", 10)
        stalled = faults(table)["shuffler-fault"]
        assert "has been shuffling for 2 min without finishing" in stalled.cause
        assert stalled.command == "tablectl dealer reshuffle --by ID"


# --- the core and the watch, without devices ---------------------------------------------


def test_a_stall_decided_after_the_completion_came_is_moot() -> None:
    state, _ = run(opened())  # round 1 open; the other deck is asked for
    state, _ = run([ShuffleStarted()], state=state)
    late = CommandStalled(device="shuffler", awaited="shuffle", waited_ms=1, reported="ready")
    done, _ = run([ShuffleCompleted(card_count=52)], state=state)
    after, fx = step(RULES, done, late)
    assert after == done and fx == []  # nothing waited: nothing journaled
    stalled, fx = step(RULES, state, late)
    (record,) = records(fx, rec.CommandStalledRecord)
    assert record.rule == "649a.13(e)" and stalled.shuffler_fault == "stalled"


def test_a_stalled_deal_voids_the_round_and_is_cleared_with_the_shoe() -> None:
    rules = RULES.model_copy(update={"shoe": True})
    state, _ = run([*opened(rules), chip(3)], rules)
    locked = LockoutPressed(at_ns=2_000, resting_seats=(3,))
    state, _ = run([locked, DealRequested(by="d1")], rules, state)
    stall = CommandStalled(device="shoe", awaited="deal", waited_ms=90_000, reported="dealing")
    state, fx = step(rules, state, stall)
    (record,) = records(fx, rec.CommandStalledRecord)
    assert record.round_id == 1 and record.rule == "649a.13(f)"
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.wagers_returned == [3] and state.shoe_fault == "stalled"
    view = {f.what: f for f in table_faults(state, shoe=True, devices={}, broker=BROKER)}
    assert "no card of the deal it took reached the table for 90 s" in view["shoe-fault"].cause
    assert view["shoe-fault"].command == "tablectl dealer clear-shoe --by ID"


def test_a_shoe_that_says_idle_while_its_deal_is_awaited_names_its_power_cycle_first() -> None:
    """A shoe restarted keeping its boot id drops its new events on the table's old
    acknowledgement: clearing the shoe alone leaves the next deal's cards lost the same way
    (until its event ids pass the old one), so the remedy names the power cycle first, as
    the shuffler's does."""
    rules = RULES.model_copy(update={"shoe": True})
    state, _ = run([*opened(rules), chip(3)], rules)
    locked = LockoutPressed(at_ns=2_000, resting_seats=(3,))
    state, _ = run([locked, DealRequested(by="d1")], rules, state)
    stall = CommandStalled(device="shoe", awaited="deal", waited_ms=3_000, reported="idle")
    state, _ = step(rules, state, stall)
    view = {f.what: f for f in table_faults(state, shoe=True, devices={}, broker=BROKER)}
    fault = view["shoe-fault"]
    assert "says it is idle, but its completion never reached the table" in fault.cause
    assert fault.remedy.startswith("power the shoe off and on")
    assert fault.command == "tablectl dealer clear-shoe --by ID"


def test_the_watch_times_from_the_ack_and_starts_again_at_each_step() -> None:
    clock = Clock()
    watch = WaitWatch({"shuffler": 60.0}, clock)
    state, _ = run(opened())
    health = {"shuffler": {"link": "up", "state": "shuffling", "events_replayed": 0}}
    watch.taken("shuffler")
    assert watch.check(state, health) == []
    clock.now += 59
    assert watch.check(state, health) == []
    started, _ = run([ShuffleStarted()], state=state)  # a step: the wait starts again
    assert watch.check(started, health) == []
    clock.now += 59
    assert watch.check(started, health) == []
    clock.now += 1
    (stall,) = watch.check(started, health)
    assert stall.waited_ms == 60_000 and stall.reported == "shuffling"
    assert watch.check(started, health) == []  # told once
    down = {"shuffler": {"link": "down"}}
    fresh = WaitWatch({"shuffler": 60.0}, clock)
    fresh.taken("shuffler")
    clock.now += 600
    assert fresh.check(state, down) == []  # its link-down is the fault that says so


def test_an_event_id_at_the_end_names_the_reboot_first() -> None:
    """A link reset cannot go on from event id 2^32-1 (it would let the device drop every
    later event unread): status names the step that can, the device's power cycle."""
    state, _ = run(opened())
    refused = DeviceEventsRefused(
        device="shuffler", boot_id=7, event_id=MAX_EVENT_ID, expected_event_id=5, kind=1
    )
    state, _ = step(RULES, state, refused)
    found = {f.what: f for f in table_faults(state, shoe=False, devices={}, broker=BROKER)}
    first = found["events-refused"]
    assert first.remedy.startswith("power the shuffler off and on") and first.command is None
    assert "a link reset cannot help" in first.cause
    assert found["shuffler-fault"].remedy.startswith("once it has rebooted (above)")
    with pytest.raises(Rejected, match="reboot the shuffler"):
        step(RULES, state, ReshuffleRequested(by="d1"))

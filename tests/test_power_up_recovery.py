"""A deal the journal asked of the shoe and nothing confirmed, settled at power-up. Pure.

core/recovery.py decides from what the shoe says first after the power-up (DeviceResumed):
the same boot, idle, no event held and nothing of the deal journaled -> dealt again, once;
dealing -> its cards decide; anything else -> the round is void under the game's own section.
The daemon and the devices are in tests/test_crash_points.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import random

import pytest
from tablectl.drivers.api import DeviceReport, FirstWord
from tablectl.drivers.reference.shoe_codec import ShoeEventKind, card_byte
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.transport.memory import MemoryConnector, MemoryPort
from tablectl.simulators.shoe import ShoeSimulator

from tablectl.core import effects as rec
from tablectl.core.effects import DealCards
from tablectl.core.events import (
    DealRequested,
    DeviceResumed,
    PowerUp,
    ShoeCard,
    ShoeOutOfOrder,
    TableRules,
)
from tablectl.core.table import Phase, TableState
from tablectl.rules.cards import Card, parse_cards
from tablectl.service.faults import table_faults
from tablectl.status import BrokerStats
from tablectl.util.clock import run_virtual

from .test_device_link import SETTINGS
from .test_shoe_core import TCP, deal_events, locked, records, run
from .test_table_core import lir, uth

BOOT = 7

# A broker link that is up: these faults are the core's, not the links'.
BROKER = BrokerStats(
    connected=True,
    broker="localhost:1883",
    published_through_seq=0,
    handed_through_seq=0,
    acked_through_seq=0,
    acked={},
    backlog_alarms=[],
    delivery_fault=None,
    redelivery={},
    last_error=None,
    counters={},
)


def shoe(
    *,
    boot_id: int = BOOT,
    cursor_boot_id: int | None = BOOT,
    state: str = "idle",
    acting: bool = False,
    events_held: int = 0,
) -> DeviceResumed:
    return DeviceResumed(
        device="shoe",
        boot_id=boot_id,
        cursor_boot_id=cursor_boot_id,
        state=state,
        acting=acting,
        events_held=events_held,
    )


def in_flight(rules: TableRules = TCP, boot: int | None = BOOT) -> TableState:
    """A deal journaled (deal.started), then the power went: the daemon starts again."""
    state, _ = run([DealRequested(shoe_boot_id=boot), PowerUp(rules=rules)], rules, locked(rules))
    assert state.phase is Phase.LOCKED and state.deal is not None and not state.deal.cards
    return state


def test_a_shoe_that_shows_it_never_dealt_is_asked_again_once() -> None:
    state = in_flight()
    state, fx = run([shoe()], state=state)
    (resolved,) = records(fx, rec.DealResolved)
    assert resolved.outcome == "reissued" and resolved.rule == "649a.10(b)"  # type: ignore[attr-defined]
    assert [e for e in fx if isinstance(e, DealCards)] == [DealCards(stacks=(3, 3, 3))]
    # The power goes again before the shoe took it: it still shows it never dealt.
    state, fx = run([PowerUp(rules=TCP), shoe()], state=state)
    assert [e for e in fx if isinstance(e, DealCards)] == [DealCards(stacks=(3, 3, 3))]
    # Its cards then form the hands as for any deal.
    state, fx = run(deal_events("AsKsQs2c3c4c5d6d7d", [3, 3, 3]), state=state)
    assert state.deal is not None and state.deal.complete


def test_a_shoe_that_is_dealing_is_left_to_its_cards() -> None:
    state, fx = run([shoe(state="dealing", acting=True)], state=in_flight())
    (resolved,) = records(fx, rec.DealResolved)
    assert resolved.outcome == "dealing"  # type: ignore[attr-defined]
    assert not any(isinstance(e, DealCards) for e in fx)
    assert state.phase is Phase.LOCKED and state.deal is not None


def test_a_deal_its_held_events_finished_needs_nothing() -> None:
    state = in_flight()
    state, _ = run(deal_events("AsKsQs2c3c4c5d6d7d", [3, 3, 3]), state=state)
    state, fx = run([shoe(events_held=13)], state=state)
    assert fx == [] and state.deal is not None and state.deal.complete


@pytest.mark.parametrize(
    ("rules", "section"),
    [
        (TCP, "649a.13(f)"),
        (uth().model_copy(update={"shoe": True}), "653a.13(f)"),
        (lir().model_copy(update={"shoe": True}), "643a.13(f)"),
    ],
)
@pytest.mark.parametrize(
    "word",
    [
        shoe(boot_id=BOOT + 1),  # another boot: what it dealt is lost
        shoe(events_held=2),  # idle after some cards: it failed to deal all of them
    ],
)
def test_a_shoe_that_cannot_show_it_never_dealt_voids_the_round(
    rules: TableRules, section: str, word: DeviceResumed
) -> None:
    state = in_flight(rules)
    before = state.meter
    dealt = [ShoeCard(card=Card(14, "s")), ShoeCard(card=Card(13, "s"))]
    state, fx = run([*dealt, word], rules, state)
    (resolved,) = records(fx, rec.DealResolved)
    assert resolved.outcome == "voided" and resolved.rule == section  # type: ignore[attr-defined]
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.rule == section and voided.wagers_returned == [2, 5]  # type: ignore[attr-defined]
    assert state.phase is Phase.CLOSED and state.shoe_fault == "deal-unconfirmed"
    if before is not None:  # every wager returned: its contribution taken back
        assert state.meter is not None and state.meter.units < before.units
    assert not any(isinstance(e, DealCards) for e in fx)
    faults = table_faults(state, shoe=True, devices={}, broker=BROKER)
    (fault,) = [f for f in faults if f.what == "shoe-fault"]
    assert fault.command == "tablectl dealer clear-shoe --by ID"


def test_a_shoe_marked_out_of_order_is_not_asked_again() -> None:
    """Covered or signed out of order (649a.13(g)): the dealer deals by hand."""
    state, _ = run([ShoeOutOfOrder(by="D1")], state=in_flight())
    state, fx = run([shoe()], state=state)
    assert fx == [] and state.phase is Phase.LOCKED
    waiting = table_faults(state, shoe=True, devices={}, broker=BROKER, awaited=frozenset({"shoe"}))
    assert not [f for f in waiting if f.what == "deal-unconfirmed"]


def test_without_a_boot_to_compare_the_round_is_void() -> None:
    """A journal before the deal kept its boot, and no cursor: nothing proves it."""
    state, fx = run([shoe(cursor_boot_id=None)], state=in_flight(boot=None))
    assert state.shoe_fault == "deal-unconfirmed"
    (resolved,) = records(fx, rec.DealResolved)
    assert resolved.outcome == "voided"  # type: ignore[attr-defined]
    # With the cursor's boot (the journal's), the same shoe can show it.
    _, fx = run([shoe()], state=in_flight(boot=None))
    assert records(fx, rec.DealResolved)[0].outcome == "reissued"  # type: ignore[attr-defined]


def test_status_tells_a_person_while_the_shoe_has_not_spoken() -> None:
    state = in_flight()
    waiting = table_faults(state, shoe=True, devices={}, broker=BROKER, awaited=frozenset({"shoe"}))
    (fault,) = [f for f in waiting if f.what == "deal-unconfirmed"]
    assert fault.rule == "649a.13(f)" and fault.command == "tablectl dealer void shoe-jam --by ID"
    heard = table_faults(state, shoe=True, devices={}, broker=BROKER)
    assert not [f for f in heard if f.what == "deal-unconfirmed"]


def test_old_journals_keep_their_bytes() -> None:
    """Fields added for this are left out of the JSON while unset (core/compat.later)."""
    assert "shoe_boot_id" not in DealRequested().model_dump_json()
    state, _ = run([DealRequested()], state=locked())
    assert state.deal is not None and "shoe_boot_id" not in state.model_dump_json()


@pytest.mark.parametrize("commit_s", [0.0, 0.5])
def test_the_shoe_speaks_first_only_once_everything_it_held_is_journaled(
    commit_s: float,
) -> None:
    """A STATUS lists 20 events at most, and lists again those not yet acknowledged: the first
    word waits for one that lists none, however slow the commits (a 7-seat deal is 33 events).
    """
    sim = ShoeSimulator(card_ms=1, rng=random.Random(3))
    for card in parse_cards("AsKsQsJsTs9s8s7s6s5s4s3s2sAhKhQhJhTh9h8h7h6h5h4h"):
        sim.event(ShoeEventKind.CARD, card_byte(card))
    port = MemoryPort()
    port.plug(sim)
    heard: list[DeviceReport | FirstWord] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()

        def journaled(report: DeviceReport) -> None:
            heard.append(report)
            loop.call_later(commit_s, driver.acknowledge, report)  # after its commit

        driver = ReferenceShoe(MemoryConnector(port), journaled, SETTINGS, (sim.boot_id, 0))
        driver.on_first_word(heard.append)
        task = asyncio.create_task(driver.run())
        try:
            async with asyncio.timeout(30):
                while driver.first_word_due:  # noqa: ASYNC110 -- virtual time
                    await asyncio.sleep(0.1)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    run_virtual(main())
    cards = [h for h in heard if isinstance(h, DeviceReport) and isinstance(h.input, ShoeCard)]
    assert len(cards) == 24 and isinstance(heard[-1], FirstWord)
    assert heard[-1].events_held == 24 and heard[-1].boot_id == sim.boot_id
    assert not sim.events  # every one acknowledged before it spoke

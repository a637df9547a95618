"""The core with an automated dealing shoe, and the device rules every device shares. Pure."""

from __future__ import annotations

import pytest

from tablectl.core import effects as rec
from tablectl.core.effects import DealCards, Effect, RequestShuffle
from tablectl.core.events import (
    CardRead,
    ChipSensed,
    DealRequested,
    DeviceAccepted,
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceLinkReset,
    DeviceReportConflict,
    Event,
    LockoutPressed,
    LockoutReleased,
    PowerUp,
    ReshuffleRequested,
    Settle,
    ShoeCard,
    ShoeCleared,
    ShoeDealCompleted,
    ShoeFault,
    ShoeOutOfOrder,
    ShoeRebooted,
    ShoeStackDealt,
    ShuffleCompleted,
    ShuffleRequestFailed,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
    TableRules,
)
from tablectl.core.table import Phase, Rejected, TableState, step
from tablectl.rules.cards import Card, parse_cards

from .test_table_core import lir, tcp, uth

TCP = tcp().model_copy(update={"shoe": True})


def run(
    events: list[Event], rules: TableRules = TCP, state: TableState | None = None
) -> tuple[TableState, list[Effect]]:
    state = state or TableState.initial(rules)
    out: list[Effect] = []
    for event in events:
        state, fx = step(rules, state, event)
        out += fx
    return state, out


def records(fx: list[Effect], kind: type[rec.Record]) -> list[rec.Record]:
    return [e for e in fx if isinstance(e, kind)]


def locked(rules: TableRules = TCP, seats: tuple[int, ...] = (2, 5)) -> TableState:
    """A round with table-system wagers at `seats`, the count final."""
    events: list[Event] = [PowerUp(rules=rules), ShuffleStarted(), ShuffleCompleted(card_count=52)]
    events += [ChipSensed(seat=s, present=True, since_ns=1) for s in seats]
    events.append(LockoutPressed(at_ns=10))
    # The button comes up and the dealer collects the wagers before the deal (649a.10(a)(2)).
    events.append(LockoutReleased(at_ns=20))
    events += [ChipSensed(seat=s, present=False, since_ns=30) for s in seats]
    state, _ = run(events, rules)
    assert state.phase is Phase.LOCKED and state.counted and not state.occupied
    return state


def deal_events(cards: str, stacks: list[int]) -> list[Event]:
    out: list[Event] = []
    it = iter(parse_cards(cards))
    for n in stacks:
        out += [ShoeCard(card=next(it)) for _ in range(n)]
        out.append(ShoeStackDealt(cards=n))
    out.append(ShoeDealCompleted(cards=sum(stacks)))
    return out


# seat 2, seat 3 (no table-system wager, an Ante player), seat 5, then the dealer
ROUND = "AsKsQs" + "2c3d4h" + "9c8d2h" + "5d6d8h"


def test_the_shoe_deals_the_plan_and_the_core_forms_every_hand_from_its_cards() -> None:
    state, fx = run([DealRequested(seats=(3,), by="d1")], state=locked())
    assert DealCards(stacks=(3, 3, 3, 3)) in fx  # 649a.10(b): a stack each, the dealer last
    (started,) = records(fx, rec.DealStarted)
    assert started.seats == [2, 3, 5] and started.rule == "649a.10(b)"  # type: ignore[attr-defined]
    state, fx = run(deal_events(ROUND, [3, 3, 3, 3]), state=state)
    (done,) = records(fx, rec.DealCompleted)
    assert done.hands_read == 3 and done.cards_read == 12  # type: ignore[attr-defined]
    assert not any("As" in r.model_dump_json() for r in fx if isinstance(r, rec.Record))
    # The dealer confirms: no card typed; hits, Envy Bonuses settle from what was read.
    state, fx = run([Settle(by="d1")], state=state)
    (hit,) = records(fx, rec.JackpotHit)
    assert hit.seat == 2 and hit.cards == "AsKsQs"  # type: ignore[attr-defined]
    (settled,) = records(fx, rec.RoundSettled)
    assert settled.hands_read_by_shoe == 3 and settled.hands_entered == 0  # type: ignore[attr-defined]


def test_typed_hands_are_refused_unless_the_shoe_is_out_of_order() -> None:
    state, _ = run([DealRequested(), *deal_events(ROUND[:18], [3, 3, 3])], state=locked())
    with pytest.raises(Rejected, match=r"649a\.13\(g\)"):
        run([Settle(hands={2: parse_cards("2h3h4h")})], state=state)
    state, fx = run([ShoeOutOfOrder(by="tech")], state=locked())
    assert records(fx, rec.ShoeOutOfOrderRecord)[0].rule == "649a.13(g)"  # type: ignore[attr-defined]
    with pytest.raises(Rejected, match="out of order"):
        run([DealRequested()], state=state)
    state, fx = run(
        [Settle(hands={2: parse_cards("2h3h4h"), 5: parse_cards("9d9h2s")})], state=state
    )
    assert records(fx, rec.RoundSettled)[0].hands_entered == 2  # type: ignore[attr-defined]


def test_settle_waits_for_the_shoe() -> None:
    state, _ = run([DealRequested()], state=locked())
    with pytest.raises(Rejected, match="not dealt"):
        run([Settle()], state=state)


@pytest.mark.parametrize(
    "rules", [TCP, uth().model_copy(update={"shoe": True}), lir().model_copy(update={"shoe": True})]
)
def test_a_jam_mid_deal_voids_the_round_and_reverses_the_contributions(rules: TableRules) -> None:
    state = locked(rules)
    before = state.meter
    state, fx = run(
        [DealRequested(), ShoeCard(card=Card(14, "s")), ShoeFault(code="jam")], rules, state
    )
    (voided,) = records(fx, rec.RoundVoided)
    chapter = {"three-card-poker": "649a", "ultimate-texas-holdem": "653a", "let-it-ride": "643a"}
    assert voided.rule == f"{chapter[state.game]}.13(f)"  # type: ignore[attr-defined]
    assert voided.wagers_returned == [2, 5]  # type: ignore[attr-defined]
    assert state.phase is not Phase.LOCKED and state.deal is None
    reversed_units = voided.contribution_reversed_ten_thousandths_cent  # type: ignore[attr-defined]
    if before is not None:  # 649a.12(e)(3): a returned wager contributes nothing
        assert state.meter is not None and reversed_units > 0
        assert state.meter.units == before.units - reversed_units
    (fault,) = records(fx, rec.ShoeFaultRecord)
    assert fault.round_voided  # type: ignore[attr-defined]
    # Cards still arriving from the stopped deal are never part of a hand.
    state, fx = run([ShoeCard(card=Card(13, "s"))], rules, state)
    assert state.counters.shoe_events_outside_a_deal == 1


def test_one_face_up_card_is_discarded_and_two_void_the_round() -> None:
    state, fx = run(
        [DealRequested(), ShoeCard(card=Card(10, "h"), read=CardRead.FACE_UP)], state=locked()
    )
    (face_up,) = records(fx, rec.CardFaceUp)
    assert face_up.rule == "649a.13(a)" and state.phase is Phase.LOCKED  # type: ignore[attr-defined]
    state, fx = run([*deal_events(ROUND[:18], [3, 3, 3]), Settle()], state=state)
    assert records(fx, rec.RoundSettled)
    state, fx = run(
        [
            DealRequested(),
            ShoeCard(card=Card(2, "c"), read=CardRead.FACE_UP),
            ShoeCard(card=Card(3, "c"), read=CardRead.FACE_UP),
        ],
        state=locked(),
    )
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.reason == "cards-face-up" and voided.rule == "649a.13(a)"  # type: ignore[attr-defined]


def test_a_duplicate_card_takes_the_deck_out_though_the_shuffler_counted_52() -> None:
    cards = [ShoeCard(card=c) for c in parse_cards("AsKsQsAs")]
    state, fx = run([DealRequested(), *cards], state=locked())
    (irregular,) = records(fx, rec.DeckIrregular)
    assert irregular.reason == "duplicate-card" and irregular.rule == "649a.10(f)"  # type: ignore[attr-defined]
    assert records(fx, rec.RoundVoided)
    assert state.blocked == "deck-irregular:duplicate-card"
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED  # no round until a new deck is registered


def test_a_foreign_or_unread_card_never_becomes_part_of_a_hand() -> None:
    state, fx = run([DealRequested(), ShoeCard(read=CardRead.FOREIGN)], state=locked())
    assert records(fx, rec.DeckIrregular) and state.blocked == "deck-irregular:foreign-card"
    state, fx = run([DealRequested(), ShoeCard(read=CardRead.UNREAD)], state=locked())
    assert records(fx, rec.RoundVoided)[0].rule == "649a.13(f)"  # type: ignore[attr-defined]


def test_a_wrong_number_of_cards_to_a_hand_voids_all_hands() -> None:
    extra = [ShoeCard(card=c) for c in parse_cards("AsKsQsJs")] + [ShoeStackDealt(cards=4)]
    _state, fx = run([DealRequested(), *extra], state=locked())
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.reason == "wrong-card-count" and voided.rule == "649a.13(c)"  # type: ignore[attr-defined]


def test_a_shoe_that_fails_to_deal_all_cards_voids_the_round() -> None:
    short = [*deal_events(ROUND[:12], [3, 3])[:-1], ShoeDealCompleted(cards=6)]
    _, fx = run([DealRequested(), *short], state=locked())
    assert records(fx, rec.RoundVoided)[0].rule == "649a.13(f)"  # type: ignore[attr-defined]
    _, fx = run([DealRequested(), ShoeCard(card=Card(2, "c")), ShoeRebooted()], state=locked())
    assert records(fx, rec.RoundVoided)  # it stopped dealing


def test_a_completion_after_a_jam_never_opens_a_round() -> None:
    """649a.13(e): before, a completion reported after a jam let the next round open."""
    state, _ = run(
        [
            PowerUp(rules=TCP),
            ShuffleStarted(),
            ShufflerFault(code="jam"),
            ShuffleCompleted(card_count=52),
        ]
    )
    state, fx = run([ReshuffleRequested(by="d")], state=state)
    assert state.phase is Phase.CLOSED and not state.deck_ready
    assert any(isinstance(e, type(fx[-1])) for e in fx)  # a new shuffle is asked for
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.BETTING


def test_a_completion_from_before_a_restart_never_opens_a_round() -> None:
    state, fx = run(
        [
            PowerUp(rules=TCP),
            ShuffleStarted(stale=True),
            ShuffleCompleted(card_count=52, stale=True),
        ]
    )
    assert state.phase is Phase.CLOSED
    (done,) = records(fx, rec.ShuffleCompletedRecord)
    assert not done.deck_ready and done.not_ready_because == "reported before this power-up"  # type: ignore[attr-defined]
    # A shuffle under way at the restart completes later: still not this power-up's shuffle.
    state, _ = run([ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED
    state, fx = run(
        [ShuffleStarted(stale=True), ShuffleCompleted(card_count=51, stale=True)], state=state
    )
    assert state.blocked == "deck-miscount:51"  # a count of 51 still takes the deck out


def test_another_device_blocks_play_until_a_technician_accepts_it() -> None:
    ident = {"model": "m", "firmware": "1"}
    state, fx = run(
        [PowerUp(rules=TCP), DeviceIdentified(device="shoe", serial_number="A", **ident)]
    )
    assert records(fx, rec.DeviceIdentifiedRecord)[0].accepted  # type: ignore[attr-defined]
    state, fx = run([DeviceIdentified(device="shoe", serial_number="A", **ident)], state=state)
    assert fx == [] or not records(fx, rec.DeviceIdentifiedRecord)  # a reconnect: nothing new
    state, fx = run([DeviceIdentified(device="shoe", serial_number="B", **ident)], state=state)
    (changed,) = records(fx, rec.DeviceIdentifiedRecord)
    assert not changed.accepted and changed.previous_serial_number == "A"  # type: ignore[attr-defined]
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED  # blocked
    with pytest.raises(Rejected, match="waiting to be accepted is B"):
        run([DeviceAccepted(device="shoe", serial_number="C", by="t")], state=state)
    state, fx = run([DeviceAccepted(device="shoe", serial_number="B", by="tech-7")], state=state)
    assert records(fx, rec.DeviceAcceptedRecord) and state.phase is Phase.BETTING


def test_a_device_out_of_sequence_is_treated_as_faulted() -> None:
    refused = DeviceEventsRefused(
        device="shuffler", boot_id=1, event_id=2**32 - 1, expected_event_id=3, kind=2
    )
    state, fx = run(
        [PowerUp(rules=TCP), ShuffleStarted(), refused, ShuffleCompleted(card_count=52)]
    )
    assert state.shuffler_fault == "event-sequence" and state.phase is Phase.CLOSED
    shoe = DeviceEventsRefused(device="shoe", boot_id=1, event_id=9, expected_event_id=3, kind=1)
    state, fx = run([DealRequested(), shoe], state=locked())
    assert records(fx, rec.RoundVoided)


# --- issue 14: cards, shoe faults that stand, refused and conflicting device events ----------


def test_a_dealt_card_found_again_face_up_takes_the_deck_out() -> None:
    """Before: a face-up card was compared only with earlier discards; the As dealt to seat 2
    and then found face up was discarded and the round went on (649a.10(f))."""
    events = [ShoeCard(card=c) for c in parse_cards("AsKsQs")]
    events.append(ShoeCard(card=Card(14, "s"), read=CardRead.FACE_UP))
    state, fx = run([DealRequested(), *events], state=locked())
    (irregular,) = records(fx, rec.DeckIrregular)
    assert irregular.reason == "duplicate-card" and irregular.rule == "649a.10(f)"  # type: ignore[attr-defined]
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.rule == "649a.10(f)" and not records(fx, rec.CardFaceUp)  # type: ignore[attr-defined]
    assert state.blocked == "deck-irregular:duplicate-card" and state.phase is Phase.CLOSED


@pytest.mark.parametrize(
    ("rules", "rule"),
    [
        (TCP, "649a.13(f)"),
        (uth().model_copy(update={"shoe": True}), "653a.13(f)"),
        (lir().model_copy(update={"shoe": True}), "643a.13(f)"),
    ],
)
def test_a_deal_two_cards_short_of_the_plan_is_a_failure_to_deal(
    rules: TableRules, rule: str
) -> None:
    """Before: the short last stack was voided as a misdeal (13(c)); the shoe failed to deal
    all cards, which is 13(f) -- and the shoe must be emptied before it deals again."""
    state, fx = run([DealRequested()], rules, locked(rules))
    (deal,) = [e for e in fx if isinstance(e, DealCards)]
    *full, last = deal.stacks
    cards = iter(parse_cards("2c3c4c5c6c7c8c9cTcJcQcKcAc2d3d4d5d6d7d8d9dTdJdQd"))
    events: list[Event] = []
    for n in full:
        events += [ShoeCard(card=next(cards)) for _ in range(n)] + [ShoeStackDealt(cards=n)]
    events += [ShoeCard(card=next(cards)) for _ in range(last - 2)]
    events.append(ShoeStackDealt(cards=last - 2))
    state, fx = run(events, rules, state)
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.rule == rule and voided.reason == "shoe-jam"  # type: ignore[attr-defined]
    (fault,) = records(fx, rec.ShoeFaultRecord)
    assert fault.code == "incomplete" and fault.rule == rule  # type: ignore[attr-defined]
    assert state.shoe_fault == "incomplete"


def test_a_hand_dealt_too_many_cards_stays_a_misdeal() -> None:
    extra = [ShoeCard(card=c) for c in parse_cards("AsKsQsJs")] + [ShoeStackDealt(cards=4)]
    state, fx = run([DealRequested(), *extra], state=locked())
    assert records(fx, rec.RoundVoided)[0].rule == "649a.13(c)"  # type: ignore[attr-defined]
    assert state.shoe_fault is None  # the shoe did what it was told; no fault to clear


def test_a_shoe_fault_keeps_the_table_closed_until_the_dealer_clears_the_shoe() -> None:
    jam: list[Event] = [DealRequested(), ShoeCard(card=Card(14, "s")), ShoeFault(code="jam")]
    state, _ = run(jam, state=locked())
    assert state.phase is Phase.CLOSED and state.shoe_fault == "jam"
    state, fx = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED and state.deck_ready  # the deck waits for the shoe
    # The same fault still showing in STATUS is not journaled again.
    state, fx = run([ShoeFault(code="jam", from_status=True)], state=state)
    assert fx == []
    state, fx = run([ShoeCleared(by="D1 (alice)")], state=state)
    (cleared,) = records(fx, rec.ShoeFaultCleared)
    assert cleared.code == "jam" and cleared.by == "D1 (alice)"  # type: ignore[attr-defined]
    assert state.phase is Phase.BETTING and state.shoe_fault is None
    with pytest.raises(Rejected, match="no fault to clear"):
        run([ShoeCleared()], state=state)


def test_a_deal_on_a_faulted_shoe_is_refused_with_what_clears_it() -> None:
    betting, _ = run([PowerUp(rules=TCP), ShuffleStarted(), ShuffleCompleted(card_count=52)])
    events: list[Event] = [ShoeFault(code="jam", at_connect=True)]  # while taking bets
    events += [ChipSensed(seat=s, present=True, since_ns=1) for s in (2, 5)]
    state, _ = run([*events, LockoutPressed(at_ns=10)], state=betting)
    assert state.phase is Phase.LOCKED and state.shoe_fault == "jam"
    with pytest.raises(Rejected, match=r"in fault \(jam, 649a\.13\(f\)\).*dealer clear-shoe"):
        run([DealRequested()], state=state)
    state, _ = run([ShoeOutOfOrder(by="d")], state=state)  # 649a.13(g): deal by hand
    hands = {2: parse_cards("2h3h4h"), 5: parse_cards("9d9h2s")}
    state, fx = run([Settle(hands=hands)], state=state)
    assert records(fx, rec.RoundSettled)


def test_a_shoe_whose_events_are_refused_needs_its_link_reset_before_it_is_cleared() -> None:
    refused = DeviceEventsRefused(device="shoe", boot_id=4, event_id=9, expected_event_id=3, kind=1)
    state, fx = run([DealRequested(), refused], state=locked())
    assert records(fx, rec.RoundVoided) and state.shoe_fault == "event-sequence"
    state, fx = run([refused], state=state)
    assert fx == []  # heard again (a restart): nothing new to journal
    with pytest.raises(Rejected, match="reset-link shoe"):
        run([ShoeCleared()], state=state)
    reset = DeviceLinkReset(device="shoe", boot_id=4, from_event_id=2, to_event_id=9, by="T9")
    state, fx = run([reset], state=state)
    (row,) = records(fx, rec.DeviceLinkResetRecord)
    assert (row.skipped_from_event_id, row.skipped_to_event_id, row.by) == (3, 9, "T9")  # type: ignore[attr-defined]
    with pytest.raises(Rejected, match="not refused"):
        run([reset], state=state)
    state, _ = run([ShoeCleared()], state=state)
    assert state.shoe_fault is None


def test_a_reshuffle_cannot_restart_a_refused_shuffler_but_a_reboot_or_a_reset_can() -> None:
    """Before: the reshuffle cleared the shown fault while the link stayed stopped at the
    refused event, and the table stalled with "shuffler fault: none"."""
    refused = DeviceEventsRefused(
        device="shuffler", boot_id=1, event_id=7, expected_event_id=5, kind=2
    )
    stuck, _ = run([PowerUp(rules=TCP), refused])
    with pytest.raises(Rejected, match=r"a reshuffle cannot fix that.*reset-link shuffler"):
        run([ReshuffleRequested()], state=stuck)
    after_reboot, _ = run([ShufflerRebooted(), ReshuffleRequested()], state=stuck)
    assert after_reboot.shuffler_fault is None and not after_reboot.events_refused
    reset = DeviceLinkReset(device="shuffler", boot_id=1, from_event_id=4, to_event_id=7)
    state, fx = run([reset, ReshuffleRequested()], state=stuck)
    assert RequestShuffle() in fx and state.shuffler_fault is None
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.BETTING


def test_one_event_id_reported_as_52_and_then_51_is_a_fault_never_a_replay() -> None:
    """Before: the second report was skipped as a replay and the round opened on the 52."""
    state, _ = run([PowerUp(rules=TCP), ShuffleStarted(), ShuffleCompleted(card_count=52)])
    assert state.phase is Phase.BETTING
    conflict = DeviceReportConflict(device="shuffler", boot_id=1, event_id=2, kind=2)
    state, fx = run([ChipSensed(seat=3, present=True, since_ns=1), conflict], state=state)
    assert records(fx, rec.DeviceReportConflictRecord)
    assert records(fx, rec.ShufflerFaultRecord)[0].code == "event-conflict"  # type: ignore[attr-defined]
    (voided,) = records(fx, rec.RoundVoided)
    assert voided.wagers_returned == [3] and voided.rule == "649a.10(f)"  # type: ignore[attr-defined]
    assert state.blocked == "deck-irregular:conflicting-count" and state.phase is Phase.CLOSED


def test_a_refused_shuffle_is_journaled_once_per_reason_while_the_shell_asks_again() -> None:
    state, _ = run([PowerUp(rules=TCP)])
    assert state.shuffle_requested
    busy = ShuffleRequestFailed(reason="device refused SHUFFLE: BUSY", retrying=True)
    state, fx = run([busy], state=state)
    assert len(records(fx, rec.ShuffleRequestFailedRecord)) == 1
    state, fx = run([busy, busy, busy], state=state)
    assert fx == [] and state.shuffle_refused == "device refused SHUFFLE: BUSY"
    assert state.shuffle_requested  # the shell is still asking: no second request
    state, _ = run([ShuffleStarted()], state=state)
    assert state.shuffle_refused is None

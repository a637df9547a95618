"""The pure core: round state machine, meter arithmetic, progressive settlement (649a.12(e))."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tablectl.core.meters import LocalMeter
from tablectl.core.round import (
    ChipSensed,
    Effect,
    Event,
    Journal,
    LockoutPressed,
    NewDeckRegistered,
    Phase,
    PowerUp,
    Rejected,
    ReportRestingChips,
    RequestShuffle,
    ReshuffleRequested,
    Rules,
    SeatLight,
    Settle,
    ShuffleCompleted,
    ShufflerFault,
    TableState,
    VoidRound,
    step,
)
from tablectl.rules.cards import parse_cards
from tablectl.rules.paytables import Hand
from tablectl.rules.progressive import settlement_order

RULES = Rules(
    seats=7,
    wager_cents=100,
    paytable="A",
    rate_bp=1450,
    initial_cents=100_000,
    reset_cents=100_000,
    decks=2,
)


def run(
    events: list[Event], rules: Rules = RULES, state: TableState | None = None
) -> tuple[TableState, list[Effect]]:
    state = state or TableState.initial(rules)
    all_effects: list[Effect] = []
    for event in events:
        state, effects = step(rules, state, event)
        all_effects += effects
    return state, all_effects


def journal(effects: list[Effect], type_: str) -> list[dict[str, object]]:
    return [e.data for e in effects if isinstance(e, Journal) and e.type == type_]


def hands(**seats: str) -> Settle:
    return Settle(hands={int(k[1:]): parse_cards(v) for k, v in seats.items()})


OPEN: list[Event] = [PowerUp(), ShuffleCompleted(52)]


def test_power_up_closes_acceptance_and_asks_for_a_shuffle() -> None:
    state, effects = run([PowerUp()])
    assert state.phase is Phase.CLOSED and not state.accepting_wagers
    assert RequestShuffle() in effects


def test_a_counted_deck_opens_betting_and_a_chip_is_acknowledged() -> None:
    state, effects = run([*OPEN, ChipSensed(3, True)])
    assert state.phase is Phase.BETTING and state.round_id == 1
    assert state.wagers == {3: 100}
    assert SeatLight(3, True) in effects
    # 649a.3(b)(2): the second deck is shuffled while the first is in play.
    assert effects.count(RequestShuffle()) == 2


def test_opening_a_round_recognises_chips_already_resting() -> None:
    _, effects = run(OPEN)
    assert ReportRestingChips() in effects  # placed before betting opened: before "no more bets"


def test_one_deck_is_shuffled_only_between_rounds() -> None:
    one_deck = replace(RULES, decks=1)
    state, effects = run([*OPEN, ChipSensed(1, True), LockoutPressed()], rules=one_deck)
    assert effects.count(RequestShuffle()) == 1
    _, effects = run([hands(s1="2c7d9h")], rules=one_deck, state=state)
    assert RequestShuffle() in effects


def test_withdrawn_chip_before_lockout_is_not_a_wager() -> None:
    state, effects = run([*OPEN, ChipSensed(3, True), ChipSensed(3, False), LockoutPressed()])
    assert state.wagers == {} and SeatLight(3, False) in effects
    assert journal(effects, "round.locked")[0]["accepted_wagers"] == 0


def test_lockout_books_each_contribution_with_the_fraction_carried() -> None:
    state, effects = run([*OPEN, ChipSensed(1, True), ChipSensed(2, True), LockoutPressed()])
    assert state.phase is Phase.LOCKED
    # 14.5% of $1 = 14.5 cents; two of them = 29 cents and nothing carried.
    contributions = journal(effects, "meter.contribution")
    assert [(c["seat"], c["meter_cents"], c["meter_carry"]) for c in contributions] == [
        (1, 100_014, 5_000),
        (2, 100_029, 0),
    ]
    assert journal(effects, "round.locked")[0]["accepted_wagers"] == 2


def test_many_contributions_lose_nothing_to_rounding() -> None:
    meter = LocalMeter(cents=100_000)
    for _ in range(10_001):
        meter = meter.contribute(100, 1401)[0]  # 14.01% of $1
    assert meter.units == 100_000 * 10_000 + 10_001 * 140_100
    assert meter.cents == 100_000 + 10_001 * 1401 // 100


def test_chip_after_lockout_is_rejected_and_counted() -> None:
    state, effects = run([*OPEN, ChipSensed(1, True), LockoutPressed(), ChipSensed(4, True)])
    assert state.wagers == {1: 100}
    assert journal(effects, "wager.rejected") == [
        {"round_id": 1, "seat": 4, "reason": "after-lockout"}
    ]
    assert SeatLight(4, True) not in effects
    assert state.counters["wagers_rejected"] == 1


def test_chip_while_closed_is_rejected() -> None:
    _, effects = run([PowerUp(), ChipSensed(2, True)])
    assert journal(effects, "wager.rejected")[0]["reason"] == "table-closed"


def test_second_lockout_press_is_ignored() -> None:
    state, effects = run([*OPEN, ChipSensed(1, True), LockoutPressed(), LockoutPressed()])
    assert len(journal(effects, "round.locked")) == 1
    assert state.counters["lockout_presses_ignored"] == 1


def test_power_up_while_betting_locks_out() -> None:
    betting, _ = run([*OPEN, ChipSensed(5, True)])
    state, effects = run([PowerUp()], state=betting)
    assert state.phase is Phase.LOCKED
    assert journal(effects, "round.locked")[0]["cause"] == "power-up"


def locked_with(*seats: int, rules: Rules = RULES) -> TableState:
    events: list[Event] = [*OPEN, *(ChipSensed(s, True) for s in seats), LockoutPressed()]
    return run(events, rules=rules)[0]


def test_meter_pays_100_percent_then_resets_and_envy_goes_to_the_others() -> None:
    state = locked_with(2, 5, 6)
    meter_cents = state.meter.cents
    state, effects = run([hands(s2="AsKsQs", s5="2c7d9h", s6="3h4h5h")], state=state)
    hits = journal(effects, "jackpot.hit")
    assert [(h["seat"], h["amount_cents"], h["basis"]) for h in hits] == [
        (6, 70 * 100, "odds-for-1"),  # straight flush, paytable A, "70 for 1"
        (2, meter_cents, "100%-of-meter"),
    ]
    envy = journal(effects, "envy.bonus")
    assert sorted((e["seat"], e["for_seat"], e["amount_cents"]) for e in envy) == [
        (5, 2, 10_000),
        (6, 2, 10_000),
    ]
    assert state.meter.cents == 100_000 and state.phase is Phase.CLOSED
    assert journal(effects, "meter.reset")[0]["paid_cents"] == meter_cents


def test_five_dollar_wager_gets_the_five_dollar_envy_bonus() -> None:
    rules = replace(RULES, wager_cents=500, rate_bp=1400)
    state = locked_with(1, 3, rules=rules)
    _, effects = run([hands(s1="AdKdQd", s3="2c7d9h")], rules=rules, state=state)
    assert [(e["seat"], e["amount_cents"]) for e in journal(effects, "envy.bonus")] == [(3, 12_500)]
    assert journal(effects, "jackpot.hit")[0]["amount_cents"] == 500 * 500


def test_folded_player_forfeits_the_wager_but_keeps_envy() -> None:
    """649a.11(b)(2)."""
    state = locked_with(1, 4)
    event = Settle(hands={4: parse_cards("AsKsQs")}, folded=frozenset({1}))
    _, effects = run([event], state=state)
    assert [e["seat"] for e in journal(effects, "envy.bonus")] == [1]
    assert [h["seat"] for h in journal(effects, "jackpot.hit")] == [4]


def test_only_the_highest_hand_pays() -> None:
    """649a.12(e)(2): an ace-king-queen suited is also a straight flush; it pays 500 for 1."""
    state = locked_with(3)
    _, effects = run([hands(s3="AhKhQh")], state=state)
    (hit,) = journal(effects, "jackpot.hit")
    assert hit["hand"] == Hand.MINI_ROYAL.value and hit["amount_cents"] == 50_000


def test_paytable_b_pays_no_straight() -> None:
    rules = replace(RULES, paytable="B", rate_bp=2000)
    state = locked_with(3, 4, rules=rules)
    _, effects = run([hands(s3="4c5d6h", s4="9s9d9c")], rules=rules, state=state)
    assert [(h["seat"], h["amount_cents"]) for h in journal(effects, "jackpot.hit")] == [(4, 9_000)]


def test_settlement_runs_from_the_dealers_right() -> None:
    assert settlement_order(7) == [7, 6, 5, 4, 3, 2, 1]


@pytest.mark.parametrize(
    ("settle", "message"),
    [
        (Settle(hands={1: parse_cards("AsKsQs"), 2: parse_cards("AsJdTd")}), "already dealt"),
        (Settle(hands={1: parse_cards("AsKs2s")}), r"seats \[2\] have progressive wagers"),
        (Settle(hands={9: parse_cards("AsKsQs")}), "seat 9 does not exist"),
        (Settle(hands={1: parse_cards("AsKsQs")}, folded=frozenset({1, 2})), "both fold"),
    ],
)
def test_settle_refuses_impossible_entries(settle: Settle, message: str) -> None:
    state = locked_with(1, 2)
    with pytest.raises(Rejected, match=message):
        step(RULES, state, settle)


def test_void_returns_wagers_and_reverses_contributions_exactly() -> None:
    before = run(OPEN)[0].meter
    state = locked_with(1, 2, 3)
    assert state.meter != before
    state, effects = run([VoidRound("shoe-jam")], state=state)
    assert state.meter == before and state.wagers == {}
    (void,) = journal(effects, "round.voided")
    assert void["rule"] == "649a.13(f)" and void["wagers_returned"] == [1, 2, 3]
    assert [e for e in effects if isinstance(e, SeatLight)] == [
        SeatLight(1, False),
        SeatLight(2, False),
        SeatLight(3, False),
    ]


def test_void_with_an_unknown_reason_is_refused() -> None:
    with pytest.raises(Rejected, match="unknown void reason"):
        step(RULES, locked_with(1), VoidRound("bored"))


def test_miscount_blocks_until_a_new_deck_is_registered() -> None:
    state, effects = run([PowerUp(), ShuffleCompleted(51)])
    assert state.blocked == "deck-miscount:51" and state.phase is Phase.CLOSED
    assert journal(effects, "irregularity")[0]["rule"] == "649a.5(b)"
    state, effects = run([ShuffleCompleted(52)], state=state)  # even a good count: still blocked
    assert state.phase is Phase.CLOSED and RequestShuffle() not in effects
    state, effects = run([NewDeckRegistered()], state=state)
    assert state.blocked is None and state.phase is Phase.BETTING  # on the deck counted 52
    assert RequestShuffle() in effects  # and the new deck is shuffled and counted in turn


def test_new_deck_without_a_miscount_is_refused() -> None:
    with pytest.raises(Rejected):
        step(RULES, run([PowerUp()])[0], NewDeckRegistered())


def test_jam_stops_shuffling_until_the_dealer_asks_for_a_reshuffle() -> None:
    state, effects = run([PowerUp(), ShufflerFault("jam")])
    assert state.shuffler_fault == "jam"
    assert journal(effects, "shuffler.fault")[0]["rule"] == "649a.13(e)"
    state, effects = run([ShuffleCompleted(52)], state=state)
    assert state.phase is Phase.CLOSED  # no round on a deck from a faulted cycle
    state, effects = run([ReshuffleRequested()], state=state)
    assert state.shuffler_fault is None and RequestShuffle() in effects


def test_state_round_trips_through_json() -> None:
    state = locked_with(1, 6)
    assert TableState.model_validate_json(state.model_dump_json()) == state

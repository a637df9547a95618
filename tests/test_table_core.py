"""The pure core: the round state machine for every game, the lock-out edge, jackpots."""

from __future__ import annotations

from typing import Any, TypeVar

import pytest

from tablectl.core import effects as rec
from tablectl.core.effects import Effect, Lamp, RequestShuffle, SeatLamp
from tablectl.core.events import (
    ChipSensed,
    ConfirmDocumentation,
    DealRequested,
    Event,
    LockoutPressed,
    LockoutReleased,
    NewDeckRegistered,
    PowerUp,
    ReshuffleRequested,
    Settle,
    ShuffleCompleted,
    ShufflerFault,
    ShuffleStarted,
    TableRules,
    ValidateHit,
    VoidRound,
)
from tablectl.core.table import HIT_HISTORY, Phase, Rejected, TableState, step
from tablectl.rules.cards import parse_cards
from tablectl.rules.meters import LocalMeter
from tablectl.rules.paytables import Hand
from tablectl.rules.progressive import settlement_order

R = TypeVar("R", bound=rec.Record)


def tcp(**progressive: Any) -> TableRules:
    game = {
        "name": "three-card-poker",
        "progressive": {
            "wager": "1.00",
            "paytable": "A",
            "rate_of_progression_percent": "14.5",
            "initial_amount": "1000.00",
            "reset_amount": "1000.00",
            **progressive,
        },
    }
    return TableRules.model_validate({"seats": 7, "decks": 2, "game": game})


def uth(text: str = "2019") -> TableRules:
    game = {
        "name": "ultimate-texas-holdem",
        "text": text,
        "progressive": {
            "wager": "1.00",
            "rate_of_progression_percent": "20",
            "initial_amount": "10000.00",
            "reset_amount": "10000.00",
        },
    }
    return TableRules.model_validate({"seats": 6, "decks": 2, "game": game})


def lir(paytable: str = "A") -> TableRules:
    game = {"name": "let-it-ride", "bonus": {"wager": "1.00", "paytable": paytable}}
    return TableRules.model_validate({"seats": 7, "decks": 2, "game": game})


RULES = tcp()


def run(
    events: list[Event], rules: TableRules = RULES, state: TableState | None = None
) -> tuple[TableState, list[Effect]]:
    state = state or TableState.initial(rules)
    all_effects: list[Effect] = []
    for event in events:
        state, effects = step(rules, state, event)
        all_effects += effects
    return state, all_effects


def records(effects: list[Effect], cls: type[R]) -> list[R]:
    return [e for e in effects if isinstance(e, cls)]


def chip(seat: int, present: bool = True, since_ns: int = 0) -> ChipSensed:
    return ChipSensed(seat=seat, present=present, since_ns=since_ns)


def lockout(at_ns: int = 1_000, *undecided: int) -> LockoutPressed:
    return LockoutPressed(at_ns=at_ns, undecided_seats=undecided)


def settle(community: str = "", folded: frozenset[int] = frozenset(), **seats: str) -> Settle:
    return Settle(
        hands={int(k[1:]): parse_cards(v) for k, v in seats.items()},
        community=parse_cards(community),
        folded=folded,
    )


def opened(rules: TableRules = RULES) -> list[Event]:
    return [PowerUp(rules=rules), ShuffleStarted(), ShuffleCompleted(card_count=52)]


def collected(*seats: int, at_ns: int = 2_000) -> list[Event]:
    """The button is up again and the dealer collects the wagers (649a.8(b))."""
    return [LockoutReleased(at_ns=at_ns), *(chip(s, present=False, since_ns=at_ns) for s in seats)]


def locked_with(*seats: int, rules: TableRules = RULES) -> TableState:
    events = [*opened(rules), *(chip(s) for s in seats), lockout(), *collected(*seats)]
    return run(events, rules=rules)[0]


# --- rounds and wagers ---------------------------------------------------------------------


def test_power_up_closes_acceptance_and_asks_for_a_shuffle() -> None:
    state, effects = run([PowerUp(rules=RULES)])
    assert state.phase is Phase.CLOSED and not state.accepting_wagers
    assert RequestShuffle() in effects


def test_a_counted_deck_opens_betting_and_a_chip_is_acknowledged() -> None:
    state, effects = run([*opened(), chip(3)])
    assert state.phase is Phase.BETTING and state.round_id == 1
    assert state.wagers == {3: 100}
    assert SeatLamp(seat=3, lamp=Lamp.ON) in effects
    # 649a.3(b)(2): the second deck is shuffled while the first is in play.
    assert effects.count(RequestShuffle()) == 2


def test_a_chip_resting_before_the_round_opens_is_accepted_once_when_it_opens() -> None:
    """Placed before betting opened, so before "no more bets": one event, when it opens."""
    state, effects = run([PowerUp(rules=RULES), chip(2), ShuffleStarted()])
    assert state.waiting == (2,) and not records(effects, rec.WagerRejected)
    state, effects = run([ShuffleCompleted(card_count=52)], state=state)
    assert state.wagers == {2: 100} and state.waiting == ()
    assert [(r.round_id, r.seat) for r in records(effects, rec.WagerAccepted)] == [(1, 2)]
    assert SeatLamp(seat=2, lamp=Lamp.ON) in effects


def test_one_deck_is_shuffled_only_between_rounds() -> None:
    one_deck = RULES.model_copy(update={"decks": 1})
    state, effects = run([*opened(one_deck), chip(1), lockout()], rules=one_deck)
    assert effects.count(RequestShuffle()) == 1
    _, effects = run([settle(s1="2c7d9h")], rules=one_deck, state=state)
    assert RequestShuffle() in effects


def test_withdrawn_chip_before_lockout_is_not_a_wager() -> None:
    state, effects = run([*opened(), chip(3), chip(3, False), lockout()])
    assert state.wagers == {} and SeatLamp(seat=3, lamp=Lamp.OFF) in effects
    assert records(effects, rec.WagersCounted)[0].accepted_wagers == 0


def test_the_count_books_each_contribution_with_the_fraction_carried() -> None:
    state, effects = run([*opened(), chip(1), chip(2), lockout()])
    assert state.phase is Phase.LOCKED and state.counted
    # 14.5% of $1 = 14.5 cents; two of them = 29 cents and nothing carried (649a.12(e)(3)).
    assert [
        (c.seat, c.meter.meter_cents, c.meter.meter_carry)
        for c in records(effects, rec.MeterContribution)
    ] == [
        (1, 100_014, 5_000),
        (2, 100_029, 0),
    ]
    (counted,) = records(effects, rec.WagersCounted)
    assert counted.accepted_wagers == 2 and counted.rule == "649a.8(b)"


def test_many_contributions_lose_nothing_to_rounding() -> None:
    meter = LocalMeter(cents=100_000)
    for _ in range(10_001):
        meter = meter.contribute(100, 1401)[0]  # 14.01% of $1
    assert meter.units == 100_000 * 10_000 + 10_001 * 140_100
    assert meter.cents == 100_000 + 10_001 * 1401 // 100


def test_chip_after_lockout_is_rejected_and_counted() -> None:
    state, effects = run([*opened(), chip(1), lockout(), chip(4, since_ns=2_000)])
    assert state.wagers == {1: 100}
    assert [(r.seat, r.reason, r.rule) for r in records(effects, rec.WagerRejected)] == [
        (4, "after-lockout", "649a.2(c)(2)")
    ]
    assert SeatLamp(seat=4, lamp=Lamp.ON) not in effects
    assert state.counters.wagers_rejected == 1


def test_a_chip_lifted_before_any_round_opens_is_refused_once_when_lifted() -> None:
    state, effects = run([PowerUp(rules=RULES), chip(2), chip(2, present=False)])
    assert [(r.seat, r.reason) for r in records(effects, rec.WagerRejected)] == [
        (2, "table-closed")
    ]
    state, effects = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.wagers == {} and not records(effects, rec.WagerAccepted)


def test_a_journal_written_before_the_core_kept_the_sensors_replays_as_written() -> None:
    """rules.sensors None (a power-up journaled before it existed): a chip sensed while
    closed is refused at once, as it was then."""
    journaled = PowerUp.model_validate(
        {"rules": RULES.model_dump(mode="json", exclude={"sensors"})}
    )
    old_rules = journaled.rules
    assert old_rules.sensors is None
    state, effects = run([journaled, chip(2)], rules=old_rules)
    assert records(effects, rec.WagerRejected)[0].reason == "table-closed"
    assert state.occupied == {} and "occupied" not in state.model_dump_json()


def test_second_lockout_press_is_ignored() -> None:
    state, effects = run([*opened(), chip(1), lockout(), lockout(2_000)])
    assert len(records(effects, rec.RoundLocked)) == 1
    assert state.counters.lockout_presses_ignored == 1


def test_power_up_while_betting_locks_out_and_counts() -> None:
    betting, _ = run([*opened(), chip(5)])
    state, effects = run([PowerUp(rules=RULES)], state=betting)
    assert state.phase is Phase.LOCKED and state.counted
    assert records(effects, rec.RoundLocked)[0].cause == "power-up"


# --- the lock-out decides by the edge (649a.2(c)(2)) ----------------------------------------


def test_a_chip_arriving_before_the_edge_counts_once_it_has_rested() -> None:
    """A chip placed before "no more bets" counts, even if its rest ends after the edge."""
    state, effects = run([*opened(), chip(1), lockout(5_000, 3)])
    assert state.phase is Phase.LOCKED and not state.counted and state.undecided == (3,)
    assert records(effects, rec.RoundLocked)[0].undecided_seats == [3]
    assert records(effects, rec.WagersCounted) == []  # the count is not final yet
    with pytest.raises(Rejected, match="still resting"):
        step(RULES, state, settle(s1="2c7d9h", s3="3c8d9s"))
    state, effects = run([chip(3, since_ns=4_999)], state=state)
    assert state.wagers == {1: 100, 3: 100} and state.counted
    assert records(effects, rec.WagerAccepted)[0].decided_after_lockout
    (counted,) = records(effects, rec.WagersCounted)
    assert counted.seats == [1, 3] and counted.decided_after_lockout == [3]
    assert len(records(effects, rec.MeterContribution)) == 2


def test_a_chip_arriving_at_or_after_the_edge_never_counts() -> None:
    state, _ = run([*opened(), chip(1), lockout(5_000, 3)])
    # The chip first touched before the edge, left, and another was placed after it.
    state, effects = run([chip(3, since_ns=5_000)], state=state)
    assert state.wagers == {1: 100} and state.counted
    assert records(effects, rec.WagerRejected)[0].reason == "after-lockout"


def test_a_chip_that_bounced_off_before_resting_is_no_wager() -> None:
    state, _ = run([*opened(), lockout(5_000, 2)])
    state, effects = run([chip(2, present=False, since_ns=4_000)], state=state)
    assert state.wagers == {} and state.counted
    assert records(effects, rec.WagersCounted)[0].accepted_wagers == 0


def test_a_void_while_chips_are_still_resting_returns_everything() -> None:
    state, _ = run([*opened(), chip(1), lockout(5_000, 3)])
    state, effects = run([VoidRound(reason="shoe-jam")], state=state)
    assert state.phase is Phase.CLOSED and state.undecided == ()
    assert records(effects, rec.RoundVoided)[0].contribution_reversed_ten_thousandths_cent == 0


# --- Three Card Poker settlement -------------------------------------------------------------


def test_meter_pays_100_percent_then_resets_and_envy_goes_to_the_others() -> None:
    state = locked_with(2, 5, 6)
    assert state.meter is not None
    meter_cents = state.meter.cents
    state, effects = run([settle(s2="AsKsQs", s5="2c7d9h", s6="3h4h5h")], state=state)
    hits = records(effects, rec.JackpotHit)
    assert [(h.seat, h.amount_cents, h.basis, h.paid_from_table_inventory) for h in hits] == [
        (6, 70 * 100, "odds-for-1", True),  # straight flush, paytable A, "70 for 1"
        (2, meter_cents, "100%-of-meter", False),  # 649a.11(c)(5)(iv)
    ]
    envy = records(effects, rec.EnvyBonusPaid)
    assert sorted((e.seat, e.for_seat, e.amount_cents) for e in envy) == [
        (5, 2, 10_000),
        (6, 2, 10_000),
    ]
    assert state.meter is not None and state.meter.cents == 100_000
    assert records(effects, rec.MeterReset)[0].paid_cents == meter_cents
    # Every wager has its result, in settlement order from the dealer's right.
    assert [(r.seat, r.outcome) for r in records(effects, rec.WagerSettled)] == [
        (6, rec.WagerOutcome.WON),
        (5, rec.WagerOutcome.LOST),
        (2, rec.WagerOutcome.WON),
    ]


def test_five_dollar_wager_gets_the_five_dollar_envy_bonus() -> None:
    rules = tcp(wager="5.00", rate_of_progression_percent="14")
    state = locked_with(1, 3, rules=rules)
    _, effects = run([settle(s1="AdKdQd", s3="2c7d9h")], rules=rules, state=state)
    assert [(e.seat, e.amount_cents) for e in records(effects, rec.EnvyBonusPaid)] == [(3, 12_500)]
    assert records(effects, rec.JackpotHit)[0].amount_cents == 500 * 500


def test_folded_player_forfeits_the_wager_but_keeps_envy() -> None:
    """649a.11(b)(2): the Progressive Payout Wager is forfeited, Envy Bonus eligibility kept."""
    state = locked_with(1, 4)
    _, effects = run([settle(folded=frozenset({1}), s4="AsKsQs")], state=state)
    assert [e.seat for e in records(effects, rec.EnvyBonusPaid)] == [1]
    assert [h.seat for h in records(effects, rec.JackpotHit)] == [4]
    outcomes = {r.seat: (r.outcome, r.rule) for r in records(effects, rec.WagerSettled)}
    assert outcomes[1] == (rec.WagerOutcome.FORFEITED, "649a.11(b)(2)")


def test_a_folded_hand_is_never_shown_and_earns_no_envy() -> None:
    """649a.11(c): a folded hand is collected unseen; holding it is no Envy Bonus hand."""
    state = locked_with(1, 4)
    with pytest.raises(Rejected, match="cannot both fold and show"):
        step(RULES, state, settle(folded=frozenset({1}), s1="AsKsQs", s4="2c7d9h"))


def test_only_the_highest_hand_pays() -> None:
    """649a.12(e)(2): an ace-king-queen suited is also a straight flush; it pays 500 for 1."""
    state = locked_with(3)
    _, effects = run([settle(s3="AhKhQh")], state=state)
    (hit,) = records(effects, rec.JackpotHit)
    assert hit.hand == Hand.MINI_ROYAL.value and hit.amount_cents == 50_000


def test_paytable_b_pays_no_straight() -> None:
    rules = tcp(paytable="B", rate_of_progression_percent="20")
    state = locked_with(3, 4, rules=rules)
    _, effects = run([settle(s3="4c5d6h", s4="9s9d9c")], rules=rules, state=state)
    assert [(h.seat, h.amount_cents) for h in records(effects, rec.JackpotHit)] == [(4, 9_000)]


def test_settlement_runs_from_the_dealers_right() -> None:
    assert settlement_order(7) == [7, 6, 5, 4, 3, 2, 1]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (settle(s1="AsKsQs", s2="AsJdTd"), "shown twice"),
        (settle(s1="AsKs2s"), r"seats \[2\] have table-system wagers"),
        (settle(s9="AsKsQs"), "seat 9 does not exist"),
        (settle(folded=frozenset({1, 2}), s1="AsKsQs"), "both fold"),
        (settle(s1="AsKs", s2="2c3c4c"), "a hand is 3 cards"),
        (settle(community="2d3d", s1="AsKsQs", s2="2c3c4c"), "no community cards"),
    ],
)
def test_settle_refuses_impossible_entries(entry: Settle, message: str) -> None:
    with pytest.raises(Rejected, match=message):
        step(RULES, locked_with(1, 2), entry)


# --- the jackpot workflow (649a.11(c)(5)) ------------------------------------------------------


def test_a_hit_holds_the_table_until_a_floorperson_validates_it() -> None:
    state = locked_with(2, 5)
    state, effects = run(
        [settle(s2="3h4h5h", s5="2c7d9h"), ShuffleStarted(), ShuffleCompleted(card_count=52)],
        state=state,
    )
    (pending,) = state.hits_pending
    assert pending.hit_id == "1-2" and pending.paid_from_table_inventory
    assert state.phase is Phase.CLOSED and state.deck_ready  # a deck waits, no round opens
    assert SeatLamp(seat=2, lamp=Lamp.WIN) in effects and SeatLamp(seat=5, lamp=Lamp.OFF) in effects
    with pytest.raises(Rejected, match="no pending hit"):
        step(RULES, state, ValidateHit(hit_id="1-5", by="floor-1"))
    state, effects = run([ValidateHit(hit_id="1-2", by="floor-1")], state=state)
    assert [(v.hit_id, v.by) for v in records(effects, rec.JackpotValidated)] == [
        ("1-2", "floor-1")
    ]
    assert records(effects, rec.JackpotReleased) and SeatLamp(seat=2, lamp=Lamp.OFF) in effects
    assert state.phase is Phase.BETTING and state.round_id == 2
    assert state.hit_history[0].validated_by == "floor-1"


def test_a_meter_hit_stays_on_the_table_until_documented() -> None:
    """649a.11(c)(5)(iv): not paid from the table inventory; the hand stays until documented."""
    state = locked_with(2)
    state, _ = run(
        [settle(s2="AsKsQs"), ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state
    )
    with pytest.raises(Rejected, match="validated before"):
        step(RULES, state, ConfirmDocumentation(hit_id="1-2", by="floor-1"))
    state, effects = run([ValidateHit(hit_id="1-2", by="floor-1")], state=state)
    assert (
        state.hits_pending
        and state.phase is Phase.CLOSED
        and not records(effects, rec.JackpotReleased)
    )
    with pytest.raises(Rejected, match="was validated by floor-1"):
        step(RULES, state, ValidateHit(hit_id="1-2", by="floor-2"))
    state, effects = run([ConfirmDocumentation(hit_id="1-2", by="floor-2")], state=state)
    assert records(effects, rec.JackpotDocumented)[0].by == "floor-2"
    assert not state.hits_pending and state.phase is Phase.BETTING
    assert state.hit_history[0].documented_by == "floor-2"


def test_hit_history_keeps_the_last_25() -> None:
    state = TableState.initial(RULES)
    events: list[Event] = [PowerUp(rules=RULES)]
    for round_id in range(1, HIT_HISTORY + 3):
        events += [
            ShuffleStarted(),
            ShuffleCompleted(card_count=52),
            chip(1),
            lockout(round_id * 10),
            *collected(1, at_ns=round_id * 10 + 5),
            settle(s1="3h4h5h"),
            ValidateHit(hit_id=f"{round_id}-1", by="floor"),
        ]
    state, _ = run(events, state=state)
    assert len(state.hit_history) == HIT_HISTORY
    assert state.hit_history[0].hit_id == f"{HIT_HISTORY + 2}-1"


# --- Ultimate Texas Hold 'Em and Let It Ride on the same core -------------------------------


def test_uth_2019_progressive_is_on_two_cards_and_the_flop() -> None:
    """653a.11(k) (2019): the river cannot make the progressive hand."""
    rules = uth("2019")
    state = locked_with(1, 2, rules=rules)
    _, effects = run([settle("9h8h2c7d3s", s1="7c7s", s2="AhKh")], rules=rules, state=state)
    # Seat 1 has three sevens only with the turn card: on two cards and the Flop, a pair.
    assert records(effects, rec.JackpotHit) == []
    assert [r.outcome for r in records(effects, rec.WagerSettled)] == [rec.WagerOutcome.LOST] * 2


def test_uth_2012_progressive_is_the_best_five_of_seven() -> None:
    rules = uth("2012")
    state = locked_with(1, rules=rules)
    _, effects = run([settle("9h8h2c7d3s", s1="7c7s")], rules=rules, state=state)
    (hit,) = records(effects, rec.JackpotHit)
    assert (hit.hand, hit.amount_cents, hit.rule) == ("three-of-a-kind", 900, "653a.12(d)")


def test_uth_ten_percent_hit_publishes_the_meter_it_leaves_not_a_reset() -> None:
    """653a.12(d)(1): 10 % of the meter for a straight flush; the rest stays on it."""
    rules = uth()
    state = locked_with(3, rules=rules)
    assert state.meter is not None
    before = state.meter.cents
    state, effects = run([settle("7h6h5h2c3d", s3="9h8h")], rules=rules, state=state)
    (hit,) = records(effects, rec.JackpotHit)
    assert hit.amount_cents == before // 10 and hit.basis == "10%-of-meter"
    assert not hit.paid_from_table_inventory  # 653a.11(k)(4): a percentage of the meter
    assert records(effects, rec.MeterReset) == []
    (share,) = records(effects, rec.MeterSharePaid)
    assert share.meter.meter_cents == before - before // 10 == state.meter.cents  # type: ignore[union-attr]


def test_uth_folded_player_keeps_the_progressive_but_shows_no_envy_hand() -> None:
    rules = uth()
    state = locked_with(1, 2, rules=rules)
    _, effects = run(
        [settle("QsJsTs2d3c", folded=frozenset({2}), s1="4c4d", s2="AsKs")],
        rules=rules,
        state=state,
    )
    # The folded royal flush is settled on its own hand, but earns seat 1 no Envy Bonus.
    assert [h.seat for h in records(effects, rec.JackpotHit)] == [2]
    assert records(effects, rec.EnvyBonusPaid) == []


def test_uth_folded_player_whose_cards_were_collected_loses_the_progressive() -> None:
    rules = uth()
    state = locked_with(1, rules=rules)
    _, effects = run([settle("QsJsTs2d3c", folded=frozenset({1}))], rules=rules, state=state)
    assert [(r.outcome, r.rule) for r in records(effects, rec.WagerSettled)] == [
        (rec.WagerOutcome.LOST, "653a.11(f)(2)(ii)")
    ]


def test_lir_bonus_pays_the_fixed_amount_only_no_meter_no_hold() -> None:
    """643a.8(b), 643a.12(b): the wager was collected; a royal flush receives $25,000 in all."""
    rules = lir("A")
    state = locked_with(2, 4, rules=rules)
    assert (
        state.meter is None
        and records(run(opened(rules), rules=rules)[1], rec.MeterContribution) == []
    )
    state, effects = run([settle("JsTs", s2="AsKsQs", s4="2c7d9h")], rules=rules, state=state)
    assert [(r.seat, r.outcome, r.paid_cents) for r in records(effects, rec.WagerSettled)] == [
        (4, rec.WagerOutcome.LOST, 0),
        (2, rec.WagerOutcome.WON, 2_500_000),
    ]
    assert records(effects, rec.JackpotHit) == [] and not state.hits_pending
    assert records(effects, rec.RoundSettled)[0].meter is None


def test_lir_has_no_fold_and_needs_both_community_cards() -> None:
    rules = lir()
    state = locked_with(2, rules=rules)
    with pytest.raises(Rejected, match="no fold"):
        step(rules, state, settle("JsTs", folded=frozenset({2})))
    with pytest.raises(Rejected, match="two community cards"):
        step(rules, state, settle("Js", s2="AsKsQs"))


def test_a_journal_of_one_game_is_not_run_as_another() -> None:
    state = TableState.initial(tcp())
    with pytest.raises(Rejected, match="three-card-poker table, not let-it-ride"):
        step(lir(), state, PowerUp(rules=lir()))


# --- voids, decks, the shuffler -----------------------------------------------------------------


def test_void_returns_wagers_and_reverses_contributions_exactly() -> None:
    before = run(opened())[0].meter
    state = locked_with(1, 2, 3)
    assert state.meter != before
    state, effects = run([VoidRound(reason="shoe-jam", by="dealer-1")], state=state)
    assert state.meter == before and state.wagers == {}
    (void,) = records(effects, rec.RoundVoided)
    assert void.rule == "649a.13(f)" and void.wagers_returned == [1, 2, 3] and void.by == "dealer-1"
    assert [e for e in effects if isinstance(e, SeatLamp)] == [
        SeatLamp(seat=s, lamp=Lamp.OFF) for s in (1, 2, 3)
    ]


@pytest.mark.parametrize(
    ("rules", "reason", "rule"),
    [
        (tcp(), "dealer-card-exposed", "649a.13(d)"),
        (uth(), "wrong-card-count", "653a.13(c)"),
        (lir(), "community-card-exposed", "643a.13(d)"),
    ],
)
def test_each_game_voids_for_its_own_irregularities(
    rules: TableRules, reason: str, rule: str
) -> None:
    _, effects = run([VoidRound(reason=reason)], rules=rules, state=locked_with(1, rules=rules))
    assert records(effects, rec.RoundVoided)[0].rule == rule


def test_void_with_an_unknown_reason_is_refused() -> None:
    with pytest.raises(Rejected, match="unknown void reason"):
        step(RULES, locked_with(1), VoidRound(reason="bored"))
    with pytest.raises(Rejected, match="unknown void reason"):  # no community cards in TCP
        step(RULES, locked_with(1), VoidRound(reason="community-card-exposed"))


def test_miscount_blocks_until_a_new_deck_is_registered() -> None:
    state, effects = run([PowerUp(rules=RULES), ShuffleStarted(), ShuffleCompleted(card_count=51)])
    assert state.blocked == "deck-miscount:51" and state.phase is Phase.CLOSED
    assert records(effects, rec.DeckMiscount)[0].rule == "649a.5(b)"
    state, effects = run(
        [ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state
    )  # still blocked: a completion while blocked is not the new deck's count
    assert state.phase is Phase.CLOSED and RequestShuffle() not in effects
    (done,) = records(effects, rec.ShuffleCompletedRecord)
    assert not done.deck_ready and "deck was removed" in (done.not_ready_because or "")
    state, effects = run([NewDeckRegistered(by="dealer-1")], state=state)
    # Before: the round opened at once, on the count taken while the table was blocked.
    assert state.blocked is None and state.phase is Phase.CLOSED and not state.deck_ready
    assert RequestShuffle() in effects  # the new deck is shuffled and counted first
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.BETTING


def test_new_deck_without_a_miscount_is_refused() -> None:
    with pytest.raises(Rejected):
        step(RULES, run([PowerUp(rules=RULES)])[0], NewDeckRegistered())


def test_jam_stops_shuffling_until_the_dealer_asks_for_a_reshuffle() -> None:
    state, effects = run([PowerUp(rules=RULES), ShufflerFault(code="jam")])
    assert state.shuffler_fault == "jam"
    assert records(effects, rec.ShufflerFaultRecord)[0].rule == "649a.13(e)"
    state, effects = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED  # no round on a deck from a faulted cycle
    state, effects = run([ReshuffleRequested()], state=state)
    assert state.shuffler_fault is None and RequestShuffle() in effects


def test_state_round_trips_through_json() -> None:
    for rules in (tcp(), uth(), lir()):
        state = locked_with(1, 6, rules=rules)
        assert TableState.model_validate_json(state.model_dump_json()) == state


def test_every_record_has_a_schema_and_a_stable_name() -> None:
    schemas = rec.record_schemas()
    assert set(schemas) == set(rec.RECORD_TYPES)
    assert schemas["jackpot.hit"]["properties"]["amount_cents"]["type"] == "integer"
    assert all(name == cls.TYPE for name, cls in rec.RECORD_TYPES.items())


def test_each_rules_object_is_stepped_with_its_own_game() -> None:
    """The core keeps the game of the rules it last stepped with (by identity): rules stay
    comparable, and a copy of them with another game is played as that game."""
    rules, again = tcp(), tcp()
    state, _ = run(opened(rules), rules=rules)
    run(opened(again), rules=again)
    assert rules == again and rules.game == again.game and hash(rules) == hash(again)
    by_hand = rules.model_copy(
        update={"game": rules.game.model_copy(update={"dealing": "hand"}), "shoe": True}
    )
    state, _ = run([chip(2), lockout(), *collected(2)], rules=rules, state=state)
    with pytest.raises(Rejected, match="hand deals no card from the shoe"):
        step(by_hand, state, DealRequested(by="dealer"))
    with pytest.raises(Rejected, match="no automated dealing shoe"):
        step(rules, state, DealRequested(by="dealer"))

"""The core's side of GPIO: a lost edge stops betting, the tie rule, the walk test's hold."""

from __future__ import annotations

import pytest

from tablectl.core import effects as rec
from tablectl.core.events import (
    ClearGpioFault,
    ClearStuckInput,
    DealRequested,
    Event,
    GpioFault,
    LockoutHeld,
    LockoutPressed,
    LockoutReleased,
    SensorRules,
    SensorTestEnded,
    SensorTestStarted,
    ShuffleCompleted,
    ShuffleStarted,
    VoidRound,
    placed_before_lockout,
)
from tablectl.core.table import Phase, Rejected, step

from .test_table_core import RULES, chip, opened, records, run, settle

MS = 1_000_000


def test_a_gpio_fault_while_betting_locks_the_round_out_and_journals_it() -> None:
    state, effects = run([*opened(), chip(2), GpioFault(reason="edges lost: 7..9", at_ns=5)])
    assert state.phase is Phase.LOCKED and state.counted and state.wagers == {2: 100}
    assert state.gpio_fault == "edges lost: 7..9" and state.counters.gpio_faults == 1
    (fault,) = records(effects, rec.GpioFaultRecord)
    assert fault.round_locked and fault.round_id == 1 and fault.rule == "649a.2(c)(2)"
    assert records(effects, rec.RoundLocked)[0].cause == "gpio-fault"
    # A chip after the fault is never recognised, and the lock-out button changes nothing.
    state, effects = run([chip(4), LockoutPressed(at_ns=10)], state=state)
    assert state.wagers == {2: 100} and records(effects, rec.WagerRejected)[0].seat == 4


def test_betting_reopens_only_when_a_person_clears_the_fault() -> None:
    state, _ = run([*opened(), GpioFault(reason="read failed", at_ns=1)])
    state, _ = run([settle(), ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED and state.deck_ready  # a deck waits; no round opens
    state, effects = step(RULES, state, ClearGpioFault(by="tech-7"))
    assert records(effects, rec.GpioFaultCleared) == [
        rec.GpioFaultCleared(reason="read failed", by="tech-7")
    ]
    assert state.phase is Phase.BETTING and state.gpio_fault is None
    with pytest.raises(Rejected, match="no GPIO fault to clear"):
        step(RULES, state, ClearGpioFault(by="tech-7"))


def test_a_fault_while_chips_are_still_resting_confirms_none_of_them() -> None:
    state, _ = run([*opened(), chip(1), LockoutPressed(at_ns=5_000, undecided_seats=(3,))])
    assert not state.counted
    state, effects = run(
        [GpioFault(reason="gap", at_ns=5_001), chip(3, since_ns=4_000)], state=state
    )
    assert state.counted and state.wagers == {1: 100}
    assert records(effects, rec.WagersCounted)[0].seats == [1]


def test_a_fault_between_rounds_keeps_the_next_round_closed() -> None:
    state, _ = run([*opened(), chip(1), LockoutPressed(at_ns=9), settle(s1="2c7d9h")])
    state, effects = step(RULES, state, GpioFault(reason="link lost", at_ns=20))
    assert not records(effects, rec.GpioFaultRecord)[0].round_locked
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED and state.deck_ready


@pytest.mark.parametrize(
    ("since_ns", "at_ns", "resolution_ns", "counts"),
    [
        (999, 1_000, 1, True),  # a nanosecond before an exact stamp
        (1_000, 1_000, 1, False),  # an exact tie is refused
        (1_001, 1_000, 1, False),
        (1_000, 1_000, 2 * MS, False),  # seen at the same poll as the button: a tie
        (1_000 - 2 * MS, 1_000, 2 * MS, True),  # seen one poll before the button
        (1_001 - 2 * MS, 1_000, 2 * MS, False),  # within the button's resolution
    ],
)
def test_the_tie_rule(since_ns: int, at_ns: int, resolution_ns: int, counts: bool) -> None:
    assert placed_before_lockout(since_ns, at_ns, resolution_ns) is counts


def test_a_polled_lockout_refuses_a_chip_within_its_resolution() -> None:
    press = LockoutPressed(at_ns=100 * MS, undecided_seats=(2, 3), resolution_ns=2 * MS)
    state, _ = run([*opened(), press, chip(2, since_ns=98 * MS), chip(3, since_ns=99 * MS)])
    assert state.wagers == {2: 100} and state.counted
    assert state.counters.wagers_rejected == 1


def test_a_walk_test_holds_the_table_and_is_journaled() -> None:
    state, _ = run([*opened()])
    with pytest.raises(Rejected, match="taking bets"):
        step(RULES, state, SensorTestStarted(test="sensors", by="tech"))
    state, _ = run(
        [LockoutPressed(at_ns=1), LockoutReleased(at_ns=2), VoidRound(reason="shoe-jam")],
        state=state,
    )
    state, effects = step(RULES, state, SensorTestStarted(test="sensors", by="tech"))
    assert state.sensor_test == "sensors"
    assert records(effects, rec.SensorTestStartedRecord)[0].by == "tech"
    with pytest.raises(Rejected, match="already running"):
        step(RULES, state, SensorTestStarted(test="lockout", by="tech"))
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED and state.deck_ready  # no round opens during the test
    end = SensorTestEnded(test="sensors", passed=(1, 2), failed=(3,), resolution_ns=1, by="t")
    state, effects = step(RULES, state, end)
    (ended,) = records(effects, rec.SensorTestEndedRecord)
    assert ended.passed == [1, 2] and ended.failed == [3] and ended.resolution_ns == 1
    assert state.phase is Phase.BETTING and state.sensor_test is None


# --- stuck inputs: the lock-out button and the seat sensors ---------------------------------


def test_no_round_opens_while_the_lockout_is_down_and_held_past_its_time_it_is_stuck() -> None:
    """A held button could not lock the next round out: it waits; held past
    gpio.lockout_hold_max_ms (the shell's LockoutHeld), betting stays closed until cleared."""
    state, _ = run([*opened(), chip(1), LockoutPressed(at_ns=10), chip(1, False)])
    state, _ = run(
        [settle(s1="2c7d9h"), ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state
    )
    assert state.phase is Phase.CLOSED and state.deck_ready and state.lockout_held
    state, effects = step(RULES, state, LockoutHeld(since_ns=10, at_ns=5_000 * MS))
    assert records(effects, rec.InputStuck) == [
        rec.InputStuck(
            input="lock-out-button",
            seat=None,
            cause="not-released",
            round_id=1,
            round_locked=False,
            rule="649a.2(c)(2)",
        )
    ]
    with pytest.raises(Rejected, match="still reads pressed"):
        step(RULES, state, ClearStuckInput(by="T9"))
    state, _ = step(RULES, state, LockoutReleased(at_ns=6_000 * MS))
    assert state.phase is Phase.CLOSED  # released, but stuck until a person clears it
    state, effects = step(RULES, state, ClearStuckInput(by="T9 (bob)"))
    assert records(effects, rec.InputStuckCleared) == [
        rec.InputStuckCleared(
            input="lock-out-button", seat=None, cause="not-released", by="T9 (bob)"
        )
    ]
    assert state.phase is Phase.BETTING and state.stuck_inputs == ()


def test_a_button_stuck_while_bets_are_taken_locks_the_round_out() -> None:
    """Should the core hear of a stuck button while bets are taken (one it never heard go
    down), the round is locked out, as for a GPIO fault."""
    state, _ = run([*opened(), chip(3)])
    state, effects = step(RULES, state, LockoutHeld(since_ns=1, at_ns=5_000 * MS))
    (stuck,) = records(effects, rec.InputStuck)
    assert stuck.cause == "held" and stuck.round_locked
    assert records(effects, rec.RoundLocked)[0].cause == "lockout-stuck"
    assert state.phase is Phase.LOCKED and state.counted and state.wagers == {3: 100}


def test_a_sensor_occupied_through_too_many_rounds_is_stuck_and_its_seat_refused() -> None:
    """gpio.sensor_stuck_rounds (1): a chip may be there for one round's betting; the dealer
    collects it before the deal (649a.8(b)). Still there when the next round opens: stuck."""
    state, _ = run(
        [*opened(), chip(2), chip(5), LockoutPressed(at_ns=10), LockoutReleased(at_ns=20)]
    )
    state, _ = run([chip(5, False), settle(s2="2c7d9h", s5="3c8d4h")], state=state)
    state, effects = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.BETTING and state.round_id == 2
    (stuck,) = records(effects, rec.InputStuck)
    assert (stuck.input, stuck.seat, stuck.cause, stuck.round_id) == (
        "seat-sensor",
        2,
        "occupied-rounds",
        2,
    )
    assert state.wagers == {} and not records(effects, rec.WagerAccepted)
    state, effects = run([chip(5), chip(2, False), chip(2)], state=state)
    assert state.wagers == {5: 100}  # the other seats play on
    assert [(r.seat, r.reason) for r in records(effects, rec.WagerRejected)] == [
        (2, "sensor-stuck")
    ]
    with pytest.raises(Rejected, match="seat 2's sensor still reads occupied"):
        step(RULES, state, ClearStuckInput(seat=2, by="D1"))
    with pytest.raises(Rejected, match="seat 3's sensor is not stuck; stuck inputs: seat 2"):
        step(RULES, state, ClearStuckInput(seat=3, by="D1"))
    state, effects = run([chip(2, False), ClearStuckInput(seat=2, by="D1"), chip(2)], state=state)
    assert records(effects, rec.InputStuckCleared)[0].seat == 2
    assert state.wagers == {2: 100, 5: 100}


def test_the_rounds_a_sensor_may_stay_occupied_are_the_tables_rule() -> None:
    rules = RULES.model_copy(update={"sensors": SensorRules(stuck_rounds=3)})
    state, _ = run([*opened(rules), chip(4)], rules=rules)
    for round_id in (2, 3, 4):
        events: list[Event] = [
            LockoutPressed(at_ns=round_id),
            LockoutReleased(at_ns=round_id + 1),
            settle(s4="2c7d9h"),
            ShuffleStarted(),
            ShuffleCompleted(card_count=52),
        ]
        state, effects = run(
            events,
            rules=rules,
            state=state,
        )
        assert state.round_id == round_id
        assert bool(records(effects, rec.InputStuck)) is (round_id == 4)
        assert (4 in state.wagers) is (round_id < 4)


def test_a_sensor_occupied_while_the_shoe_deals_is_stuck() -> None:
    """649a.10(a)(2): the wagers are collected before the shoe dispenses any cards."""
    shoe = RULES.model_copy(update={"shoe": True})
    state, _ = run(
        [*opened(shoe), chip(1), chip(3), LockoutPressed(at_ns=10), chip(1, False)], rules=shoe
    )
    state, effects = step(shoe, state, DealRequested(by="D1"))
    assert [(s.seat, s.cause) for s in records(effects, rec.InputStuck)] == [
        (3, "occupied-during-deal")
    ]
    state, effects = step(shoe, state, chip(6))  # a chip put down while the shoe deals
    assert [(s.seat, s.cause) for s in records(effects, rec.InputStuck)] == [
        (6, "occupied-during-deal")
    ]
    assert records(effects, rec.WagerRejected)[0].reason == "after-lockout"
    assert {f.seat for f in state.stuck_inputs} == {3, 6}


def test_a_chip_resting_on_a_stuck_seat_when_the_round_opens_is_refused_once() -> None:
    state, _ = run([*opened(), chip(2), LockoutPressed(at_ns=10), LockoutReleased(at_ns=11)])
    state, _ = run(
        [settle(s2="2c7d9h"), ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state
    )
    assert {f.seat for f in state.stuck_inputs} == {2}
    state, _ = run([LockoutPressed(at_ns=20), LockoutReleased(at_ns=21)], state=state)
    state, _ = run([chip(2, False), VoidRound(reason="shoe-jam"), chip(2)], state=state)
    assert state.phase is Phase.CLOSED and state.waiting == (2,)
    state, effects = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert [(r.seat, r.reason) for r in records(effects, rec.WagerRejected)] == [
        (2, "sensor-stuck")
    ]
    assert state.wagers == {} and state.waiting == ()


def test_journals_from_before_never_track_the_button() -> None:
    rules = RULES.model_copy(update={"sensors": None})
    state, _ = run([*opened(rules), chip(1), LockoutPressed(at_ns=10)], rules=rules)
    state, _ = run(
        [settle(s1="2c7d9h"), ShuffleStarted(), ShuffleCompleted(card_count=52)],
        rules=rules,
        state=state,
    )
    assert not state.lockout_held and state.phase is Phase.BETTING

"""The core's side of GPIO: a lost edge stops betting, the tie rule, the walk test's hold."""

from __future__ import annotations

import pytest

from tablectl.core import effects as rec
from tablectl.core.events import (
    ClearGpioFault,
    GpioFault,
    LockoutPressed,
    LockoutReleased,
    SensorTestEnded,
    SensorTestStarted,
    ShuffleCompleted,
    ShuffleStarted,
    VoidRound,
    placed_before_lockout,
)
from tablectl.core.round import Phase, Rejected, step

from .test_table_core import RULES, chip, opened, records, run, settle

MS = 1_000_000


def test_a_gpio_fault_while_betting_locks_the_round_out_and_journals_it() -> None:
    state, effects = run([*opened(), chip(2), GpioFault(reason="edges lost: 7..9", at_ns=5)])
    assert state.phase is Phase.LOCKED and state.counted and state.wagers == {2: 100}
    assert state.gpio_fault == "edges lost: 7..9" and state.counters["gpio_faults"] == 1
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
    assert state.counters["wagers_rejected"] == 1


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

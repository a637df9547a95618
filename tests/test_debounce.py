"""Debouncing and the lock-out edge, on an injected clock (ns): pure, no sleeps."""

from __future__ import annotations

from tablectl.drivers.gpio.debounce import Decision, PressDebouncer, SeatDebouncer
from tablectl.drivers.gpio.table_io import SeatInputs

from tablectl.core.events import ChipSensed, LockoutPressed

MS = 1_000_000


def test_a_chip_counts_once_it_has_rested() -> None:
    deb = SeatDebouncer(hold_ns=150 * MS)
    deb.edge(True, 1_000 * MS)
    assert deb.due_ns() == 1_150 * MS
    assert deb.settle(1_149 * MS) is None
    assert deb.settle(1_150 * MS) == Decision(present=True, since_ns=1_000 * MS, changed=True)
    assert deb.stable and deb.due_ns() is None
    assert deb.resting_since() == 1_000 * MS


def test_a_bouncing_chip_is_stamped_at_its_first_touch() -> None:
    deb = SeatDebouncer(hold_ns=150 * MS)
    for t, level in ((0, True), (5, False), (9, True), (12, False), (20, True)):
        deb.edge(level, t * MS)
    assert deb.settle(160 * MS) is None  # the last edge was at 20 ms
    assert deb.settle(170 * MS) == Decision(True, 0, True)


def test_a_chip_that_rolls_off_ends_its_episode_unchanged() -> None:
    deb = SeatDebouncer(hold_ns=150 * MS)
    deb.edge(True, 0)
    deb.edge(False, 40 * MS)
    assert deb.arriving_since() == 0
    assert deb.settle(190 * MS) == Decision(False, 0, False)
    assert deb.arriving_since() is None and not deb.stable


def test_a_lifted_chip_is_decided_absent() -> None:
    deb = SeatDebouncer(hold_ns=100 * MS)
    deb.edge(True, 0)
    deb.settle(100 * MS)
    deb.edge(False, 500 * MS)
    assert deb.resting_since() is None  # being lifted: not resting any more
    assert deb.settle(600 * MS) == Decision(False, 500 * MS, True)


def test_lockout_acts_on_the_leading_edge_and_ignores_bounces() -> None:
    press = PressDebouncer(lockout_ns=50 * MS)
    assert press.press(1_000 * MS)
    assert not press.press(1_010 * MS)
    assert not press.press(1_049 * MS)
    assert press.press(1_050 * MS)


def test_the_lockout_names_chips_that_arrived_before_it_and_are_still_settling() -> None:
    seats = SeatInputs(6, chip_present_ms=150, lockout_debounce_ms=50)
    seats.chip_edge(2, True, 999 * MS)  # 1 ms before the edge
    seats.chip_edge(4, True, 1_000 * MS)  # at the edge: too late
    seats.chip_edge(5, True, 100 * MS)
    assert seats.settle(300 * MS) == [ChipSensed(seat=5, present=True, since_ns=100 * MS)]
    assert seats.lockout_edge(1_000 * MS) == LockoutPressed(at_ns=1_000 * MS, undecided_seats=(2,))
    assert seats.lockout_edge(1_001 * MS) is None  # a bounce
    assert seats.settle(1_148 * MS) == []
    # Seat 2 arrived 1 ms before "no more bets": the core accepts it. Seat 4 did not.
    assert seats.settle(1_149 * MS) == [ChipSensed(seat=2, present=True, since_ns=999 * MS)]
    assert seats.settle(1_150 * MS) == [ChipSensed(seat=4, present=True, since_ns=1_000 * MS)]


def test_resting_chips_are_reported_with_their_arrival() -> None:
    seats = SeatInputs(3, chip_present_ms=100, lockout_debounce_ms=0)
    seats.chip_edge(3, True, 7 * MS)
    seats.settle(107 * MS)
    assert seats.resting() == [ChipSensed(seat=3, present=True, since_ns=7 * MS)]

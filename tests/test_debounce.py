"""Debouncing, contacts and the lock-out button, on an injected clock (ns): pure, no sleeps."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st
from tablectl.drivers.gpio.backend import LOCKOUT, Edge
from tablectl.drivers.gpio.debounce import Decision, LockoutButton, PressDebouncer, SeatDebouncer
from tablectl.drivers.gpio.table_io import SeatInputs

from tablectl.core.events import (
    ChipSensed,
    GpioFault,
    LockoutHeld,
    LockoutPressed,
    LockoutReleased,
)

MS = 1_000_000


def chip(seat: int, level: bool, t_ns: int, resolution_ns: int = 1) -> Edge:
    return Edge(seat, level, t_ns, None, resolution_ns)


def button(level: bool, t_ns: int, resolution_ns: int = 1) -> Edge:
    return Edge(LOCKOUT, level, t_ns, None, resolution_ns)


def test_a_chip_counts_once_it_has_rested() -> None:
    deb = SeatDebouncer(hold_ns=150 * MS)
    deb.edge(True, 1_000 * MS)
    assert deb.due_ns() == 1_150 * MS
    assert deb.settle(1_149 * MS) == []
    assert deb.settle(1_150 * MS) == [Decision(present=True, since_ns=1_000 * MS)]
    assert deb.stable and deb.due_ns() is None and deb.rested()


def test_a_bouncing_chip_is_stamped_at_its_first_touch() -> None:
    deb = SeatDebouncer(hold_ns=150 * MS)
    for t, level in ((0, True), (5, False), (9, True), (12, False), (20, True)):
        deb.edge(level, t * MS)
    assert deb.settle(160 * MS) == []  # the last edge was at 20 ms
    assert deb.settle(170 * MS) == [Decision(True, 0)]


def test_a_chip_that_rolls_off_ends_its_episode_unchanged() -> None:
    deb = SeatDebouncer(hold_ns=150 * MS)
    deb.edge(True, 0)
    deb.edge(False, 40 * MS)
    assert deb.settle(190 * MS) == [Decision(False, 0, changed=False)]
    assert not deb.stable and not deb.rested()


def test_a_contact_joins_openings_that_surely_lasted_a_bounce_at_most() -> None:
    """The opening's earliest moment (its stamp minus its resolution) to the closing."""
    deb = SeatDebouncer(hold_ns=150 * MS, bounce_ns=5 * MS)
    deb.edge(True, 0)
    deb.settle(150 * MS)
    assert deb.rested()
    deb.edge(False, 200 * MS, resolution_ns=2 * MS)  # opened within (198, 200] ms
    deb.edge(True, 203 * MS)  # away at most 5 ms: a bounce, the same rested contact
    assert deb.rested() and deb.closed_at(204 * MS, 1)
    deb.edge(False, 300 * MS, resolution_ns=2 * MS)
    deb.edge(True, 303 * MS + 1)  # perhaps away 5 ms and a nanosecond: another contact
    assert not deb.rested()


def test_closed_at_the_edge_follows_the_tie_rule() -> None:
    deb = SeatDebouncer(hold_ns=150 * MS)
    deb.edge(True, 100 * MS)
    assert deb.closed_at(100 * MS + 1, 1) and not deb.closed_at(100 * MS, 1)
    assert not deb.closed_at(101 * MS, 2 * MS) and deb.closed_at(102 * MS, 2 * MS)


def test_lockout_acts_on_the_leading_edge_and_ignores_bounces() -> None:
    press = PressDebouncer(lockout_ns=50 * MS)
    assert press.press(1_000 * MS)
    assert not press.press(1_010 * MS)
    assert not press.press(1_049 * MS)
    assert press.press(1_050 * MS)


def test_the_button_is_released_once_up_for_the_debounce_time_and_stuck_when_held() -> None:
    b = LockoutButton(debounce_ns=50 * MS, hold_max_ns=5_000 * MS)
    assert b.edge(True, 0) and b.held
    assert not b.edge(False, 10 * MS) and not b.edge(True, 12 * MS)  # a bounce: still held
    assert b.due_ns() == 5_000 * MS and b.stuck(4_999 * MS) is None
    assert b.stuck(5_000 * MS) == 0 and b.stuck(6_000 * MS) is None  # told once
    b.edge(False, 7_000 * MS)
    assert b.released(7_049 * MS) is None and b.released(7_050 * MS) == 7_000 * MS
    assert not b.held and b.due_ns() is None


STEPS = st.lists(
    st.tuples(
        st.sampled_from(["edge", "settle", "watch", "unwatch"]),
        st.booleans(),  # the edge's level
        st.integers(0, 30),  # time since the last step (ns; hold 20, bounce 5)
        st.integers(1, 3),  # the edge's resolution
    ),
    max_size=40,
)


@settings(derandomize=True, max_examples=400)
@given(STEPS)
def test_a_seat_settled_before_it_is_due_decides_and_changes_nothing(
    steps: list[tuple[str, bool, int, int]],
) -> None:
    """What SeatInputs relies on to settle only the seats that are due: before due_ns()
    (or with none), settle() decides nothing and leaves the debouncer as it was."""
    deb = SeatDebouncer(hold_ns=20, bounce_ns=5)
    t = 0
    for op, level, dt, resolution in steps:
        t += dt
        due = deb.due_ns()
        for now in (t, t + 100 if due is None else due - 1):
            if now >= t and (due is None or now < due):
                before = copy.copy(deb)
                assert deb.settle(now) == [] and deb == before
        if op == "edge":
            deb.edge(level, t, resolution)
        elif op == "settle":
            deb.settle(t)
        elif op == "watch":
            deb.watch(t)
        else:
            deb.unwatch()


def test_seat_inputs_decide_what_rested_before_each_edge_first() -> None:
    """A chip that rested before the press, though the timer had not fired yet, is a
    resting chip at the edge: its decision comes first, then the press names it."""
    inputs = SeatInputs(6, chip_present_ms=150, lockout_debounce_ms=50)
    out = inputs.take([chip(5, True, 100 * MS), chip(2, True, 999 * MS)])
    assert out == [ChipSensed(seat=5, present=True, since_ns=100 * MS)]  # before seat 2's edge
    out = inputs.take([button(True, 1_000 * MS), chip(4, True, 1_000 * MS)])
    assert out == [LockoutPressed(at_ns=1_000 * MS, undecided_seats=(2,), resting_seats=(5,))]
    assert inputs.take([button(False, 1_001 * MS), button(True, 1_002 * MS)]) == []  # bounce
    assert inputs.settle(1_148 * MS) == []
    # Seat 2 was on its sensor a millisecond before "no more bets"; seat 4 was a tie.
    assert inputs.settle(1_149 * MS) == [ChipSensed(seat=2, present=True, since_ns=999 * MS)]
    assert inputs.settle(1_150 * MS) == [ChipSensed(seat=4, present=True, since_ns=1_000 * MS)]


def test_a_button_held_too_long_then_released_is_stuck_however_late_the_loop_looks() -> None:
    """The timer never ran while it was down: the release's own edge finds it held too long."""
    inputs = SeatInputs(3, chip_present_ms=100, lockout_debounce_ms=50, lockout_hold_max_ms=600)
    pressed, held = inputs.take([button(True, 1_000 * MS), button(False, 1_700 * MS)])
    assert isinstance(pressed, LockoutPressed)
    assert held == LockoutHeld(since_ns=1_000 * MS, at_ns=1_700 * MS)
    assert inputs.settle(2_000 * MS) == [LockoutReleased(at_ns=1_700 * MS)]
    button_only = LockoutButton(debounce_ns=50 * MS, hold_max_ns=600 * MS)
    button_only.edge(True, 0)
    button_only.edge(False, 700 * MS)  # nobody looked until it was up again
    assert button_only.stuck(900 * MS) == 0 and button_only.released(900 * MS) == 700 * MS


def test_the_button_released_and_held_too_long_are_inputs() -> None:
    inputs = SeatInputs(3, chip_present_ms=100, lockout_debounce_ms=50, lockout_hold_max_ms=600)
    (pressed,) = inputs.take([button(True, 1_000 * MS)])
    assert isinstance(pressed, LockoutPressed)
    assert inputs.due_ns() == 1_600 * MS
    assert inputs.settle(1_600 * MS) == [LockoutHeld(since_ns=1_000 * MS, at_ns=1_600 * MS)]
    assert inputs.settle(2_000 * MS) == []
    inputs.take([button(False, 2_000 * MS)])
    assert inputs.settle(2_050 * MS) == [LockoutReleased(at_ns=2_000 * MS)]


def test_an_opening_delivered_after_the_press_it_may_precede_refuses_a_settling_chip() -> None:
    """Out of order (a mock script, a thread): still the stamps decide, on the safe side."""
    inputs = SeatInputs(6, chip_present_ms=150, lockout_debounce_ms=50)
    inputs.take([chip(3, True, 990 * MS)])
    (pressed,) = inputs.take([button(True, 1_000 * MS)])
    assert isinstance(pressed, LockoutPressed) and pressed.undecided_seats == (3,)
    assert inputs.take([chip(3, False, 1_000 * MS)]) == [
        ChipSensed(seat=3, present=False, since_ns=1_000 * MS)
    ]


def test_with_a_reordering_backend_the_press_waits_for_what_may_precede_it() -> None:
    """gpiozero: an edge may arrive up to reorder_ns after one stamped later. The press is
    told once that has passed; an opening stamped within its resolution joins it first, and
    nothing after the press is decided before it."""
    inputs = SeatInputs(6, chip_present_ms=150, lockout_debounce_ms=50, reorder_ns=2 * MS)
    out = inputs.take([chip(1, True, 100 * MS), chip(2, True, 851 * MS)])
    assert out == [ChipSensed(seat=1, present=True, since_ns=100 * MS)]
    assert inputs.take([button(True, 1_000 * MS, MS)]) == []
    assert inputs.due_ns() == 1_002 * MS
    # Seat 1 left 0.4 ms after the press by its stamp: within the resolution, so perhaps
    # before. Seat 2 rests at 1,001 ms, after the press: not decided before it is told.
    late = [chip(1, False, 1_000 * MS + 400_000, MS), chip(3, True, 1_001 * MS + 500_000, MS)]
    assert inputs.take(late) == []
    assert inputs.settle(1_002 * MS) == [
        LockoutPressed(at_ns=1_000 * MS, resolution_ns=MS, undecided_seats=(2,), resting_seats=()),
        ChipSensed(seat=2, present=True, since_ns=851 * MS),
    ]


def test_resync_reads_a_held_button_as_a_press_that_counts_no_chip_anew() -> None:
    inputs = SeatInputs(3, chip_present_ms=100, lockout_debounce_ms=50)
    out = inputs.resync({LOCKOUT: True, 2: True}, 5 * MS)
    assert out == [LockoutPressed(at_ns=5 * MS, resting_seats=None)]
    assert inputs.lockout.held
    assert inputs.settle(105 * MS) == [ChipSensed(seat=2, present=True, since_ns=5 * MS)]


def test_a_counted_chip_heard_leaving_before_the_edge_too_late_is_a_gpio_fault() -> None:
    """Delivered in order, that cannot happen; when it does (a script, a kernel read split in
    the press's nanosecond), the count may be wrong: the dealer is told to check it."""
    inputs = SeatInputs(6, chip_present_ms=150, lockout_debounce_ms=50)
    inputs.take([chip(2, True, 100 * MS)])
    (_, pressed) = inputs.take([button(True, 1_000 * MS)])
    assert isinstance(pressed, LockoutPressed) and pressed.resting_seats == (2,)
    (fault,) = inputs.take([chip(2, False, 1_000 * MS)])
    assert isinstance(fault, GpioFault) and "seat 2's chip may have left" in fault.reason
    assert inputs.take([chip(2, True, 1_100 * MS), chip(2, False, 1_200 * MS)]) == []

"""Chip presence and lock-out press debouncing, on an injected clock."""

from __future__ import annotations

from tablectl.drivers.gpio.debounce import PresenceDebouncer, PressDebouncer


def test_chip_counts_only_after_resting_for_the_hold_time() -> None:
    deb = PresenceDebouncer(hold_ms=150)
    deb.edge(True, now_ms=1000)
    assert deb.due_ms() == 1150
    assert deb.settle(1149) is None
    assert deb.settle(1150) is True and deb.stable


def test_bounces_restart_the_hold_time() -> None:
    deb = PresenceDebouncer(hold_ms=150)
    for t, level in [(0, True), (5, False), (9, True), (12, False), (20, True)]:
        deb.edge(level, t)
    assert deb.settle(160) is None  # only 140 ms since the last bounce
    assert deb.settle(170) is True


def test_chip_that_rolls_off_never_counts() -> None:
    deb = PresenceDebouncer(hold_ms=150)
    deb.edge(True, 0)
    deb.edge(False, 100)
    assert deb.due_ms() is None
    assert deb.settle(1000) is None and not deb.stable


def test_lockout_acts_on_the_first_edge_and_ignores_its_bounces() -> None:
    press = PressDebouncer(lockout_ms=50)
    assert press.press(1000) is True
    assert press.press(1010) is False
    assert press.press(1049) is False
    assert press.press(1100) is True

"""The lock-out rule (docs/gpio.md), from raw edges through SeatInputs and the round core.

A chip counts only if its sensor was surely closed at the lock-out edge (within the edge's
resolution; ties refused) and its contact -- closings joined across openings that surely
lasted at most chip_bounce_ms -- rested chip_present_ms: before the edge, or after it without
ever leaving for longer than a bounce. Scripted patterns an adversary would try, on every
backend's stamping; then generated edge sequences against an oracle written from the rule's
statement, and against the true timeline.
"""

from __future__ import annotations

import importlib.util
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tablectl.drivers.gpio.backend import LOCKOUT, Edge
from tablectl.drivers.gpio.table_io import SeatInputs
from tablectl.simulators.sensor_scripts import (
    GPIOD,
    GPIOZERO,
    MS,
    POLLED_2MS,
    POLLED_20MS,
    STAMPINGS,
    US,
    Stamping,
    TrueEdge,
    burst,
    contacts,
    press,
    truly_late,
)

from tablectl.core import effects as rec
from tablectl.core.effects import Effect
from tablectl.core.events import Event, PowerUp, ShuffleCompleted, ShuffleStarted
from tablectl.core.table import Phase, TableState, step

from .test_table_core import RULES, records

HOLD = 150 * MS  # chip_present_ms
BOUNCE = 5 * MS  # chip_bounce_ms
L = 10_000 * MS  # the true moment of the press
END = L + 10_000 * MS
SEAT = 4


def betting() -> TableState:
    state = TableState.initial(RULES)
    for event in (PowerUp(rules=RULES), ShuffleStarted(), ShuffleCompleted(card_count=52)):
        state, _ = step(RULES, state, event)
    assert state.phase is Phase.BETTING
    return state


BETTING = betting()


@dataclass
class Played:
    state: TableState
    events: list[Event]
    effects: list[Effect]
    delivered: list[list[Edge]]

    def counted(self, seat: int = SEAT) -> bool:
        assert self.state.phase is Phase.LOCKED and self.state.counted, "the count is final"
        return seat in self.state.wagers


def play(
    script: Sequence[TrueEdge],
    stamping: Stamping = GPIOD,
    seed: int = 0,
    phase_ns: int | None = None,
    timer: bool = True,
) -> Played:
    """The true edges, as the backend delivers them, through SeatInputs and the core.
    phase_ns: where a polled backend's reads fall (default: from the seed). timer=False: a
    loop too busy for the timer; what is due is settled only at the next edge, and at the end."""
    rng = random.Random(seed)
    if phase_ns is None:
        phase_ns = rng.randrange(stamping.resolution_ns)
    deliveries = stamping.observe(script, rng, phase_ns=phase_ns)
    inputs = SeatInputs(
        7,
        chip_present_ms=HOLD // MS,
        lockout_debounce_ms=50,
        chip_bounce_ms=BOUNCE // MS,
        lockout_hold_max_ms=60_000,
        reorder_ns=stamping.reorder_ns,
    )
    events: list[Event] = []

    def timer_until(now: int) -> None:  # TableGpio's timer: settle at each due time
        if not timer:
            events.extend(inputs.settle(now) if now == END else [])
            return
        for _ in range(10_000):
            due = inputs.due_ns()
            if due is None or due > now:
                return
            events.extend(inputs.settle(due))
        raise AssertionError(f"settling never ends: due {inputs.due_ns()}")

    for arrival, batch in deliveries:
        timer_until(arrival)
        events.extend(inputs.take(batch))
    timer_until(END)
    events.extend(inputs.settle(END))
    state, effects = BETTING, []
    for event in events:
        state, fx = step(RULES, state, event)
        effects += fx
    return Played(state, events, effects, [batch for _, batch in deliveries])


def seat_and_press(seat_edges: list[TrueEdge]) -> list[TrueEdge]:
    return [*press(L), *seat_edges]


# --- scripted: what an adversary tries --------------------------------------------------------

PATTERNS: dict[str, tuple[list[TrueEdge], bool]] = {
    # (the seat's true edges, counts with exact stamps)
    "placed before the edge, rests after it": (contacts(SEAT, L - 10 * MS, [10**10]), True),
    "rested long before the edge": (contacts(SEAT, L - 500 * MS, [10**10]), True),
    "touch before the edge, chip placed after it": (
        contacts(SEAT, L - 100 * MS, [5 * MS, 145 * MS, 10**10]),
        False,
    ),
    "touch ending a moment before, chip a moment after (within a bounce)": (
        contacts(SEAT, L - 100 * MS, [99 * MS, 2 * MS, 10**10]),
        False,
    ),
    "placed before, bouncing across the edge, closed at it": (
        contacts(
            SEAT,
            L - 20 * MS,
            [17 * MS, 500 * US, 1_500 * US, 500 * US, 1 * MS, 500 * US, 1 * MS, 300 * US, 10**10],
        ),
        True,
    ),
    "placed before, a bounce open across the edge": (
        contacts(SEAT, L - 20 * MS, [19_500 * US, 1 * MS, 10**10]),
        False,
    ),
    "slides off after the edge and back (longer than a bounce)": (
        contacts(SEAT, L - 20 * MS, [30 * MS, 30 * MS, 10**10]),
        False,
    ),
    "slides off after the edge and back within a bounce": (
        contacts(SEAT, L - 20 * MS, [30 * MS, 3 * MS, 10**10]),
        True,
    ),
    "a resting wager lifted before the edge, put back after it": (
        contacts(SEAT, L - 500 * MS, [450 * MS, 70 * MS, 10**10]),
        False,
    ),
    "a resting wager lifted just after the edge": (
        contacts(SEAT, L - 500 * MS, [501 * MS, 10**10]),
        True,
    ),
    "a wager lifted and put back before the edge, gone after it": (
        contacts(SEAT, L - 500 * MS, [400 * MS, 40 * MS, 70 * MS, 10**10]),
        False,
    ),
    "10 kHz burst across the edge, closed at it, then resting": (
        [(L - 20 * MS, SEAT, True), *burst(SEAT, L - 4_975 * US, 200, closing_first=False)],
        True,
    ),
    "10 kHz burst across the edge, open at it": (
        burst(SEAT, L - 5 * MS + 25 * US, 201),
        False,
    ),
    "10 kHz burst after the edge (a chip tossed late), then resting": (
        burst(SEAT, L + 1 * MS, 201),
        False,
    ),
    "10 kHz burst before the edge, nothing on the sensor at it": (
        burst(SEAT, L - 20 * MS, 200),
        False,
    ),
    "on the sensor at the edge, then chattering for longer than twice its rest": (
        [(L - 10 * MS, SEAT, True), *burst(SEAT, L + 1 * MS, 4_000, closing_first=False)],
        False,
    ),
    "placed at the very nanosecond of the edge (a tie)": (contacts(SEAT, L, [10**10]), False),
    "placed a nanosecond before the edge": (contacts(SEAT, L - 1, [10**10]), True),
    "lifted at the very nanosecond of the edge": (
        contacts(SEAT, L - 20 * MS, [20 * MS, 100 * MS, 10**10]),
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_each_pattern_with_kernel_stamps(name: str) -> None:
    script, counts = PATTERNS[name]
    played = play(seat_and_press(script))
    assert played.counted() is counts
    assert rule(played.delivered, SEAT, HOLD, BOUNCE) is counts  # the oracle agrees
    if counts:
        assert not truly_late(seat_and_press(script), SEAT, L, bounce_ns=BOUNCE, hold_ns=HOLD)


@pytest.mark.parametrize("stamping", STAMPINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_each_pattern_on_every_backends_stamps(name: str, stamping: Stamping) -> None:
    """What each backend sees decides; a chip counted was never late in truth (a polled chip
    cannot see an opening shorter than its period: judged on what its reads saw)."""
    script, _ = PATTERNS[name]
    for seed in range(5):
        played = play(seat_and_press(script), stamping, seed)
        assert played.counted() is rule(played.delivered, SEAT, HOLD, BOUNCE)
        if played.counted() and not stamping.polled:
            assert not truly_late(
                seat_and_press(script),
                SEAT,
                L,
                bounce_ns=BOUNCE,
                hold_ns=HOLD,
                rest_slack_ns=stamping.resolution_ns,
            )


def test_touch_then_place_after_is_never_one_wager_and_the_late_chip_is_refused() -> None:
    """The hole of issue 14: a touch opened an episode, a chip after the edge joined it."""
    script, _ = PATTERNS["touch before the edge, chip placed after it"]
    played = play(seat_and_press(script))
    assert SEAT not in played.state.wagers
    (locked,) = records(played.effects, rec.RoundLocked)
    assert locked.undecided_seats == [] and locked.seats == []
    assert [(r.seat, r.reason) for r in records(played.effects, rec.WagerRejected)] == [
        (SEAT, "after-lockout")
    ]


def test_a_wager_lifted_before_the_edge_is_withdrawn_at_the_edge() -> None:
    script, _ = PATTERNS["a resting wager lifted before the edge, put back after it"]
    played = play(seat_and_press(script))
    kinds = [type(e).__name__ for e in played.effects if isinstance(e, rec.Record)]
    assert kinds[kinds.index("WagerAccepted") :] == [
        "WagerAccepted",  # it rested while betting
        "WagerWithdrawn",  # not on its sensor at the edge
        "RoundLocked",
        "WagersCounted",
        "WagerRejected",  # the chip put back after "no more bets"
    ]


def test_a_chip_that_slides_off_after_the_edge_is_decided_when_it_left() -> None:
    script, _ = PATTERNS["slides off after the edge and back (longer than a bounce)"]
    played = play(seat_and_press(script))
    (locked,) = records(played.effects, rec.RoundLocked)
    assert locked.undecided_seats == [SEAT]
    (counted,) = records(played.effects, rec.WagersCounted)
    assert counted.seats == [] and counted.decided_after_lockout == []


def test_a_polled_read_of_the_press_that_also_sees_the_chip_leave_refuses_it() -> None:
    """One read sees the button down and the chip gone: it may have left before the press,
    even though the lock-out is the first line the read reports."""
    script = contacts(SEAT, L - 500 * MS, [500 * MS + 500 * US, 10**10])  # lifted 0.5 ms on
    played = play(seat_and_press(script), POLLED_2MS, phase_ns=(L + 1 * MS) % (2 * MS))
    (batch,) = [b for b in played.delivered if any(e.line == LOCKOUT and e.level for e in b)]
    assert [(e.line, e.level) for e in batch] == [(LOCKOUT, True), (SEAT, False)]
    assert not played.counted()
    assert records(played.effects, rec.WagerWithdrawn)[0].seat == SEAT


def test_gpiozero_gathers_edges_so_a_late_callback_is_judged_with_the_press() -> None:
    """Lifted 0.2 ms before the press, its callback may be stamped after the press's: the
    backend hands both over together, in stamp order, and the chip is refused."""
    script = contacts(SEAT, L - 500 * MS, [500 * MS - 200 * US, 10**10])
    for seed in range(50):
        played = play(seat_and_press(script), GPIOZERO, seed)
        assert not played.counted()


@pytest.mark.parametrize("stamping", [POLLED_2MS, POLLED_20MS], ids=lambda s: s.name)
def test_polled_a_chip_seen_at_the_same_read_as_the_press_is_a_tie(stamping: Stamping) -> None:
    phase = (L + stamping.resolution_ns // 2) % stamping.resolution_ns  # a read 1/2 period on
    script = contacts(SEAT, L - 1 * US, [10**10])
    assert not play(seat_and_press(script), stamping, phase_ns=phase).counted()
    early = contacts(SEAT, L - 3 * stamping.resolution_ns, [10**10])
    assert play(seat_and_press(early), stamping, phase_ns=phase).counted()


# --- the oracle: the rule as docs/gpio.md states it ------------------------------------------


def rule(delivered: Sequence[Sequence[Edge]], seat: int, hold_ns: int, bounce_ns: int) -> bool:
    """Written from the statement, not from SeatInputs: the seat counts if it was surely
    closed at the press and its contact rested, before or after it."""
    edges = [e for batch in delivered for e in batch]
    presses = [e for e in edges if e.line == LOCKOUT and e.level]
    if not presses:
        return False
    pressed = presses[0]
    at, resolution = pressed.t_ns, max(1, pressed.resolution_ns)
    mine = [e for e in edges if e.line == seat]

    def earliest(edge: Edge) -> int:  # the edge happened within (t - resolution, t]
        return edge.t_ns - max(1, edge.resolution_ns)

    # Surely closed at the press: the last closing stamped surely before it, and the opening
    # after that closing surely after it.
    closings = [i for i, e in enumerate(mine) if e.level and e.t_ns <= at - resolution]
    if not closings:
        return False
    c = closings[-1]
    if c + 1 < len(mine) and earliest(mine[c + 1]) < at:
        return False

    def bounce(opening: int) -> bool:  # the opening at index i closed again within a bounce
        return opening + 1 < len(mine) and mine[opening + 1].t_ns - earliest(mine[opening]) <= (
            bounce_ns
        )

    first, last = c, c
    while first >= 2 and bounce(first - 1):
        first -= 2
    while last + 2 < len(mine) and bounce(last + 1):
        last += 2
    # Rested: one closing of the contact stayed closed, no edge at all, for hold_ns, by
    # twice hold_ns after the press at the latest.
    return any(
        (k + 1 >= len(mine) or mine[k + 1].t_ns - mine[k].t_ns >= hold_ns)
        and mine[k].t_ns + hold_ns <= at + 2 * hold_ns
        for k in range(first, last + 1, 2)
    )


# --- generated: every interleaving the strategies reach -------------------------------------

# Durations an adversary mixes: 10 kHz chatter, bounces about the bounce time, hand-made
# touches and slides, rests; starts at and around the edge to the nanosecond.
DURATION = st.one_of(
    st.integers(1, 100 * US),
    st.integers(BOUNCE - 2 * MS, BOUNCE + 2 * MS),
    st.integers(1 * MS, 60 * MS),
    st.integers(HOLD - 5 * MS, HOLD + 5 * MS),
    st.integers(HOLD, 3 * HOLD),
)
START = st.one_of(
    st.integers(L - 2 * HOLD, L + HOLD),
    st.sampled_from([L - 1, L, L + 1, L - BOUNCE, L - HOLD, L - HOLD - 1]),
    st.integers(L - 3 * MS, L + 3 * MS),
)


# Or built from what a chip does: rest, touch, bounce, lift and put back, chatter.
CLOSED = st.one_of(
    st.integers(HOLD, 2 * HOLD),  # rests
    st.integers(1 * MS, HOLD - 1),  # a touch, or a chip lifted before it rested
    st.just(50 * US),  # 10 kHz chatter
)
OPEN = st.one_of(
    st.integers(1, BOUNCE),  # a bounce
    st.integers(BOUNCE + 1, HOLD),  # lifted and put back
    st.just(50 * US),
    st.integers(HOLD, 2 * HOLD),  # gone
)
SEGMENTS = st.lists(st.tuples(CLOSED, OPEN), min_size=1, max_size=6).map(
    lambda pairs: [d for pair in pairs for d in pair]
)


@st.composite
def seat_timelines(draw: st.DrawFn, seat: int) -> list[TrueEdge]:
    start = draw(START)
    durations = draw(st.one_of(st.lists(DURATION, min_size=1, max_size=12), SEGMENTS))
    if draw(st.booleans()):
        # Put one edge on the press, to the nanosecond or either side of it, or about a
        # bounce time away.
        shift = draw(st.one_of(st.sampled_from([-1, 0, 1]), st.integers(-3 * BOUNCE, 3 * BOUNCE)))
        i = draw(st.integers(0, len(durations) - 1))
        start += L - (start + sum(durations[:i])) + shift
    return contacts(seat, start, durations)


@settings(
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    seat_a=seat_timelines(SEAT),
    seat_b=seat_timelines(2),
    stamping=st.sampled_from(STAMPINGS),
    seed=st.integers(0, 2**16),
    timer=st.booleans(),
)
def test_no_chip_counts_that_the_rule_refuses(
    seat_a: list[TrueEdge], seat_b: list[TrueEdge], stamping: Stamping, seed: int, timer: bool
) -> None:
    script = [*press(L), *seat_a, *seat_b]
    if not timer and stamping.reorder_ns:
        timer = True  # gpiozero's press is told by the timer: a loop never that busy
    played = play(script, stamping, seed, timer=timer)
    for seat in (SEAT, 2):
        counted = played.counted(seat)
        assert counted is rule(played.delivered, seat, HOLD, BOUNCE), seat
        if counted and not stamping.polled:
            assert not truly_late(
                script,
                seat,
                L,
                bounce_ns=BOUNCE,
                hold_ns=HOLD,
                rest_slack_ns=stamping.resolution_ns,
            ), seat


def test_the_diagram_in_the_docs_is_what_the_code_decides() -> None:
    """docs/diagrams/lockout-rule.svg is drawn by running each row through SeatInputs and
    the core: regenerate it when the rule changes."""
    source = Path(__file__).resolve().parents[1] / "docs" / "diagrams" / "lockout_rule.py"
    spec = importlib.util.spec_from_file_location("lockout_rule_diagram", source)
    assert spec is not None and spec.loader is not None
    diagram = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(diagram)
    assert diagram.OUT.read_text() == diagram.svg(), f"run: .venv/bin/python {source}"
    verdicts = [diagram.decide(edges) for _, edges in diagram.ROWS]
    assert verdicts == [True, True, False, True, False, False, False]

"""The lock-out edge: no late wager, over many randomised trials around "no more bets".

Each trial scripts one seat's true contacts around a lock-out press -- a chip landing with
contact bounce (some roll off), a touch before the edge and a chip after it, a chip placed
before and bouncing across the edge, one sliding off and back, 10 kHz bursts, a resting wager
lifted and put back -- sees them through a backend's stamping (simulators/sensor_scripts.py:
the kernel's exact stamps, gpiozero's threads, a polled chip) and runs them through the
production code on an injected clock: SeatInputs (drivers/gpio/table_io.py) and the round
core. It reports, min / median / max over the runs:

- late wagers: chips that counted although, in the true timeline, they were not on their
  sensor at the press, or were away longer than chip_bounce_ms after it before they had
  rested (a polled chip cannot see an opening shorter than its period: those count as closed);
- the refusal window: how long before the press a chip that lands and stays may still be
  refused (ties: the press's resolution).

Side by side, in the same trials: the rule before issue 14 (a chip counted if the debounce
episode it ended was begun before the edge), the baseline whose late wagers were the hole.

Run: .venv/bin/python bench/lockout_window.py [--trials N] [--repeats R] [--stamping NAME]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tablectl.drivers.gpio.backend import LOCKOUT, Edge
from tablectl.drivers.gpio.table_io import GpioInput, SeatInputs
from tablectl.simulators.sensor_scripts import (
    GPIOD,
    GPIOZERO,
    MS,
    POLLED_2MS,
    US,
    Stamping,
    TrueEdge,
    burst,
    contacts,
    press,
    truly_late,
)

from tablectl.core.events import (
    ChipSensed,
    Event,
    LockoutPressed,
    PowerUp,
    ShuffleCompleted,
    ShuffleStarted,
    TableRules,
    placed_before_lockout,
)
from tablectl.core.table import TableState, step

HOLD_MS, BOUNCE_MS = 150, 5
HOLD, BOUNCE = HOLD_MS * MS, BOUNCE_MS * MS
EDGE = 10_000 * MS  # the true moment of the press
END = EDGE + 5_000 * MS
SEAT = 4
RULES = TableRules.model_validate(
    {
        "seats": 7,
        "decks": 2,
        "game": {
            "name": "three-card-poker",
            "progressive": {
                "wager": "1.00",
                "paytable": "A",
                "rate_of_progression_percent": "14.5",
                "initial_amount": "1000.00",
                "reset_amount": "1000.00",
            },
        },
    }
)


def betting() -> TableState:
    state = TableState.initial(RULES)
    for event in (PowerUp(rules=RULES), ShuffleStarted(), ShuffleCompleted(card_count=52)):
        state, _ = step(RULES, state, event)
    return state


BETTING = betting()


# --- what an adversary does around the edge (true times, ns) --------------------------------


def u(rng: random.Random, low_ns: int, high_ns: int) -> int:
    return rng.randint(low_ns, high_ns)


def landing(rng: random.Random) -> tuple[str, list[TrueEdge]]:
    """A chip dropped near the edge, chattering as it lands; some roll off again."""
    t = EDGE + u(rng, -2 * HOLD, 2 * HOLD)
    durations = []
    for _ in range(rng.randint(0, 3)):
        durations += [u(rng, 50 * US, 3 * MS), u(rng, 50 * US, 3 * MS)]
    stays = rng.random() < 0.85
    durations += [u(rng, 1 * MS, HOLD - 1 * MS), 10**12] if not stays else [10**12]
    return ("landing" if stays else "rolls off"), contacts(SEAT, t, durations)


def touch_then_place_after(rng: random.Random) -> tuple[str, list[TrueEdge]]:
    touch = EDGE - u(rng, 1, HOLD)
    durations = [u(rng, 100 * US, 10 * MS)]
    after = EDGE + u(rng, 0, HOLD)
    if after <= touch + durations[0]:
        after = touch + durations[0] + 1
    return "touch, then a chip after", contacts(
        SEAT, touch, [*durations, after - touch - durations[0], 10**12]
    )


def bounce_across(rng: random.Random) -> tuple[str, list[TrueEdge]]:
    t = EDGE - u(rng, 1 * MS, 30 * MS)
    first = EDGE - u(rng, 0, 3 * MS) - t  # closed until the bouncing starts near the edge
    durations = [max(1, first)]
    for _ in range(rng.randint(1, 6)):
        durations += [u(rng, 50 * US, BOUNCE), u(rng, 50 * US, 2 * MS)]
    durations[-1] = 10**12
    return "placed, bouncing across", contacts(SEAT, t, durations)


def slide_off_and_back(rng: random.Random) -> tuple[str, list[TrueEdge]]:
    t = EDGE - u(rng, 1 * MS, 2 * HOLD)
    off = EDGE + u(rng, -5 * MS, 50 * MS)
    away = u(rng, 100 * US, 3 * BOUNCE)
    durations = [max(1, off - t), away]
    durations += [10**12] if rng.random() < 0.8 else [u(rng, 1 * MS, HOLD), 10**12]
    return "slides off and back", contacts(SEAT, t, durations)


def chatter(rng: random.Random) -> tuple[str, list[TrueEdge]]:
    """10 kHz: 50 µs closed, 50 µs open, across or near the edge; then it rests or not."""
    edges = rng.randint(10, 400)
    return "10 kHz burst", burst(SEAT, EDGE + u(rng, -25 * MS, 5 * MS), edges)


def wager_lifted(rng: random.Random) -> tuple[str, list[TrueEdge]]:
    t = EDGE - 2 * HOLD - u(rng, 0, HOLD)
    lift = EDGE + u(rng, -HOLD, HOLD)
    durations = [lift - t, u(rng, 1 * MS, 3 * HOLD)] if rng.random() < 0.7 else [lift - t]
    return "a wager lifted, put back", contacts(SEAT, t, [*durations, 10**12])


PATTERNS: list[Callable[[random.Random], tuple[str, list[TrueEdge]]]] = [
    landing,
    touch_then_place_after,
    bounce_across,
    slide_off_and_back,
    chatter,
    wager_lifted,
]


# --- the rule before issue 14: the baseline ---------------------------------------------------


@dataclass
class PreviousSeat:
    """drivers/gpio/debounce.py before issue 14: one debounce episode from the first edge
    away from the decided level until the level held hold_ns; a chip counted if its
    episode began before the edge."""

    hold_ns: int
    stable: bool = False
    raw: bool = False
    since: int | None = None
    last: int = 0

    def edge(self, level: bool, t: int) -> None:
        if level != self.raw:
            self.raw, self.last = level, t
            self.since = t if self.since is None else self.since

    def due(self) -> int | None:
        return None if self.since is None else self.last + self.hold_ns

    def settle(self, now: int) -> ChipSensed | None:
        if self.since is None or now - self.last < self.hold_ns:
            return None
        since, self.since, self.stable = self.since, None, self.raw
        return ChipSensed(seat=SEAT, present=self.stable, since_ns=since)


def previous_rule(deliveries: Sequence[tuple[int, list[Edge]]]) -> list[Event]:
    seat = PreviousSeat(HOLD)
    events: list[Event | None] = []
    for arrival, batch in deliveries:  # the timer, then each edge as it came (no settling first)
        while (due := seat.due()) is not None and due <= arrival:
            events.append(seat.settle(due))
        for edge in batch:
            if edge.line == SEAT:
                seat.edge(edge.level, edge.t_ns)
            elif edge.line == LOCKOUT and edge.level:
                arriving = seat.since if not seat.stable else None
                early = arriving is not None and placed_before_lockout(
                    arriving, edge.t_ns, edge.resolution_ns
                )
                events.append(
                    LockoutPressed(
                        at_ns=edge.t_ns,
                        undecided_seats=(SEAT,) if early else (),
                        resolution_ns=edge.resolution_ns,
                    )
                )
    events.append(seat.settle(END))
    return [e for e in events if e is not None]


def current_rule(deliveries: Sequence[tuple[int, list[Edge]]], stamping: Stamping) -> list[Event]:
    inputs = SeatInputs(
        7,
        chip_present_ms=HOLD_MS,
        lockout_debounce_ms=50,
        chip_bounce_ms=BOUNCE_MS,
        reorder_ns=stamping.reorder_ns,
    )
    events: list[GpioInput] = []
    for arrival, batch in deliveries:  # TableGpio's timer, then the batch
        while (due := inputs.due_ns()) is not None and due <= arrival:
            events += inputs.settle(due)
        events += inputs.take(batch)
    while (due := inputs.due_ns()) is not None and due <= END:
        events += inputs.settle(due)
    return [*events, *inputs.settle(END)]


def counted(events: Sequence[Event]) -> bool:
    state = BETTING
    for event in events:
        state, _ = step(RULES, state, event)
    assert state.counted, "every chip is decided"
    return SEAT in state.wagers


def seen_as_closed(script: Sequence[TrueEdge], unseen_ns: int) -> list[TrueEdge]:
    """The seat's timeline without openings shorter than unseen_ns (a polled chip's)."""
    mine = sorted(e for e in script if e[1] == SEAT)
    out: list[TrueEdge] = []
    i = 0
    while i < len(mine):
        t, line, level = mine[i]
        if not level and i + 1 < len(mine) and mine[i + 1][0] - t < unseen_ns:
            i += 2  # an opening and its closing: not seen
            continue
        out.append((t, line, level))
        i += 1
    return out


@dataclass
class Run:
    trials: int = 0
    late: int = 0
    late_before: int = 0
    window_ns: int = 0  # how long before the press a chip that stays was refused, at most
    window_before_ns: int = 0
    seconds: float = 0.0
    late_before_by_pattern: Counter[str] = field(default_factory=Counter)


def run(stamping: Stamping, trials: int, seed: int) -> Run:
    rng = random.Random(seed)
    out = Run()
    started = time.perf_counter()
    for i in range(trials):
        name, seat = PATTERNS[i % len(PATTERNS)](rng)
        script = [*press(EDGE), *seat]
        deliveries = stamping.observe(script, rng, phase_ns=rng.randrange(stamping.resolution_ns))
        now, before = (
            counted(current_rule(deliveries, stamping)),
            counted(previous_rule(deliveries)),
        )
        truth = seen_as_closed(seat, stamping.resolution_ns) if stamping.polled else seat
        late = truly_late(
            [*press(EDGE), *truth],
            SEAT,
            EDGE,
            bounce_ns=BOUNCE,
            hold_ns=HOLD,
            rest_slack_ns=stamping.resolution_ns,
        )
        out.trials += 1
        out.late += now and late
        out.late_before += before and late
        out.late_before_by_pattern[name] += before and late
        if name == "landing":  # a chip that lands and stays: refused how long before?
            arrival = seat[0][0]
            if arrival < EDGE and not now:
                out.window_ns = max(out.window_ns, EDGE - arrival)
            if arrival < EDGE and not before:
                out.window_before_ns = max(out.window_before_ns, EDGE - arrival)
    out.seconds = time.perf_counter() - started
    return out


STAMPINGS = {s.name: s for s in (GPIOD, GPIOZERO, POLLED_2MS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=10_000, help="per run (default 10,000)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--stamping", choices=sorted(STAMPINGS), action="append", help="default: all three"
    )
    args = parser.parse_args()
    print(
        f"{args.repeats} runs x {args.trials:,} trials per backend's stamping "
        f"(chip_present_ms {HOLD_MS}, chip_bounce_ms {BOUNCE_MS}); patterns: "
        + ", ".join(p.__name__.replace("_", " ") for p in PATTERNS)
    )
    for name in args.stamping or list(STAMPINGS):
        runs = [run(STAMPINGS[name], args.trials, seed) for seed in range(args.repeats)]
        print(f"{name} (resolution {STAMPINGS[name].resolution_ns / MS:g} ms):")
        for label, values in (
            ("late wagers, the lock-out rule (must be 0)", [r.late for r in runs]),
            ("late wagers, the rule before (the hole)", [r.late_before for r in runs]),
            ("refusal window, the lock-out rule (ms)", [r.window_ns / MS for r in runs]),
            ("refusal window, the rule before (ms)", [r.window_before_ns / MS for r in runs]),
            ("trials per second", [r.trials / r.seconds for r in runs]),
        ):
            print(
                f"  {label:<44} min {min(values):10.3f}  median "
                f"{statistics.median(values):10.3f}  max {max(values):10.3f}"
            )
        by_pattern = sum((r.late_before_by_pattern for r in runs), Counter[str]())
        print(
            "  the rule before's late wagers, all runs: "
            + ", ".join(f"{name} {n}" for name, n in by_pattern.most_common())
        )


if __name__ == "__main__":
    main()

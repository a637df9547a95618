"""The lock-out edge: which chips count, over many randomised trials around "no more bets".

Each trial opens a round, drops a chip at a random moment within +-window of the lock-out
edge (with a random bounce burst; some chips roll off again), presses the button, and lets
every sensor settle, all through the production code on an injected clock: the pure
debouncers (drivers/gpio/debounce.py, SeatInputs) and the round core. It reports
- late wagers accepted: chips that first touched the sensor at or after the edge and still
  counted (649a.2(c)(2): must be 0);
- the refusal window: how long before the edge a chip that stays could land and still be
  refused (the goal is at most 5 ms).
Side by side, in the same trials, the rule the daemon used before (a chip counts only if its
debounce completed before the edge), whose window is the whole debounce time.

Run: .venv/bin/python bench/lockout_window.py [--trials N] [--repeats R]
"""

from __future__ import annotations

import argparse
import random
import statistics

from tablectl.drivers.gpio.table_io import SeatInputs

from tablectl.core.events import (
    ChipSensed,
    LockoutPressed,
    PowerUp,
    ShuffleCompleted,
    ShuffleStarted,
    TableRules,
)
from tablectl.core.round import TableState, step

MS = 1_000_000
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


def trial(
    rng: random.Random, base: TableState, hold_ms: int, window_ms: int, resolution_ns: int
) -> tuple[int, bool, bool, bool]:
    """One chip around one edge: (arrival - edge in ns, stays, counted now, counted before).

    resolution_ns > 1 stamps every edge at the end of its sampling period, as a polled GPIO
    backend would (ties with the lock-out are then refused).
    """
    seats = SeatInputs(7, chip_present_ms=hold_ms, lockout_debounce_ms=50)
    edge = 10_000 * MS
    arrival = edge + rng.randint(-window_ms * MS, window_ms * MS)
    stays = rng.random() < 0.85
    edges = [(arrival, True)]
    t = arrival
    for _ in range(rng.randint(0, 3)):  # contacts chatter as the chip lands
        t += rng.randint(50_000, 3 * MS)
        edges.append((t, False))
        t += rng.randint(50_000, 3 * MS)
        edges.append((t, True))
    last_contact = t
    if not stays:  # it rolls off before it has rested
        edges.append((t + rng.randint(1, hold_ms - 1) * MS, False))

    def stamp(at: int) -> int:
        return -(-at // resolution_ns) * resolution_ns

    timeline = sorted([(stamp(at), 0, level) for at, level in edges] + [(stamp(edge), 1, True)])
    events: list[ChipSensed | LockoutPressed] = []
    for at, kind, level in timeline:
        events += seats.settle(at)
        if kind == 0:
            seats.chip_edge(4, level, at)
        else:
            press = seats.lockout_edge(at)
            assert press is not None
            events.append(press)
    events += seats.settle(edge + 10 * hold_ms * MS)
    state = base
    for event in events:
        state, _ = step(RULES, state, event)
    counted = 4 in state.wagers
    # The rule before: a chip counted only if its rest completed before the edge.
    counted_before = stays and last_contact + hold_ms * MS < edge
    return arrival - edge, stays, counted, counted_before


def run(
    trials: int, seed: int, hold_ms: int, window_ms: int, resolution_ns: int
) -> dict[str, float]:
    rng = random.Random(seed)
    base = betting()
    late_accepted = 0
    refused_before_edge: list[int] = []
    refused_before_edge_old: list[int] = []
    for _ in range(trials):
        offset, stays, counted, counted_before = trial(rng, base, hold_ms, window_ms, resolution_ns)
        if counted and offset >= 0:
            late_accepted += 1
        if stays and offset < 0 and not counted:
            refused_before_edge.append(-offset)
        if stays and offset < 0 and not counted_before:
            refused_before_edge_old.append(-offset)
    return {
        "late_accepted": late_accepted,
        "window_ms": max(refused_before_edge, default=0) / MS,
        "window_old_ms": max(refused_before_edge_old, default=0) / MS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chip-present-ms", type=int, default=150)
    parser.add_argument(
        "--resolution-us",
        type=int,
        default=0,
        help="stamp edges at this sampling period (a polled backend); 0: exact kernel stamps",
    )
    args = parser.parse_args()
    window_ms = 2 * args.chip_present_ms
    resolution_ns = max(1, args.resolution_us * 1000)
    results = [
        run(args.trials, seed, args.chip_present_ms, window_ms, resolution_ns)
        for seed in range(args.repeats)
    ]
    print(
        f"{args.repeats} runs x {args.trials:,} trials, chips within +-{window_ms} ms of the "
        f"edge, chip_present_ms = {args.chip_present_ms}, edge resolution "
        f"{args.resolution_us or 'exact'} us"
    )
    for key, label in (
        ("late_accepted", "late wagers accepted (must be 0)"),
        ("window_ms", "refusal window, edge-decided (ms)"),
        ("window_old_ms", "refusal window, debounce-decided (ms)"),
    ):
        values = [r[key] for r in results]
        print(
            f"  {label:<40} min {min(values):8.3f}  median {statistics.median(values):8.3f}  "
            f"max {max(values):8.3f}"
        )


if __name__ == "__main__":
    main()

"""The overlap window's p-values against its null alone: do they hold their levels per round?

The full monitor costs about 0.3 ms a round, so the fair-round run reaches a few million
rounds a game; the overlap window alone (monitor.py `_overlap_window`) costs about 20 us. Here
it is fed what a fair shuffle gives it, drawn directly: each use's overlap with its deck's use
before is hypergeometric, independent of everything before it, with the game's deal sizes (1
to 6 players at random, two decks alternating). The run prints the fraction of rounds whose
p-value is at or below each level, as rounds and as episodes (runs of consecutive rounds
below it, counted once); a valid p-value falls there at most that often on average.

    .venv/bin/python bench/window_null.py [--game three-card-poker] [--rounds 15000000]
        [--seed 1]
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random
import time
from pathlib import Path

from tablectl.simulators.shuffle_play import shoe_plan

from tablectl.config import load_config
from tablectl.core.games.base import Procedure
from tablectl.core.shuffle_integrity import nulls
from tablectl.core.shuffle_integrity.monitor import ShuffleMonitor

ROOT = Path(__file__).resolve().parents[1]
LEVELS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)


class Hypergeometric:
    """Overlaps drawn by the inverse of each (drawn, marked) pair's cumulative pmf."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._cdf: dict[tuple[int, int], list[float]] = {}

    def __call__(self, drawn: int, marked: int) -> int:
        cdf = self._cdf.get((drawn, marked))
        if cdf is None:
            cdf = self._cdf[drawn, marked] = list(
                itertools.accumulate(nulls.hypergeometric_pmf(drawn, marked))
            )
        return min(bisect.bisect_left(cdf, self._rng.random()), len(cdf) - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="three-card-poker")
    parser.add_argument("--rounds", type=int, default=15_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    game = load_config(ROOT / "config" / f"{args.game}.toml").game.table_game()
    drawn_by_players = {
        k: len(shoe_plan(game.deal_plan(list(range(1, k + 1)), Procedure.AUTOMATED_SHOE))[1])
        for k in range(1, 7)
    }
    rng = random.Random(args.seed)
    overlap = Hypergeometric(rng)
    monitor = ShuffleMonitor()
    window = monitor.window
    below, episodes, before = [0] * len(LEVELS), [0] * len(LEVELS), [False] * len(LEVELS)
    last_drawn: dict[int, int] = {}
    started = time.monotonic()
    for n in range(args.rounds):
        drawn, deck = drawn_by_players[rng.randint(1, 6)], n % 2
        marked = last_drawn.get(deck)
        if marked is not None:
            window.add_overlap(drawn, marked, overlap(drawn, marked))
        last_drawn[deck] = drawn
        p = monitor._overlap_window(window).p_value
        for i, level in enumerate(LEVELS):
            now = p <= level
            below[i] += now
            episodes[i] += now and not before[i]
            before[i] = now
    print(
        f"{args.game}: {args.rounds:,} rounds of the overlap window alone, "
        f"{time.monotonic() - started:.0f} s (deal sizes {sorted(set(drawn_by_players.values()))})"
    )
    print("  level     " + "  ".join(f"{x:>8g}" for x in LEVELS))
    print("  rounds    " + "  ".join(f"{c / args.rounds:8.2e}" for c in below))
    print("  episodes  " + "  ".join(f"{c / args.rounds:8.2e}" for c in episodes))


if __name__ == "__main__":
    main()

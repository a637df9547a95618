"""Hand evaluation speed against treys (the independent evaluator), in the same run,
and the time of the full Three Card Poker Ante/Play report.

Run: .venv/bin/python bench/evaluator.py [--hands N]
Goals (issue 3): evaluation at least as fast as treys; the ante-play report within 10 s.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from treys import Card as TreysCard
from treys import Evaluator

from tablectl.analysis.report import report
from tablectl.rules.cards import full_deck
from tablectl.rules.poker import DECK_CODES, best_of, eval5, prepare_seven_card_evaluation


def rate(label: str, run: Callable[[], None], count: int, repeat: int = 3) -> float:
    best = min(_timed(run) for _ in range(repeat))
    per_s = count / best
    print(f"  {label:<34} {per_s:>12,.0f} hands/s")
    return per_s


def _timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main(hands: int) -> None:
    rng = random.Random(1)
    deck = list(full_deck())
    treys_codes = [TreysCard.new(str(c)) for c in deck]
    evaluator = Evaluator()
    five = [rng.sample(range(52), 5) for _ in range(hands)]
    seven = [rng.sample(range(52), 7) for _ in range(hands // 10)]
    ours5 = [[DECK_CODES[i] for i in h] for h in five]
    theirs5 = [[treys_codes[i] for i in h] for h in five]
    ours7 = [[DECK_CODES[i] for i in h] for h in seven]
    theirs7 = [[treys_codes[i] for i in h] for h in seven]

    def ours_five() -> None:
        for h in ours5:
            eval5(*h)

    def treys_five() -> None:
        for h in theirs5:
            evaluator.evaluate(h[:2], h[2:])

    def ours_seven() -> None:
        for h in ours7:
            best_of(h)

    def treys_seven() -> None:
        for h in theirs7:
            evaluator.evaluate(h[:2], h[2:])

    print(f"five-card hands ({hands:,} random)")
    r5 = rate("tablectl eval5", ours_five, hands) / rate("treys evaluate", treys_five, hands)
    print(f"  ratio tablectl / treys: {r5:.2f}x")
    start = time.perf_counter()
    prepare_seven_card_evaluation()
    print(
        f"seven-card hands ({hands // 10:,} random; rank table built once in "
        f"{time.perf_counter() - start:.2f} s)"
    )
    r7 = rate("tablectl best_of", ours_seven, hands // 10) / rate(
        "treys evaluate", treys_seven, hands // 10
    )
    print(f"  ratio tablectl / treys: {r7:.2f}x")
    start = time.perf_counter()
    result = report("three-card-poker", "ante-play", "A")
    print(
        f"three-card-poker ante-play report (A): {time.perf_counter() - start:.2f} s, "
        f"house edge {float(result.house_edge):.4%}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hands", type=int, default=200_000)
    main(parser.parse_args().hands)

"""Shuffle integrity: false alarms on fair shuffles, uses of a deck until a bad shuffler is
caught, and the monitor's CPU per round (docs/shuffle-integrity.md, "Measured").

    .venv/bin/python bench/shuffle_integrity.py [--fair-rounds 100000] [--trials 40]
    .venv/bin/python bench/shuffle_integrity.py --write-thresholds   # the calibration

Fair shuffles come from the operating system's cryptographic source (random.SystemRandom),
dealt through each game's own deal plan (automated shoe, 1 to 6 players at random) and
collected by its pickup, two decks alternating: the path of the simulated table
(simulators/card_flow.py, simulators/shuffle_play.py). Every test's p-value is exact or an
upper bound, so a test alarms on at most its ALPHA of fair rounds; the run measures it. Ten
million rounds take about 1.5 core-hours in plain Python: run with --fair-rounds 10000000 for
that (the default measures 100,000 per game, and the nulls carry the rest).

--write-thresholds writes tablectl/core/shuffle_integrity/thresholds.py: the error budget
(ALPHA) and what the run measured (MEASURED).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from figures import percentile, spread
from tablectl.simulators.shuffle_play import play
from tablectl.simulators.shuffler import Mixing

from tablectl.config import load_config
from tablectl.core.games.base import TableGame
from tablectl.core.shuffle_integrity.monitor import DeckUse, ShuffleMonitor, UseReport
from tablectl.core.shuffle_integrity.thresholds import ALPHA, TABLE_ALPHA

ROOT = Path(__file__).resolve().parent.parent
GAMES = ("three-card-poker", "ultimate-texas-holdem", "let-it-ride")
LEVELS = (1e-2, 1e-3, 1e-4)
BAD = (
    ("unshuffled", ["unshuffled"], 1),
    ("repeated order", ["repeat"], 1),
    ("cut only", ["cut"], 1),
    ("one riffle", ["riffle", "1"], 2),
    ("three riffles", ["riffle", "3"], 20),
    ("chosen card at a chosen position", ["place", "As", "1"], 200),
)
WARM_UP = 30  # fair rounds before the bad shuffler takes over: the monitor has a history
GIVE_UP_USES = 400


def game(name: str) -> TableGame:
    return load_config(ROOT / "config" / f"{name}.toml").game.table_game()


class TimedMonitor(ShuffleMonitor):
    """The monitor, with the CPU time of its observations summed (nothing else counted)."""

    cpu_s = 0.0

    def observe(self, use: DeckUse) -> UseReport:
        started = time.process_time()
        report = super().observe(use)
        self.cpu_s += time.process_time() - started
        return report


def fair(name: str, rounds: int) -> tuple[int, dict[str, list[int]], list[float]]:
    """Alarms, per test how many rounds fell at or below each level, CPU per round (ms) per
    block of 1,000 rounds."""
    below = {test: [0] * len(LEVELS) for test in ALPHA}
    alarms = 0
    cpu: list[float] = []
    monitor = TimedMonitor()
    rounds_played = play(game(name), Mixing(), random.SystemRandom(), monitor=monitor)
    for n, played in enumerate(rounds_played, start=1):
        alarms += bool(played.report.alarms)
        for f in played.report.findings:
            for i, level in enumerate(LEVELS):
                below[f.test][i] += f.p_value <= level
        if n % 1000 == 0:
            cpu.append(monitor.cpu_s)
            monitor.cpu_s = 0.0
        if n == rounds:
            break
    return alarms, below, cpu


def detection(name: str, spec: list[str], trials: int, seed: int) -> list[int]:
    """Uses of a deck until the first alarm, once per trial (GIVE_UP_USES: never)."""
    found = []
    for trial in range(trials):
        rng = random.Random(seed * 1000 + trial)
        for played in play(game(name), Mixing.parse(spec), rng, warm_up=WARM_UP):
            if played.report.alarms or played.use >= GIVE_UP_USES:
                found.append(played.use if played.report.alarms else GIVE_UP_USES)
                break
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fair-rounds", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--games", default=",".join(GAMES))
    parser.add_argument("--write-thresholds", action="store_true")
    args = parser.parse_args(argv)
    games = args.games.split(",")
    print(
        f"error budget: {len(ALPHA)} tests at {max(ALPHA.values()):g} each per round, "
        f"{TABLE_ALPHA:g} per round for the table (goal: at most 1e-06)"
    )
    measured: dict[str, dict[str, object]] = {}
    ok = True
    for name in games:
        alarms, below, cpu = fair(name, args.fair_rounds)
        rounds = args.fair_rounds
        per_round = [block for block in cpu]  # seconds per 1,000 rounds = ms per round
        print(f"\n{name}: {rounds:,} fair rounds (SystemRandom), {alarms} alarms")
        print(f"  monitor CPU per round (ms, blocks of 1,000):  {spread(per_round, '6.3f')}")
        ok &= statistics.median(per_round) < 1.0
        print("  fraction of rounds with p at or below   " + "  ".join(f"{x:>8g}" for x in LEVELS))
        for test, counts in below.items():
            fractions = [c / rounds for c in counts]
            print(f"    {test:<16} " + " " * 21 + "  ".join(f"{x:8.1e}" for x in fractions))
            # A valid p-value falls below a level at most that often (3 standard errors).
            for level, x in zip(LEVELS, fractions, strict=True):
                ok &= x <= level + 3 * (level / rounds) ** 0.5
        measured[name] = {
            "rounds": rounds,
            "alarms": alarms,
            **{test: [c / rounds for c in counts] for test, counts in below.items()},
        }
        print("  bad shuffler: uses of a deck until the alarm (median, 95th percentile; goal)")
        for label, spec, goal in BAD:
            uses = detection(name, spec, args.trials, seed=len(label))
            median, p95 = statistics.median(uses), percentile([float(u) for u in uses], 95)
            print(f"    {label:<34} {median:6.1f} {p95:6.0f}   (goal {goal})")
    if args.write_thresholds:
        write_thresholds(measured)
    print("\nok" if ok else "\nFAILED: a p-value fell below its level too often, or CPU over 1 ms")
    return 0 if ok else 1


def write_thresholds(measured: dict[str, dict[str, object]]) -> None:
    path = ROOT / "tablectl" / "core" / "shuffle_integrity" / "thresholds.py"
    text = path.read_text()
    head, _, _ = text.partition("MEASURED: dict[str, dict[str, object]] = ")
    lines = ["{"]
    for name, figures in measured.items():
        lines.append(f"    {name!r}: {{")
        for key, value in figures.items():
            if isinstance(value, list):
                value = [float(f"{v:.3g}") for v in value]
            lines.append(f"        {key!r}: {value!r},")
        lines.append("    },")
    lines.append("}")
    path.write_text(head + "MEASURED: dict[str, dict[str, object]] = " + "\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())

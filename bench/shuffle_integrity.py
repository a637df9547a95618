"""Shuffle integrity: false alarms on fair shuffles, uses of a deck until a bad shuffler is
caught, and the monitor's CPU per round (docs/shuffle-integrity.md, "Measured").

    .venv/bin/python bench/shuffle_integrity.py [--fair-rounds 1000000] [--fair-minutes 30]
        [--workers 2] [--trials 40] [--json out.json]
    .venv/bin/python bench/shuffle_integrity.py --write-thresholds   # the calibration
    .venv/bin/python bench/shuffle_integrity.py --add-to earlier.json ...  # runs added up

Fair shuffles come from the operating system's cryptographic source (random.SystemRandom),
dealt through each game's own deal plan (automated shoe, 1 to 6 players at random) and
collected by its pickup, two decks alternating: the path of the simulated table
(simulators/card_flow.py, simulators/shuffle_play.py), the pure monitor without the daemon.
The fair rounds are played as independent tables of --chunk rounds each (every table starts
with no history, as a new table does) spread over --workers processes; --fair-minutes stops
handing out chunks after that long, and the run says how many rounds it played. Every
test's p-value is exact or an upper bound, so a test alarms on at most its ALPHA of fair
rounds; the run counts alarms as the table raises them (after one, the monitor's windows
restart: the evidence is spent) and holds them to the table's level (Poisson), and how often
each p-value fell at or below 1e-2 .. 1e-5, as rounds and as episodes (runs of consecutive
rounds below the level, counted once: a windowed test's rounds below a level cluster); the
episodes are held to the level.

Each bad shuffler (simulators/shuffler.py, Mixing) takes over after 30 fair rounds; the run
counts the uses of a deck until the first alarm (median, 95th percentile), per game.

10,000,000 fair rounds a game take about 5 core-hours: --add-to adds an earlier run's fair
rounds (its --json) to this run's, if both ran the same statistics (the fingerprint: the
monitor's findings on fixed seeded rounds, recorded in --json).

--write-thresholds writes tablectl/core/shuffle_integrity/thresholds.py: the error budget
(ALPHA) and what the run measured (MEASURED).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import multiprocessing
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from figures import percentile, spread
from tablectl.simulators.shuffle_play import play
from tablectl.simulators.shuffler import Mixing, MixingError

from tablectl.config import load_config
from tablectl.core.games.base import TableGame
from tablectl.core.shuffle_integrity.monitor import DeckUse, ShuffleMonitor, UseReport
from tablectl.core.shuffle_integrity.thresholds import ALPHA, TABLE_ALPHA

ROOT = Path(__file__).resolve().parent.parent
GAMES = ("three-card-poker", "ultimate-texas-holdem", "let-it-ride")
LEVELS = (1e-2, 1e-3, 1e-4, 1e-5)
# (label, mixing, the issue's goal in uses of a deck; 0: no goal stated)
BAD = (
    ("unshuffled", ["unshuffled"], 1),
    ("repeated order", ["repeat"], 1),
    ("cut only", ["cut"], 1),
    ("one riffle", ["riffle", "1"], 2),
    ("two riffles", ["riffle", "2"], 0),
    ("three riffles", ["riffle", "3"], 20),
    ("three clumpy riffles", ["clumpy", "3"], 0),
    ("pile shuffle, 5 piles", ["piles", "5"], 0),
    ("shelf machine, 10 shelves", ["shelf", "10"], 0),
    ("chosen card at a chosen position", ["place", "As", "1"], 200),
    ("chosen card to a chosen seat", ["steer", "As", "3"], 200),
    ("a pair to a chosen seat", ["pair", "3"], 0),
)
WARM_UP = 30  # fair rounds before the bad shuffler takes over: the monitor has a history
GIVE_UP_USES = 400


def game(name: str) -> TableGame:
    return load_config(ROOT / "config" / f"{name}.toml").game.table_game()


class TimedMonitor(ShuffleMonitor):
    """The monitor, with the CPU time of its observations summed (nothing else counted)."""

    cpu_s = 0.0

    def observe(self, use: DeckUse, *, restart: bool | None = None) -> UseReport:
        started = time.process_time()
        report = super().observe(use, restart=restart)
        self.cpu_s += time.process_time() - started
        return report


@dataclass
class FairFigures:
    """What fair rounds showed: alarms (with their tests), p-values at or below each level,
    CPU per round (ms) per block of 1,000 rounds."""

    rounds: int = 0
    alarms: int = 0
    alarm_tests: dict[str, int] = field(default_factory=dict)
    below: dict[str, list[int]] = field(
        default_factory=lambda: {test: [0] * len(LEVELS) for test in ALPHA}
    )
    # episodes: runs of consecutive rounds at or below a level, counted once. A windowed
    # test's p-values are correlated from round to round (one extreme use stays in its
    # 128-use window), so its rounds below a level come in clusters: the binomial check
    # applies to the episodes (at most as many as the rounds, so still at most the level
    # on average), not to the rounds.
    episodes: dict[str, list[int]] = field(
        default_factory=lambda: {test: [0] * len(LEVELS) for test in ALPHA}
    )
    cpu_ms: list[float] = field(default_factory=list)

    def add(self, other: FairFigures) -> None:
        self.rounds += other.rounds
        self.alarms += other.alarms
        for test, n in other.alarm_tests.items():
            self.alarm_tests[test] = self.alarm_tests.get(test, 0) + n
        for kept, added in ((self.below, other.below), (self.episodes, other.episodes)):
            for test, counts in added.items():
                mine = kept.setdefault(test, [0] * len(LEVELS))
                for i, c in enumerate(counts):
                    mine[i] += c
        self.cpu_ms += other.cpu_ms


def fair_chunk(task: tuple[str, int]) -> tuple[str, FairFigures]:
    """One fresh table playing `rounds` fair rounds (a process's share of the run)."""
    name, rounds = task
    out = FairFigures()
    monitor = TimedMonitor()
    under: dict[str, list[bool]] = {}  # per test and level: the round before was below it
    rounds_played = play(game(name), Mixing(), random.SystemRandom(), monitor=monitor)
    for n, played in enumerate(rounds_played, start=1):
        if played.report.alarms:
            out.alarms += 1
            for f in played.report.alarms:
                out.alarm_tests[f.test] = out.alarm_tests.get(f.test, 0) + 1
        for f in played.report.findings:
            counts = out.below.setdefault(f.test, [0] * len(LEVELS))
            starts = out.episodes.setdefault(f.test, [0] * len(LEVELS))
            before = under.setdefault(f.test, [False] * len(LEVELS))
            for i, level in enumerate(LEVELS):
                now = f.p_value <= level
                counts[i] += now
                starts[i] += now and not before[i]
                before[i] = now
        if n % 1000 == 0:
            out.cpu_ms.append(monitor.cpu_s)  # seconds per 1,000 rounds = ms per round
            monitor.cpu_s = 0.0
        if n == rounds:
            break
    out.rounds = rounds
    return name, out


def fair(
    games: list[str], rounds: int, chunk: int, workers: int, minutes: float
) -> dict[str, FairFigures]:
    """Up to `rounds` fair rounds per game, in chunks over the workers, games interleaved
    (a run stopped by --fair-minutes has played about as many of each)."""
    tasks: list[tuple[str, int]] = []
    for start in range(0, rounds, chunk):
        tasks += [(name, min(chunk, rounds - start)) for name in games]
    figures = {name: FairFigures() for name in games}
    deadline = time.monotonic() + minutes * 60 if minutes else None
    with multiprocessing.Pool(workers) as pool:
        pending = [pool.apply_async(fair_chunk, (task,)) for task in tasks[:workers]]
        queued = workers
        while pending:
            result = pending.pop(0)
            name, got = result.get()
            figures[name].add(got)
            late = deadline is not None and time.monotonic() > deadline
            if queued < len(tasks) and not late:
                pending.append(pool.apply_async(fair_chunk, (tasks[queued],)))
                queued += 1
    return figures


def fingerprint() -> str:
    """The monitor's behaviour: a hash of its findings on fixed seeded rounds of every game
    under a fair, a riffling and a cheating shuffler. Runs with equal fingerprints ran the
    same statistics, whatever else changed in the code; only such runs are added up."""
    digest = hashlib.sha256()
    for name in GAMES:
        for spec in (["fair"], ["riffle", "3"], ["place", "As", "1"]):
            played = play(game(name), Mixing.parse(spec), random.Random(7), warm_up=WARM_UP)
            for played_round in itertools.islice(played, 100):
                for f in played_round.report.findings:
                    digest.update(repr((f.test, f.figure, f.p_value)).encode())
    return digest.hexdigest()[:16]


def earlier_run(report: dict[str, Any]) -> dict[str, FairFigures]:
    """The counts an earlier run's --json holds (its fractions times its rounds)."""
    out: dict[str, FairFigures] = {}
    for name, measured in report["fair"].items():
        rounds = measured["rounds"]
        got = FairFigures(rounds=rounds, alarms=measured["alarms"])
        got.alarm_tests = dict(report["alarm_tests"].get(name, {}))
        got.below = {
            test: [round(x * rounds) for x in fractions]
            for test, fractions in measured.items()
            if isinstance(fractions, list)
        }
        got.episodes = {
            test: [round(x * rounds) for x in fractions]
            for test, fractions in report["fair_episodes"][name].items()
        }
        out[name] = got
    return out


def detection_trial(task: tuple[str, tuple[str, ...], int]) -> int | str:
    """Uses of a deck until the first alarm (GIVE_UP_USES: never), one trial; or why a
    plugged-in shuffler failed (the run goes on with the others)."""
    name, spec, seed = task
    rng = random.Random(seed)
    try:
        for played in play(game(name), Mixing.parse(list(spec)), rng, warm_up=WARM_UP):
            if played.report.alarms or played.use >= GIVE_UP_USES:
                return played.use if played.report.alarms else GIVE_UP_USES
    except MixingError as exc:  # the bench is the tester's own: the cause is shown whole
        return f"{exc}: {exc.__cause__!r}" if exc.__cause__ else str(exc)
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fair-rounds", type=int, default=100_000, help="per game")
    parser.add_argument("--fair-minutes", type=float, default=0.0, help="0: no limit")
    parser.add_argument("--chunk", type=int, default=20_000, help="rounds per fresh table")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--games", default=",".join(GAMES))
    parser.add_argument("--bad", default="", help="labels' first words to run (default all)")
    parser.add_argument(
        "--mixing",
        action="append",
        default=[],
        metavar="'HOW'",
        help="a bad shuffler to time, as `simulate table --mixing` takes it (again for more), "
        "e.g. 'python my_shufflers.py:keeps_the_top' (docs/shuffle-integrity.md); only "
        "these, unless --bad names some of the built-in ones as well",
    )
    parser.add_argument("--json", type=Path, help="write the figures here as well")
    parser.add_argument("--write-thresholds", action="store_true")
    parser.add_argument(
        "--add-to",
        type=Path,
        action="append",
        default=[],
        help="an earlier run's --json (again for more): its fair rounds are added to this "
        "run's (the same statistics: its fingerprint must equal this code's)",
    )
    parser.add_argument(
        "--same-code",
        action="store_true",
        help="with --add-to: take a run that recorded no fingerprint as this code's",
    )
    args = parser.parse_args(argv)
    games = args.games.split(",")
    for at, how in enumerate(args.mixing):  # said now, not after the fair rounds
        if how in args.mixing[:at]:
            parser.error(f"--mixing {how!r} given twice")
        try:
            Mixing.parse(how.split())
        except ValueError as exc:
            parser.error(f"--mixing {how!r}: {exc}")
    ours = fingerprint()
    earlier: dict[Path, dict[str, Any]] = {}
    for path in args.add_to:
        if path in earlier:
            parser.error(f"--add-to {path} given twice: a run's rounds count once")
        earlier[path] = json.loads(path.read_text())
        theirs = earlier[path].get("fingerprint")
        if theirs != ours and not (theirs is None and args.same_code):
            parser.error(
                f"--add-to {path}: its statistics' fingerprint {theirs} is not this "
                f"code's {ours}: rounds of other statistics do not add up"
            )
    print(
        f"error budget: {len(ALPHA)} tests at {max(ALPHA.values()):g} each per round, "
        f"{TABLE_ALPHA:g} per round for the table (goal: at most 1e-06)"
    )
    measured: dict[str, dict[str, object]] = {}
    episodes: dict[str, dict[str, list[float]]] = {}
    ok = True
    started = time.monotonic()
    figures = (
        fair(games, args.fair_rounds, args.chunk, args.workers, args.fair_minutes)
        if args.fair_rounds
        else {}
    )
    wall = time.monotonic() - started
    report: dict[str, object] = {
        "fair_wall_s": round(wall, 1),
        "workers": args.workers,
        "fingerprint": ours,
    }
    for path, run in earlier.items():
        for name, got in earlier_run(run).items():
            figures.setdefault(name, FairFigures()).add(got)
        wall += run.get("fair_wall_s", 0.0)
        print(f"with the fair rounds of {path} added (fingerprint {ours})")
    report["fair_wall_s"] = round(wall, 1)
    for name, got in figures.items():
        rounds = got.rounds
        print(f"\n{name}: {rounds:,} fair rounds (SystemRandom), {got.alarms} alarms", end="")
        print(f" {got.alarm_tests}" if got.alarm_tests else "")
        bound = TABLE_ALPHA * rounds
        chance = poisson_at_least(bound, got.alarms)
        print(
            f"  alarms per round {got.alarms / rounds:.2g} (level {TABLE_ALPHA:g}: at most "
            f"{bound:.1f} expected; as many or more by chance: {chance:.2g})"
        )
        ok &= chance >= 1e-3
        if got.cpu_ms:
            print(f"  monitor CPU per round (ms, blocks of 1,000):  {spread(got.cpu_ms, '6.3f')}")
            ok &= statistics.median(got.cpu_ms) < 1.0
        print("  fraction of rounds with p at or below   " + "  ".join(f"{x:>8g}" for x in LEVELS))
        for test, counts in got.below.items():
            fractions = [c / rounds for c in counts]
            runs = [c / rounds for c in got.episodes.get(test, [0] * len(LEVELS))]
            print(f"    {test:<16} " + " " * 21 + "  ".join(f"{x:8.1e}" for x in fractions))
            print(f"    {'  episodes':<16} " + " " * 21 + "  ".join(f"{x:8.1e}" for x in runs))
            # A valid p-value falls below a level at most that often on average; the
            # episodes are near independent: as many must not be unlikely for a Poisson
            # count of that mean (1e-4: over the 108 counts, about 1 run in 100 fails).
            for level, c in zip(LEVELS, got.episodes.get(test, []), strict=False):
                ok &= poisson_at_least(level * rounds, c) >= 1e-4
        measured[name] = {
            "rounds": rounds,
            "alarms": got.alarms,
            **{test: [c / rounds for c in counts] for test, counts in got.below.items()},
        }
        episodes[name] = {t: [c / rounds for c in e] for t, e in got.episodes.items()}
    if figures:
        total = sum(got.rounds for got in figures.values())
        alarms = sum(got.alarms for got in figures.values())
        print(f"\nall games: {total:,} fair rounds, {alarms} alarms, {wall:.0f} s wall")
    bad = [b for b in BAD if not args.bad or b[1][0] in args.bad.split(",")]
    if args.mixing and not args.bad:
        bad = []  # only the shufflers asked for
    bad += [(how, how.split(), 0) for how in args.mixing if how.split() not in [b[1] for b in bad]]
    detected: dict[str, dict[str, list[int]]] = {}
    failed: dict[str, str] = {}  # a plugged-in shuffler's spec -> why it failed
    if args.trials and bad:
        tasks = [
            (name, tuple(spec), 1000 * len(label) + trial)
            for name in games
            for label, spec, _ in bad
            for trial in range(args.trials)
        ]
        with multiprocessing.Pool(args.workers) as pool:
            uses = pool.map(detection_trial, tasks, chunksize=1)
        for (name, words, _), n in zip(tasks, uses, strict=True):
            if isinstance(n, str):
                failed[" ".join(words)] = n
            else:
                detected.setdefault(name, {}).setdefault(" ".join(words), []).append(n)
        print(
            f"\nbad shufflers: uses of a deck until the alarm, median / 95th percentile over "
            f"{args.trials} trials ({GIVE_UP_USES}: not caught in {GIVE_UP_USES} uses)"
        )
        print(f"  {'':<34}" + "".join(f"{name:>24}" for name in games) + "    goal")
        for label, spec, goal in bad:
            if " ".join(spec) in failed:
                print(f"  {label:<34}    FAILED: {failed[' '.join(spec)]}")
                ok = False
                continue
            cells = []
            for name in games:
                got_uses = detected[name][" ".join(spec)]
                median = statistics.median(got_uses)
                p95 = percentile([float(u) for u in got_uses], 95)
                cells.append(f"{median:g} / {p95:g}")
            print(f"  {label:<34}" + "".join(f"{c:>24}" for c in cells) + f"    {goal or '-'}")
    if args.json:
        report["fair"] = measured
        report["fair_episodes"] = episodes
        report["alarm_tests"] = {n: g.alarm_tests for n, g in figures.items()}
        report["cpu_ms_median"] = {
            n: statistics.median(g.cpu_ms) for n, g in figures.items() if g.cpu_ms
        }
        report["detection"] = detected
        report["detection_failed"] = failed
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    if args.write_thresholds:
        write_thresholds(measured)
    print(
        "\nok"
        if ok
        else "\nFAILED: a p-value fell below its level too often, CPU over 1 ms, or a shuffler "
        "failed"
    )
    return 0 if ok else 1


def poisson_at_least(mean: float, k: int) -> float:
    """P(Poisson(mean) >= k), its terms in logs (a mean of 40,000 underflows exp(-mean))."""
    if k <= 0:
        return 1.0
    if mean <= 0:
        return 0.0

    def term(i: int) -> float:
        return math.exp(-mean + i * math.log(mean) - math.lgamma(i + 1))

    if k <= mean:
        return max(0.0, 1.0 - sum(term(i) for i in range(k)))
    tail, i = 0.0, k
    while (t := term(i)) > tail * 1e-17:  # past the mean the terms fall geometrically
        tail, i = tail + t, i + 1
    return min(1.0, tail)


def write_thresholds(measured: dict[str, dict[str, object]]) -> None:
    path = ROOT / "tablectl" / "core" / "shuffle_integrity" / "thresholds.py"
    text = path.read_text()
    head, _, _ = text.partition("MEASURED: dict[str, dict[str, object]] = ")
    lines = ["{"]
    for name, figures in measured.items():
        lines.append(f"    {json.dumps(name)}: {{")
        for key, value in figures.items():
            if isinstance(value, list):
                value = [float(f"{v:.3g}") for v in value]
            lines.append(f"        {json.dumps(key)}: {value!r},")
        lines.append("    },")
    lines.append("}")
    path.write_text(head + "MEASURED: dict[str, dict[str, object]] = " + "\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())

"""The error budget of the shuffle-integrity monitor: each test's false-alarm level per round.

Written by `bench/shuffle_integrity.py --write-thresholds` (do not edit by hand: run it
again). Every test's p-value is exact or an upper bound on the true one (nulls.py, and the
next-card test's e-value: monitor.py), so a test alarms on a fair shuffle in at most ALPHA
of the rounds it looks at, whatever the game, deal plan or pickup;
each test looks once per deck use (= once per round). By the union bound the table alarms on
a fair shuffler in at most sum(ALPHA.values()) of its rounds: 9 in 10,000,000, under the
issue's 1 in 1,000,000 (docs/shuffle-integrity.md, "The error budget").

The calibration run below drew fair shuffles from the operating system's cryptographic source
(random.SystemRandom), dealt them through each game's deal plan and pickup, and counted how
often each test's p-value fell at or below 1e-2, 1e-3, 1e-4 and 1e-5 (a p-value that is
exact or conservative falls there at most that often): MEASURED.
"""

from __future__ import annotations

# test -> false-alarm level per round (the union bound's share)
ALPHA: dict[str, float] = {
    "order": 1e-7,
    "order-window": 1e-7,
    "repeat": 1e-7,
    "overlap": 1e-7,
    "overlap-window": 1e-7,
    "position": 1e-7,
    "runs": 1e-7,
    "next-card": 1e-7,
    "seat": 1e-7,
}
TABLE_ALPHA = sum(ALPHA.values())

# Written by the calibration run: game -> rounds, and test -> fraction of rounds with
# p <= 1e-2, 1e-3, 1e-4, 1e-5 (each at most its level on average; a windowed test's rounds
# below a level cluster, docs/shuffle-integrity.md, "Calibration and the figures").
MEASURED: dict[str, dict[str, object]] = {
    "three-card-poker": {
        "rounds": 850000,
        "alarms": 0,
        "order": [0.000727, 4.47e-05, 1.06e-05, 0.0],
        "order-window": [0.000808, 0.000369, 8.59e-05, 2.71e-05],
        "repeat": [0.00188, 0.000167, 8.24e-06, 1.18e-06],
        "overlap": [0.00237, 0.000225, 1.06e-05, 0.0],
        "overlap-window": [0.000894, 6.94e-05, 3.88e-05, 1.18e-06],
        "position": [0.000102, 1.53e-05, 2.35e-06, 0.0],
        "runs": [0.00314, 0.000228, 2e-05, 1.18e-06],
        "next-card": [8.35e-05, 2.35e-06, 0.0, 0.0],
        "seat": [0.000622, 7.88e-05, 9.41e-06, 0.0],
    },
    "ultimate-texas-holdem": {
        "rounds": 800000,
        "alarms": 0,
        "order": [0.000353, 3.5e-05, 0.0, 0.0],
        "order-window": [0.000551, 0.000179, 7.5e-06, 0.0],
        "repeat": [0.00132, 0.000128, 7.5e-06, 2.5e-06],
        "overlap": [0.00197, 7.5e-05, 6.25e-06, 1.25e-06],
        "overlap-window": [0.00123, 0.000135, 7.5e-05, 2.5e-06],
        "position": [7.62e-05, 1e-05, 1.25e-06, 0.0],
        "runs": [0.0014, 8.25e-05, 6.25e-06, 0.0],
        "next-card": [0.000139, 1.75e-05, 1.25e-06, 0.0],
        "seat": [0.000467, 5e-05, 5e-06, 0.0],
    },
    "let-it-ride": {
        "rounds": 800000,
        "alarms": 0,
        "order": [0.000665, 2.38e-05, 1.25e-06, 0.0],
        "order-window": [0.00093, 0.000399, 6.88e-05, 8.75e-06],
        "repeat": [0.00196, 0.000174, 1.38e-05, 1.25e-06],
        "overlap": [0.00229, 0.000186, 6.25e-06, 1.25e-06],
        "overlap-window": [0.000944, 6.88e-05, 4e-05, 0.0],
        "position": [0.000106, 1.5e-05, 3.75e-06, 0.0],
        "runs": [0.00312, 0.00023, 2.13e-05, 3.75e-06],
        "next-card": [9.75e-05, 5e-06, 1.25e-06, 0.0],
        "seat": [0.00045, 5e-05, 5e-06, 0.0],
    },
}

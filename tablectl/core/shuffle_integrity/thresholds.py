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
        "rounds": 10050000,
        "alarms": 0,
        "order": [0.000673, 3.54e-05, 5.87e-06, 0.0],
        "order-window": [0.000728, 0.000283, 3.08e-05, 3.78e-06],
        "repeat": [0.00193, 0.000165, 1e-05, 1.69e-06],
        "overlap": [0.00226, 0.0002, 1.07e-05, 1.19e-06],
        "overlap-window": [0.00102, 9.02e-05, 5.74e-05, 4.48e-06],
        "position": [0.000242, 3.29e-05, 3.38e-06, 1.99e-07],
        "runs": [0.00315, 0.000224, 1.74e-05, 1.39e-06],
        "next-card": [0.000114, 1.11e-05, 1.59e-06, 2.99e-07],
        "seat": [0.000692, 6.82e-05, 7.86e-06, 6.97e-07],
    },
    "ultimate-texas-holdem": {
        "rounds": 10050000,
        "alarms": 0,
        "order": [0.000374, 3.43e-05, 1.99e-07, 1.99e-07],
        "order-window": [0.0005, 0.000159, 1.7e-05, 2.29e-06],
        "repeat": [0.00129, 0.000147, 8.46e-06, 1.19e-06],
        "overlap": [0.00194, 9.11e-05, 1.19e-05, 1.59e-06],
        "overlap-window": [0.000994, 9.61e-05, 5.47e-05, 9.95e-06],
        "position": [0.000137, 8.96e-06, 5.97e-07, 0.0],
        "runs": [0.00146, 7.87e-05, 2.99e-06, 0.0],
        "next-card": [0.000139, 1.44e-05, 1.69e-06, 0.0],
        "seat": [0.000492, 6.1e-05, 5.37e-06, 6.97e-07],
    },
    "let-it-ride": {
        "rounds": 10000000,
        "alarms": 1,
        "order": [0.000692, 3.57e-05, 5.8e-06, 1e-07],
        "order-window": [0.000787, 0.000327, 4.88e-05, 3.1e-06],
        "repeat": [0.00191, 0.000164, 1.13e-05, 1.5e-06],
        "overlap": [0.0023, 0.000211, 1.05e-05, 8e-07],
        "overlap-window": [0.000998, 8.29e-05, 5.49e-05, 4.9e-06],
        "position": [0.000233, 2.13e-05, 4.9e-06, 1.1e-06],
        "runs": [0.00315, 0.000217, 1.52e-05, 9e-07],
        "next-card": [0.000104, 9.6e-06, 6e-07, 0.0],
        "seat": [0.000508, 5.21e-05, 4.5e-06, 5e-07],
    },
}

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
        "rounds": 7850000,
        "alarms": 0,
        "order": [0.000679, 3.59e-05, 5.86e-06, 0.0],
        "order-window": [0.000726, 0.000277, 2.85e-05, 2.93e-06],
        "repeat": [0.00193, 0.000166, 1.07e-05, 1.78e-06],
        "overlap": [0.00225, 0.0002, 1.04e-05, 1.15e-06],
        "overlap-window": [0.001, 8.45e-05, 5.43e-05, 3.95e-06],
        "position": [0.000206, 2.78e-05, 3.31e-06, 2.55e-07],
        "runs": [0.00315, 0.000222, 1.73e-05, 1.4e-06],
        "next-card": [0.000116, 1.22e-05, 2.04e-06, 3.82e-07],
        "seat": [0.000688, 6.59e-05, 6.62e-06, 3.82e-07],
    },
    "ultimate-texas-holdem": {
        "rounds": 7850000,
        "alarms": 0,
        "order": [0.000378, 3.48e-05, 1.27e-07, 1.27e-07],
        "order-window": [0.000492, 0.00015, 1.41e-05, 1.4e-06],
        "repeat": [0.00128, 0.000146, 9.17e-06, 1.27e-06],
        "overlap": [0.00194, 9.07e-05, 1.13e-05, 1.66e-06],
        "overlap-window": [0.001, 9.96e-05, 5.66e-05, 1.2e-05],
        "position": [0.000142, 9.04e-06, 6.37e-07, 0.0],
        "runs": [0.00145, 7.63e-05, 3.31e-06, 0.0],
        "next-card": [0.000142, 1.45e-05, 2.17e-06, 0.0],
        "seat": [0.000498, 6.34e-05, 6.75e-06, 8.92e-07],
    },
    "let-it-ride": {
        "rounds": 7800000,
        "alarms": 1,
        "order": [0.000699, 3.67e-05, 6.03e-06, 1.28e-07],
        "order-window": [0.000797, 0.000336, 5.21e-05, 3.21e-06],
        "repeat": [0.00192, 0.000167, 1.17e-05, 1.79e-06],
        "overlap": [0.00229, 0.000211, 1e-05, 2.56e-07],
        "overlap-window": [0.001, 8.15e-05, 5.36e-05, 5e-06],
        "position": [0.000234, 2.27e-05, 5.9e-06, 1.41e-06],
        "runs": [0.00314, 0.000209, 1.5e-05, 5.13e-07],
        "next-card": [0.000106, 1.05e-05, 6.41e-07, 0.0],
        "seat": [0.000508, 5.08e-05, 4.49e-06, 5.13e-07],
    },
}

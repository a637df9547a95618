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
        "rounds": 4000000,
        "alarms": 8,
        "order": [0.000681, 3.28e-05, 4.25e-06, 0.0],
        "order-window": [0.000817, 0.000322, 4e-05, 3.75e-06],
        "repeat": [0.00192, 0.000176, 1.5e-05, 1.75e-06],
        "overlap": [0.0023, 0.000216, 1.15e-05, 1.5e-06],
        "overlap-window": [0.00102, 9.52e-05, 6.15e-05, 1.9e-05],
        "position": [0.000193, 2.53e-05, 2.25e-06, 0.0],
        "runs": [0.00317, 0.000216, 1.87e-05, 7.5e-07],
        "next-card": [0.000107, 1.17e-05, 5e-07, 0.0],
        "seat": [0.000628, 5.87e-05, 6.75e-06, 5e-07],
    },
    "ultimate-texas-holdem": {
        "rounds": 4000000,
        "alarms": 10,
        "order": [0.000375, 3.63e-05, 2.5e-07, 2.5e-07],
        "order-window": [0.000498, 0.00017, 1.82e-05, 3.5e-06],
        "repeat": [0.00128, 0.000146, 8e-06, 7.5e-07],
        "overlap": [0.00194, 9.1e-05, 1e-05, 2e-06],
        "overlap-window": [0.00109, 0.000115, 7.05e-05, 5.25e-06],
        "position": [0.000195, 1.5e-05, 1e-06, 5e-07],
        "runs": [0.00147, 7.25e-05, 2.25e-06, 0.0],
        "next-card": [0.000142, 1.8e-05, 1.5e-06, 0.0],
        "seat": [0.000484, 5.9e-05, 8.75e-06, 2e-06],
    },
    "let-it-ride": {
        "rounds": 3950000,
        "alarms": 0,
        "order": [0.000675, 3.37e-05, 4.81e-06, 0.0],
        "order-window": [0.000743, 0.000307, 3.24e-05, 7.59e-07],
        "repeat": [0.00191, 0.000173, 9.62e-06, 7.59e-07],
        "overlap": [0.00223, 0.000192, 1.22e-05, 2.03e-06],
        "overlap-window": [0.00103, 0.000111, 7.82e-05, 7.09e-06],
        "position": [0.000239, 3.47e-05, 2.03e-06, 2.53e-07],
        "runs": [0.0032, 0.000232, 1.65e-05, 2.03e-06],
        "next-card": [0.000118, 1.24e-05, 1.27e-06, 2.53e-07],
        "seat": [0.000554, 6.41e-05, 7.34e-06, 1.01e-06],
    },
}

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
# p <= 1e-2, 1e-3, 1e-4 (each must not exceed its level beyond sampling error).
MEASURED: dict[str, dict[str, object]] = {
    "three-card-poker": {
        "rounds": 20000,
        "alarms": 0,
        "order": [0.0006, 0.0001, 0.0],
        "order-window": [0.0005, 0.0001, 0.0],
        "repeat": [0.00195, 0.0001, 0.0],
        "overlap": [0.00295, 0.00025, 0.0],
        "overlap-window": [0.00095, 0.0, 0.0],
        "position": [0.0003, 5e-05, 0.0],
        "runs": [0.0031, 0.0005, 5e-05],
    },
    "ultimate-texas-holdem": {
        "rounds": 20000,
        "alarms": 0,
        "order": [0.0002, 0.0, 0.0],
        "order-window": [0.0002, 5e-05, 0.0],
        "repeat": [0.0014, 0.0001, 0.0],
        "overlap": [0.00255, 5e-05, 0.0],
        "overlap-window": [0.00065, 0.0, 0.0],
        "position": [0.0001, 0.0, 0.0],
        "runs": [0.0015, 0.0001, 0.0],
    },
    "let-it-ride": {
        "rounds": 20000,
        "alarms": 0,
        "order": [0.0004, 0.0, 0.0],
        "order-window": [0.0008, 0.00015, 5e-05],
        "repeat": [0.00195, 5e-05, 0.0],
        "overlap": [0.0022, 0.0004, 5e-05],
        "overlap-window": [0.001, 5e-05, 0.0],
        "position": [0.00015, 0.0, 0.0],
        "runs": [0.00385, 0.00035, 0.0],
    },
}

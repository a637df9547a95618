"""What every bench prints: a figure's spread over repeated runs, and percentiles of samples."""

from __future__ import annotations

import statistics


def spread(values: list[float], fmt: str = "8.2f") -> str:
    """min / median / max of a figure over the runs, each formatted with fmt."""
    return "  ".join(
        f"{name} {format(f(values), fmt)}"
        for name, f in (("min", min), ("median", statistics.median), ("max", max))
    )


def percentile(values: list[float], p: float) -> float:
    """The sample at the p-th percentile (nearest rank, no interpolation)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

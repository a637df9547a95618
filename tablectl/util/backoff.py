"""Capped, jittered exponential backoff for reconnect loops (serial links, MQTT)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    initial_s: float = 0.2
    max_s: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2  # +/- fraction, so a room of tables does not reconnect in step
    failures: int = 0
    _rng: random.Random = field(default_factory=random.Random)

    def next_delay(self) -> float:
        base = min(self.max_s, self.initial_s * self.factor**self.failures)
        self.failures += 1
        return base * (1 + self._rng.uniform(-self.jitter, self.jitter))

    def reset(self) -> None:
        self.failures = 0

    @property
    def first_failure(self) -> bool:
        """Log the first failure loudly and the repeats quietly."""
        return self.failures <= 1

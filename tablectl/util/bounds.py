"""Numbers typed by a person (a command's argument, a line typed at a simulator), each
bounded, and the bound's source named when one is refused.

A limit says where it comes from (a rule section, a config field, a field of the control
protocol, or a maximum a tool states with its reason), so a refusal reads "0 to 104 (the
control protocol's StubCountRequest.cards)" and not pydantic's or int()'s own words.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# ASCII digits only (a sign allowed): not "1e9", "0x10", "1_000", " 5 " or another script's
# digits ("\u0665") that int() would take or refuse in words of its own; 19 digits reach past
# any limit while int() stays cheap.
_WHOLE = re.compile(r"[+-]?[0-9]{1,19}")
_DECIMAL = re.compile(r"[+-]?([0-9]{1,19}(\.[0-9]{0,9})?|\.[0-9]{1,9})")


def _shown(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,g}"


@dataclass(frozen=True)
class Limit:
    """The values a number may take: low to high (low excluded when low_open), and why."""

    low: int | float
    high: int | float
    source: str  # where the limit comes from, as a person looks it up
    low_open: bool = False  # a duration such as a timeout: more than low, never low itself

    def __str__(self) -> str:
        low = f"more than {_shown(self.low)} and at most" if self.low_open else _shown(self.low)
        joiner = " " if self.low_open else " to "
        return f"{low}{joiner}{_shown(self.high)} ({self.source})"

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        return math.isfinite(value) and above and value <= self.high

    def whole(self, text: str, what: str) -> int:
        """text as a whole number within the limit; ValueError naming what, the limit and
        its source."""
        if not _WHOLE.fullmatch(text):
            raise ValueError(f"{text!r}: {what}: a whole number, {self}")
        value = int(text)
        if not self.holds(value):
            raise ValueError(f"{text!r}: {what}: {self}")
        return value

    def number(self, text: str, what: str) -> float:
        """text as a decimal number within the limit (never inf, nan or an exponent)."""
        if not _DECIMAL.fullmatch(text):
            raise ValueError(f"{text!r}: {what}: a number, {self}")
        value = float(text)
        if not self.holds(value):
            raise ValueError(f"{text!r}: {what}: {self}")
        return value

"""Money and rates as written in config files: exact decimals, held as integers.

Money is written as a quoted decimal ("1000.00") or whole dollars and held as integer cents;
a rate as a percentage with at most two decimals ("14.5"), held as basis points. Floats are
refused: they cannot say 14.5 % exactly.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer

# No amount a table is configured with comes near this; it keeps absurd values such as
# "1e30" out of the meter arithmetic with a clear message.
MAX_CENTS = 100_000_000 * 100  # $100,000,000


def _scaled_decimal(value: object, scale: int, what: str, example: str) -> int:
    """A decimal written as a string or a whole number (never a float), times scale, exactly."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"write {what} as a quoted decimal such as {example}, not {value!r}")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise ValueError(f"{value!r} is not {what}") from None
    if not number.is_finite() or abs(number) > MAX_CENTS:
        raise ValueError(f"{value!r} is not {what} a table can use")
    scaled = number * scale
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value!r} is more precise than {what} can be ({example})")
    return int(scaled)


def to_cents(value: object) -> int:
    """Money: "1000.00" or whole dollars (1000), held as integer cents."""
    cents = _scaled_decimal(value, 100, "money", '"1000.00" or whole dollars')
    if not 0 <= cents <= MAX_CENTS:
        raise ValueError(f"{value!r} is outside $0 to ${MAX_CENTS // 100:,}")
    return cents


def to_basis_points(value: object) -> int:
    """A percentage with at most two decimals ("14.25"), held as basis points."""
    bp = _scaled_decimal(value, 100, "a percentage", '"14.5"')
    if not 0 <= bp <= 10_000:
        raise ValueError(f"{value!r} is not a percentage from 0 to 100")
    return bp


def dollars(cents: int) -> str:
    """$1,234.56, for messages and people."""
    sign = "-" if cents < 0 else ""
    return f"{sign}${abs(cents) // 100:,}.{abs(cents) % 100:02d}"


def _percent_text(bp: int) -> str:
    return str(Decimal(bp) / 100)


# Written back as they are read ("1000.00", "14.5"), so a config round-trips exactly (it is
# journaled with every power-up and read again by `tablectl journal replay`).
def _cents_text(cents: int) -> str:
    return dollars(cents)[1:].replace(",", "")


# The serialisers' str return type is what the JSON Schema of a config says (birth messages).
Cents = Annotated[int, BeforeValidator(to_cents), PlainSerializer(_cents_text)]
BasisPoints = Annotated[int, BeforeValidator(to_basis_points), PlainSerializer(_percent_text)]


class Strict(BaseModel):
    """A config section: unknown keys are errors, values are frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

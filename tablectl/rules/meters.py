"""Progressive meters behind one seam: what the round core needs of a meter ledger. Pure.

The core never does arithmetic on a meter itself; it asks its ledger. `LocalMeter` is the
ledger of a meter kept on this table PC; `LinkedMeter` the table's view of a meter shared by
a link of tables and kept by the link controller (docs/linked-progressives.md).

Money is integer cents. A contribution is wager x rate of progression; the part below one
cent is carried in ten-thousandths of a cent, so no contribution is ever rounded away.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Annotated, Literal, Protocol, Self, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from tablectl.util.frozen import replaced

# Rates are whole basis points (hundredths of a percent): one contribution is exactly
# wager_cents * rate_bp ten-thousandths of a cent.
CARRY_DENOMINATOR = 10_000


class MeterLedger(Protocol):
    """The operations the core and settlement use; every one returns a new ledger."""

    @property
    def meter_id(self) -> str: ...

    @property
    def cents(self) -> int:
        """The amount shown on the meter and paid from it, in whole cents."""
        ...

    @property
    def carry(self) -> int:
        """Contributions below one cent, in ten-thousandths of a cent, kept for later."""
        ...

    def contribute(self, wager_cents: int, rate_bp: int) -> tuple[Self, int]:
        """Book one wager's contribution; returns the ledger and the exact units booked."""
        ...

    def reverse(self, units: int) -> Self:
        """Take back contributions exactly (a voided round returns its wagers)."""
        ...

    def pay_share(self, share: Fraction, reset_cents: int) -> tuple[Self, int]:
        """Pay a share of the meter; returns the ledger it leaves and the cents paid.

        A 100 % hit restarts the meter at the reset amount; a smaller share (UTH's 10 %
        straight flush) leaves the rest on the meter: it is not a reset.
        """
        ...


class LocalMeter(BaseModel):
    """A meter kept on this table PC: whole cents plus the carried fraction of a cent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["local"] = "local"
    meter_id: str = "progressive"
    cents: int
    carry: int = 0  # ten-thousandths of a cent, 0 <= carry < CARRY_DENOMINATOR

    @property
    def units(self) -> int:
        return self.cents * CARRY_DENOMINATOR + self.carry

    def _with_units(self, units: int) -> LocalMeter:
        cents, carry = divmod(units, CARRY_DENOMINATOR)
        return self.replace(cents=cents, carry=carry)

    def contribute(self, wager_cents: int, rate_bp: int) -> tuple[LocalMeter, int]:
        units = wager_cents * rate_bp
        return self._with_units(self.units + units), units

    def reverse(self, units: int) -> LocalMeter:
        return self._with_units(self.units - units)

    def pay_share(self, share: Fraction, reset_cents: int) -> tuple[LocalMeter, int]:
        if not 0 < share <= 1:
            raise ValueError(f"a meter share is more than 0 and at most 100 %, not {share}")
        amount = self.cents * share.numerator // share.denominator
        if share == 1:
            # The carried fraction of a cent stays on the restarted meter: nothing is lost.
            return self.replace(cents=reset_cents), amount
        return self._with_units(self.units - amount * CARRY_DENOMINATOR), amount

    def replace(self, **update: Unpack[LocalMeterUpdate]) -> LocalMeter:
        """A copy with the fields named changed; mypy checks each name and its type."""
        return replaced(self, update)


class LocalMeterUpdate(TypedDict, total=False):
    """Any of LocalMeter's fields, each with its type: what `LocalMeter.replace` takes."""

    kind: Literal["local"]
    meter_id: str
    cents: int
    carry: int


class LinkLevel(BaseModel):
    """One level of a link, as its parameters say: what each wager contributes to it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    level_id: str
    contribution_rate_bp: int  # to the meter shown plus the hidden reserve (NJ 1.39A)
    initial_cents: int
    reset_cents: int


class LinkedMeter(BaseModel):
    """A meter shared by the tables of a link, kept by the link controller (PostgreSQL).

    The table books nothing on it: a contribution is a journaled `link.contribution` the
    controller applies, and the amount of a hit is the controller's answer to its claim. What
    this ledger holds is the link's parameters as the table accepted them (5321.18(b)(4)), and
    the amount it last knew (the first level's initial amount until a claim is answered).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["linked"] = "linked"
    meter_id: str = "progressive"
    link_id: str
    parameters_version: int = 0  # 0: no parameters accepted yet; nothing is contributed
    parameters_sha256: str = ""
    wager_cents: int = 0
    levels: tuple[LinkLevel, ...] = ()
    cents: int = 0
    carry: int = 0

    @property
    def units(self) -> int:
        return self.cents * CARRY_DENOMINATOR + self.carry

    @property
    def claim_level(self) -> LinkLevel | None:
        """The level a qualifying hand claims: the link's first (its headline meter)."""
        return self.levels[0] if self.levels else None

    def contribute(self, wager_cents: int, rate_bp: int) -> tuple[LinkedMeter, int]:
        # The link's rates, not the table's: every level's share, journaled by the core.
        return self, sum(wager_cents * level.contribution_rate_bp for level in self.levels)

    def reverse(self, units: int) -> LinkedMeter:
        return self  # the controller applied them: a void cannot take them back here

    def pay_share(self, share: Fraction, reset_cents: int) -> tuple[LinkedMeter, int]:
        if not 0 < share <= 1:
            raise ValueError(f"a meter share is more than 0 and at most 100 %, not {share}")
        # Provisional: the controller's answer to the claim says what is paid.
        return self, self.cents * share.numerator // share.denominator

    def replace(self, **update: Unpack[LinkedMeterUpdate]) -> LinkedMeter:
        """A copy with the fields named changed; mypy checks each name and its type."""
        return replaced(self, update)


class LinkedMeterUpdate(TypedDict, total=False):
    """Any of LinkedMeter's fields, each with its type: what `LinkedMeter.replace` takes."""

    kind: Literal["linked"]
    meter_id: str
    link_id: str
    parameters_version: int
    parameters_sha256: str
    wager_cents: int
    levels: tuple[LinkLevel, ...]
    cents: int
    carry: int


# Every kind of ledger the table state can hold.
MeterState = Annotated[LocalMeter | LinkedMeter, Field(discriminator="kind")]

"""The terms of a link, as the book applies them: its definition, its levels' parameters and
what a claim was awarded, with the units its meters count in. Pure: the book (book.py) sees
only these; the wire contract (contract.py) re-exports them with everything else the tables
and controllers say to each other.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from tablectl.mqtt.message import ID_PATTERN, Message
from tablectl.rules.meters import CARRY_DENOMINATOR

UNITS_PER_CENT = CARRY_DENOMINATOR  # ten-thousandths of a cent, as the table's meters carry

LinkId = Annotated[str, Field(pattern=ID_PATTERN)]
LevelId = Annotated[str, Field(pattern=ID_PATTERN)]
ClaimId = Annotated[str, Field(pattern=ID_PATTERN)]
TableRef = Annotated[
    str,
    Field(
        pattern=r"^[a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9-]{0,62}$",
        description="site/table, as the table's config names them (table.site_id, table_id)",
    ),
]
HitPolicy = Literal["ordered", "full-amount-each"]


class LevelParameters(Message):
    """One level (meter) of a link."""

    level_id: LevelId
    title: str = Field(max_length=40)
    rate_bp: int = Field(ge=0, le=10_000, description="rate of progression to the meter shown")
    reserve_rate_bp: int = Field(
        default=0,
        ge=0,
        le=10_000,
        description="hidden rate to the reserve pool that funds the next reset (NJ 1.39A)",
    )
    initial_cents: int = Field(ge=0)
    reset_cents: int = Field(ge=0)
    limit_cents: int | None = Field(
        default=None, description="the meter's maximum; contributions above it go to overflow"
    )

    @property
    def contribution_rate_bp(self) -> int:
        """What a table contributes per wager: to the meter shown plus to the reserve."""
        return self.rate_bp + self.reserve_rate_bp


class LinkDefinition(Message):
    """What cannot change while the link is in operation (NY 5321.18(b)(4))."""

    link_id: LinkId
    title: str = Field(max_length=60)
    game: Literal["three-card-poker", "ultimate-texas-holdem"]
    paytable: Literal["A", "B"] | None = Field(
        default=None, description="Three Card Poker's progressive paytable (649a.12(e))"
    )
    wager_cents: int = Field(ge=1, description="the progressive wager every linked table takes")
    hit_policy: HitPolicy
    simultaneous_window_ms: int = Field(
        ge=0,
        le=60_000,
        description="claims committed within this time of a level's first hit share its "
        "window (full-amount-each: each receives the meter that hit locked)",
    )
    link_timeout_ms: int = Field(
        ge=1000, le=60_000, description="silence after which a table (and a sign) says LINK DOWN"
    )
    broadcast_interval_ms: int = Field(ge=50, le=1000)
    backend_id: str = Field(pattern=ID_PATTERN, description="the id the controllers ack under")
    tables: list[TableRef] = Field(min_length=1)
    levels: list[LevelParameters] = Field(min_length=1)

    def level(self, level_id: str) -> LevelParameters | None:
        return next((lv for lv in self.levels if lv.level_id == level_id), None)


class Award(Message):
    """What a claim received, with both hit policies' inputs, so an auditor can recompute it.

    ordered: `amount_cents` = floor(`meter_before_cents` x share), paid from the meter.
    full-amount-each: a claim within `simultaneous_window_ms` of the window's first hit
    (order > 1) receives floor(`window_locked_cents` x share), funded outside the meter
    (New Mexico 15.1.24.19(A)); the first hit of a window is paid as under ordered.
    """

    award_version: int
    level_id: str
    claim_id: str
    seat: int
    round_id: int
    policy: HitPolicy
    share_percent: int
    meter_before_cents: int = Field(description="the meter at this claim's turn")
    window_first_version: int = Field(description="the award that opened the window")
    window_locked_cents: int = Field(description="the meter the window's first hit locked")
    window_ms: int
    elapsed_ms: int = Field(description="from the window's first hit to this claim's lock")
    order_in_window: int = Field(ge=1)
    amount_cents: int
    paid_from_meter_cents: int
    funded_outside_meter_cents: int
    meter_after_cents: int
    reset: bool

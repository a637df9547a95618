"""What a link's rows do to its meters: pure arithmetic on a link held under its lock.

The ledger (ledger.py) locks a link's row, loads a `LinkBook` from it, feeds it the tables'
rows in order and writes back the events it produced. No I/O and no clock here: the ledger
passes the time it took the lock (`lock_time`, the database's clock), so every outcome can be
recomputed from the events alone.

Amounts are in units, ten-thousandths of a cent, as the tables' own meters carry them. A hit
is paid with the table's own arithmetic (`LocalMeter.pay_share`): whole cents of the meter
times the share, rounded down; the fraction of a cent stays on the meter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Literal

from tablectl.core.effects import (
    JackpotValidated,
    LinkClaim,
    LinkContribution,
    LinkContributionReversed,
)
from tablectl.link.terms import UNITS_PER_CENT, Award, LevelParameters, LinkDefinition
from tablectl.rules.meters import LocalMeter

EventKind = Literal[
    "link.created",
    "level.initialized",
    "parameters.changed",
    "link.opened",
    "link.closed",
    "table.online",
    "table.offline",
    "contribution",
    "contribution.refused",
    "award",
    "meter.reset",
    "claim.refused",
    "award.validated",
    "contribution.reversed",
    "reversal.refused",
]


def canonical_json(value: Any) -> str:
    """The one JSON text of a value: sorted keys, no spaces (hashed, so it must not vary)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def utc_text(moment: datetime) -> str:
    """A timestamp as the ledger hashes it: UTC, microseconds, Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class EventRow:
    """One row of link_event, before the ledger's trigger stamps its time and hashes."""

    link_id: str
    version: int
    kind: EventKind
    table_ref: str | None = None
    seq: int | None = None
    level_id: str | None = None
    round_id: int | None = None
    seat: int | None = None
    claim_id: str | None = None
    ref_version: int | None = None
    wager_cents: int | None = None
    rate_bp: int | None = None
    contribution_units: int = 0
    display_units: int = 0
    reserve_units: int = 0
    overflow_units: int = 0
    seed_units: int = 0
    award_cents: int = 0
    detail: str = "{}"

    def balances(self) -> bool:
        """What the pools gained is what came in, less what was awarded."""
        pools = self.display_units + self.reserve_units + self.overflow_units
        return (
            pools == self.contribution_units + self.seed_units - self.award_cents * UNITS_PER_CENT
        )


@dataclass(slots=True)
class LevelBook:
    params: LevelParameters
    display_units: int
    reserve_units: int = 0
    overflow_units: int = 0
    changed_at: int = 0  # the link version that last changed it

    @property
    def cents(self) -> int:
        return self.display_units // UNITS_PER_CENT


@dataclass(frozen=True, slots=True)
class Window:
    """A level's hits within `simultaneous_window_ms` of its first: one polling cycle."""

    first_version: int
    opened_at: datetime
    locked_cents: int  # the meter its first hit locked
    hits: int


@dataclass(frozen=True, slots=True)
class KnownClaim:
    award_version: int | None  # None: the claim was refused
    validated: bool


@dataclass(frozen=True, slots=True)
class KnownContribution:
    """A contribution event, for a reversal to take back exactly what it put on."""

    version: int
    contribution_units: int
    display_units: int
    reserve_units: int
    overflow_units: int
    reversed: bool


# (table_ref, round_id, seat, level_id): what a reversal names its contribution by.
ContributionKey = tuple[str, int, int, str]


@dataclass(frozen=True, slots=True)
class TableRow:
    """One row of a table's event stream, as the controller hands it to the ledger."""

    table_ref: str
    seq: int
    type: str
    record: LinkContribution | LinkContributionReversed | LinkClaim | JackpotValidated | None = None
    ts: str = ""  # the table's journal time, kept as evidence of a claim
    malformed: str | None = None  # a link row that did not parse: refused, with why
    online: bool | None = None  # a status message (not a row of the stream)


@dataclass
class LinkBook:
    """A link as its locked row and levels say, and the events that change it."""

    link_id: str
    definition: LinkDefinition
    operating: bool
    version: int
    parameters_version: int
    levels: dict[str, LevelBook]
    windows: dict[str, Window] = field(default_factory=dict)
    claims: dict[tuple[str, str], KnownClaim] = field(default_factory=dict)
    contributions: dict[ContributionKey, KnownContribution] = field(default_factory=dict)
    events: list[EventRow] = field(default_factory=list)
    awards_changed: set[str] = field(default_factory=set)  # tables whose answers changed

    def _next(self, kind: EventKind, **columns: Any) -> EventRow:
        self.version += 1
        event = EventRow(link_id=self.link_id, version=self.version, kind=kind, **columns)
        if not event.balances():
            raise AssertionError(f"an unbalanced {kind} event: {event}")  # a bug, not input
        self.events.append(event)
        return event

    def _touch(self, level: LevelBook) -> None:
        level.changed_at = self.version

    # --- rows from the tables ------------------------------------------------------------

    def apply(self, row: TableRow, lock_time: datetime) -> None:
        """One table row: a contribution, a claim or a validation (other rows change nothing)."""
        if row.malformed is not None:
            kind: EventKind = "contribution.refused"
            if row.type == "link.claim":
                kind = "claim.refused"
            elif row.type == "link.contribution_reversed":
                kind = "reversal.refused"
            self._next(
                kind,
                table_ref=row.table_ref,
                seq=row.seq,
                detail=canonical_json({"reason": row.malformed}),
            )
        elif isinstance(row.record, LinkContribution):
            self.contribute(row, row.record)
        elif isinstance(row.record, LinkContributionReversed):
            self.reverse(row, row.record)
        elif isinstance(row.record, LinkClaim):
            self.claim(row, row.record, lock_time)
        elif isinstance(row.record, JackpotValidated):
            self.validate(row, row.record)

    def _refuse_contribution(self, row: TableRow, rec: LinkContribution, reason: str) -> None:
        self._next(
            "contribution.refused",
            table_ref=row.table_ref,
            seq=row.seq,
            level_id=rec.level_id,
            round_id=rec.round_id,
            seat=rec.seat,
            wager_cents=rec.wager_cents,
            rate_bp=rec.rate_bp,
            detail=canonical_json({"reason": reason, "record": rec.model_dump(mode="json")}),
        )

    def contribute(self, row: TableRow, rec: LinkContribution) -> None:
        """Apply one contribution; one that does not match the link's parameters is refused
        (recorded with its reason and acknowledged: the table's journal keeps the wager)."""
        level = self.levels.get(rec.level_id)
        reason = None
        if rec.link_id != self.link_id:
            reason = f"the table is on link {self.link_id}, not {rec.link_id}"
        elif level is None:
            reason = f"link {self.link_id} has no level {rec.level_id}"
        elif rec.parameters_version != self.parameters_version:
            reason = (
                f"made with parameters version {rec.parameters_version}; the link's is "
                f"{self.parameters_version}"
            )
        elif rec.wager_cents != self.definition.wager_cents:
            reason = f"wager {rec.wager_cents} cents; the link's is {self.definition.wager_cents}"
        elif rec.rate_bp != level.params.contribution_rate_bp:
            reason = f"rate {rec.rate_bp} bp; the level's is {level.params.contribution_rate_bp}"
        elif rec.contribution_ten_thousandths_cent != rec.wager_cents * rec.rate_bp:
            reason = "contribution is not wager x rate"
        if reason is not None or level is None:
            self._refuse_contribution(row, rec, reason or "no level")
            return
        to_meter = rec.wager_cents * level.params.rate_bp
        to_reserve = rec.wager_cents * level.params.reserve_rate_bp
        overflow = 0
        if level.params.limit_cents is not None:
            room = max(0, level.params.limit_cents * UNITS_PER_CENT - level.display_units)
            overflow = max(0, to_meter - room)
            to_meter -= overflow
        event = self._next(
            "contribution",
            table_ref=row.table_ref,
            seq=row.seq,
            level_id=rec.level_id,
            round_id=rec.round_id,
            seat=rec.seat,
            wager_cents=rec.wager_cents,
            rate_bp=rec.rate_bp,
            contribution_units=rec.contribution_ten_thousandths_cent,
            display_units=to_meter,
            reserve_units=to_reserve,
            overflow_units=overflow,
        )
        level.display_units += event.display_units
        level.reserve_units += event.reserve_units
        level.overflow_units += event.overflow_units
        self._touch(level)
        self.contributions[(row.table_ref, rec.round_id, rec.seat, rec.level_id)] = (
            KnownContribution(
                event.version, event.contribution_units, to_meter, to_reserve, overflow, False
            )
        )

    def reverse(self, row: TableRow, rec: LinkContributionReversed) -> None:
        """A voided round's contribution taken back: each pool loses exactly what the
        contribution put on it, even if the level was hit since (as the table's own meter
        takes a void's contributions back from the meter it holds then). A share a pool no
        longer holds (the reserve or overflow spent on a reset) comes off the meter shown.
        A reversal naming no applied contribution, or one reversed already, is refused."""
        level = self.levels.get(rec.level_id)
        known = self.contributions.get((row.table_ref, rec.round_id, rec.seat, rec.level_id))
        reason = None
        if rec.link_id != self.link_id:
            reason = f"the table is on link {self.link_id}, not {rec.link_id}"
        elif level is None:
            reason = f"link {self.link_id} has no level {rec.level_id}"
        elif known is None:
            reason = (
                f"no contribution of round {rec.round_id} seat {rec.seat} to {rec.level_id} "
                "was applied"
            )
        elif known.reversed:
            reason = f"the contribution of event {known.version} was reversed already"
        elif known.contribution_units != rec.contribution_ten_thousandths_cent:
            reason = (
                f"reverses {rec.contribution_ten_thousandths_cent} units; the contribution "
                f"of event {known.version} was {known.contribution_units}"
            )
        if reason is None and level is not None and known is not None:
            from_reserve = min(known.reserve_units, level.reserve_units)
            from_overflow = min(known.overflow_units, level.overflow_units)
            from_meter = known.contribution_units - from_reserve - from_overflow
            if from_meter > level.display_units:
                reason = f"the meter holds {level.display_units} units, less than {from_meter}"
        if reason is not None or level is None or known is None:
            self._next(
                "reversal.refused",
                table_ref=row.table_ref,
                seq=row.seq,
                level_id=rec.level_id,
                round_id=rec.round_id,
                seat=rec.seat,
                wager_cents=rec.wager_cents,
                rate_bp=rec.rate_bp,
                detail=canonical_json(
                    {"reason": reason or "no level", "record": rec.model_dump(mode="json")}
                ),
            )
            return
        event = self._next(
            "contribution.reversed",
            table_ref=row.table_ref,
            seq=row.seq,
            level_id=rec.level_id,
            round_id=rec.round_id,
            seat=rec.seat,
            ref_version=known.version,
            wager_cents=rec.wager_cents,
            rate_bp=rec.rate_bp,
            contribution_units=-known.contribution_units,
            display_units=-from_meter,
            reserve_units=-from_reserve,
            overflow_units=-from_overflow,
            detail=canonical_json({"reason": rec.reason, "rule": rec.rule}),
        )
        level.display_units += event.display_units
        level.reserve_units += event.reserve_units
        level.overflow_units += event.overflow_units
        self._touch(level)
        key = (row.table_ref, rec.round_id, rec.seat, rec.level_id)
        self.contributions[key] = replace(known, reversed=True)

    def _refuse_claim(self, row: TableRow, rec: LinkClaim, reason: str) -> None:
        self._next(
            "claim.refused",
            table_ref=row.table_ref,
            seq=row.seq,
            level_id=rec.level_id,
            round_id=rec.round_id,
            seat=rec.seat,
            claim_id=rec.claim_id,
            detail=canonical_json({"reason": reason, "claim": rec.model_dump(mode="json")}),
        )
        # A claim id answered before keeps its answer (its award stays what it was).
        self.claims.setdefault((row.table_ref, rec.claim_id), KnownClaim(None, False))
        self.awards_changed.add(row.table_ref)

    def claim(self, row: TableRow, rec: LinkClaim, lock_time: datetime) -> None:
        """The first claim committed locks the amount; the rest follow the link's policy."""
        level = self.levels.get(rec.level_id)
        refusal = None
        if rec.link_id != self.link_id:
            refusal = f"the table is on link {self.link_id}"
        elif level is None:
            refusal = f"link {self.link_id} has no level {rec.level_id}"
        elif (row.table_ref, rec.claim_id) in self.claims:
            refusal = f"claim {rec.claim_id} was already answered"
        if refusal is not None or level is None:
            self._refuse_claim(row, rec, refusal or "no level")
            return
        policy = self.definition.hit_policy
        window_ms = self.definition.simultaneous_window_ms
        window = self.windows.get(rec.level_id)
        elapsed_ms = 0
        if window is not None:
            elapsed_ms = max(0, int((lock_time - window.opened_at).total_seconds() * 1000))
        meter_before = level.cents
        if window is None or elapsed_ms > window_ms:
            window = Window(self.version + 1, lock_time, meter_before, 0)
            elapsed_ms = 0
        window = replace(window, hits=window.hits + 1)
        self.windows[rec.level_id] = window
        share = Fraction(rec.share_percent, 100)
        meter = LocalMeter(
            meter_id=rec.level_id,
            cents=level.cents,
            carry=level.display_units % UNITS_PER_CENT,
        )
        if policy == "full-amount-each" and window.hits > 1:
            # NM 15.1.24.19(A): hits in one polling cycle each receive the full meter; the
            # first already reset it, so this one is funded outside the meter.
            amount = window.locked_cents * share.numerator // share.denominator
            from_meter, outside, resets = 0, amount, False
        else:
            _, amount = meter.pay_share(share, level.params.reset_cents)
            from_meter, outside, resets = amount, 0, share == 1
        award = self._next(
            "award",
            table_ref=row.table_ref,
            seq=row.seq,
            level_id=rec.level_id,
            round_id=rec.round_id,
            seat=rec.seat,
            claim_id=rec.claim_id,
            display_units=-from_meter * UNITS_PER_CENT,
            seed_units=outside * UNITS_PER_CENT,
            award_cents=amount,
        )
        level.display_units += award.display_units
        if resets:
            self._reset(level, award.version)
        record = Award(
            award_version=award.version,
            level_id=rec.level_id,
            claim_id=rec.claim_id,
            seat=rec.seat,
            round_id=rec.round_id,
            policy=policy,
            share_percent=rec.share_percent,
            meter_before_cents=meter_before,
            window_first_version=window.first_version,
            window_locked_cents=window.locked_cents,
            window_ms=window_ms,
            elapsed_ms=elapsed_ms,
            order_in_window=window.hits,
            amount_cents=amount,
            paid_from_meter_cents=from_meter,
            funded_outside_meter_cents=outside,
            meter_after_cents=level.cents,
            reset=resets,
        )
        detail = {
            "award": record.model_dump(mode="json"),
            "window_opened_at": utc_text(window.opened_at),
            "locked_at": utc_text(lock_time),
            "claim": rec.model_dump(mode="json"),
            "claim_ts": row.ts,
        }
        # The award's row carries its detail; rows are written once, so it is set here.
        self.events[self.events.index(award)] = replace(award, detail=canonical_json(detail))
        self.claims[(row.table_ref, rec.claim_id)] = KnownClaim(award.version, False)
        self.awards_changed.add(row.table_ref)
        self._touch(level)

    def _reset(self, level: LevelBook, award_version: int) -> None:
        """After a 100 % hit: the meter restarts at the reset amount, funded first from the
        reserve pool (NJ 1.39A), the rest by the operator; overflow moves back onto it."""
        reset_units = level.params.reset_cents * UNITS_PER_CENT
        from_reserve = min(level.reserve_units, reset_units)
        from_overflow = level.overflow_units
        if level.params.limit_cents is not None:
            room = level.params.limit_cents * UNITS_PER_CENT - level.display_units - reset_units
            from_overflow = max(0, min(from_overflow, room))
        event = self._next(
            "meter.reset",
            level_id=level.params.level_id,
            ref_version=award_version,
            display_units=reset_units + from_overflow,
            reserve_units=-from_reserve,
            overflow_units=-from_overflow,
            seed_units=reset_units - from_reserve,
            detail=canonical_json(
                {
                    "reset_cents": level.params.reset_cents,
                    "from_reserve_units": from_reserve,
                    "from_overflow_units": from_overflow,
                    "from_operator_units": reset_units - from_reserve,
                }
            ),
        )
        level.display_units += event.display_units
        level.reserve_units += event.reserve_units
        level.overflow_units += event.overflow_units

    def validate(self, row: TableRow, rec: JackpotValidated) -> None:
        """The table's floorperson validated a hit: if it is one of this link's awards, it is
        no longer pending. A hit of the table's own meter is none of the link's business."""
        known = self.claims.get((row.table_ref, rec.hit_id))
        if known is None or known.award_version is None or known.validated:
            return
        self._next(
            "award.validated",
            table_ref=row.table_ref,
            seq=row.seq,
            claim_id=rec.hit_id,
            ref_version=known.award_version,
            detail=canonical_json({"by": rec.by}),
        )
        self.claims[(row.table_ref, rec.hit_id)] = KnownClaim(known.award_version, True)
        self.awards_changed.add(row.table_ref)

    # --- the link itself -------------------------------------------------------------------

    def table_status(self, table_ref: str, online: bool) -> None:
        self._next("table.online" if online else "table.offline", table_ref=table_ref)

    def set_operating(self, operating: bool, by: str) -> None:
        self.operating = operating
        self._next("link.opened" if operating else "link.closed", detail=canonical_json({"by": by}))


def initial_events(book: LinkBook, parameters_json: str) -> None:
    """A new link: its creation, then each level at its initial amount (from the operator)."""
    book._next("link.created", detail=parameters_json)
    for level in book.levels.values():
        initialise_level(book, level)


def initialise_level(book: LinkBook, level: LevelBook) -> None:
    units = level.params.initial_cents * UNITS_PER_CENT
    event = book._next(
        "level.initialized",
        level_id=level.params.level_id,
        display_units=units,
        seed_units=units,
        detail=canonical_json({"initial_cents": level.params.initial_cents}),
    )
    level.display_units = units
    level.changed_at = event.version

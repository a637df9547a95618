"""The record set: which journal record goes into which report, and each report's rows.

`ROUTES` is the one place that maps every record type of `core/effects.py` to the reports
(sheets) it appears in; a record type added later (a deck introduced or retired, a stub
count, a link event) needs one line there. Every row of a period is in the `journal` sheet
whatever its type, with its hashes; `()` means "only there". A type this code does not know
(a journal written by a newer version), or a row whose data does not validate against its
model, goes to `other-events` with its data as journaled, and is counted in the manifest and
reported on stderr: an auditor's export must not fail for it, nor lose it. A type known to
`RECORD_TYPES` but missing from ROUTES fails at import (`check_record_set`) and in the tests,
as does an amount of a record (`*_cents`) that MOVEMENTS does not show in a sheet's column
and NOT_MOVEMENTS does not say why: every money movement the journal records is in a sheet
and in the summary.

Money stays in integer cents (meter contributions in ten-thousandths of a cent); it is
formatted as dollars only where a person reads it (the PDF). Times are the journal's UTC
stamp plus the local date and time in the report's zone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict

from tablectl.core import effects as rec
from tablectl.core.effects import RECORD_TYPES, Record


class Sheet(StrEnum):
    """The reports of a record set; each is one file per format (`<name>.csv`, ...)."""

    METERS = "meters"  # per meter (level): opening, contributed, paid, closing; reconciled
    WAGER_COUNTS = "wager-counts"  # each round's final count: the wagers collected
    WAGERS = "wagers"  # each table-system wager's result: won, lost, forfeited, and paid
    ENVY_BONUSES = "envy-bonuses"
    CONTRIBUTIONS = "contributions"
    HITS = "hits"
    RESETS = "resets"
    VOIDED_ROUNDS = "voided-rounds"
    LINK_CONTRIBUTIONS = "link-contributions"  # a linked table's, and their reversals
    LINK_CLAIMS = "link-claims"  # a linked table's claims, with the controller's answers
    DEVICE_EVENTS = "device-events"  # faults and swaps
    DECK_EVENTS = "deck-events"
    PARAMETER_CHANGES = "parameter-changes"
    CONTROL_ACTIONS = "control-actions"  # who did what
    OTHER_EVENTS = "other-events"  # record types this version does not know
    JOURNAL = "journal"  # every row of the period, as hashed (verifiable against the chain)


# Every record type -> the sheets it goes to (besides `journal`). One line per type.
ROUTES: dict[type[Record], tuple[Sheet, ...]] = {
    rec.RoundOpened: (),
    rec.WagerAccepted: (),
    rec.WagerRejected: (),
    rec.WagerWithdrawn: (),
    rec.RoundLocked: (),
    rec.WagersCounted: (Sheet.WAGER_COUNTS,),
    rec.MeterContribution: (Sheet.CONTRIBUTIONS,),
    rec.GpioFaultRecord: (Sheet.DEVICE_EVENTS,),
    rec.GpioFaultCleared: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.InputStuck: (Sheet.DEVICE_EVENTS,),
    rec.InputStuckCleared: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.SensorTestStartedRecord: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.SensorTestEndedRecord: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.ShuffleStartedRecord: (),
    rec.ShuffleCompletedRecord: (),
    rec.ShufflerFaultRecord: (Sheet.DEVICE_EVENTS,),
    rec.ShufflerRebootedRecord: (Sheet.DEVICE_EVENTS,),
    rec.ShuffleRequestFailedRecord: (Sheet.DEVICE_EVENTS,),
    rec.ShufflerFaultCleared: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.DeckMiscount: (Sheet.DECK_EVENTS,),
    rec.DeckRegistered: (Sheet.DECK_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.DeviceIdentifiedRecord: (Sheet.DEVICE_EVENTS,),
    rec.DeviceAcceptedRecord: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.DeviceEventsRefusedRecord: (Sheet.DEVICE_EVENTS,),
    rec.DeviceReportConflictRecord: (Sheet.DEVICE_EVENTS,),
    rec.DeviceLinkResetRecord: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.DealStarted: (Sheet.CONTROL_ACTIONS,),
    rec.DealCompleted: (),
    rec.DealRequestFailedRecord: (Sheet.DEVICE_EVENTS,),
    rec.DealResolved: (Sheet.DEVICE_EVENTS,),
    rec.CommandStalledRecord: (Sheet.DEVICE_EVENTS,),
    rec.DeliveryFaultRecord: (Sheet.DEVICE_EVENTS,),
    rec.DeliveryFaultCleared: (Sheet.DEVICE_EVENTS,),
    rec.CardFaceUp: (Sheet.DECK_EVENTS,),
    rec.DeckIrregular: (Sheet.DECK_EVENTS,),
    rec.ShoeFaultRecord: (Sheet.DEVICE_EVENTS,),
    rec.ShoeFaultCleared: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.ShoeRebootedRecord: (Sheet.DEVICE_EVENTS,),
    rec.ShoeOutOfOrderRecord: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    # 649a.5(a): the shuffle-integrity monitor's alarm (figures and p-values) and its answer
    rec.ShuffleSuspect: (Sheet.DEVICE_EVENTS,),
    rec.ShuffleSuspectCleared: (Sheet.DEVICE_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.WagerSettled: (Sheet.WAGERS,),
    rec.JackpotHit: (Sheet.HITS,),
    rec.MeterReset: (Sheet.RESETS,),
    rec.MeterSharePaid: (Sheet.RESETS,),
    rec.EnvyBonusPaid: (Sheet.ENVY_BONUSES,),
    rec.RoundSettled: (Sheet.CONTROL_ACTIONS,),
    rec.RoundVoided: (Sheet.VOIDED_ROUNDS, Sheet.CONTROL_ACTIONS),
    rec.JackpotValidated: (Sheet.CONTROL_ACTIONS,),
    rec.JackpotDocumented: (Sheet.CONTROL_ACTIONS,),
    rec.JackpotReleased: (),
    rec.JournalRecoveredRecord: (Sheet.CONTROL_ACTIONS,),
    rec.JournalRolledBack: (Sheet.DEVICE_EVENTS,),
    rec.JournalChainVerified: (),
    rec.JournalChainBroken: (Sheet.DEVICE_EVENTS,),
    rec.DeckIntroducedRecord: (Sheet.DECK_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.DeckAgeWarning: (Sheet.DECK_EVENTS,),
    rec.DeckAgeExpired: (Sheet.DECK_EVENTS,),
    rec.DeckAlternation: (Sheet.DECK_EVENTS,),
    rec.StubCountDue: (Sheet.DECK_EVENTS,),
    rec.StubCountRecord: (Sheet.DECK_EVENTS, Sheet.CONTROL_ACTIONS),
    rec.DeckAgeHold: (Sheet.DECK_EVENTS,),
    rec.StubCountQuestioned: (Sheet.DECK_EVENTS,),
    rec.IdleProcedureDue: (Sheet.DECK_EVENTS,),
    rec.IdleProcedureDoneRecord: (Sheet.DECK_EVENTS, Sheet.CONTROL_ACTIONS),
    # A linked progressive: the link's ledger (PostgreSQL) keeps its meters; the table's
    # sheets list what it sent the link and what the link paid, and its ups and downs.
    rec.LinkContribution: (Sheet.LINK_CONTRIBUTIONS,),
    rec.LinkContributionReversed: (Sheet.LINK_CONTRIBUTIONS,),  # voided-rounds: the void
    rec.LinkClaim: (Sheet.LINK_CLAIMS,),
    rec.LinkClaimAnswered: (Sheet.LINK_CLAIMS,),
    rec.LinkParametersAccepted: (),
    rec.LinkParametersRefused: (Sheet.DEVICE_EVENTS,),
    rec.LinkDown: (Sheet.DEVICE_EVENTS,),
    rec.LinkUp: (Sheet.DEVICE_EVENTS,),
}

# The `by` of what the table did by itself, not a person (core/table/ voids a round the
# shoe spoiled with by="shoe"): such rows are not control actions.
AUTOMATIC_BY = frozenset({"shoe", "shuffler", "table"})


# --- rows -------------------------------------------------------------------------------


class Row(BaseModel):
    """One row of a sheet; its fields, in order, are the file's columns."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    SHEET: ClassVar[Sheet]


class Stamped(Row):
    """A row from one journal row: where it is in the journal and when, UTC and local."""

    seq: int
    ts_utc: str
    local_date: str
    local_time: str


class MeterRow(Row):
    """Per meter (the table's level): the period's movements, reconciled with the readings.

    closing = opening + contributed - reversed - paid x 10,000 + reseeded x 10,000, in
    ten-thousandths of a cent (`reconciles`)."""

    SHEET = Sheet.METERS
    meter_id: str
    opening_cents: int
    opening_carry: int  # ten-thousandths of a cent
    opening_seq: int | None  # the row that left it so (None: the configured initial amount)
    contributions: int
    contributed_ten_thousandths_cent: int
    rounds_voided: int
    reversed_ten_thousandths_cent: int
    hits: int  # paid from this meter (100 % or a share)
    paid_cents: int
    resets: int
    reseeded_cents: int  # the reset amounts the meter restarted at
    closing_cents: int
    closing_carry: int
    closing_seq: int | None  # the row that left it so (None: none did, it is the initial amount)
    reconciles: bool


class WagerCountRow(Stamped):
    """A round's final count: the wagers collected at "no more bets" (649a.8(b))."""

    SHEET = Sheet.WAGER_COUNTS
    round_id: int
    wagers: int
    seats: str  # space-separated
    total_wager_cents: int
    decided_after_lockout: str  # seats, space-separated
    rule: str


class WagerRow(Stamped):
    """One table-system wager's result; paid_cents is all the player receives (a hit's
    amount included), the wager having been collected at the count."""

    SHEET = Sheet.WAGERS
    round_id: int
    seat: int
    wager: str
    wager_cents: int
    outcome: str  # won, lost, forfeited, returned
    paid_cents: int
    hand: str | None
    rule: str


class EnvyBonusRow(Stamped):
    """An Envy Bonus paid to `seat` for the hand at `for_seat` (649a.12(e)(5), 653a.12(d)(5))."""

    SHEET = Sheet.ENVY_BONUSES
    round_id: int
    seat: int
    for_seat: int
    hand: str
    amount_cents: int
    rule: str


class ContributionRow(Stamped):
    SHEET = Sheet.CONTRIBUTIONS
    round_id: int
    seat: int
    meter_id: str
    wager_cents: int
    rate_bp: int
    contribution_ten_thousandths_cent: int
    meter_cents: int
    meter_carry: int


class HitRow(Stamped):
    SHEET = Sheet.HITS
    hit_id: str
    table: str
    round_id: int
    seat: int
    hand: str
    cards: str
    amount_cents: int
    basis: str
    meter_before_cents: int
    paid_from_table_inventory: bool
    rule: str
    validated_by: str | None = None
    validated_ts_utc: str | None = None
    documented_by: str | None = None
    documented_ts_utc: str | None = None


class ResetRow(Stamped):
    SHEET = Sheet.RESETS
    meter_id: str
    kind: str  # reset (a 100 % hit), share (a share of the meter, not a reset)
    hit_id: str
    round_id: int
    paid_cents: int
    share_percent: str
    reset_cents: int | None
    meter_cents: int
    meter_carry: int


class VoidedRoundRow(Stamped):
    SHEET = Sheet.VOIDED_ROUNDS
    round_id: int
    reason: str
    rule: str  # the section that voids it
    wagers_returned: str  # seats, space-separated
    # The wagers of those seats, from the round's wager.accepted rows (the void names the
    # seats, not the amounts); None when a row of the round is not in the journal read.
    wagers_returned_cents: int | None
    contribution_reversed_ten_thousandths_cent: int
    by: str


class LinkContributionRow(Stamped):
    """A counted wager's share sent to a level of the link, or taken back (a voided round)."""

    SHEET = Sheet.LINK_CONTRIBUTIONS
    kind: str  # contribution, reversal
    link_id: str
    level_id: str
    parameters_version: int
    round_id: int
    seat: int
    wager_cents: int
    rate_bp: int
    contribution_ten_thousandths_cent: int
    reason: str | None = None  # a reversal's: the void's reason and section
    rule: str | None = None


class LinkClaimRow(Stamped):
    """A claim on a level of the link and the controller's answer (the amount paid is its).
    Stamped with the claim, or with the answer when the claim is before the period (its
    own fields are then empty)."""

    SHEET = Sheet.LINK_CLAIMS
    claim_id: str
    link_id: str
    level_id: str | None
    round_id: int | None
    seat: int | None
    hand: str | None
    cards: str | None
    share_percent: int | None
    rule: str | None
    status: str | None  # awarded, refused; None: not answered in the period
    award_cents: int | None
    award_version: int | None
    reason: str | None
    answered_ts_utc: str | None
    validated_by: str | None = None
    validated_ts_utc: str | None = None


class EventRow(Stamped):
    """A device, deck or control event, or one this version does not know: the fields every
    such record may have, and the rest as `detail` (key=value, amounts in cents)."""

    SHEET = Sheet.DEVICE_EVENTS
    event: str
    round_id: int | None = None
    device: str | None = None
    by: str | None = None
    rule: str | None = None
    detail: str = ""


class ParameterChangeRow(Row):
    """A parameter of the table's rules set or changed at a power-up (the journaled input)."""

    SHEET = Sheet.PARAMETER_CHANGES
    input_seq: int
    ts_utc: str
    local_date: str
    local_time: str
    parameter: str
    previous: str | None  # None: first set (the table's first power-up on this journal)
    value: str | None  # None: no longer set


class JournalEntryRow(Row):
    """A journal row exactly as stored and hashed (`journal export` has the same columns)."""

    SHEET = Sheet.JOURNAL
    seq: int
    event_id: str
    ts: str
    boot_id: str
    type: str
    data: str  # the JSON text the hash covers
    prev_hash: str
    hash: str
    hash_v: int = 1  # the formula of hash: 2 covers every column, boot_id included


ROW_MODELS: dict[Sheet, type[Row]] = {
    Sheet.METERS: MeterRow,
    Sheet.WAGER_COUNTS: WagerCountRow,
    Sheet.WAGERS: WagerRow,
    Sheet.ENVY_BONUSES: EnvyBonusRow,
    Sheet.CONTRIBUTIONS: ContributionRow,
    Sheet.HITS: HitRow,
    Sheet.RESETS: ResetRow,
    Sheet.VOIDED_ROUNDS: VoidedRoundRow,
    Sheet.LINK_CONTRIBUTIONS: LinkContributionRow,
    Sheet.LINK_CLAIMS: LinkClaimRow,
    Sheet.DEVICE_EVENTS: EventRow,
    Sheet.DECK_EVENTS: EventRow,
    Sheet.PARAMETER_CHANGES: ParameterChangeRow,
    Sheet.CONTROL_ACTIONS: EventRow,
    Sheet.OTHER_EVENTS: EventRow,
    Sheet.JOURNAL: JournalEntryRow,
}

# The sheets whose rows come from one record class each (the rest take any record as an
# EventRow). Routing a record to one of these needs its row builder in `specific_row`.
SPECIFIC: dict[Sheet, tuple[type[Record], ...]] = {
    Sheet.WAGER_COUNTS: (rec.WagersCounted,),
    Sheet.WAGERS: (rec.WagerSettled,),
    Sheet.ENVY_BONUSES: (rec.EnvyBonusPaid,),
    Sheet.CONTRIBUTIONS: (rec.MeterContribution,),
    Sheet.HITS: (rec.JackpotHit,),
    Sheet.RESETS: (rec.MeterReset, rec.MeterSharePaid),
    Sheet.VOIDED_ROUNDS: (rec.RoundVoided,),
    Sheet.LINK_CONTRIBUTIONS: (rec.LinkContribution, rec.LinkContributionReversed),
    Sheet.LINK_CLAIMS: (rec.LinkClaim, rec.LinkClaimAnswered),
}
GENERIC = (Sheet.DEVICE_EVENTS, Sheet.DECK_EVENTS, Sheet.CONTROL_ACTIONS)


def columns(sheet: Sheet) -> list[str]:
    return list(ROW_MODELS[sheet].model_fields)


# --- money: every amount the journal records, and where the record set shows it ----------


@dataclass(frozen=True, slots=True)
class Movement:
    """Money the journal records moving: a record's amount field, the sheet column that
    carries it (in the rows whose `kind` is `kind`, on a sheet of several records), and its
    line in the summary. In cents, or ten-thousandths of a cent (`*_ten_thousandths_cent`)."""

    record: type[Record]
    amount: str
    sheet: Sheet
    column: str
    label: str
    kind: str | None = None

    @property
    def exact(self) -> bool:
        """Ten-thousandths of a cent (a meter's contributions), not cents."""
        return self.amount.endswith(_EXACT)


_CENTS, _EXACT = "_cents", "_ten_thousandths_cent"

# Every money amount of every record type: a movement in one sheet and the summary, or in
# NOT_MOVEMENTS with why not. A record type added with an amount in neither fails at import
# (`_check_money`) and in the tests, as one missing from ROUTES does.
MOVEMENTS: tuple[Movement, ...] = (
    Movement(
        rec.WagersCounted,
        "total_wager_cents",
        Sheet.WAGER_COUNTS,
        "total_wager_cents",
        "wagers collected at the final count",
    ),
    Movement(rec.WagerSettled, "wager_cents", Sheet.WAGERS, "wager_cents", "wagers settled"),
    Movement(rec.WagerSettled, "paid_cents", Sheet.WAGERS, "paid_cents", "paid on wagers settled"),
    Movement(
        rec.EnvyBonusPaid, "amount_cents", Sheet.ENVY_BONUSES, "amount_cents", "Envy Bonuses paid"
    ),
    Movement(rec.JackpotHit, "amount_cents", Sheet.HITS, "amount_cents", "progressive hits"),
    Movement(
        rec.MeterContribution,
        "contribution_ten_thousandths_cent",
        Sheet.CONTRIBUTIONS,
        "contribution_ten_thousandths_cent",
        "contributed to the meter",
    ),
    Movement(
        rec.LinkContribution,
        "contribution_ten_thousandths_cent",
        Sheet.LINK_CONTRIBUTIONS,
        "contribution_ten_thousandths_cent",
        "contributed to the link",
        "contribution",
    ),
    Movement(
        rec.RoundVoided,
        "contribution_reversed_ten_thousandths_cent",
        Sheet.VOIDED_ROUNDS,
        "contribution_reversed_ten_thousandths_cent",
        "contributions reversed with voided rounds (the meter's or the link's)",
    ),
    Movement(
        rec.LinkContributionReversed,
        "contribution_ten_thousandths_cent",
        Sheet.LINK_CONTRIBUTIONS,
        "contribution_ten_thousandths_cent",
        "of which the link's (each level's)",
        "reversal",
    ),
    Movement(
        rec.MeterReset,
        "paid_cents",
        Sheet.RESETS,
        "paid_cents",
        "paid from the meter (100%)",
        "reset",
    ),
    Movement(
        rec.MeterSharePaid,
        "paid_cents",
        Sheet.RESETS,
        "paid_cents",
        "paid from the meter (a share)",
        "share",
    ),
    Movement(rec.MeterReset, "reset_cents", Sheet.RESETS, "reset_cents", "meter reset to", "reset"),
    Movement(
        rec.LinkClaimAnswered,
        "amount_cents",
        Sheet.LINK_CLAIMS,
        "award_cents",
        "awarded by the link",
    ),
)

# Amounts that are not a movement of their own, and why.
NOT_MOVEMENTS: dict[tuple[type[Record], str], str] = {
    (rec.WagerAccepted, "wager_cents"): "a chip recognised on its sensor: collected at the "
    "final count (wagers.counted), or withdrawn",
    (rec.MeterContribution, "wager_cents"): "the wager the contribution is a share of",
    (rec.LinkContribution, "wager_cents"): "the wager the contribution is a share of",
    (rec.LinkContributionReversed, "wager_cents"): "the wager the contribution was a share of",
    (rec.JackpotHit, "meter_before_cents"): "the meter's reading when it was hit",
    (rec.RoundSettled, "paid_cents"): "the round's total: its wager.settled paid_cents and "
    "envy.bonus amount_cents",
}


def money_fields(cls: type[Record]) -> list[str]:
    """A record's amounts: its whole-number fields in cents or ten-thousandths of a cent."""
    return [
        name
        for name, info in cls.model_fields.items()
        if name.endswith((_CENTS, _EXACT)) and info.annotation is int
    ]


def check_record_set(
    record_types: Mapping[str, type[Record]] = RECORD_TYPES,
    routes: Mapping[type[Record], tuple[Sheet, ...]] = ROUTES,
    movements: Sequence[Movement] = MOVEMENTS,
) -> None:
    """Every known record type is routed, and only to sheets that can take it; every amount
    is a movement shown in a sheet's column, or says why it is not one (run at import)."""
    missing = sorted(t for t, cls in record_types.items() if cls not in routes)
    if missing:
        raise RuntimeError(f"records/sheets.py ROUTES has no line for {missing}")
    for cls, sheets in routes.items():
        for sheet in sheets:
            if sheet in SPECIFIC and cls not in SPECIFIC[sheet]:
                raise RuntimeError(f"{cls.TYPE} is routed to {sheet} but has no row builder")
            if sheet not in SPECIFIC and sheet not in GENERIC:
                raise RuntimeError(f"{cls.TYPE} cannot be routed to {sheet}")
    moved = {(m.record, m.amount) for m in movements}
    for cls in record_types.values():
        for name in money_fields(cls):
            if ((cls, name) in moved) == ((cls, name) in NOT_MOVEMENTS):
                raise RuntimeError(
                    f"{cls.TYPE}.{name}: an amount the record set must show; records/sheets.py "
                    "MOVEMENTS (its sheet and column) or NOT_MOVEMENTS (why not) needs a line"
                )
    for m in movements:
        fields = ROW_MODELS[m.sheet].model_fields
        if m.sheet not in routes.get(m.record, ()) or m.column not in fields:
            raise RuntimeError(f"{m.record.TYPE}.{m.amount} has no column {m.sheet}.{m.column}")
        if m.amount not in m.record.model_fields or (m.kind is not None) != ("kind" in fields):
            raise RuntimeError(f"{m.record.TYPE}.{m.amount}: no such amount, or kind {m.kind}")


check_record_set()


# --- turning journal rows into sheet rows -----------------------------------------------


class Stamp:
    """Local date and time of journal timestamps in the report's zone."""

    def __init__(self, zone: ZoneInfo) -> None:
        self.zone = zone

    def local(self, ts_utc: str) -> tuple[str, str]:
        when = datetime.fromisoformat(ts_utc).astimezone(self.zone)
        return when.strftime("%Y-%m-%d"), when.strftime("%H:%M:%S")

    def fields(self, seq: int, ts_utc: str) -> dict[str, Any]:
        day, clock = self.local(ts_utc)
        return {"seq": seq, "ts_utc": ts_utc, "local_date": day, "local_time": clock}


def _seats(seats: list[int]) -> str:
    return " ".join(map(str, seats))


def specific_row(record: Record, sheet: Sheet, stamp: dict[str, Any], table: str) -> Row:
    """The row of a sheet of one kind of record (hits, voided rounds and link claims are
    written by the builder, which joins what comes later: validation, answers, amounts)."""
    match record:
        case rec.WagersCounted():
            return WagerCountRow(
                **stamp,
                round_id=record.round_id,
                wagers=record.accepted_wagers,
                seats=_seats(record.seats),
                total_wager_cents=record.total_wager_cents,
                decided_after_lockout=_seats(record.decided_after_lockout),
                rule=record.rule,
            )
        case rec.WagerSettled():
            return WagerRow(
                **stamp,
                round_id=record.round_id,
                seat=record.seat,
                wager=record.wager,
                wager_cents=record.wager_cents,
                outcome=record.outcome.value,
                paid_cents=record.paid_cents,
                hand=record.hand,
                rule=record.rule,
            )
        case rec.EnvyBonusPaid():
            return EnvyBonusRow(
                **stamp,
                round_id=record.round_id,
                seat=record.seat,
                for_seat=record.for_seat,
                hand=record.hand,
                amount_cents=record.amount_cents,
                rule=record.rule,
            )
        case rec.LinkContribution() | rec.LinkContributionReversed():
            reversal = isinstance(record, rec.LinkContributionReversed)
            return LinkContributionRow(
                **stamp,
                kind="reversal" if reversal else "contribution",
                link_id=record.link_id,
                level_id=record.level_id,
                parameters_version=record.parameters_version,
                round_id=record.round_id,
                seat=record.seat,
                wager_cents=record.wager_cents,
                rate_bp=record.rate_bp,
                contribution_ten_thousandths_cent=record.contribution_ten_thousandths_cent,
                reason=record.reason if isinstance(record, rec.LinkContributionReversed) else None,
                rule=record.rule if isinstance(record, rec.LinkContributionReversed) else None,
            )
        case rec.MeterContribution():
            return ContributionRow(
                **stamp,
                round_id=record.round_id,
                seat=record.seat,
                meter_id=record.meter.meter_id,
                wager_cents=record.wager_cents,
                rate_bp=record.rate_bp,
                contribution_ten_thousandths_cent=record.contribution_ten_thousandths_cent,
                meter_cents=record.meter.meter_cents,
                meter_carry=record.meter.meter_carry,
            )
        case rec.JackpotHit():
            return hit_row(record, stamp, table)
        case rec.MeterReset():
            return ResetRow(
                **stamp,
                meter_id=record.meter.meter_id,
                kind="reset",
                hit_id=record.hit_id,
                round_id=record.round_id,
                paid_cents=record.paid_cents,
                share_percent="100",
                reset_cents=record.reset_cents,
                meter_cents=record.meter.meter_cents,
                meter_carry=record.meter.meter_carry,
            )
        case rec.MeterSharePaid():
            return ResetRow(
                **stamp,
                meter_id=record.meter.meter_id,
                kind="share",
                hit_id=record.hit_id,
                round_id=record.round_id,
                paid_cents=record.paid_cents,
                share_percent=record.share_percent,
                reset_cents=None,
                meter_cents=record.meter.meter_cents,
                meter_carry=record.meter.meter_carry,
            )
    raise TypeError(f"no {sheet} row for {type(record).__name__}")


def voided_round_row(
    record: rec.RoundVoided, stamp: dict[str, Any], returned_cents: int | None
) -> VoidedRoundRow:
    return VoidedRoundRow(
        **stamp,
        round_id=record.round_id,
        reason=record.reason,
        rule=record.rule,
        wagers_returned=_seats(record.wagers_returned),
        wagers_returned_cents=returned_cents,
        contribution_reversed_ten_thousandths_cent=(
            record.contribution_reversed_ten_thousandths_cent
        ),
        by=record.by,
    )


def link_claim_row(
    claim: rec.LinkClaim | None,
    answer: tuple[rec.LinkClaimAnswered, str] | None,
    stamp: dict[str, Any],
    validated: Signed | None,
) -> LinkClaimRow:
    """A claim with its answer (and when it came) and its validation, each when in the
    period; one of claim and answer at least."""
    answered, answered_ts = answer if answer is not None else (None, None)
    claim_id = claim.claim_id if claim is not None else answered.claim_id if answered else ""
    link_id = claim.link_id if claim is not None else answered.link_id if answered else ""
    return LinkClaimRow(
        **stamp,
        claim_id=claim_id,
        link_id=link_id,
        level_id=claim.level_id if claim else None,
        round_id=claim.round_id if claim else None,
        seat=claim.seat if claim else None,
        hand=claim.hand if claim else None,
        cards=claim.cards if claim else None,
        share_percent=claim.share_percent if claim else None,
        rule=claim.rule if claim else None,
        status=answered.status if answered else None,
        award_cents=answered.amount_cents if answered else None,
        award_version=answered.award_version if answered else None,
        reason=answered.reason if answered else None,
        answered_ts_utc=answered_ts,
        validated_by=validated.by if validated else None,
        validated_ts_utc=validated.ts_utc if validated else None,
    )


@dataclass(frozen=True, slots=True)
class Signed:
    """Who did a floor step for a hit, and when (UTC)."""

    by: str
    ts_utc: str


def hit_row(
    record: rec.JackpotHit,
    stamp: dict[str, Any],
    table: str,
    validated: Signed | None = None,
    documented: Signed | None = None,
) -> HitRow:
    """A hit: date, time, table, seat, hand, amount, and who validated and documented it."""
    return HitRow(
        **stamp,
        hit_id=record.hit_id,
        table=table,
        round_id=record.round_id,
        seat=record.seat,
        hand=record.hand,
        cards=record.cards,
        amount_cents=record.amount_cents,
        basis=record.basis,
        meter_before_cents=record.meter_before_cents,
        paid_from_table_inventory=record.paid_from_table_inventory,
        rule=record.rule,
        validated_by=validated.by if validated else None,
        validated_ts_utc=validated.ts_utc if validated else None,
        documented_by=documented.by if documented else None,
        documented_ts_utc=documented.ts_utc if documented else None,
    )


_EVENT_COLUMNS = ("round_id", "device", "by", "rule")


def event_row(type_: str, data: dict[str, Any], stamp: dict[str, Any]) -> EventRow:
    """A generic event row from a record's (or an unknown row's) data: the round, device,
    person and rule in their columns, everything else in `detail`."""
    picked: dict[str, Any] = {}
    rest: list[str] = []
    for key, value in data.items():
        if (key == "round_id" and type(value) is int) or (
            key in ("device", "by", "rule") and isinstance(value, str)
        ):
            picked[key] = value
        elif not (key in ("round_id", "device", "by", "rule") and value is None):
            rest.append(f"{key}={detail_value(value)}")
    return EventRow(**stamp, event=type_, detail=" ".join(rest), **picked)


def detail_value(value: object) -> str:
    """A value as it reads in a detail column: yes/no, lists comma-separated, nested as JSON."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(detail_value(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


# Where built rows go: (the sheet, the row); a writer per format.
RowSink = Callable[[Sheet, Row], None]

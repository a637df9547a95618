"""The record set: which journal record goes into which report, and each report's rows.

`ROUTES` is the one place that maps every record type of `core/effects.py` to the reports
(sheets) it appears in; a record type added later (a deck introduced or retired, a stub
count, a link event) needs one line there. Every row of a period is in the `journal` sheet
whatever its type, with its hashes; `()` means "only there". A type this code does not know
(a journal written by a newer version), or a row whose data does not validate against its
model, goes to `other-events` with its data as journaled, and is counted in the manifest and
reported on stderr: an auditor's export must not fail for it, nor lose it. A type known to
`RECORD_TYPES` but missing from ROUTES fails at import (`_check_routes`) and in the tests.

Money stays in integer cents (meter contributions in ten-thousandths of a cent); it is
formatted as dollars only where a person reads it (the PDF). Times are the journal's UTC
stamp plus the local date and time in the report's zone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
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
    CONTRIBUTIONS = "contributions"
    HITS = "hits"
    RESETS = "resets"
    VOIDED_ROUNDS = "voided-rounds"
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
    rec.WagersCounted: (),
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
    rec.WagerSettled: (),
    rec.JackpotHit: (Sheet.HITS,),
    rec.MeterReset: (Sheet.RESETS,),
    rec.MeterSharePaid: (Sheet.RESETS,),
    rec.EnvyBonusPaid: (),
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
    # A linked progressive: the link's ledger (PostgreSQL) keeps its meters and hits; the
    # table's own sheets list its link's ups, downs and refused parameters.
    rec.LinkContribution: (),
    rec.LinkContributionReversed: (),  # the voided-rounds sheet lists the void itself
    rec.LinkClaim: (),
    rec.LinkClaimAnswered: (),
    rec.LinkParametersAccepted: (),
    rec.LinkParametersRefused: (Sheet.DEVICE_EVENTS,),
    rec.LinkDown: (Sheet.DEVICE_EVENTS,),
    rec.LinkUp: (Sheet.DEVICE_EVENTS,),
}

# The `by` of what the table did by itself, not a person (core/round.py voids a round the
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
    closing_seq: int | None
    reconciles: bool


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
    contribution_reversed_ten_thousandths_cent: int
    by: str


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
    Sheet.CONTRIBUTIONS: ContributionRow,
    Sheet.HITS: HitRow,
    Sheet.RESETS: ResetRow,
    Sheet.VOIDED_ROUNDS: VoidedRoundRow,
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
    Sheet.CONTRIBUTIONS: (rec.MeterContribution,),
    Sheet.HITS: (rec.JackpotHit,),
    Sheet.RESETS: (rec.MeterReset, rec.MeterSharePaid),
    Sheet.VOIDED_ROUNDS: (rec.RoundVoided,),
}
GENERIC = (Sheet.DEVICE_EVENTS, Sheet.DECK_EVENTS, Sheet.CONTROL_ACTIONS)


def columns(sheet: Sheet) -> list[str]:
    return list(ROW_MODELS[sheet].model_fields)


def _check_routes() -> None:
    """Every known record type is routed, and only to sheets that can take it."""
    missing = sorted(t for t, cls in RECORD_TYPES.items() if cls not in ROUTES)
    if missing:
        raise RuntimeError(f"records/sheets.py ROUTES has no line for {missing}")
    for cls, sheets in ROUTES.items():
        for sheet in sheets:
            if sheet in SPECIFIC and cls not in SPECIFIC[sheet]:
                raise RuntimeError(f"{cls.TYPE} is routed to {sheet} but has no row builder")
            if sheet not in SPECIFIC and sheet not in GENERIC:
                raise RuntimeError(f"{cls.TYPE} cannot be routed to {sheet}")


_check_routes()


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


def parse_record(type_: str, data: dict[str, Any]) -> Record | None:
    """The typed record of a journal row; None for a type or data this version cannot read."""
    cls = RECORD_TYPES.get(type_)
    if cls is None:
        return None
    try:
        return cls.model_validate(data)
    except ValueError:  # pydantic's ValidationError is one
        return None


def specific_row(record: Record, sheet: Sheet, stamp: dict[str, Any], table: str) -> Row:
    """The row of a one-record-type sheet."""
    match record:
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
        case rec.RoundVoided():
            return VoidedRoundRow(
                **stamp,
                round_id=record.round_id,
                reason=record.reason,
                rule=record.rule,
                wagers_returned=" ".join(map(str, record.wagers_returned)),
                contribution_reversed_ten_thousandths_cent=(
                    record.contribution_reversed_ten_thousandths_cent
                ),
                by=record.by,
            )
    raise TypeError(f"no {sheet} row for {type(record).__name__}")


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

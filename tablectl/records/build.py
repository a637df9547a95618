"""Building a period's record set from its journal rows: pure, fed one row at a time.

`RecordSetBuilder.add` routes each journal row (`sheets.ROUTES`) to the sheets' rows, handed
to a sink as they come (contributions and the journal can be millions of rows: they are never
all held); `finish` writes the rows that need the whole period (hits with their validation,
the meters' reconciliation) and returns a `Summary`, small, for the manifest and the PDF.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from tablectl.core import effects as rec
from tablectl.core.effects import parse_record
from tablectl.core.events import TableRules
from tablectl.records.sheets import (
    AUTOMATIC_BY,
    MOVEMENTS,
    ROUTES,
    SPECIFIC,
    EnvyBonusRow,
    EventRow,
    HitRow,
    JournalEntryRow,
    LinkClaimRow,
    LinkContributionRow,
    MeterRow,
    Movement,
    ParameterChangeRow,
    ResetRow,
    Row,
    RowSink,
    Sheet,
    Signed,
    Stamp,
    VoidedRoundRow,
    WagerRow,
    event_row,
    hit_row,
    link_claim_row,
    specific_row,
    voided_round_row,
)
from tablectl.records.source import Entry, MeterAt, PowerUpInput
from tablectl.rules.meters import CARRY_DENOMINATOR

# Control actions every round has: listed in full in the files, summed up in the PDF.
ROUTINE_ACTIONS = frozenset({rec.RoundSettled.TYPE, rec.DealStarted.TYPE})


@dataclass
class MeterTally:
    """One meter through the period; every reading is checked against the running amount."""

    meter_id: str
    opening_units: int | None  # ten-thousandths of a cent; None: not known
    opening_seq: int | None
    running_units: int | None = None
    contributions: int = 0
    contributed: int = 0
    rounds_voided: int = 0
    reversed: int = 0
    hits: int = 0
    paid_cents: int = 0
    resets: int = 0
    reseeded_cents: int = 0
    closing_seq: int | None = None
    first_mismatch_seq: int | None = None
    points: list[tuple[datetime, int]] = field(default_factory=list)  # (when, cents) for charts

    def __post_init__(self) -> None:
        self.running_units = self.opening_units

    def reading(self, seq: int, when: datetime, reading: rec.MeterReading) -> None:
        units = reading.meter_cents * CARRY_DENOMINATOR + reading.meter_carry
        if self.running_units is None:
            self.running_units = units  # nothing to check the first reading against
        elif units != self.running_units and self.first_mismatch_seq is None:
            self.first_mismatch_seq = seq
        self.running_units = units
        self.closing_seq = seq
        self.points.append((when, reading.meter_cents))

    def row(self) -> MeterRow:
        opening = self.opening_units if self.opening_units is not None else 0
        closing = self.running_units if self.running_units is not None else opening
        expected = (
            opening
            + self.contributed
            - self.reversed
            + (self.reseeded_cents - self.paid_cents) * CARRY_DENOMINATOR
        )
        return MeterRow(
            meter_id=self.meter_id,
            opening_cents=opening // CARRY_DENOMINATOR,
            opening_carry=opening % CARRY_DENOMINATOR,
            opening_seq=self.opening_seq,
            contributions=self.contributions,
            contributed_ten_thousandths_cent=self.contributed,
            rounds_voided=self.rounds_voided,
            reversed_ten_thousandths_cent=self.reversed,
            hits=self.hits,
            paid_cents=self.paid_cents,
            resets=self.resets,
            reseeded_cents=self.reseeded_cents,
            closing_cents=closing // CARRY_DENOMINATOR,
            closing_carry=closing % CARRY_DENOMINATOR,
            closing_seq=self.opening_seq if self.closing_seq is None else self.closing_seq,
            reconciles=(
                self.opening_units is not None
                and self.first_mismatch_seq is None
                and closing == expected
            ),
        )


@dataclass(frozen=True, slots=True)
class Event:
    """An event row as written, and the data it came from (the PDF words it for people)."""

    row: EventRow
    data: dict[str, Any]


@dataclass
class DayTally:
    """One local day of the period (the PDF's figures per day)."""

    rounds_settled: int = 0
    rounds_voided: int = 0
    wagers: int = 0
    wagered_cents: int = 0  # collected at the final count
    returned_cents: int = 0  # the wagers of voided rounds
    paid_cents: int = 0  # on wagers settled, hits included
    envy_bonuses: int = 0
    envy_cents: int = 0
    contributed: int = 0  # ten-thousandths of a cent, to the meter or to the link
    hits: int = 0
    hit_cents: int = 0


@dataclass
class MoneyTally:
    """A movement's records in the period and their sum (in the movement's unit)."""

    records: int = 0
    amount: int = 0


@dataclass
class OutcomeTally:
    """The wagers settled with one outcome (won, lost, ...): what was staked and paid."""

    wagers: int = 0
    staked_cents: int = 0
    paid_cents: int = 0


@dataclass
class LevelTally:
    """What a linked table sent a level of its link, and took back (ten-thousandths)."""

    rows: int = 0
    contributed: int = 0
    reversed: int = 0


@dataclass
class Summary:
    """What the manifest and the PDF need of a period, beside the streamed files."""

    rows: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    meters: list[MeterRow] = field(default_factory=list)
    meter_points: dict[str, list[tuple[datetime, int]]] = field(default_factory=dict)
    days: dict[str, DayTally] = field(default_factory=dict)
    hits: list[HitRow] = field(default_factory=list)
    resets: list[ResetRow] = field(default_factory=list)
    voided: list[VoidedRoundRow] = field(default_factory=list)
    envy_bonuses: list[EnvyBonusRow] = field(default_factory=list)
    # Every movement of MOVEMENTS, in its order, with the sheet column that carries it.
    money: dict[Movement, MoneyTally] = field(
        default_factory=lambda: {m: MoneyTally() for m in MOVEMENTS}
    )
    returned: MoneyTally = field(default_factory=MoneyTally)  # wagers of voided rounds
    outcomes: dict[str, OutcomeTally] = field(default_factory=dict)
    link_levels: dict[tuple[str, str], LevelTally] = field(default_factory=dict)  # link, level
    link_claims: list[LinkClaimRow] = field(default_factory=list)
    device_events: list[Event] = field(default_factory=list)
    deck_events: list[Event] = field(default_factory=list)
    parameter_changes: list[ParameterChangeRow] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)  # in effect at the period's end
    control_actions: list[Event] = field(default_factory=list)  # not routine
    routine_actions: Counter[tuple[str, str]] = field(default_factory=Counter)  # (by, event)
    other_events: list[Event] = field(default_factory=list)
    unknown_types: Counter[str] = field(default_factory=Counter)


class RecordSetBuilder:
    """Routes a period's journal rows to the sheets; see the module's docstring."""

    def __init__(
        self,
        *,
        table: str,
        zone: ZoneInfo,
        sink: RowSink,
        period_start_ts: str,
        meters_before: dict[str, MeterAt],
        power_ups: list[PowerUpInput],
    ) -> None:
        self._table = table
        self._stamp = Stamp(zone)
        self._sink = sink
        self._power_ups = power_ups
        self.summary = Summary()
        self._hits: dict[str, tuple[rec.JackpotHit, dict[str, Any]]] = {}
        self._validated: dict[str, Signed] = {}
        self._documented: dict[str, Signed] = {}
        self._claims: dict[str, _Claim] = {}
        # The open round's wagers, seat -> cents: a void names the seats it returns.
        self._wagers: dict[int, dict[int, int]] = {}
        self._meters: dict[str, MeterTally] = {
            meter_id: MeterTally(
                meter_id,
                at.reading.meter_cents * CARRY_DENOMINATOR + at.reading.meter_carry,
                at.seq,
            )
            for meter_id, at in meters_before.items()
        }
        # The table's meter opens and closes the period even if nothing moved it (a quiet
        # period, or the table's first): at the amount it was left at, or its initial one.
        first = next((p.rules for p in power_ups if p.ts >= period_start_ts), None)
        self._meter_of(_rules_at(power_ups, period_start_ts) or first, period_start_ts)
        self._parameter_changes(period_start_ts)

    def _emit_to(self, sheet: Sheet, row: Row) -> None:
        self._sink(sheet, row)

    # --- parameters --------------------------------------------------------------------

    def _parameter_changes(self, start_ts: str) -> None:
        before: dict[str, str] = {}
        for power_up in self._power_ups:
            now = _parameters(power_up)
            if power_up.ts >= start_ts:
                day, clock = self._stamp.local(power_up.ts)
                for name in sorted(before.keys() | now.keys()):
                    if before.get(name) != now.get(name):
                        row = ParameterChangeRow(
                            input_seq=power_up.input_seq,
                            ts_utc=power_up.ts,
                            local_date=day,
                            local_time=clock,
                            parameter=name,
                            previous=before.get(name),
                            value=now.get(name),
                        )
                        self.summary.parameter_changes.append(row)
                        self._emit_to(Sheet.PARAMETER_CHANGES, row)
            before = now
        self.summary.parameters = before

    # --- rows --------------------------------------------------------------------------

    def before(self, entry: Entry) -> None:
        """A row before the period of a round still open at its start: its wagers, which a
        void in the period returns. Nothing of it is written."""
        record = parse_record(entry.type, entry.data)
        if record is not None:
            self._round_wagers(record)

    def add(self, entry: Entry) -> None:
        s = self.summary
        s.rows += 1
        s.first_seq = s.first_seq or entry.seq
        s.last_seq = entry.seq
        self._emit_to(
            Sheet.JOURNAL,
            JournalEntryRow(
                seq=entry.seq,
                event_id=entry.event_id,
                ts=entry.ts,
                boot_id=entry.boot_id,
                type=entry.type,
                data=entry.data_json,
                prev_hash=entry.prev_hash,
                hash=entry.hash,
                hash_v=entry.hash_v,
            ),
        )
        stamp = self._stamp.fields(entry.seq, entry.ts)
        record = parse_record(entry.type, entry.data)
        if record is None or type(record) not in ROUTES:
            s.unknown_types[entry.type] += 1
            row = event_row(entry.type, entry.data, stamp)
            s.other_events.append(Event(row, entry.data))
            self._emit_to(Sheet.OTHER_EVENTS, row)
            return
        for movement in _MOVEMENTS_OF.get(type(record), ()):
            money = s.money[movement]
            money.records += 1
            money.amount += getattr(record, movement.amount)  # an int: check_record_set
        returned = self._round_wagers(record)
        self._tally(entry, record, stamp["local_date"], returned)
        for sheet in ROUTES[type(record)]:
            self._route(sheet, entry, record, stamp, returned)

    def _round_wagers(self, record: rec.Record) -> int | None:
        """Follows each open round's wagers; for a void, the cents of the wagers it returns
        (None if one of them was not seen: its round opened before what was read)."""
        match record:
            case rec.RoundOpened():
                self._wagers = {record.round_id: {}}  # one round at a time: none left open
            case rec.WagerAccepted():
                self._wagers.setdefault(record.round_id, {})[record.seat] = record.wager_cents
            case rec.WagerWithdrawn():
                self._wagers.get(record.round_id, {}).pop(record.seat, None)
            case rec.RoundSettled():
                self._wagers.pop(record.round_id, None)
            case rec.RoundVoided():
                wagers = self._wagers.pop(record.round_id, {})
                if all(seat in wagers for seat in record.wagers_returned):
                    return sum(wagers[seat] for seat in record.wagers_returned)
        return None

    def _route(
        self,
        sheet: Sheet,
        entry: Entry,
        record: rec.Record,
        stamp: dict[str, Any],
        returned: int | None,
    ) -> None:
        s = self.summary
        if sheet is Sheet.HITS and isinstance(record, rec.JackpotHit):
            self._hits[record.hit_id] = (record, stamp)  # finish() writes it, with who validated
            return
        if sheet is Sheet.LINK_CLAIMS and isinstance(record, rec.LinkClaim | rec.LinkClaimAnswered):
            claim = self._claims.setdefault(record.claim_id, _Claim(stamp))
            if isinstance(record, rec.LinkClaim):
                claim.claim, claim.stamp = record, stamp
            else:
                claim.answer = (record, entry.ts)
            return  # finish() writes it, with its answer
        if sheet is Sheet.VOIDED_ROUNDS and isinstance(record, rec.RoundVoided):
            voided = voided_round_row(record, stamp, returned)
            s.voided.append(voided)
            self._emit_to(sheet, voided)
            return
        if sheet in SPECIFIC:
            row = specific_row(record, sheet, stamp, self._table)
            if isinstance(row, ResetRow):
                s.resets.append(row)
            elif isinstance(row, EnvyBonusRow):
                s.envy_bonuses.append(row)
            elif isinstance(row, WagerRow):
                outcome = s.outcomes.setdefault(row.outcome, OutcomeTally())
                outcome.wagers += 1
                outcome.staked_cents += row.wager_cents
                outcome.paid_cents += row.paid_cents
            elif isinstance(row, LinkContributionRow):
                level = s.link_levels.setdefault((row.link_id, row.level_id), LevelTally())
                level.rows += 1
                if row.kind == "reversal":
                    level.reversed += row.contribution_ten_thousandths_cent
                else:
                    level.contributed += row.contribution_ten_thousandths_cent
            self._emit_to(sheet, row)
            return
        event = event_row(entry.type, entry.data, stamp)
        if sheet is Sheet.CONTROL_ACTIONS:
            if event.by is None or event.by in AUTOMATIC_BY:
                return  # the table acted by itself
            if entry.type in ROUTINE_ACTIONS:
                s.routine_actions[(event.by, entry.type)] += 1
            else:
                s.control_actions.append(Event(event, entry.data))
        elif sheet is Sheet.DEVICE_EVENTS:
            s.device_events.append(Event(event, entry.data))
        elif sheet is Sheet.DECK_EVENTS:
            s.deck_events.append(Event(event, entry.data))
        self._emit_to(sheet, event)

    def _tally(self, entry: Entry, record: rec.Record, day_name: str, returned: int | None) -> None:
        day = self.summary.days.setdefault(day_name, DayTally())
        match record:
            case rec.WagersCounted():
                day.wagers += record.accepted_wagers
                day.wagered_cents += record.total_wager_cents
            case rec.WagerSettled():
                day.paid_cents += record.paid_cents
            case rec.EnvyBonusPaid():
                day.envy_bonuses += 1
                day.envy_cents += record.amount_cents
            case rec.LinkContribution():
                day.contributed += record.contribution_ten_thousandths_cent
            case rec.RoundSettled():
                day.rounds_settled += 1
            case rec.RoundVoided():
                day.rounds_voided += 1
                day.returned_cents += returned or 0
                self.summary.returned.records += 1
                self.summary.returned.amount += returned or 0
            case rec.JackpotHit():
                day.hits += 1
                day.hit_cents += record.amount_cents
            case rec.JackpotValidated():
                self._validated[record.hit_id] = Signed(record.by, entry.ts)
            case rec.JackpotDocumented():
                self._documented[record.hit_id] = Signed(record.by, entry.ts)
        reading = record.meter_reading()
        if reading is None:
            return
        meter = self._meter(reading.meter_id, entry.ts)
        match record:
            case rec.MeterContribution():
                meter.contributions += 1
                meter.contributed += record.contribution_ten_thousandths_cent
                day.contributed += record.contribution_ten_thousandths_cent
                if meter.running_units is not None:
                    meter.running_units += record.contribution_ten_thousandths_cent
            case rec.RoundVoided():
                meter.rounds_voided += 1
                meter.reversed += record.contribution_reversed_ten_thousandths_cent
                if meter.running_units is not None:
                    meter.running_units -= record.contribution_reversed_ten_thousandths_cent
            case rec.MeterReset():
                meter.hits += 1
                meter.resets += 1
                meter.paid_cents += record.paid_cents
                meter.reseeded_cents += record.reset_cents
                if meter.running_units is not None:
                    meter.running_units += (
                        record.reset_cents - record.paid_cents
                    ) * CARRY_DENOMINATOR
            case rec.MeterSharePaid():
                meter.hits += 1
                meter.paid_cents += record.paid_cents
                if meter.running_units is not None:
                    meter.running_units -= record.paid_cents * CARRY_DENOMINATOR
        meter.reading(entry.seq, datetime.fromisoformat(entry.ts), reading)

    def _meter(self, meter_id: str, ts: str) -> MeterTally:
        """The meter's tally; one first seen in the period opens at its configured initial
        amount (the power-up in effect), the table's first rounds on this journal."""
        if meter_id not in self._meters:
            rules = _rules_at(self._power_ups, ts)
            if self._meter_of(rules, ts) != meter_id:
                self._meters[meter_id] = MeterTally(meter_id, None, None)
        return self._meters[meter_id]

    def _meter_of(self, rules: TableRules | None, ts: str) -> str | None:
        """The table's own meter under these rules, its tally opened (at its configured
        initial amount when no row before ts left it at another); None if it has none (a
        game without one, or a linked table: the link's meters are the controller's)."""
        game_meter = rules.game.table_game().meter if rules is not None else None
        if rules is None or game_meter is None or rules.link is not None:
            return None
        if game_meter.meter_id not in self._meters:
            opening = game_meter.initial_cents * CARRY_DENOMINATOR
            self._meters[game_meter.meter_id] = MeterTally(game_meter.meter_id, opening, None)
        return game_meter.meter_id

    def finish(self) -> Summary:
        s = self.summary
        for hit_id, (record, stamp) in self._hits.items():  # in seq order, as they came
            row = hit_row(
                record,
                stamp,
                self._table,
                self._validated.get(hit_id),
                self._documented.get(hit_id),
            )
            s.hits.append(row)
            self._emit_to(Sheet.HITS, row)
        for claim_id, claim in self._claims.items():  # in the order first seen
            claim_row = link_claim_row(
                claim.claim, claim.answer, claim.stamp, self._validated.get(claim_id)
            )
            s.link_claims.append(claim_row)
            self._emit_to(Sheet.LINK_CLAIMS, claim_row)
        for meter_id in sorted(self._meters):
            tally = self._meters[meter_id]
            meter = tally.row()
            s.meters.append(meter)
            s.meter_points[meter_id] = tally.points
            self._emit_to(Sheet.METERS, meter)
        return s


@dataclass
class _Claim:
    """A claim on the link and its answer, as they come (either may be before the period)."""

    stamp: dict[str, Any]
    claim: rec.LinkClaim | None = None
    answer: tuple[rec.LinkClaimAnswered, str] | None = None  # and its journal ts


_MOVEMENTS_OF: dict[type[rec.Record], tuple[Movement, ...]] = {
    cls: tuple(m for m in MOVEMENTS if m.record is cls) for cls in {m.record for m in MOVEMENTS}
}


def _rules_at(power_ups: list[PowerUpInput], ts: str) -> TableRules | None:
    rules = None
    for power_up in power_ups:
        if power_up.ts > ts:
            break
        rules = power_up.rules
    return rules


def _parameters(power_up: PowerUpInput) -> dict[str, str]:
    """The table's parameters as journaled with a power-up, flattened: game.progressive.wager."""
    raw = power_up.raw.get("rules", power_up.raw)
    if power_up.rules is not None:
        raw = power_up.rules.model_dump(mode="json")
    out: dict[str, str] = {}

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list):
            out[prefix] = ",".join(map(str, value))
        elif value is not None:  # None: not set, as a parameter never given
            out[prefix] = "yes" if value is True else "no" if value is False else str(value)

    walk("", raw)
    return out

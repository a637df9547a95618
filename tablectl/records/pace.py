"""Game pace from the journal: rounds and hands per hour, how long each part of a round takes,
and how long the table stood blocked, by cause. Pure: fed journal rows, reads no clock.

    zone, starts = report_zone(config.records.time_zone), config.records.shift_starts
    since = pace_reads_from(start, now, zone, starts)
    rows = read_entries(config.storage.database, since, now)  # records/source.py: read-only
    pace = compute_pace(rows, start=start, end=now, zone=zone, shift_starts=starts)

    live = LivePace(zone, starts)  # the daemon's: each minute, only the rows not read yet
    pace = live.update(now, rows_after)  # records/source.py: read_rows_after
    publish("pace", pace.model_dump_json(), retain=True)       # at most once a minute

What each figure counts (docs/records.md):
- rounds: rounds settled in the window (by the time of `round.settled`); voided rounds apart.
- hands: per settled round, the seats the shoe dealt to (`deal.started`), or, dealt by hand,
  the hands the dealer entered (`round.settled.hands_entered`).
- betting: `round.opened` to `round.locked`; deal: `deal.started` to `deal.completed`;
  decision: the end of the deal (`deal.completed`, or the final count `wagers.counted` when
  the shoe did not deal) to `round.settled`; shuffle: `shuffle.started` to
  `shuffle.completed`. A duration counts in the window its end falls in.
- blocked: the time a cause stood in the way of the next round, from the row that starts it
  to the row that ends it (`BLOCK_RULES`, one line per cause), clipped to the window; a cause
  still standing at the window's end counts to the end. Causes may overlap: `blocked_ms` is
  the time any of them stood.
Rates are per hour of the window's length (wall time, blocked time included). Rows must reach
back before the earliest window (`pace_reads_from`) so that what was open at its start is seen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from itertools import pairwise
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field

from tablectl.core import effects as rec
from tablectl.core.effects import Record, parse_record
from tablectl.store.journal import journal_ts

# How far before the earliest window rows are read, to see a block, deal or shuffle that was
# open at its start. Longer-standing causes are not seen (a table blocked for half a day is
# not a pace question).
LOOKBACK = timedelta(hours=12)
DEFAULT_ROLLING = timedelta(hours=1)


class JournalRowLike(Protocol):
    """What pace needs of a journal row (store.JournalRow and records.source.Entry are)."""

    @property
    def ts(self) -> str: ...

    @property
    def type(self) -> str: ...

    @property
    def data(self) -> Mapping[str, Any]: ...


class BlockCause(StrEnum):
    MISCOUNT = "miscount"  # the shuffler's count was not 52 (649a.5(b)): a new deck is needed
    DECK_IRREGULAR = "deck-irregular"  # a duplicate or foreign card: the deck left the table
    JAM = "jam"  # a shuffler jam, stop or incomplete cycle (649a.13(e)): a reshuffle is needed
    SHOE_FAULT = "shoe-fault"  # a shoe jam or failure to deal (649a.13(f)): the shoe is cleared
    PENDING_JACKPOT = "pending-jackpot"  # a hit waits for a floorperson (649a.11(c)(5))
    GPIO_FAULT = "gpio-fault"  # the sensors cannot be trusted until a person clears it
    STUCK_INPUT = "stuck-input"  # a stuck lock-out button (a stuck seat sensor blocks one seat)
    DEVICE_NOT_ACCEPTED = "device-not-accepted"  # another device waits for a technician
    SENSOR_TEST = "sensor-test"  # a technician's walk test holds the sensors
    LINK_DOWN = "link-down"  # the floor link (its records come with the link controller)
    DECK_AGE = "deck-age"  # a deck reached its age limit (649a.3(c)): it is replaced
    STUB_COUNT = "stub-count"  # the stub count is due (649a.8(f) ...): the dealer counts


def _always(_: Record) -> bool:
    return True


def _no_key(_: Record) -> str:
    return ""


def _device(record: Record) -> str:
    if isinstance(record, rec.DeviceIdentifiedRecord | rec.DeviceAcceptedRecord):
        return record.device
    return ""


def _lockout_stuck(record: Record) -> bool:
    """Only a stuck lock-out button blocks the table; a stuck seat sensor blocks one seat."""
    return isinstance(record, rec.InputStuck | rec.InputStuckCleared) and record.seat is None


def _deck(record: Record) -> str:
    """An expired deck's block ends when a deck replaces it."""
    if isinstance(record, rec.DeckAgeExpired):
        return record.deck_id
    if isinstance(record, rec.DeckIntroducedRecord):
        return record.replaces or ""
    return ""


def _device_refused(record: Record) -> bool:
    return isinstance(record, rec.DeviceIdentifiedRecord) and not record.accepted


def _device_settled(record: Record) -> bool:
    return not _device_refused(record)


@dataclass(frozen=True, slots=True)
class BlockRule:
    """A cause starts at a `starts` row (if `opens` says so) and ends at the next `ends` row
    (if `closes` says so) with the same key (a device's name, say)."""

    cause: BlockCause
    starts: type[Record]
    ends: tuple[type[Record], ...]
    opens: Callable[[Record], bool] = _always
    closes: Callable[[Record], bool] = _always
    key: Callable[[Record], str] = _no_key


# Every cause of blocked time and the rows that start and end it: one line per cause.
BLOCK_RULES: tuple[BlockRule, ...] = (
    BlockRule(BlockCause.MISCOUNT, rec.DeckMiscount, (rec.DeckRegistered,)),
    BlockRule(BlockCause.DECK_IRREGULAR, rec.DeckIrregular, (rec.DeckRegistered,)),
    BlockRule(BlockCause.JAM, rec.ShufflerFaultRecord, (rec.ShufflerFaultCleared,)),
    BlockRule(
        BlockCause.SHOE_FAULT, rec.ShoeFaultRecord, (rec.ShoeFaultCleared, rec.ShoeOutOfOrderRecord)
    ),
    BlockRule(BlockCause.PENDING_JACKPOT, rec.JackpotHit, (rec.JackpotReleased,)),
    BlockRule(BlockCause.GPIO_FAULT, rec.GpioFaultRecord, (rec.GpioFaultCleared,)),
    BlockRule(
        BlockCause.STUCK_INPUT,
        rec.InputStuck,
        (rec.InputStuckCleared,),
        opens=_lockout_stuck,
        closes=_lockout_stuck,
        key=_no_key,
    ),
    BlockRule(
        BlockCause.DEVICE_NOT_ACCEPTED,
        rec.DeviceIdentifiedRecord,
        (rec.DeviceAcceptedRecord, rec.DeviceIdentifiedRecord),
        opens=_device_refused,
        closes=_device_settled,
        key=_device,
    ),
    BlockRule(BlockCause.SENSOR_TEST, rec.SensorTestStartedRecord, (rec.SensorTestEndedRecord,)),
    BlockRule(BlockCause.DECK_AGE, rec.DeckAgeExpired, (rec.DeckIntroducedRecord,), key=_deck),
    BlockRule(BlockCause.STUB_COUNT, rec.StubCountDue, (rec.StubCountRecord,)),
)


# --- the model ----------------------------------------------------------------------------


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Durations(_Model):
    """How long one part of a round took, over the parts that ended in the window."""

    count: int
    mean_ms: int | None
    median_ms: int | None
    max_ms: int | None


class Blocked(_Model):
    cause: BlockCause
    ms: int = Field(description="time this cause stood in the window")
    episodes: int = Field(description="times it stood in the window")


class PaceFigures(_Model):
    start_utc: str = Field(description="from (inclusive), UTC")
    end_utc: str = Field(description="to (exclusive), UTC")
    hours: float
    rounds: int = Field(description="rounds settled")
    rounds_voided: int
    hands: int = Field(description="player hands dealt in the rounds settled")
    rounds_per_hour: float | None
    hands_per_hour: float | None
    betting: Durations
    shuffle: Durations
    deal: Durations
    decision: Durations
    blocked: list[Blocked] = Field(description="every cause, in a fixed order")
    blocked_ms: int = Field(description="time any cause stood (overlaps counted once)")


class ShiftPace(_Model):
    shift: str = Field(description="the shift's start, local time (records.shift_starts)")
    start_local: str
    end_local: str
    figures: PaceFigures = Field(description="from the shift's start to its end, or to now")


class Pace(_Model):
    """Game pace, retained on `pace`: the window asked for, the last rolling period, and
    each shift that overlaps the window (docs/records.md)."""

    v: Literal[1] = 1
    ts: str = Field(description="as of (UTC): the end of every window")
    time_zone: str = Field(description="the zone shifts are defined in")
    window: PaceFigures
    rolling: PaceFigures
    shifts: list[ShiftPace]


# --- computing it -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Span:
    start: datetime
    end: datetime | None  # None: still standing


@dataclass
class _Round:
    opened: datetime | None = None
    counted: datetime | None = None
    deal_started: datetime | None = None
    deal_done: datetime | None = None
    dealt_seats: int | None = None

    def forget_before(self, cutoff: datetime) -> bool:
        """Drops what rows before cutoff set; False once nothing is left."""
        if self.opened is not None and self.opened < cutoff:
            self.opened = None
        if self.counted is not None and self.counted < cutoff:
            self.counted = None
        if self.deal_started is not None and self.deal_started < cutoff:
            self.deal_started, self.dealt_seats = None, None
        if self.deal_done is not None and self.deal_done < cutoff:
            self.deal_done = None
        return any(
            t is not None for t in (self.opened, self.counted, self.deal_started, self.deal_done)
        )


@dataclass(frozen=True, slots=True)
class _Settled:
    """A settled round and the times its hands and decision depend on: which of them count
    depends on how far back the rows reach (`_at`)."""

    when: datetime
    hands_entered: int
    counted: datetime | None
    deal_started: datetime | None
    dealt_seats: int | None
    deal_done: datetime | None

    def hands(self, since: datetime | None) -> int:
        dealt = _at(self.deal_started, since) is not None
        return self.dealt_seats if dealt and self.dealt_seats is not None else self.hands_entered

    def decision(self, since: datetime | None) -> _Span | None:
        deal_done = _at(self.deal_done, since)
        counted = _at(self.counted, since) if _at(self.deal_started, since) is None else None
        decided_from = deal_done or counted
        return None if decided_from is None else _Span(decided_from, self.when)


def _at(when: datetime | None, since: datetime | None) -> datetime | None:
    """when, if rows from since on include it."""
    return when if when is None or since is None or when >= since else None


@dataclass
class _Facts:
    """What the rows say, before any window: instants and spans."""

    settled: list[tuple[datetime, int]]  # (when, hands)
    voided: list[datetime]
    betting: list[_Span]
    shuffle: list[_Span]
    deal: list[_Span]
    decision: list[_Span]
    blocks: list[tuple[BlockCause, _Span]]


@dataclass(frozen=True, slots=True)
class _Block:
    cause: BlockCause
    starts: list[datetime]  # every start row while it stood: the first counts
    end: datetime


def _pace_record_types() -> frozenset[str]:
    read: tuple[type[Record], ...] = (
        rec.RoundOpened,
        rec.RoundLocked,
        rec.WagersCounted,
        rec.DealStarted,
        rec.DealCompleted,
        rec.RoundSettled,
        rec.RoundVoided,
        rec.ShuffleStartedRecord,
        rec.ShuffleCompletedRecord,
        rec.ShufflerFaultRecord,
        rec.ShufflerRebootedRecord,
    )
    for rule in BLOCK_RULES:
        read += (rule.starts, *rule.ends)
    return frozenset(name for name, cls in rec.RECORD_TYPES.items() if issubclass(cls, read))


# The rows pace reads: any other type changes no figure (a wager, a contribution, a card).
PACE_RECORD_TYPES = _pace_record_types()


class PaceFold:
    """The facts of journal rows fed in journal order, kept from a cutoff on: after
    `forget_before(cutoff)` they are what rows from cutoff on alone would give (times in the
    journal run forward), so each minute only the rows not read yet are fed, and what
    lies before the earliest window is dropped (memory stays flat as the journal grows)."""

    def __init__(self) -> None:
        self.since: datetime | None = None  # rows before it are forgotten (None: none)
        self._rounds: dict[int, _Round] = {}
        self._shuffling: datetime | None = None
        # Each open cause's start rows while it stood: the first one from the cutoff on counts.
        self._open_blocks: dict[tuple[BlockCause, str], list[datetime]] = {}
        self._settled: list[_Settled] = []
        self._voided: list[datetime] = []
        self._betting: list[_Span] = []
        self._shuffle: list[_Span] = []
        self._deal: list[_Span] = []
        self._blocks: list[_Block] = []

    def feed(self, rows: Iterable[JournalRowLike], end: datetime) -> None:
        """Rows in journal order, up to (not including) the first at or after end."""
        for row in rows:
            when = datetime.fromisoformat(row.ts)
            if when >= end:
                break
            self.add(row, when)

    def add(self, row: JournalRowLike, when: datetime) -> None:
        """One row, the next in journal order; when: its time."""
        record = parse_record(row.type, dict(row.data))
        if record is None:
            return
        for rule in BLOCK_RULES:
            key = (rule.cause, rule.key(record))
            if isinstance(record, rule.starts) and rule.opens(record):
                self._open_blocks.setdefault(key, []).append(when)
            elif isinstance(record, rule.ends) and rule.closes(record) and key in self._open_blocks:
                self._blocks.append(_Block(rule.cause, self._open_blocks.pop(key), when))
        rounds = self._rounds
        match record:
            case rec.RoundOpened():
                rounds[record.round_id] = _Round(opened=when)
            case rec.RoundLocked():
                r = rounds.get(record.round_id)
                if r is not None and r.opened is not None:
                    self._betting.append(_Span(r.opened, when))
            case rec.WagersCounted():
                rounds.setdefault(record.round_id, _Round()).counted = when
            case rec.DealStarted():
                r = rounds.setdefault(record.round_id, _Round())
                r.deal_started, r.dealt_seats = when, len(record.seats)
            case rec.DealCompleted():
                r = rounds.setdefault(record.round_id, _Round())
                if r.deal_started is not None:
                    self._deal.append(_Span(r.deal_started, when))
                r.deal_done = when
            case rec.RoundSettled():
                r = rounds.pop(record.round_id, _Round())
                self._settled.append(
                    _Settled(
                        when,
                        record.hands_entered,
                        r.counted,
                        r.deal_started,
                        r.dealt_seats,
                        r.deal_done,
                    )
                )
            case rec.RoundVoided():
                rounds.pop(record.round_id, None)
                self._voided.append(when)
            case rec.ShuffleStartedRecord(stale=False):
                self._shuffling = when
            case rec.ShuffleCompletedRecord():
                if self._shuffling is not None:
                    self._shuffle.append(_Span(self._shuffling, when))
                self._shuffling = None
            case rec.ShufflerFaultRecord() | rec.ShufflerRebootedRecord():
                self._shuffling = None  # that shuffle never completes

    def forget_before(self, cutoff: datetime) -> None:
        """Drop what only rows before cutoff gave: the facts are then those of the rows from
        cutoff on. A cutoff before the last one forgets nothing more (what was dropped is
        gone: read the rows again into a new fold)."""
        if self.since is not None and cutoff <= self.since:
            return
        self.since = cutoff
        self._rounds = {k: r for k, r in self._rounds.items() if r.forget_before(cutoff)}
        if self._shuffling is not None and self._shuffling < cutoff:
            self._shuffling = None
        open_blocks: dict[tuple[BlockCause, str], list[datetime]] = {}
        for key, starts in self._open_blocks.items():
            if kept := [t for t in starts if t >= cutoff]:
                open_blocks[key] = kept
        self._open_blocks = open_blocks
        self._settled = [s for s in self._settled if s.when >= cutoff]
        self._voided = [t for t in self._voided if t >= cutoff]
        self._betting = [s for s in self._betting if s.start >= cutoff]
        self._shuffle = [s for s in self._shuffle if s.start >= cutoff]
        self._deal = [s for s in self._deal if s.start >= cutoff]
        blocks = []
        for block in self._blocks:
            if kept := [t for t in block.starts if t >= cutoff]:
                blocks.append(_Block(block.cause, kept, block.end))
        self._blocks = blocks

    def facts(self) -> _Facts:
        since = self.since
        decisions = [s.decision(since) for s in self._settled]
        blocks = [(b.cause, _Span(b.starts[0], b.end)) for b in self._blocks]
        blocks += [
            (cause, _Span(starts[0], None)) for (cause, _), starts in self._open_blocks.items()
        ]
        return _Facts(
            settled=[(s.when, s.hands(since)) for s in self._settled],
            voided=list(self._voided),
            betting=list(self._betting),
            shuffle=list(self._shuffle),
            deal=list(self._deal),
            decision=[d for d in decisions if d is not None],
            blocks=blocks,
        )


def _ms(delta: timedelta) -> int:
    return round(delta.total_seconds() * 1000)


def _durations(spans: Sequence[_Span], start: datetime, end: datetime) -> Durations:
    took = sorted(_ms(s.end - s.start) for s in spans if s.end is not None and start <= s.end < end)
    if not took:
        return Durations(count=0, mean_ms=None, median_ms=None, max_ms=None)
    n = len(took)
    return Durations(
        count=n, mean_ms=(sum(took) + n // 2) // n, median_ms=took[(n - 1) // 2], max_ms=took[-1]
    )


def _clipped(span: _Span, start: datetime, end: datetime) -> tuple[datetime, datetime] | None:
    a, b = max(span.start, start), min(span.end or end, end)
    return (a, b) if a < b else None


def _per_hour(count: int, hours: float) -> float | None:
    return round(count / hours, 2) if hours > 0 else None


def _figures(facts: _Facts, start: datetime, end: datetime) -> PaceFigures:
    hours = (end - start).total_seconds() / 3600
    settled = [hands for when, hands in facts.settled if start <= when < end]
    blocked: list[Blocked] = []
    every: list[tuple[datetime, datetime]] = []
    for cause in BlockCause:
        parts = [
            part
            for c, span in facts.blocks
            if c is cause and (part := _clipped(span, start, end)) is not None
        ]
        every += parts
        blocked.append(
            Blocked(cause=cause, ms=sum(_ms(b - a) for a, b in parts), episodes=len(parts))
        )
    union_ms, reach = 0, start
    for a, b in sorted(every):
        if b > reach:
            union_ms += _ms(b - max(a, reach))
            reach = b
    return PaceFigures(
        start_utc=journal_ts(start),
        end_utc=journal_ts(end),
        hours=round(hours, 4),
        rounds=len(settled),
        rounds_voided=sum(1 for when in facts.voided if start <= when < end),
        hands=sum(settled),
        rounds_per_hour=_per_hour(len(settled), hours),
        hands_per_hour=_per_hour(sum(settled), hours),
        betting=_durations(facts.betting, start, end),
        shuffle=_durations(facts.shuffle, start, end),
        deal=_durations(facts.deal, start, end),
        decision=_durations(facts.decision, start, end),
        blocked=blocked,
        blocked_ms=union_ms,
    )


@dataclass(frozen=True, slots=True)
class Shift:
    name: str  # its start, "06:00"
    start: datetime
    end: datetime


def shifts_between(
    start: datetime, end: datetime, zone: ZoneInfo, shift_starts: Sequence[time]
) -> list[Shift]:
    """The shifts overlapping [start, end): each runs from its start to the next one's, in
    local time (a shift across a DST change is an hour longer or shorter)."""
    if not shift_starts:
        return []
    first_day = start.astimezone(zone).date() - timedelta(days=1)
    last_day = end.astimezone(zone).date()
    begins: list[tuple[str, datetime]] = []
    day = first_day
    while day <= last_day + timedelta(days=1):
        begins += [
            (f"{t:%H:%M}", datetime.combine(day, t, tzinfo=zone)) for t in sorted(shift_starts)
        ]
        day += timedelta(days=1)
    out = []
    for (name, a), (_, b) in pairwise(begins):
        if a < end and b > start:
            # In UTC: the difference of two times of one zone is wall time in Python.
            out.append(Shift(name, a.astimezone(UTC), b.astimezone(UTC)))
    return out


def pace_reads_from(
    start: datetime,
    end: datetime,
    zone: ZoneInfo,
    shift_starts: Sequence[time],
    rolling: timedelta = DEFAULT_ROLLING,
) -> datetime:
    """The earliest time compute_pace needs rows from, for these windows."""
    shifts = shifts_between(start, end, zone, shift_starts)
    return min([start, end - rolling, *(s.start for s in shifts)]) - LOOKBACK


def compute_pace(
    rows: Iterable[JournalRowLike],
    *,
    start: datetime,
    end: datetime,
    zone: ZoneInfo,
    shift_starts: Sequence[time],
    rolling: timedelta = DEFAULT_ROLLING,
) -> Pace:
    """Pace for [start, end), the rolling period before end, and each shift overlapping the
    window (up to end). rows: in journal order, from `pace_reads_from(...)` on."""
    # Every instant in UTC: Python subtracts two times of one zone as wall times (a DST change
    # would gain or lose an hour).
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    fold = PaceFold()
    fold.feed(rows, end)
    return _pace(
        fold.facts(), start=start, end=end, zone=zone, shift_starts=shift_starts, rolling=rolling
    )


def _pace(
    facts: _Facts,
    *,
    start: datetime,
    end: datetime,
    zone: ZoneInfo,
    shift_starts: Sequence[time],
    rolling: timedelta,
) -> Pace:
    shifts = []
    for shift in shifts_between(start, end, zone, shift_starts):
        shifts.append(
            ShiftPace(
                shift=shift.name,
                start_local=shift.start.astimezone(zone).isoformat(timespec="minutes"),
                end_local=shift.end.astimezone(zone).isoformat(timespec="minutes"),
                figures=_figures(facts, shift.start, min(shift.end, end)),
            )
        )
    return Pace(
        ts=journal_ts(end),
        time_zone=zone.key,
        window=_figures(facts, start, end),
        rolling=_figures(facts, end - rolling, end),
        shifts=shifts,
    )


class SeqRowLike(JournalRowLike, Protocol):
    """A journal row with its seq: where the next read starts."""

    @property
    def seq(self) -> int: ...


# rows_after(seq, since, end): the rows after seq with since <= ts, in journal order, up to
# (not including) the first at or after end.
RowsAfter = Callable[[int, datetime, datetime], Iterable[SeqRowLike]]


class LivePace:
    """Pace as of now, as the table publishes it each minute: the window is the shift now
    running (so `shifts` holds it), with the rolling period before now. Each update reads
    only the rows after the last one read; what they said is kept in a `PaceFold` from the
    earliest window's lookback on, so the figures are those of `compute_pace` over every
    row from `pace_reads_from(...)` while a read costs what the minute added."""

    def __init__(
        self,
        zone: ZoneInfo,
        shift_starts: Sequence[time],
        rolling: timedelta = DEFAULT_ROLLING,
    ) -> None:
        self._zone = zone
        self._shift_starts = list(shift_starts)
        self._rolling = rolling
        self._fold: PaceFold | None = None
        self._after_seq = 0
        self.rows_read = 0  # rows read in all: each update reads only those it has not

    def update(self, now: datetime, rows_after: RowsAfter) -> Pace:
        now = now.astimezone(UTC)
        zone, starts = self._zone, self._shift_starts
        start = shifts_between(now - timedelta(days=1), now, zone, starts)[-1].start
        since = pace_reads_from(start, now, zone, starts, self._rolling)
        fold = self._fold
        if fold is None or (fold.since is not None and since < fold.since):
            # The first update, or the clock went back past what was kept: read it all again.
            fold, self._after_seq = PaceFold(), 0
            self._fold = fold
        fold.forget_before(since)
        for row in rows_after(self._after_seq, since, now):
            when = datetime.fromisoformat(row.ts)
            if when >= now:
                break
            self.rows_read += 1
            self._after_seq = row.seq
            fold.add(row, when)
        return _pace(
            fold.facts(),
            start=start,
            end=now,
            zone=zone,
            shift_starts=starts,
            rolling=self._rolling,
        )

"""The table's round state machine, for every game: (state, input) -> (state, effects). Pure.

A round opens when a verified deck is ready and no jackpot is pending, recognises the table
game system's wagers until the dealer's lock-out edge, counts them (booking each one's meter
contribution), then is settled on the cards shown or voided. The game module (core/games)
supplies every rule that differs between games; this module never names a game.

The records a step journals are built from the state and from inputs validated when they came
in, so they are built `trusted` (util/frozen.py: typed by mypy, not validated a second time at
every step); the link contract's records, strict and constrained for the link controller, are
validated.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Literal, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, model_serializer, model_validator

from tablectl.core import decks, stalls
from tablectl.core import effects as rec
from tablectl.core.compat import later
from tablectl.core.decks import DeckLife
from tablectl.core.effects import (
    DealCards,
    Effect,
    Lamp,
    RequestShuffle,
    SeatLamp,
)
from tablectl.core.events import (
    AckPastJournal,
    CardRead,
    Cards,
    ChipSensed,
    ClearGpioFault,
    ClearStuckInput,
    CommandStalled,
    ConfirmDocumentation,
    DealRequested,
    DealRequestFailed,
    DeckClock,
    DeckInPlay,
    DeckIntroduced,
    DeckRules,
    DeliveryFault,
    DeliveryRestored,
    DeviceAccepted,
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceLinkReset,
    DeviceReportConflict,
    DeviceResumed,
    Event,
    GpioFault,
    IdleProcedureDone,
    JournalChainChecked,
    JournalCheckPending,
    JournalRecovered,
    LinkClaimAnswer,
    LinkLost,
    LinkParametersHeard,
    LinkRestored,
    LockoutHeld,
    LockoutPressed,
    LockoutReleased,
    NewDeckRegistered,
    PowerUp,
    ReshuffleRequested,
    SensorTestEnded,
    SensorTestStarted,
    Settle,
    ShoeCard,
    ShoeCleared,
    ShoeDealCompleted,
    ShoeFault,
    ShoeOutOfOrder,
    ShoeRebooted,
    ShoeStackDealt,
    ShuffleCompleted,
    ShuffleRequestFailed,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
    StubCounted,
    TableIdle,
    TableRules,
    ValidateHit,
    VoidRound,
    placed_before_lockout,
)
from tablectl.core.games.base import (
    DECK_SIZE,
    DealPlan,
    Hit,
    Outcome,
    RoundCards,
    TableGame,
    form_hands,
)
from tablectl.core.journal_checks import BROKEN_ACTION, ROLLBACK_ACTION, RolledBack
from tablectl.core.recovery import Resolution, resolve_deal
from tablectl.core.stalls import Awaited, Stall, Wait
from tablectl.rules.meters import LinkedMeter, LinkLevel, LocalMeter, MeterState
from tablectl.util.frozen import replaced, trusted

HIT_HISTORY = 25  # hits kept in the state for status and the birth message


class Rejected(Exception):
    """A command that is not allowed now; the state is unchanged."""


class Phase(StrEnum):
    CLOSED = "closed"  # between rounds: no wager is recognised
    BETTING = "betting"  # wagers are recognised and acknowledged
    LOCKED = "locked"  # "no more bets": wagers frozen, cards in play


class HitEntry(BaseModel):
    """A progressive payout and where its floor workflow stands."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hit_id: str
    round_id: int
    seat: int
    hand: str
    amount_cents: int
    basis: str
    paid_from_table_inventory: bool
    validated_by: str | None = None
    documented_by: str | None = None
    # A claim on a linked meter: JACKPOT PENDING until the controller answers; the amount
    # paid is the controller's (docs/linked-progressives.md, Hits).
    link_claim: bool = later(False)
    answered: bool = later(False)

    @property
    def done(self) -> bool:
        return self.validated_by is not None and (
            self.paid_from_table_inventory or self.documented_by is not None
        )

    def replace(self, **update: Unpack[HitEntryUpdate]) -> HitEntry:
        """A copy with the fields named changed; mypy checks each name and its type."""
        return replaced(self, update)


class HitEntryUpdate(TypedDict, total=False):
    """Any of HitEntry's fields, each with its type: what `HitEntry.replace` takes."""

    hit_id: str
    round_id: int
    seat: int
    hand: str
    amount_cents: int
    basis: str
    paid_from_table_inventory: bool
    validated_by: str | None
    documented_by: str | None
    link_claim: bool
    answered: bool


CounterName = Literal[
    "lockout_presses_ignored",
    "wagers_rejected",
    "unknown_seat_events",
    "inputs_stuck",
    "gpio_faults",
    "completions_not_used",
    "deck_miscounts",
    "deck_irregular",
    "rounds_settled",
    "rounds_voided",
    "devices_changed",
    "device_events_refused",
    "device_report_conflicts",
    "shoe_events_outside_a_deal",
    "shoe_faults",
    "link_losses",
    "commands_stalled",
]


class Counters(BaseModel):
    """How often each of these happened at the table since its journal began.

    Its JSON is the mapping it replaced: the counters that happened, name -> count, in the
    order each first happened. The journal's state hashes were taken of that form, so an
    older journal replays to the same bytes; two states equal only if they dump the same.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    lockout_presses_ignored: int = 0  # pressed while no round took bets
    wagers_rejected: int = 0  # a chip refused as a wager (late, closed, stuck, link down)
    unknown_seat_events: int = 0  # a chip on a seat the table does not have
    inputs_stuck: int = 0  # a lock-out button or a seat sensor found stuck
    gpio_faults: int = 0  # edges lost
    completions_not_used: int = 0  # a shuffle's count of 52 that made no deck ready
    deck_miscounts: int = 0  # a shuffle counted other than 52 (649a.5(b))
    deck_irregular: int = 0  # not 52 distinct cards: a duplicate, foreign card, stub count
    rounds_settled: int = 0
    rounds_voided: int = 0
    devices_changed: int = 0  # a device with another serial number than the accepted one
    device_events_refused: int = 0  # a device's event stream stopped (out of sequence)
    device_report_conflicts: int = 0  # one event id, two reports
    shoe_events_outside_a_deal: int = 0
    shoe_faults: int = 0
    link_losses: int = 0  # the linked progressive's link lost
    commands_stalled: int = 0  # a shuffle or deal taken by its device that never completed
    happened: tuple[CounterName, ...] = ()  # the counters above, in the order each first did

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        """A mapping read back (or keyword arguments): its keys, in order, are what happened."""
        if isinstance(data, dict) and "happened" not in data:
            return {**data, "happened": tuple(data)}
        return data

    @model_serializer
    def _as_mapping(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.happened}

    def bump(self, name: CounterName) -> Counters:
        """One more of `name`: a new counter goes last, as it did in the mapping."""
        happened = self.happened if name in self.happened else (*self.happened, name)
        # `name` is a field (mypy checks the literal, test_typed_updates each field): the
        # copy needs no validation, as the mapping read back and validated again did.
        return replaced(self, {name: getattr(self, name) + 1, "happened": happened})


class StuckCause(StrEnum):
    HELD = "held"  # the lock-out button down past gpio.lockout_hold_max_ms
    NOT_RELEASED = "not-released"  # ... and still down when the next round would open
    OCCUPIED_ROUNDS = "occupied-rounds"  # a seat sensor occupied past gpio.sensor_stuck_rounds
    OCCUPIED_DURING_DEAL = "occupied-during-deal"  # the wagers are collected before the deal


class StuckInput(BaseModel):
    """A stuck input, until a person frees it and clears it: the lock-out button (seat None;
    betting stays closed) or one seat's sensor (that seat's wagers are refused)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seat: int | None
    cause: StuckCause
    round_id: int  # the round it was found in

    @property
    def input(self) -> str:
        return "lock-out-button" if self.seat is None else "seat-sensor"


class Deal(BaseModel):
    """The shoe's deal of the round in play: the plan's stacks and the cards read so far.

    The cards stay in the state (on the table PC); no journal record carries their order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seats: tuple[int, ...]  # the players dealt in, from the dealer's left
    stacks: tuple[int, ...]  # the by-shoe steps of the deal plan, in order
    cards: Cards = ()  # read, in dealing order
    discarded: Cards = ()  # found face up, not used (649a.13(a))
    stacks_done: tuple[int, ...] = ()  # the sizes the shoe reported
    face_up: int = 0
    complete: bool = False
    # The shoe's boot the deal was asked of (core/recovery.py).
    shoe_boot_id: int | None = later(None)

    def seen(self, card: object) -> bool:
        return card in self.cards or card in self.discarded

    def replace(self, **update: Unpack[DealUpdate]) -> Deal:
        """A copy with the fields named changed; mypy checks each name and its type."""
        return replaced(self, update)


class DealUpdate(TypedDict, total=False):
    """Any of Deal's fields, each with its type: what `Deal.replace` takes."""

    seats: tuple[int, ...]
    stacks: tuple[int, ...]
    cards: Cards
    discarded: Cards
    stacks_done: tuple[int, ...]
    face_up: int
    complete: bool
    shoe_boot_id: int | None


class RefusedEvent(BaseModel):
    """Where a device's event stream stopped: an event out of sequence, with an absurd id or
    of an unknown kind. Nothing after it is taken until the device reboots or a technician
    resets the link (`tablectl devices reset-link`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    boot_id: int
    event_id: int
    expected_event_id: int
    kind: int


class TableState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    game: str
    phase: Phase = Phase.CLOSED
    round_id: int = 0
    wagers: dict[int, int] = {}  # seat -> accepted table-system wager, cents
    lockout_at_ns: int | None = None
    lockout_resolution_ns: int = 1  # the edge happened within (at - resolution, at]
    undecided: tuple[int, ...] = ()  # chips that arrived before the edge, still resting
    decided_after_lockout: tuple[int, ...] = ()
    counted: bool = False  # the accepted count is final and contributions are booked
    round_contribution_units: int = 0  # reversed exactly on a void
    # A linked meter: the round's contributions, each reversed on the link by a void.
    round_link_contributions: tuple[rec.LinkContribution, ...] = later(())
    meter: MeterState | None = None
    deck_ready: bool = False
    shuffle_requested: bool = False
    # A shuffle started since the last power-up, fault or reboot: only its completion makes a
    # deck ready (a completion from before a restart, or after a jam, never opens a round).
    shuffle_started: bool = False
    shuffler_fault: str | None = None  # 649a.13(e): cleared only by a reshuffle request
    blocked: str | None = None  # 649a.5(b): the deck left the table; a new one is needed
    gpio_fault: str | None = None  # lost edges: no round opens until a person clears it
    sensor_test: str | None = None  # a technician's walk test holds the sensors
    deal: Deal | None = None  # the shoe's deal of the round in play
    shoe_out_of_order: bool = False  # 649a.13(g): covered or signed; hands entered by hand
    devices: dict[str, str] = {}  # device -> the serial number accepted for play
    devices_pending: dict[str, str] = {}  # device -> another serial number, to be accepted
    hits_pending: tuple[HitEntry, ...] = ()  # hold the table (649a.11(c)(5))
    hit_history: tuple[HitEntry, ...] = ()  # newest first
    counters: Counters = Counters()
    # 649a.13(f): a shoe that jammed, stopped or failed to deal holds the cards of a void
    # round; it deals again once the dealer has removed them (`tablectl dealer clear-shoe`).
    shoe_fault: str | None = later(None)
    events_refused: dict[str, RefusedEvent] = later({})  # device -> where its event stream stopped
    # Why the shuffler will not take SHUFFLE (asked again).
    shuffle_refused: str | None = later(None)
    deal_refused: str | None = later(None)  # why the shoe did not take the last DEAL
    # The inputs as the core last heard them (rules.sensors): seat -> the rounds whose
    # betting its chip has been there for; chips that arrived while the table was closed,
    # decided once (accepted when a round opens, refused when lifted first); the button.
    occupied: dict[int, int] = later({})
    waiting: tuple[int, ...] = later(())
    lockout_held: bool = later(False)
    stuck_inputs: tuple[StuckInput, ...] = later(())
    # The broker refuses our rows: they wait (docs/mqtt.md).
    delivery_fault: str | None = later(None)
    deck: DeckLife = later(DeckLife())  # the decks' identity, age and stub counts (core/decks.py)
    # A linked progressive: why the link is not heard (None: heard), and why its parameters
    # were refused (None: not refused). Either locks out the progressive (5321.18(c)).
    link_silent: str | None = later(None)
    link_refused: str | None = later(None)
    # device -> the wait that never ended, while its fault stands (core/stalls.py).
    stalls: dict[str, Stall] = later({})
    # What the journal's checks found while the table runs (core/journal_checks.py): a
    # backend that acknowledged past its end; its chains being walked in full since this
    # start (through this seq), or a break found there. Each holds the table.
    rolled_back: RolledBack | None = later(None)
    chain_pending: int | None = later(None)
    chain_broken: str | None = later(None)

    @property
    def accepting_wagers(self) -> bool:
        return self.phase is Phase.BETTING and self.link_down is None

    @property
    def link_down(self) -> str | None:
        """Why a linked progressive is unplayable now (LINK DOWN), or None: playable."""
        if not isinstance(self.meter, LinkedMeter):
            return None
        if self.link_refused is not None:
            return self.link_refused
        if self.meter.parameters_version == 0:
            return "no link parameters heard yet"
        return self.link_silent

    @classmethod
    def initial(cls, rules: TableRules) -> TableState:
        game = rules.game.table_game()
        meter = game.meter
        return cls(
            game=game.name,
            meter=None if meter is None else _meter_for(rules, meter.meter_id, meter.initial_cents),
        )

    def replace(self, **update: Unpack[TableStateUpdate]) -> TableState:
        """A copy with the fields named changed; mypy checks each name and its type."""
        return replaced(self, update)


class TableStateUpdate(TypedDict, total=False):
    """Any of TableState's fields, each with its type: what `TableState.replace` takes."""

    game: str
    phase: Phase
    round_id: int
    wagers: dict[int, int]
    lockout_at_ns: int | None
    lockout_resolution_ns: int
    undecided: tuple[int, ...]
    decided_after_lockout: tuple[int, ...]
    counted: bool
    round_contribution_units: int
    round_link_contributions: tuple[rec.LinkContribution, ...]
    meter: MeterState | None
    deck_ready: bool
    shuffle_requested: bool
    shuffle_started: bool
    shuffler_fault: str | None
    blocked: str | None
    gpio_fault: str | None
    sensor_test: str | None
    deal: Deal | None
    shoe_out_of_order: bool
    devices: dict[str, str]
    devices_pending: dict[str, str]
    hits_pending: tuple[HitEntry, ...]
    hit_history: tuple[HitEntry, ...]
    counters: Counters
    shoe_fault: str | None
    events_refused: dict[str, RefusedEvent]
    shuffle_refused: str | None
    deal_refused: str | None
    occupied: dict[int, int]
    waiting: tuple[int, ...]
    lockout_held: bool
    stuck_inputs: tuple[StuckInput, ...]
    delivery_fault: str | None
    deck: DeckLife
    link_silent: str | None
    link_refused: str | None
    stalls: dict[str, Stall]
    rolled_back: RolledBack | None
    chain_pending: int | None
    chain_broken: str | None


def _meter_for(rules: TableRules, meter_id: str, initial_cents: int) -> MeterState:
    if rules.link is not None:
        return LinkedMeter(meter_id=meter_id, link_id=rules.link.link_id)
    return LocalMeter(meter_id=meter_id, cents=initial_cents)


def _reading_of(meter: MeterState | None) -> rec.MeterReading | None:
    """A round's record of its table's meter; a linked meter is the controller's to tell."""
    return None if meter is None or isinstance(meter, LinkedMeter) else _reading(meter)


def _reading(meter: MeterState, cents: int | None = None) -> rec.MeterReading:
    """What a record says of the meter it leaves (cents: a hit's, before later hits)."""
    return trusted(
        rec.MeterReading,
        meter_id=meter.meter_id,
        meter_cents=meter.cents if cents is None else cents,
        meter_carry=meter.carry,
    )


# --- transitions ------------------------------------------------------------------------


def step(rules: TableRules, state: TableState, event: Event) -> tuple[TableState, list[Effect]]:
    """Apply one input. Commands that are not allowed now raise Rejected."""
    game = _game(rules)
    if game.name != state.game:
        raise Rejected(f"this table's journal is a {state.game} table, not {game.name}")
    fx: list[Effect] = []
    state = _HANDLERS.get(type(event), _apply)(event, state, _Context(rules, game, fx))
    if rules.revision < 2 and state.shoe_fault is not None:
        # The first revision kept no standing shoe fault: its journals replay as written.
        state = state.replace(shoe_fault=None)
    state = _advance(rules, game, state, fx)
    return state, fx


# The game of the rules last stepped with. The shell steps with one rules object (its power-
# up's) for as long as it runs; building the game at every step was ~16 us of a cold one.
# Held by identity, not equality: a copy of the rules with another game gets its own.
_last_game: tuple[TableRules, TableGame] | None = None


def _game(rules: TableRules) -> TableGame:
    global _last_game
    last = _last_game
    if last is not None and last[0] is rules:
        return last[1]
    game = rules.game.table_game()
    _last_game = (rules, game)
    return game


@dataclasses.dataclass(slots=True)
class _Context:
    """What every input's handler needs besides the input and the state. Not frozen: a frozen
    dataclass's __init__ sets each field through object.__setattr__ (~6 us of a cold step)."""

    rules: TableRules
    game: TableGame
    fx: list[Effect]  # the effects of this step so far, appended to


@functools.singledispatch
def _apply(event: Event, s: TableState, ctx: _Context) -> TableState:
    """The state after one input: each input type has its handler, registered below."""
    raise AssertionError(f"unhandled input {event!r}")


# --- the inputs: power, the lock-out button, the seat sensors, GPIO ---------------------


@_apply.register
def _on_power_up(event: PowerUp, s: TableState, ctx: _Context) -> TableState:
    game, fx = ctx.game, ctx.fx
    # Lock-out is the safe state: a round that was taking bets is closed at once, and chips
    # that were still resting cannot be confirmed any more.
    if s.phase is Phase.BETTING:
        s = _lock(game, s, fx, cause="power-up", at_ns=None, undecided=())
    if s.phase is Phase.LOCKED and not s.counted:
        s = _finish_count(game, _drop_undecided(s, fx), fx)
    s = _link_at_power_up(ctx.rules, game, s)
    # Whatever the shuffler held before is unknown now: reshuffle. A walk test that was
    # running ended with the daemon; a GPIO fault stays until a person clears it, and so does
    # a stuck input. The inputs' levels are read again from the lines.
    # The journal's chains are walked again at this start (a pending walk or a break found
    # by the last start's is decided anew).
    return _unverify(s).replace(
        sensor_test=None,
        deal_refused=None,
        occupied={},
        waiting=(),
        lockout_held=False,
        chain_pending=None,
        chain_broken=None,
    )


@_apply.register
def _on_chip(event: ChipSensed, s: TableState, ctx: _Context) -> TableState:
    return _chip(ctx.rules, ctx.game, s, event, ctx.fx)


@_apply.register
def _on_lockout_pressed(event: LockoutPressed, s: TableState, ctx: _Context) -> TableState:
    # The core keeps the button's level (rules.sensors); journals from before it did not.
    held = ctx.rules.sensors is not None or s.lockout_held
    if s.phase is not Phase.BETTING:
        if held != s.lockout_held:
            s = s.replace(lockout_held=held)
        if s.sensor_test is not None:
            return s  # the technician's test press (service/walk_test.py), not play
        return s.replace(counters=s.counters.bump("lockout_presses_ignored"))
    s = _lock(
        ctx.game,
        s,
        ctx.fx,
        cause="lockout-button",
        at_ns=event.at_ns,
        undecided=event.undecided_seats,
        resting=event.resting_seats,
        # One copy of the state on the lock-out's path: the button's level and the edge's
        # resolution go with the lock and the count.
        also={"lockout_held": held, "lockout_resolution_ns": event.resolution_ns},
    )
    if not ctx.rules.shoe or s.shoe_out_of_order:
        # "No more bets": the dealer deals now (649a.8(c), 649a.9(b)); not from a deck past
        # its age (649a.3(c)).
        s = _deck_age_at_deal(ctx.rules, ctx.game, s, ctx.fx)
    return s


@_apply.register
def _on_lockout_released(event: LockoutReleased, s: TableState, ctx: _Context) -> TableState:
    return s.replace(lockout_held=False)


@_apply.register
def _on_lockout_held(event: LockoutHeld, s: TableState, ctx: _Context) -> TableState:
    # Between rounds, the round waiting to open would have no working lock-out.
    cause = StuckCause.NOT_RELEASED if s.phase is Phase.CLOSED else StuckCause.HELD
    return _stuck(ctx.game, s, None, cause, ctx.fx)


@_apply.register
def _on_clear_stuck(event: ClearStuckInput, s: TableState, ctx: _Context) -> TableState:
    return _clear_stuck(s, event, ctx.fx)


@_apply.register
def _on_gpio_fault(event: GpioFault, s: TableState, ctx: _Context) -> TableState:
    return _gpio_fault(ctx.game, s, event.reason, ctx.fx)


@_apply.register
def _on_clear_gpio_fault(event: ClearGpioFault, s: TableState, ctx: _Context) -> TableState:
    if s.gpio_fault is None:
        raise Rejected("no GPIO fault to clear")
    ctx.fx.append(trusted(rec.GpioFaultCleared, reason=s.gpio_fault, by=event.by))
    return s.replace(gpio_fault=None)


@_apply.register
def _on_test_started(event: SensorTestStarted, s: TableState, ctx: _Context) -> TableState:
    return _test_started(s, event, ctx.fx)


@_apply.register
def _on_test_ended(event: SensorTestEnded, s: TableState, ctx: _Context) -> TableState:
    if s.sensor_test != event.test:
        raise Rejected(f"no {event.test} test is running")
    ctx.fx.append(
        trusted(
            rec.SensorTestEndedRecord,
            test=event.test,
            passed=list(event.passed),
            failed=list(event.failed),
            resolution_ns=event.resolution_ns,
            by=event.by,
        )
    )
    return s.replace(sensor_test=None)


# --- the shuffler ----------------------------------------------------------------------


@_apply.register
def _on_shuffle_started(event: ShuffleStarted, s: TableState, ctx: _Context) -> TableState:
    ctx.fx.append(trusted(rec.ShuffleStartedRecord, stale=event.stale))
    if event.stale:
        return s
    return s.replace(shuffle_requested=True, shuffle_started=True, shuffle_refused=None)


@_apply.register
def _on_shuffle_completed(event: ShuffleCompleted, s: TableState, ctx: _Context) -> TableState:
    return _shuffle_completed(s, event, ctx.fx)


@_apply.register
def _on_shuffler_fault(event: ShufflerFault, s: TableState, ctx: _Context) -> TableState:
    if (event.at_connect or event.from_status) and s.shuffler_fault == event.code:
        return s  # the fault already journaled, still showing in STATUS
    # 649a.13(e): jam, stop or incomplete cycle -> the cards shall be reshuffled.
    ctx.fx.append(trusted(rec.ShufflerFaultRecord, code=event.code, rule="649a.13(e)"))
    return _shuffler_unusable(s, event.code)


@_apply.register
def _on_shuffler_rebooted(event: ShufflerRebooted, s: TableState, ctx: _Context) -> TableState:
    ctx.fx.append(trusted(rec.ShufflerRebootedRecord))
    # Its event ids start over: a refusal of its old stream no longer stands.
    return _unverify(_events_flow(s, "shuffler"))


@_apply.register
def _on_shuffle_request_failed(
    event: ShuffleRequestFailed, s: TableState, ctx: _Context
) -> TableState:
    if not event.retrying:  # journals before the shell retried by itself: ask again now
        ctx.fx.append(trusted(rec.ShuffleRequestFailedRecord, reason=event.reason))
        return s.replace(shuffle_requested=False)
    if event.reason == s.shuffle_refused:
        return s  # nothing new: journaled once per reason, not once per attempt
    ctx.fx.append(trusted(rec.ShuffleRequestFailedRecord, reason=event.reason))
    return s.replace(shuffle_refused=event.reason)


@_apply.register
def _on_reshuffle(event: ReshuffleRequested, s: TableState, ctx: _Context) -> TableState:
    refused = s.events_refused.get("shuffler")
    if refused is not None:
        raise Rejected(
            f"the shuffler's events are refused ({_refused_text(refused)}): a reshuffle "
            "cannot fix that; reboot the shuffler, or "
            "`tablectl devices reset-link shuffler --by ID`, then reshuffle"
        )
    if s.shuffler_fault is None:
        raise Rejected("the shuffler reports no fault to recover from")
    ctx.fx.append(trusted(rec.ShufflerFaultCleared, code=s.shuffler_fault, by=event.by))
    # 649a.13(e): the cards are reshuffled; nothing reported before counts.
    return _unverify(s.replace(shuffler_fault=None, stalls=_without(s.stalls, "shuffler")))


@_apply.register
def _on_new_deck(event: NewDeckRegistered, s: TableState, ctx: _Context) -> TableState:
    if _deck_rules(ctx.rules) is not None:
        raise Rejected(
            "this table keeps its decks: introduce the new one with its id and back "
            "colour (`tablectl dealer new-deck --id ID --back COLOUR`)"
        )
    if s.blocked is None:
        raise Rejected("no deck is waiting to be replaced")
    ctx.fx.append(trusted(rec.DeckRegistered, replaces=s.blocked, by=event.by))
    # 649a.5(b): the new deck is played only once the shuffler has counted it.
    return _unverify(s.replace(blocked=None))


# --- devices: identity, refused events, resumption ---------------------------------------


@_apply.register
def _on_identified(event: DeviceIdentified, s: TableState, ctx: _Context) -> TableState:
    return _identified(ctx.game, s, event, ctx.fx)


@_apply.register
def _on_device_accepted(event: DeviceAccepted, s: TableState, ctx: _Context) -> TableState:
    return _accept_device(s, event, ctx.fx)


@_apply.register
def _on_events_refused(event: DeviceEventsRefused, s: TableState, ctx: _Context) -> TableState:
    return _events_refused(ctx.game, s, event, ctx.fx)


@_apply.register
def _on_report_conflict(event: DeviceReportConflict, s: TableState, ctx: _Context) -> TableState:
    return _report_conflict(ctx.game, s, event, ctx.fx)


@_apply.register
def _on_link_reset(event: DeviceLinkReset, s: TableState, ctx: _Context) -> TableState:
    return _link_reset(s, event, ctx.fx)


@_apply.register
def _on_resumed(event: DeviceResumed, s: TableState, ctx: _Context) -> TableState:
    return _resumed(ctx.game, s, event, ctx.fx)


@_apply.register
def _on_command_stalled(event: CommandStalled, s: TableState, ctx: _Context) -> TableState:
    return _stalled(ctx.game, s, event, ctx.fx)


# --- the automated dealing shoe ---------------------------------------------------------


@_apply.register
def _on_deal_requested(event: DealRequested, s: TableState, ctx: _Context) -> TableState:
    s = _deal(ctx.rules, ctx.game, s, event, ctx.fx)
    # 649a.10(a)(2), 653a.10(a)(2): the wagers were collected before the shoe deals.
    for seat in sorted(s.occupied):
        s = _stuck(ctx.game, s, seat, StuckCause.OCCUPIED_DURING_DEAL, ctx.fx)
    return s


@_apply.register
def _on_deal_request_failed(event: DealRequestFailed, s: TableState, ctx: _Context) -> TableState:
    ctx.fx.append(trusted(rec.DealRequestFailedRecord, round_id=s.round_id, reason=event.reason))
    s = s.replace(deal_refused=event.reason)
    if s.deal is not None and not s.deal.cards and not s.deal.face_up:
        s = s.replace(deal=None)  # the dealer may ask again
    return s


@_apply.register
def _on_shoe_dealt(
    event: ShoeCard | ShoeStackDealt | ShoeDealCompleted, s: TableState, ctx: _Context
) -> TableState:
    checked = _shoe_back(ctx.rules, ctx.game, s, event, ctx.fx)
    if checked is not None:
        return checked
    return _shoe_read(ctx.rules, _shoe_dealt(ctx.game, s, event, ctx.fx))


@_apply.register
def _on_shoe_fault(event: ShoeFault, s: TableState, ctx: _Context) -> TableState:
    if (event.at_connect or event.from_status) and s.shoe_fault == event.code:
        return s  # the fault already journaled, still showing in STATUS
    return _shoe_fault(ctx.game, s, event.code, ctx.fx, at_connect=event.at_connect)


@_apply.register
def _on_shoe_rebooted(event: ShoeRebooted, s: TableState, ctx: _Context) -> TableState:
    ctx.fx.append(trusted(rec.ShoeRebootedRecord))
    s = _events_flow(s, "shoe")
    if _dealing(s):
        return _shoe_fault(ctx.game, s, "rebooted", ctx.fx, record=False)
    return s


@_apply.register
def _on_shoe_cleared(event: ShoeCleared, s: TableState, ctx: _Context) -> TableState:
    return _shoe_cleared(s, event.by, ctx.fx)


@_apply.register
def _on_shoe_out_of_order(event: ShoeOutOfOrder, s: TableState, ctx: _Context) -> TableState:
    out = event.out_of_order
    if not ctx.rules.shoe:
        raise Rejected("this table has no automated dealing shoe")
    if out == s.shoe_out_of_order:
        raise Rejected(f"the shoe is {'already' if out else 'not'} out of order")
    ctx.fx.append(
        trusted(
            rec.ShoeOutOfOrderRecord,
            out_of_order=out,
            rule=_shoe_rule(ctx.game, "device-unusable"),
            by=event.by,
        )
    )
    return s.replace(shoe_out_of_order=out)


# --- decks, the round's settlement or void, the floor --------------------------------------


@_apply.register
def _on_deck(
    event: DeckIntroduced | DeckClock | DeckInPlay | StubCounted | TableIdle | IdleProcedureDone,
    s: TableState,
    ctx: _Context,
) -> TableState:
    return _deck_input(ctx.rules, ctx.game, s, event, ctx.fx)


@_apply.register
def _on_settle(event: Settle, s: TableState, ctx: _Context) -> TableState:
    return _settle(ctx.rules, ctx.game, s, event, ctx.fx)


@_apply.register
def _on_void(event: VoidRound, s: TableState, ctx: _Context) -> TableState:
    return _void(ctx.rules, ctx.game, s, event, ctx.fx)


@_apply.register
def _on_floor(
    event: ValidateHit | ConfirmDocumentation, s: TableState, ctx: _Context
) -> TableState:
    return _floor(s, event, ctx.fx)


# --- the event stream's delivery, a linked progressive, the journal ------------------------


@_apply.register
def _on_delivery_fault(event: DeliveryFault, s: TableState, ctx: _Context) -> TableState:
    if event.reason == s.delivery_fault:
        return s  # journaled once per change, not per publish or reconnect
    ctx.fx.append(trusted(rec.DeliveryFaultRecord, reason=event.reason))
    return s.replace(delivery_fault=event.reason)


@_apply.register
def _on_delivery_restored(event: DeliveryRestored, s: TableState, ctx: _Context) -> TableState:
    if s.delivery_fault is None:
        return s
    ctx.fx.append(trusted(rec.DeliveryFaultCleared, reason=s.delivery_fault))
    return s.replace(delivery_fault=None)


@_apply.register
def _on_link_parameters(event: LinkParametersHeard, s: TableState, ctx: _Context) -> TableState:
    return _link_parameters(ctx.rules, ctx.game, s, event, ctx.fx)


@_apply.register
def _on_link_lost(event: LinkLost, s: TableState, ctx: _Context) -> TableState:
    return _link_lost(ctx.game, s, event.reason, ctx.fx)


@_apply.register
def _on_link_restored(event: LinkRestored, s: TableState, ctx: _Context) -> TableState:
    if s.link_silent is None or not isinstance(s.meter, LinkedMeter):
        return s
    ctx.fx.append(trusted(rec.LinkUp, link_id=s.meter.link_id))
    return s.replace(link_silent=None)


@_apply.register
def _on_link_answer(event: LinkClaimAnswer, s: TableState, ctx: _Context) -> TableState:
    return _link_answer(s, event, ctx.fx)


@_apply.register
def _on_journal_recovered(event: JournalRecovered, s: TableState, ctx: _Context) -> TableState:
    # The journal says what was mended, and by whom; a rollback the table found stands until
    # a technician accepts the acknowledgement that showed it as wrong.
    ctx.fx.append(
        trusted(
            rec.JournalRecoveredRecord,
            problems=list(event.problems),
            accepted=list(event.accepted),
            done=list(event.done),
            by=event.by,
        )
    )
    if s.rolled_back is not None and "acks" in event.accepted:
        return s.replace(rolled_back=None)
    return s


@_apply.register
def _on_ack_past_journal(event: AckPastJournal, s: TableState, ctx: _Context) -> TableState:
    if s.rolled_back is not None:
        return s  # found once: nothing more is published already
    ctx.fx.append(
        trusted(
            rec.JournalRolledBack,
            backend_id=event.backend_id,
            acked_through_seq=event.acked_through_seq,
            last_seq=event.last_seq,
            action=ROLLBACK_ACTION,
        )
    )
    return s.replace(rolled_back=RolledBack.of(event))


@_apply.register
def _on_chain_pending(event: JournalCheckPending, s: TableState, ctx: _Context) -> TableState:
    return s.replace(chain_pending=event.through_seq, chain_broken=None)


@_apply.register
def _on_chain_checked(event: JournalChainChecked, s: TableState, ctx: _Context) -> TableState:
    if event.broken is None:
        ctx.fx.append(
            trusted(
                rec.JournalChainVerified,
                through_seq=event.through_seq,
                through_input=event.through_input,
            )
        )
        return s.replace(chain_pending=None)
    ctx.fx.append(
        trusted(
            rec.JournalChainBroken,
            through_seq=event.through_seq,
            through_input=event.through_input,
            problem=event.broken,
            action=BROKEN_ACTION,
        )
    )
    return s.replace(chain_pending=None, chain_broken=event.broken)


# Each input type's handler, as registered above, looked up once per step: singledispatch's
# own lookup goes through a WeakKeyDictionary (a weak reference made at every call).
_HANDLERS: dict[type, Callable[[Any, TableState, _Context], TableState]] = dict(_apply.registry)


def _advance(rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]) -> TableState:
    """Open the next round when a verified deck is ready, and keep a deck being shuffled."""
    if s.phase is Phase.CLOSED:
        s = _deck_asks(rules, game, s, fx)
        if s.deck_ready and _shuffler_usable(s) and _table_ready(rules, s):
            s = _open_round(rules, game, s, fx)
    free = _decks_free(rules, s.phase)
    if not s.deck_ready and not s.shuffle_requested and free > 0 and _shuffler_usable(s):
        fx.append(RequestShuffle())
        s = s.replace(shuffle_requested=True)
    return s


def _decks_free(rules: TableRules, phase: Phase) -> int:
    """Decks not in play: 649a.3(b)(2), with two decks one is shuffled while the other is."""
    return rules.decks - (0 if phase is Phase.CLOSED else 1)


def _shuffler_usable(s: TableState) -> bool:
    return (
        s.blocked is None
        and s.shuffler_fault is None
        and not s.devices_pending
        and "shuffler" not in s.events_refused
    )


def _table_ready(rules: TableRules, s: TableState) -> bool:
    """Nothing but the deck holds the next round: the shoe, the sensors, hits, the decks."""
    # A faulted shoe holds a void round's cards (649a.13(f)); out of order, it deals nothing.
    shoe_ok = (
        not rules.shoe
        or s.shoe_out_of_order
        or (s.shoe_fault is None and "shoe" not in s.events_refused)
    )
    # No round opens while the lock-out button is down: it could not lock that round out.
    lockout_free = not s.lockout_held and all(f.seat is not None for f in s.stuck_inputs)
    sensors_ok = s.gpio_fault is None and s.sensor_test is None and lockout_free
    # A journal rolled back, or not yet (or not) shown whole: no round is played on it.
    journal_ok = s.rolled_back is None and s.chain_pending is None and s.chain_broken is None
    return (
        shoe_ok
        and sensors_ok
        and journal_ok
        and not s.hits_pending
        and _deck_block(rules, s) is None
    )


def _open_round(rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]) -> TableState:
    """A round opens on the deck shuffled for it; the other deck, if any, is asked for in the
    same copy of the state (the shuffler is usable, or the round would not open)."""
    shuffle = not s.shuffle_requested and _decks_free(rules, Phase.BETTING) > 0
    s = s.replace(
        phase=Phase.BETTING,
        round_id=s.round_id + 1,
        deck_ready=False,
        wagers={},
        lockout_at_ns=None,
        lockout_resolution_ns=1,
        undecided=(),
        decided_after_lockout=(),
        counted=False,
        round_contribution_units=0,
        round_link_contributions=(),
        deal=None,
        deal_refused=None,
        shuffle_requested=s.shuffle_requested or shuffle,
    )
    fx.append(trusted(rec.RoundOpened, round_id=s.round_id))
    s = _deck_round_opened(rules, s)
    s = _chips_resting_at_open(rules, game, s, fx)
    if shuffle:
        fx.append(RequestShuffle())
    return s


def _accept(game: TableGame, s: TableState, seat: int, fx: list[Effect], late: bool) -> TableState:
    if s.link_down is not None:
        # 5321.18(c), NJ 13:69E-1.39B(c): a progressive off its link is unplayable.
        return _reject(game, s, seat, "link-down", fx, rule="5321.18(c)")
    fx.append(
        trusted(
            rec.WagerAccepted,
            round_id=s.round_id,
            seat=seat,
            wager_cents=game.wager_cents,
            decided_after_lockout=late,
        )
    )
    fx.append(SeatLamp(seat=seat, lamp=Lamp.ON))  # 649a.2(c)(1): the device acknowledges it
    return s.replace(wagers={**s.wagers, seat: game.wager_cents})


def _reject(
    game: TableGame,
    s: TableState,
    seat: int,
    reason: str,
    fx: list[Effect],
    rule: str | None = None,
) -> TableState:
    # 649a.2(c)(2), 653a.2(c)(2), 643a.8(b): no wager is recognised after "no more bets".
    fx.append(
        trusted(
            rec.WagerRejected,
            round_id=s.round_id,
            seat=seat,
            reason=reason,
            rule=rule or game.table_wager.lockout_rule,
        )
    )
    return s.replace(counters=s.counters.bump("wagers_rejected"))


def _withdraw(s: TableState, seat: int, fx: list[Effect]) -> TableState:
    fx.append(trusted(rec.WagerWithdrawn, round_id=s.round_id, seat=seat))
    fx.append(SeatLamp(seat=seat, lamp=Lamp.OFF))
    return s.replace(wagers={k: v for k, v in s.wagers.items() if k != seat})


def _chip(
    rules: TableRules, game: TableGame, s: TableState, chip: ChipSensed, fx: list[Effect]
) -> TableState:
    seat, present = chip.seat, chip.present
    if not 1 <= seat <= rules.seats:
        return s.replace(counters=s.counters.bump("unknown_seat_events"))
    if rules.sensors is None:
        return _chip_as_journaled_before(game, s, chip, fx)
    s = _sensed(s, seat, present)
    if s.sensor_test is not None:
        return s  # a walk test's chip: never a wager, nothing to refuse
    if present and _dealing(s):
        # 649a.10(a)(2), 653a.10(a)(2): the wagers were collected before the shoe deals.
        s = _stuck(game, s, seat, StuckCause.OCCUPIED_DURING_DEAL, fx)
    if s.phase is Phase.BETTING:
        if present and seat not in s.wagers:
            if _seat_stuck(s, seat):
                return _reject(game, s, seat, "sensor-stuck", fx)
            return _accept(game, s, seat, fx, late=False)
        if not present and seat in s.wagers:
            return _withdraw(s, seat, fx)
        return s
    if s.phase is Phase.CLOSED:
        # A chip resting before the round opens is decided once: it is a wager when the round
        # opens (_chips_resting_at_open), or refused if it is lifted first.
        if present:
            return s.replace(waiting=tuple(sorted({*s.waiting, seat})))
        if seat in s.waiting:
            s = s.replace(waiting=tuple(x for x in s.waiting if x != seat))
            return _reject(game, s, seat, "table-closed", fx)
        return s
    if seat in s.undecided:
        return _decide_after_edge(game, s, chip, fx)
    if present and seat not in s.wagers:
        return _reject(game, s, seat, "after-lockout", fx)
    return s


def _chip_as_journaled_before(
    game: TableGame, s: TableState, chip: ChipSensed, fx: list[Effect]
) -> TableState:
    """A chip as decided before the core kept the sensors' levels (rules.sensors is None):
    journals written then replay as they were written."""
    seat, present = chip.seat, chip.present
    if s.phase is Phase.BETTING:
        if present and seat not in s.wagers:
            return _accept(game, s, seat, fx, late=False)
        if not present and seat in s.wagers:
            return _withdraw(s, seat, fx)
        return s
    if s.phase is Phase.LOCKED and seat in s.undecided:
        return _decide_after_edge(game, s, chip, fx)
    if present and seat not in s.wagers:
        reason = "after-lockout" if s.phase is Phase.LOCKED else "table-closed"
        return _reject(game, s, seat, reason, fx)
    return s


def _sensed(s: TableState, seat: int, present: bool) -> TableState:
    """The seat's sensor as decided: a chip that arrives while bets are taken has been there
    for this round's betting; one that arrives otherwise, for none yet."""
    if present == (seat in s.occupied):
        return s
    if present:
        occupied = {**s.occupied, seat: 1 if s.phase is Phase.BETTING else 0}
    else:
        occupied = {k: v for k, v in s.occupied.items() if k != seat}
    return s.replace(occupied=occupied)


def _decide_after_edge(
    game: TableGame, s: TableState, chip: ChipSensed, fx: list[Effect]
) -> TableState:
    """A chip that was on its sensor at the edge but had not rested: decided now, once its
    contact has rested or broken (docs/gpio.md, the lock-out rule)."""
    seat = chip.seat
    s = s.replace(undecided=tuple(x for x in s.undecided if x != seat))
    assert s.lockout_at_ns is not None
    counts = chip.present and placed_before_lockout(
        chip.since_ns, s.lockout_at_ns, s.lockout_resolution_ns
    )
    if counts and seat in s.wagers:
        pass  # the wager it already was stands: it rested
    elif counts and not _seat_stuck(s, seat):
        s = _accept(game, s, seat, fx, late=True)
        s = s.replace(decided_after_lockout=tuple(sorted({*s.decided_after_lockout, seat})))
    elif seat in s.wagers:
        s = _withdraw(s, seat, fx)  # it left its sensor before resting
    elif chip.present:
        s = _reject(game, s, seat, "sensor-stuck" if counts else "after-lockout", fx)
    return s if s.undecided else _finish_count(game, s, fx)


def _drop_undecided(s: TableState, fx: list[Effect]) -> TableState:
    """Chips still to be decided from the edge cannot be confirmed any more (a fault, a
    restart): none counts."""
    for seat in s.undecided:
        if seat in s.wagers:
            s = _withdraw(s, seat, fx)
    return s.replace(undecided=())


def _chips_resting_at_open(
    rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]
) -> TableState:
    """Betting opened: each chip already resting on its sensor is a wager now, decided once
    (649a.2(c)(2): placed before "no more bets"), unless its sensor has been occupied for the
    betting of more rounds than gpio.sensor_stuck_rounds allows."""
    if rules.sensors is None or not (s.occupied or s.waiting):
        return s
    occupied: dict[int, int] = {}
    for seat, rounds in sorted(s.occupied.items()):
        occupied[seat] = rounds + 1
        if rounds + 1 > rules.sensors.stuck_rounds:
            s = _stuck(game, s, seat, StuckCause.OCCUPIED_ROUNDS, fx)
        if not _seat_stuck(s, seat):
            s = _accept(game, s, seat, fx, late=False)
        elif seat in s.waiting:
            s = _reject(game, s, seat, "sensor-stuck", fx)
    return s.replace(occupied=occupied, waiting=())


def _seat_stuck(s: TableState, seat: int) -> bool:
    return any(f.seat == seat for f in s.stuck_inputs)


def _stuck(
    game: TableGame, s: TableState, seat: int | None, cause: StuckCause, fx: list[Effect]
) -> TableState:
    """A stuck input, journaled once. A stuck lock-out cannot prevent the recognition of a
    late wager (649a.2(c)(2)): betting stays closed. A stuck sensor cannot tell a wager from
    none: its seat's wagers are refused (649a.2(c)(1), and the dealer collects the wagers
    before the deal, 649a.8(b))."""
    if any(f.seat == seat for f in s.stuck_inputs):
        return s
    fault = StuckInput(seat=seat, cause=cause, round_id=s.round_id)
    betting = seat is None and s.phase is Phase.BETTING
    rule = game.table_wager.lockout_rule if seat is None else game.table_wager.count_rule
    fx.append(
        trusted(
            rec.InputStuck,
            input=fault.input,
            seat=seat,
            cause=cause.value,
            round_id=s.round_id,
            round_locked=betting,
            rule=rule,
        )
    )
    s = s.replace(stuck_inputs=(*s.stuck_inputs, fault), counters=s.counters.bump("inputs_stuck"))
    if betting:
        s = _lock(game, s, fx, cause="lockout-stuck", at_ns=None, undecided=())
    return s


def _clear_stuck(s: TableState, event: ClearStuckInput, fx: list[Effect]) -> TableState:
    seat = event.seat
    what = "the lock-out button" if seat is None else f"seat {seat}'s sensor"
    fault = next((f for f in s.stuck_inputs if f.seat == seat), None)
    if fault is None:
        stuck = ", ".join(
            "the lock-out button" if f.seat is None else f"seat {f.seat}" for f in s.stuck_inputs
        )
        raise Rejected(f"{what} is not stuck; stuck inputs: {stuck or 'none'}")
    if seat is None and s.lockout_held:
        raise Rejected("the lock-out button still reads pressed: free it, then clear")
    if seat is not None and seat in s.occupied:
        raise Rejected(
            f"seat {seat}'s sensor still reads occupied: lift the chip or repair the sensor, "
            "then clear"
        )
    fx.append(
        trusted(
            rec.InputStuckCleared,
            input=fault.input,
            seat=seat,
            cause=fault.cause.value,
            by=event.by,
        )
    )
    return s.replace(stuck_inputs=tuple(f for f in s.stuck_inputs if f != fault))


def _lock(
    game: TableGame,
    s: TableState,
    fx: list[Effect],
    *,
    cause: str,
    at_ns: int | None,
    undecided: tuple[int, ...],
    resting: tuple[int, ...] | None = None,
    also: TableStateUpdate | None = None,
) -> TableState:
    """No more bets (649a.8(b), 653a.8(b), 643a.8(b)): nothing placed after the edge counts.

    resting: the seats whose chip was on its sensor at the edge and had rested. Given, the
    edge decides (docs/gpio.md, the lock-out rule): a wager whose chip was not on its sensor
    at the edge is withdrawn, and one that had not rested is decided again from the edge.
    None (a lock without an edge, journals from before): the wagers recognised so far count.
    also: what the caller changes with the lock (fields nothing here reads), in its copy.
    """
    if resting is None:
        pending = tuple(sorted(set(undecided) - set(s.wagers)))
    else:
        pending = tuple(sorted(set(undecided)))
        for seat in sorted(s.wagers):
            if seat not in resting and seat not in pending:
                s = _withdraw(s, seat, fx)
    seats = sorted(set(s.wagers) - set(pending))
    fx.append(
        trusted(
            rec.RoundLocked,
            round_id=s.round_id,
            cause=cause,
            accepted_wagers=len(seats),
            seats=seats,
            undecided_seats=list(pending),
            rule=game.table_wager.lockout_rule,
        )
    )
    locked: TableStateUpdate = {
        **(also or {}),
        "phase": Phase.LOCKED,
        "lockout_at_ns": at_ns,
        "undecided": pending,
    }
    return s.replace(**locked) if pending else _finish_count(game, s, fx, **locked)


def _gpio_fault(game: TableGame, s: TableState, reason: str, fx: list[Effect]) -> TableState:
    """Lost edges: the lock-out can no longer prevent a late wager's recognition (649a.2(c)(2))."""
    betting = s.phase is Phase.BETTING
    fx.append(
        trusted(
            rec.GpioFaultRecord,
            reason=reason,
            round_id=s.round_id,
            round_locked=betting,
            rule=game.table_wager.lockout_rule,
        )
    )
    if betting:
        s = _lock(game, s, fx, cause="gpio-fault", at_ns=None, undecided=())
    elif s.phase is Phase.LOCKED and not s.counted:
        # The chips still resting cannot be confirmed from edges that may be lost.
        s = _finish_count(game, _drop_undecided(s, fx), fx)
    return s.replace(gpio_fault=reason, counters=s.counters.bump("gpio_faults"))


def _test_started(s: TableState, event: SensorTestStarted, fx: list[Effect]) -> TableState:
    if s.sensor_test is not None:
        raise Rejected(f"a {s.sensor_test} test is already running")
    if s.phase is Phase.BETTING:
        raise Rejected(
            f"round {s.round_id} is taking bets: press the lock-out and settle or void it first"
        )
    if s.phase is Phase.LOCKED and not s.counted:
        raise Rejected(f"round {s.round_id}: chips are still resting; wait for the count")
    fx.append(trusted(rec.SensorTestStartedRecord, test=event.test, by=event.by))
    return s.replace(sensor_test=event.test)


def _finish_count(
    game: TableGame, s: TableState, fx: list[Effect], /, **also: Unpack[TableStateUpdate]
) -> TableState:
    """The count is final: book each wager's meter contribution (649a.12(e)(3)). `also`:
    what the caller changes with it (a lock-out's phase), in the same copy of the state."""
    seats = sorted(s.wagers)
    meter, booked = s.meter, 0
    meter_rules = game.meter
    linked: list[rec.LinkContribution] = []
    if isinstance(meter, LinkedMeter):
        # The contribution cut-off: this round's wagers count toward the link's meter as of
        # "no more bets" (NM 15.1.24.19(A)); the controller applies each row once.
        for seat in seats:
            for level in meter.levels:
                linked.append(_link_contribution(meter, level, s.round_id, seat, s.wagers[seat]))
        fx.extend(linked)
        booked = sum(c.contribution_ten_thousandths_cent for c in linked)
    elif meter is not None and meter_rules is not None:
        for seat in seats:
            meter, units = meter.contribute(s.wagers[seat], meter_rules.rate_bp)
            booked += units
            fx.append(
                trusted(
                    rec.MeterContribution,
                    round_id=s.round_id,
                    seat=seat,
                    wager_cents=s.wagers[seat],
                    rate_bp=meter_rules.rate_bp,
                    contribution_ten_thousandths_cent=units,
                    meter=_reading(meter),
                )
            )
    fx.append(
        trusted(
            rec.WagersCounted,
            round_id=s.round_id,
            accepted_wagers=len(seats),
            seats=seats,
            total_wager_cents=sum(s.wagers.values()),
            decided_after_lockout=list(s.decided_after_lockout),
            rule=game.table_wager.count_rule,
        )
    )
    counted: TableStateUpdate = {
        **also,
        "counted": True,
        "meter": meter,
        "round_contribution_units": booked,
        "round_link_contributions": tuple(linked),
    }
    return s.replace(**counted)


def _unverify(s: TableState) -> TableState:
    """No deck is verified any more: only a shuffle that starts after this, and completes
    with a count of 52, makes one ready (649a.5(b), 649a.13(e)). Power-up, a shuffler fault
    or reboot, a deck removed or replaced, another shuffler: each comes through here."""
    return s.replace(
        deck_ready=False, shuffle_requested=False, shuffle_started=False, shuffle_refused=None
    )


def _shuffler_unusable(s: TableState, code: str) -> TableState:
    return _unverify(s).replace(shuffler_fault=code)


def _shuffle_completed(s: TableState, event: ShuffleCompleted, fx: list[Effect]) -> TableState:
    count = event.card_count
    ok = count == DECK_SIZE
    because = (
        "reported before this power-up"
        if event.stale
        else f"shuffler fault {s.shuffler_fault} (649a.13(e))"
        if s.shuffler_fault is not None
        else "the shuffler's events are refused"
        if "shuffler" in s.events_refused
        else f"the deck was removed ({s.blocked}): a new deck is counted by its own shuffle"
        if s.blocked is not None
        else "another shuffler is connected and not accepted"
        if "shuffler" in s.devices_pending
        else "no shuffle started since the last power-up, fault or reboot"
        if not s.shuffle_started
        else None
    )
    ready = ok and because is None
    fx.append(
        trusted(
            rec.ShuffleCompletedRecord,
            card_count=count,
            count_ok=ok,
            deck_ready=ready,
            not_ready_because=because if ok else f"counted {count}, not {DECK_SIZE}",
        )
    )
    if ok:
        counters = s.counters if because is None else s.counters.bump("completions_not_used")
        return s.replace(
            shuffle_requested=False, shuffle_started=False, deck_ready=ready, counters=counters
        )
    # 649a.5(b), 653a.5(b): an incorrect count removes the deck from the table (and _unverify
    # ends the shuffle: no longer requested nor started).
    fx.append(
        trusted(
            rec.DeckMiscount,
            card_count=count,
            expected=DECK_SIZE,
            rule="649a.5(b)",
            action="deck removed; register a new deck",
        )
    )
    return _unverify(s).replace(
        blocked=f"deck-miscount:{count}", counters=s.counters.bump("deck_miscounts")
    )


def _basis(hit: Hit) -> str:
    if hit.share is None:
        return "odds-for-1"
    return f"{hit.share * 100}%-of-meter"


def _settle(
    rules: TableRules, game: TableGame, s: TableState, event: Settle, fx: list[Effect]
) -> TableState:
    if s.phase is not Phase.LOCKED:
        raise Rejected(f"no round to settle: the table is {s.phase.value}")
    if not s.counted:
        raise Rejected(f"the count is not final: seats {list(s.undecided)} are still resting")
    if (old := _deck_too_old(rules, s)) is not None and s.deck.age_held_round == s.round_id:
        raise Rejected(
            f"deck {old.deck_id} reached its age limit before this round was dealt "
            f"({decks.age_rule(game)}): void the round (`tablectl dealer void deck-age`)"
        )
    for seat in {*event.hands, *event.folded}:
        if not 1 <= seat <= rules.seats:
            raise Rejected(f"seat {seat} does not exist (1..{rules.seats})")
    by_shoe = rules.shoe and not s.shoe_out_of_order
    try:
        if by_shoe:
            cards = _cards_read(game, s, event)
            try:
                game.check_cards(cards, s.wagers, event.folded)
            except ValueError:
                # A game whose folded hands are never shown (649a.11(c)): leave them out.
                cards = RoundCards(
                    {k: v for k, v in cards.hands.items() if k not in event.folded},
                    cards.dealer,
                    cards.community,
                    cards.burned,
                )
                game.check_cards(cards, s.wagers, event.folded)
        else:
            # The game's settle checks the cards shown before anything else it could refuse
            # (the seats and the wagers are the table's own, checked above).
            cards = RoundCards(event.hands, event.dealer, event.community)
        settled = game.settle(s.meter, s.wagers, cards, event.folded, rules.seats)
    except ValueError as exc:
        raise Rejected(str(exc)) from None
    paid = 0
    pending: list[HitEntry] = []
    wager = game.table_wager.name
    hits = {h.seat: h for h in settled.hits}
    linked = s.meter if isinstance(s.meter, LinkedMeter) else None
    for result in settled.results:  # in settlement order, from the dealer's right
        seat = result.seat
        hit = hits.get(seat)
        if linked is not None and hit is not None and hit.share is not None:
            # A claim on the link: what it pays is the controller's answer, not ours.
            result = dataclasses.replace(result, paid_cents=0)
        paid += result.paid_cents
        fx.append(
            trusted(
                rec.WagerSettled,
                round_id=s.round_id,
                seat=seat,
                wager=wager,
                wager_cents=s.wagers[seat],
                outcome=_OUTCOMES[result.outcome],
                paid_cents=result.paid_cents,
                hand=result.hand,
                rule=result.rule,
            )
        )
        if hit is not None and linked is not None and hit.share is not None:
            entry = HitEntry(
                hit_id=f"{s.round_id}-{seat}",
                round_id=s.round_id,
                seat=seat,
                hand=hit.hand,
                amount_cents=0,
                basis=_basis(hit),
                paid_from_table_inventory=False,
                link_claim=True,
            )
            pending.append(entry)
            fx.append(_link_claim(linked, s.round_id, entry, hit))
        elif hit is not None:
            entry = HitEntry(
                hit_id=f"{s.round_id}-{seat}",
                round_id=s.round_id,
                seat=seat,
                hand=hit.hand,
                amount_cents=hit.amount_cents,
                basis=_basis(hit),
                paid_from_table_inventory=hit.paid_from_table_inventory,
            )
            pending.append(entry)
            fx.extend(_hit_records(s, entry, hit))
        for envy in (e for e in settled.envy if e.seat == seat):
            paid += envy.amount_cents
            fx.append(
                trusted(
                    rec.EnvyBonusPaid,
                    round_id=s.round_id,
                    seat=envy.seat,
                    for_seat=envy.for_seat,
                    hand=envy.hand,
                    amount_cents=envy.amount_cents,
                    rule=envy.rule,
                )
            )
    meter = settled.meter
    assert meter is None or isinstance(meter, LocalMeter | LinkedMeter)
    fx.append(
        trusted(
            rec.RoundSettled,
            round_id=s.round_id,
            paid_cents=paid,
            folded=sorted(event.folded),
            hits_pending=[h.hit_id for h in pending],
            by=event.by,
            meter=_reading_of(meter),
            hands_read_by_shoe=len(cards.hands) if by_shoe else 0,
            hands_entered=0 if by_shoe else len(cards.hands),
        )
    )
    winners = {h.seat for h in pending}
    # 649a.11(c)(5)(ii): the winning seat's light shows the win until it is validated.
    fx.extend(
        SeatLamp(seat=seat, lamp=Lamp.WIN if seat in winners else Lamp.OFF)
        for seat in sorted(s.wagers)
    )
    return s.replace(
        phase=Phase.CLOSED,
        meter=meter,
        wagers={},
        round_contribution_units=0,
        round_link_contributions=(),
        deal=None,
        hits_pending=(*s.hits_pending, *pending),
        hit_history=(*reversed(pending), *s.hit_history)[:HIT_HISTORY],
        counters=s.counters.bump("rounds_settled"),
    )


# Each game's outcome as journaled, looked up rather than called (an enum call is two Python
# frames in the enum module, per wager settled).
_OUTCOMES = {outcome: rec.WagerOutcome(outcome.value) for outcome in Outcome}


def _hit_records(s: TableState, entry: HitEntry, hit: Hit) -> list[Effect]:
    out: list[Effect] = [
        trusted(
            rec.JackpotHit,
            hit_id=entry.hit_id,
            round_id=s.round_id,
            seat=hit.seat,
            hand=hit.hand,
            cards="".join(map(str, hit.cards)),
            amount_cents=hit.amount_cents,
            basis=entry.basis,
            meter_before_cents=hit.meter_before_cents,
            paid_from_table_inventory=hit.paid_from_table_inventory,
            rule=hit.rule,
        )
    ]
    if hit.share is None or s.meter is None:
        return out
    reading = _reading(s.meter, hit.meter_after_cents)
    # The meter this hit leaves: a reset only for 100 %, never for a smaller share.
    if hit.share == 1:
        out.append(
            trusted(
                rec.MeterReset,
                round_id=s.round_id,
                hit_id=entry.hit_id,
                paid_cents=hit.amount_cents,
                reset_cents=hit.meter_after_cents,
                meter=reading,
            )
        )
    else:
        out.append(
            trusted(
                rec.MeterSharePaid,
                round_id=s.round_id,
                hit_id=entry.hit_id,
                share_percent=str(hit.share * 100),
                paid_cents=hit.amount_cents,
                meter=reading,
            )
        )
    return out


def _floor(
    s: TableState, event: ValidateHit | ConfirmDocumentation, fx: list[Effect]
) -> TableState:
    """649a.11(c)(5)(iii)-(iv): a floorperson validates; a share of the meter is documented."""
    by_id = {h.hit_id: h for h in s.hits_pending}
    hit = by_id.get(event.hit_id)
    if hit is None:
        waiting = ", ".join(by_id) or "none"
        raise Rejected(f"no pending hit {event.hit_id!r}; pending: {waiting}")
    if hit.link_claim and not hit.answered:
        raise Rejected(
            f"hit {hit.hit_id} is JACKPOT PENDING: the link controller has not answered its "
            "claim yet (it stays pending, with its evidence, until it does)"
        )
    if isinstance(event, ValidateHit):
        if hit.validated_by is not None:
            raise Rejected(f"hit {hit.hit_id} was validated by {hit.validated_by}")
        hit = hit.replace(validated_by=event.by)
        fx.append(trusted(rec.JackpotValidated, hit_id=hit.hit_id, by=event.by))
    else:
        if hit.paid_from_table_inventory:
            raise Rejected(
                f"hit {hit.hit_id} is paid from the table inventory: nothing to document"
            )
        if hit.validated_by is None:
            raise Rejected(f"hit {hit.hit_id} must be validated before its documentation")
        hit = hit.replace(documented_by=event.by)
        fx.append(trusted(rec.JackpotDocumented, hit_id=hit.hit_id, by=event.by))
    pending = tuple(hit if h.hit_id == hit.hit_id else h for h in s.hits_pending)
    history = tuple(hit if h.hit_id == hit.hit_id else h for h in s.hit_history)
    if hit.done:
        pending = tuple(h for h in pending if h.hit_id != hit.hit_id)
        fx.append(SeatLamp(seat=hit.seat, lamp=Lamp.OFF))  # the hand may leave the table
        if not pending:
            fx.append(trusted(rec.JackpotReleased, round_id=hit.round_id))
    return s.replace(hits_pending=pending, hit_history=history)


def _void(
    rules: TableRules, game: TableGame, s: TableState, event: VoidRound, fx: list[Effect]
) -> TableState:
    if s.phase is Phase.CLOSED:
        raise Rejected("no round in play to void")
    reasons = game.void_reasons()
    if _deck_rules_since_4(rules) is not None:
        # 649a.3(c): a round opened on a deck that passed its age before the deal.
        reasons = {**reasons, "deck-age": decks.age_rule(game)}
    if event.reason not in reasons:
        raise Rejected(f"unknown void reason {event.reason!r}; one of {sorted(reasons)}")
    return _void_round(s, event.reason, reasons[event.reason], event.by, fx)


def _void_round(s: TableState, reason: str, rule: str, by: str, fx: list[Effect]) -> TableState:
    """Void the round: every wager is returned, so its meter contribution is taken back.

    Before the count is final (a fault right at power-up) there is nothing to reverse yet:
    the contributions are booked only at the final count."""
    meter = s.meter.reverse(s.round_contribution_units) if s.meter is not None else None
    # A linked meter: the controller takes back each contribution it applied, once.
    fx.extend(_link_reversal(c, reason, rule) for c in s.round_link_contributions)
    fx.append(
        trusted(
            rec.RoundVoided,
            round_id=s.round_id,
            reason=reason,
            rule=rule,
            wagers_returned=sorted(s.wagers),
            contribution_reversed_ten_thousandths_cent=s.round_contribution_units,
            by=by,
            meter=_reading_of(meter),
        )
    )
    fx.extend(SeatLamp(seat=seat, lamp=Lamp.OFF) for seat in sorted(s.wagers))
    return s.replace(
        phase=Phase.CLOSED,
        meter=meter,
        wagers={},
        undecided=(),
        round_contribution_units=0,
        round_link_contributions=(),
        deal=None,
        counters=s.counters.bump("rounds_voided"),
    )


# --- devices: identity, refused events ------------------------------------------------


def _identified(
    game: TableGame, s: TableState, event: DeviceIdentified, fx: list[Effect]
) -> TableState:
    """A device read on connect. Another serial number than the accepted one blocks play."""
    device, serial = event.device, event.serial_number
    accepted = s.devices.get(device)
    pending = s.devices_pending.get(device)
    in_use = pending or accepted
    if device == "shuffler" and in_use is not None and serial != in_use:
        # Another shuffler (or the accepted one back): what was shuffled is not its deck.
        s = _unverify(s)

    def record(ok: bool) -> None:
        fx.append(
            trusted(
                rec.DeviceIdentifiedRecord,
                device=device,
                model=event.model,
                serial_number=serial,
                firmware=event.firmware,
                accepted=ok,
                previous_serial_number=accepted,
            )
        )

    if accepted is None:
        record(True)  # the first device of its kind at this table
        return s.replace(devices={**s.devices, device: serial})
    if serial == accepted:
        if pending is None:
            return s  # the same device again (a reconnect): nothing to journal
        record(True)  # the accepted device is back
        return s.replace(
            devices_pending={k: v for k, v in s.devices_pending.items() if k != device}
        )
    if serial == pending:
        return s
    record(False)
    s = s.replace(
        devices_pending={**s.devices_pending, device: serial},
        counters=s.counters.bump("devices_changed"),
    )
    if device == "shoe" and _dealing(s):
        # Another shoe mid-deal: the one that dealt stopped dealing (649a.13(f)).
        return _shoe_fault(game, s, "replaced", fx)
    return s


def _accept_device(s: TableState, event: DeviceAccepted, fx: list[Effect]) -> TableState:
    pending = s.devices_pending.get(event.device)
    if pending is None:
        raise Rejected(f"no {event.device} is waiting to be accepted")
    if pending != event.serial_number:
        raise Rejected(
            f"the {event.device} waiting to be accepted is {pending}, not {event.serial_number}"
        )
    fx.append(
        trusted(
            rec.DeviceAcceptedRecord,
            device=event.device,
            serial_number=pending,
            replaces=s.devices.get(event.device),
            by=event.by,
        )
    )
    if event.device == "shuffler":
        s = _unverify(s)  # the accepted shuffler counts its own deck before a round opens
    return s.replace(
        devices={**s.devices, event.device: pending},
        devices_pending={k: v for k, v in s.devices_pending.items() if k != event.device},
    )


def _events_refused(
    game: TableGame, s: TableState, event: DeviceEventsRefused, fx: list[Effect]
) -> TableState:
    """A device out of sequence cannot be believed: it counts as a device fault, and its
    stream stays stopped (a reshuffle cannot restart it) until it reboots or a technician
    resets the link."""
    refused = RefusedEvent(
        boot_id=event.boot_id,
        event_id=event.event_id,
        expected_event_id=event.expected_event_id,
        kind=event.kind,
    )
    if s.events_refused.get(event.device) == refused:
        return s  # the same refusal, heard again after a restart: nothing new
    fx.append(
        trusted(
            rec.DeviceEventsRefusedRecord,
            device=event.device,
            boot_id=event.boot_id,
            event_id=event.event_id,
            expected_event_id=event.expected_event_id,
            kind=event.kind,
        )
    )
    s = s.replace(
        counters=s.counters.bump("device_events_refused"),
        events_refused={**s.events_refused, event.device: refused},
    )
    if event.device == "shuffler":
        fx.append(trusted(rec.ShufflerFaultRecord, code="event-sequence", rule="649a.13(e)"))
        return _shuffler_unusable(s, "event-sequence")
    if event.device == "shoe":
        return _shoe_fault(game, s, "event-sequence", fx)
    return s


def _refused_text(refused: RefusedEvent) -> str:
    return f"event {refused.event_id} where {refused.expected_event_id} was due"


def _events_flow(s: TableState, device: str) -> TableState:
    """The device's stream starts over (a reboot) or was reset: no refusal stands."""
    if device not in s.events_refused:
        return s
    return s.replace(events_refused={k: v for k, v in s.events_refused.items() if k != device})


def _report_conflict(
    game: TableGame, s: TableState, event: DeviceReportConflict, fx: list[Effect]
) -> TableState:
    """One event id, two reports: never a replay. A shuffler that says 52 and then 51 of one
    deck has not shown that 52 cards are present: the deck leaves the table (649a.5(b)) and
    a round on it is void (649a.10(f)); the shuffler is faulted until a reshuffle."""
    fx.append(
        trusted(
            rec.DeviceReportConflictRecord,
            device=event.device,
            boot_id=event.boot_id,
            event_id=event.event_id,
            kind=event.kind,
        )
    )
    s = s.replace(counters=s.counters.bump("device_report_conflicts"))
    if event.device == "shuffler":
        fx.append(trusted(rec.ShufflerFaultRecord, code="event-conflict", rule="649a.13(e)"))
        s = _shuffler_unusable(s, "event-conflict")
        return _deck_irregular(game, s, "conflicting-count", fx, by="shuffler")
    if event.device == "shoe":
        return _shoe_fault(game, s, "event-conflict", fx)
    return s


def _link_reset(s: TableState, event: DeviceLinkReset, fx: list[Effect]) -> TableState:
    refused = s.events_refused.get(event.device)
    if refused is None:
        raise Rejected(f"the {event.device}'s events are not refused: there is no link to reset")
    if refused.boot_id != event.boot_id:
        raise Rejected(
            f"the refusal was in the {event.device}'s boot {refused.boot_id}, "
            f"not {event.boot_id}: ask again"
        )
    fx.append(
        trusted(
            rec.DeviceLinkResetRecord,
            device=event.device,
            boot_id=event.boot_id,
            skipped_from_event_id=event.from_event_id + 1,
            skipped_to_event_id=event.to_event_id,
            by=event.by,
        )
    )
    s = _events_flow(s, event.device)
    # Whatever the skipped events said is unknown: the shuffler's deck is counted again.
    return _unverify(s) if event.device == "shuffler" else s


# --- waits: what the table awaits from its devices, and a wait that never ends -----------


def waits(s: TableState) -> tuple[Wait, ...]:
    """What the table waits for from its devices now (core/stalls.py): a shuffle's completion
    while it wants a deck and nothing else explains the wait, the shoe's deal of the round."""
    found: list[Wait] = []
    if s.shuffle_requested and not s.deck_ready and _shuffler_usable(s):
        found.append(Wait("shuffler", Awaited.SHUFFLE, (int(s.shuffle_started),)))
    deal = s.deal
    if (
        deal is not None
        and _dealing(s)
        and s.shoe_fault is None
        and not s.shoe_out_of_order
        and "shoe" not in s.events_refused
    ):
        progress = (len(deal.cards), len(deal.stacks_done), deal.face_up, len(deal.discarded))
        found.append(Wait("shoe", Awaited.DEAL, progress))
    return tuple(found)


def _stalled(game: TableGame, s: TableState, event: CommandStalled, fx: list[Effect]) -> TableState:
    """A wait the shell found too long: a fault, if the table still waits for it (a
    completion journaled meanwhile makes the decision moot: nothing is journaled)."""
    awaited = Awaited(event.awaited)
    if not any(w.device == event.device and w.awaited is awaited for w in waits(s)):
        return s
    stall = Stall.of(event)
    chapter = _chapter(game)
    dealt = awaited is Awaited.DEAL
    fx.append(
        trusted(
            rec.CommandStalledRecord,
            device=event.device,
            awaited=awaited.value,
            waited_ms=event.waited_ms,
            reported=event.reported,
            card_count=event.card_count,
            replayed=event.replayed,
            round_id=s.round_id if dealt else None,
            rule=stalls.rule(chapter, awaited),
            action=stalls.action(awaited),
        )
    )
    s = s.replace(
        stalls={**s.stalls, event.device: stall},
        counters=s.counters.bump("commands_stalled"),
    )
    if dealt:
        # 649a.13(f): the shoe stopped dealing: the round is void, its cards reshuffled.
        return _shoe_fault(game, s, "stalled", fx)
    # 649a.13(e): the shuffle cycle did not complete; the cards are reshuffled.
    fx.append(trusted(rec.ShufflerFaultRecord, code="stalled", rule=stalls.rule(chapter, awaited)))
    s = _shuffler_unusable(s, "stalled")
    counted = stalls.miscount(stall)
    if counted is None:
        return s
    # 649a.5(b): the shuffler showed the count in its STATUS, if not in an event.
    fx.append(
        trusted(
            rec.DeckMiscount,
            card_count=counted,
            expected=DECK_SIZE,
            rule="649a.5(b)",
            action="deck removed; register a new deck",
        )
    )
    return s.replace(blocked=f"deck-miscount:{counted}", counters=s.counters.bump("deck_miscounts"))


def _without(stalled: dict[str, Stall], device: str) -> dict[str, Stall]:
    return stalled if device not in stalled else {k: v for k, v in stalled.items() if k != device}


# --- the automated dealing shoe -------------------------------------------------------


def _chapter(game: TableGame) -> str:
    """The game's chapter (649a, 653a, 643a), from the rule its irregularities cite."""
    return game.void_reasons()["shoe-jam"].split(".")[0]


def _shoe_rule(game: TableGame, irregularity: str) -> str:
    return {
        "device-unusable": f"{_chapter(game)}.13(g)",
        "deck": f"{_chapter(game)}.10(f)",
    }[irregularity]


def _dealing(s: TableState) -> bool:
    return s.phase is Phase.LOCKED and s.deal is not None and not s.deal.complete


def _deal(
    rules: TableRules, game: TableGame, s: TableState, event: DealRequested, fx: list[Effect]
) -> TableState:
    """649a.10(a)(2), (b): after "no more bets" the shoe dispenses the plan's stacks."""
    if not rules.shoe:
        raise Rejected("this table has no automated dealing shoe")
    if s.shoe_out_of_order:
        raise Rejected("the shoe is out of order (649a.13(g)): deal by hand and enter the hands")
    if s.phase is not Phase.LOCKED:
        raise Rejected(f"no round to deal: the table is {s.phase.value}")
    if not s.counted:
        raise Rejected(f"the count is not final: seats {list(s.undecided)} are still resting")
    if s.devices_pending.get("shoe"):
        raise Rejected("another shoe is connected: a technician must accept it first")
    refused = s.events_refused.get("shoe")
    if refused is not None:
        raise Rejected(
            f"the shoe's events are refused ({_refused_text(refused)}): reboot the shoe, or "
            "`tablectl devices reset-link shoe --by ID`, then `tablectl dealer clear-shoe`"
        )
    if s.shoe_fault is not None:
        raise Rejected(
            f"the shoe is in fault ({s.shoe_fault}, {_chapter(game)}.13(f)): remove the cards "
            "from the shoe, then `tablectl dealer clear-shoe --by ID`; or "
            "`tablectl dealer shoe-out-of-order` and deal by hand"
        )
    if s.deal is not None and (s.deal.cards or s.deal.face_up or s.deal.complete):
        raise Rejected("the shoe is already dealing this round")
    if (old := _deck_too_old(rules, s)) is not None:
        # 649a.3(c): not dealt from a deck past its age; journaled once, then refused.
        if s.deck.age_held_round == s.round_id:
            raise Rejected(
                f"deck {old.deck_id} reached its age limit ({decks.age_rule(game)}): introduce "
                f"the deck that replaces it (`tablectl dealer new-deck --id ID --back COLOUR "
                f"--replaces {old.deck_id}`) and deal, or `tablectl dealer void deck-age`"
            )
        return _deck_age_at_deal(rules, game, s, fx)
    seats = tuple(sorted({*s.wagers, *event.seats}))
    for seat in seats:
        if not 1 <= seat <= rules.seats:
            raise Rejected(f"seat {seat} does not exist (1..{rules.seats})")
    if not seats:
        raise Rejected("no player to deal to: name the seats in play")
    plan = game.deal_plan(seats)
    stacks = tuple(step.cards for step in plan.steps if step.by_shoe)
    if not stacks:
        raise Rejected(f"{plan.procedure.value} deals no card from the shoe")
    fx.append(
        trusted(
            rec.DealStarted,
            round_id=s.round_id,
            seats=list(seats),
            stacks=list(stacks),
            procedure=plan.procedure.value,
            rule=plan.rule,
            by=event.by,
        )
    )
    fx.append(DealCards(stacks=stacks))
    deal = Deal(seats=seats, stacks=stacks, shoe_boot_id=event.shoe_boot_id)
    return s.replace(deal=deal, deal_refused=None)


def _resumed(game: TableGame, s: TableState, event: DeviceResumed, fx: list[Effect]) -> TableState:
    """What the shoe said first after a power-up settles a deal the journal had asked of it
    and nothing confirmed (core/recovery.py): dealt again, left to its cards, or void."""
    deal = s.deal
    if event.device != "shoe" or deal is None or not _dealing(s):
        return s  # nothing in flight to it (the events it held may have finished the deal)
    if s.shoe_out_of_order:
        return s  # covered or signed (649a.13(g)): the dealer deals by hand and enters hands
    progressed = bool(deal.cards or deal.discarded or deal.face_up or deal.stacks_done)
    decision = resolve_deal(issued_to_boot=deal.shoe_boot_id, progressed=progressed, shoe=event)
    void = decision.resolution is Resolution.VOID
    fx.append(
        trusted(
            rec.DealResolved,
            round_id=s.round_id,
            outcome=decision.resolution.value,
            why=decision.why,
            boot_id=event.boot_id,
            state=event.state,
            events_held=event.events_held,
            # 649a.13(f), 653a.13(f), 643a.13(f): a shoe that fails to deal voids the round.
            rule=game.void_reasons()["shoe-jam"] if void else game.deal_plan(deal.seats).rule,
        )
    )
    if decision.resolution is Resolution.REISSUE:
        fx.append(DealCards(stacks=deal.stacks))  # the same plan, to the same boot
        return s
    if void:
        return _shoe_fault(game, s, "deal-unconfirmed", fx)
    return s


def _shoe_dealt(
    game: TableGame,
    s: TableState,
    event: ShoeCard | ShoeStackDealt | ShoeDealCompleted,
    fx: list[Effect],
) -> TableState:
    deal = s.deal
    if deal is None or deal.complete or s.phase is not Phase.LOCKED:
        # Nothing was asked of the shoe (or the round is over): never part of a hand.
        return s.replace(counters=s.counters.bump("shoe_events_outside_a_deal"))
    match event:
        case ShoeCard():
            return _shoe_card(game, s, deal, event, fx)
        case ShoeStackDealt():
            return _shoe_stack_dealt(game, s, deal, event.cards, fx)
        case ShoeDealCompleted():
            return _shoe_deal_completed(game, s, deal, event.cards, fx)


def _shoe_card(
    game: TableGame, s: TableState, deal: Deal, event: ShoeCard, fx: list[Effect]
) -> TableState:
    reasons = game.void_reasons()
    card = event.card
    match event.read:
        case CardRead.FACE_UP:
            if card is not None and deal.seen(card):
                # A card already dealt (or discarded) this round, seen again: not one deck
                # of 52 distinct cards, whatever the count said (649a.10(f)).
                return _deck_irregular(game, s, "duplicate-card", fx)
            deal = deal.replace(
                face_up=deal.face_up + 1,
                discarded=(*deal.discarded, card) if card else deal.discarded,
            )
            s = s.replace(deal=deal)
            if deal.face_up > 1:
                # 649a.13(a): more than one face up: all hands void, the cards reshuffled.
                return _void_round(s, "cards-face-up", reasons["cards-face-up"], "shoe", fx)
            # 649a.13(a): one card face up is not used; it goes to the discard rack.
            rule = reasons["cards-face-up"]
            fx.append(trusted(rec.CardFaceUp, round_id=s.round_id, action="discarded", rule=rule))
            return s
        case CardRead.UNREAD:
            return _shoe_fault(game, s, "unread-card", fx)
        case CardRead.FOREIGN:
            return _deck_irregular(game, s, "foreign-card", fx)
    if card is None:
        return s
    if deal.seen(card):
        return _deck_irregular(game, s, "duplicate-card", fx)
    deal = deal.replace(cards=(*deal.cards, card))
    s = s.replace(deal=deal)
    if len(deal.cards) > sum(deal.stacks):
        # 649a.13(c): a hand dealt an incorrect number of cards voids all hands.
        return _void_round(s, "wrong-card-count", reasons["wrong-card-count"], "shoe", fx)
    return s


def _shoe_stack_dealt(
    game: TableGame, s: TableState, deal: Deal, n: int, fx: list[Effect]
) -> TableState:
    done = (*deal.stacks_done, n)
    i = len(done) - 1
    if i >= len(deal.stacks) or n > deal.stacks[i] or len(deal.cards) > sum(done):
        # 649a.13(c): a hand was dealt more cards than the plan gives it.
        rule = game.void_reasons()["wrong-card-count"]
        return _void_round(s, "wrong-card-count", rule, "shoe", fx)
    if n < deal.stacks[i] or len(deal.cards) < sum(deal.stacks[: i + 1]):
        # 649a.13(f): the shoe stopped short of the plan -- it failed to deal all cards,
        # which voids the round and sends the cards back to be reshuffled.
        return _shoe_fault(game, s, "incomplete", fx)
    return s.replace(deal=deal.replace(stacks_done=done))


def _shoe_deal_completed(
    game: TableGame, s: TableState, deal: Deal, n: int, fx: list[Effect]
) -> TableState:
    if deal.stacks_done != deal.stacks or n != len(deal.cards):
        # 649a.13(f): the shoe failed to deal all cards.
        return _shoe_fault(game, s, "incomplete", fx)
    hands = _shoe_plan(game, deal).steps
    seats = {step.seat for step in hands if step.seat is not None}
    fx.append(trusted(rec.DealCompleted, round_id=s.round_id, cards_read=n, hands_read=len(seats)))
    return s.replace(deal=deal.replace(complete=True))


def _shoe_fault(
    game: TableGame,
    s: TableState,
    code: str,
    fx: list[Effect],
    *,
    at_connect: bool = False,
    record: bool = True,
) -> TableState:
    """649a.13(f), 653a.13(f), 643a.13(f): a shoe that jams, stops or fails to deal all cards
    during a round voids it; every wager is returned."""
    rule = game.void_reasons()["shoe-jam"]
    in_play = s.phase is Phase.LOCKED
    if record:
        fx.append(
            trusted(
                rec.ShoeFaultRecord,
                code=code,
                round_id=s.round_id if in_play else None,
                round_voided=in_play,
                rule=rule,
                at_connect=at_connect,
            )
        )
    # The fault stands until the dealer has emptied the shoe (`tablectl dealer clear-shoe`).
    s = s.replace(counters=s.counters.bump("shoe_faults"), shoe_fault=code)
    if not in_play:
        return s
    return _void_round(s, "shoe-jam", rule, "shoe", fx)


def _shoe_cleared(s: TableState, by: str, fx: list[Effect]) -> TableState:
    refused = s.events_refused.get("shoe")
    if refused is not None:
        raise Rejected(
            f"the shoe's events are refused ({_refused_text(refused)}): clearing the shoe "
            "cannot fix that; reboot the shoe, or `tablectl devices reset-link shoe --by ID`"
        )
    if s.shoe_fault is None:
        raise Rejected("the shoe reports no fault to clear")
    fx.append(trusted(rec.ShoeFaultCleared, code=s.shoe_fault, by=by))
    return s.replace(shoe_fault=None, stalls=_without(s.stalls, "shoe"))


def _deck_irregular(
    game: TableGame, s: TableState, reason: str, fx: list[Effect], *, by: str = "shoe"
) -> TableState:
    """Not 52 distinct cards (a count of 52 cannot see a duplicate): the deck leaves the table
    and all hands are void (649a.10(f), 653a.10(f), 643a.10(f))."""
    rule = _shoe_rule(game, "deck")
    fx.append(
        trusted(
            rec.DeckIrregular,
            round_id=s.round_id,
            reason=reason,
            rule=rule,
            action="deck removed; register a new deck",
        )
    )
    s = _unverify(s).replace(
        blocked=f"deck-irregular:{reason}", counters=s.counters.bump("deck_irregular")
    )
    if s.phase is Phase.CLOSED:
        return s  # no round is played on it
    return _void_round(s, reason, rule, by, fx)


def _shoe_plan(game: TableGame, deal: Deal) -> DealPlan:
    plan = game.deal_plan(deal.seats)
    return DealPlan(plan.procedure, plan.rule, tuple(s for s in plan.steps if s.by_shoe))


def _cards_read(game: TableGame, s: TableState, event: Settle) -> RoundCards:
    """The round's cards as the shoe read them, given out by the deal plan; the community
    cards the dealer deals from the hand (653a.10(c)) come with the settle."""
    if event.hands or event.dealer:
        raise Rejected(
            "the shoe read the hands: enter them only for a shoe marked out of order "
            f"({_shoe_rule(game, 'device-unusable')})"
        )
    deal = s.deal
    if deal is None or not deal.complete:
        raise Rejected("the shoe has not dealt this round: `tablectl dealer deal`")
    read = form_hands(_shoe_plan(game, deal), deal.cards)
    by_hand = [step for step in game.deal_plan(deal.seats).steps if not step.by_shoe and step.cards]
    if event.community and not by_hand:
        raise Rejected("the shoe dealt the community cards: they cannot be entered")
    return RoundCards(
        dict(read.hands), read.dealer, (*read.community, *event.community), read.burned
    )


# --- decks: identity, alternation, age, stub counts (core/decks.py) --------------------


def _deck_rules(rules: TableRules) -> DeckRules | None:
    """The deck rules in force: none before revision 3, so older journals replay as written."""
    return rules.deck if rules.revision >= 3 else None


def _deck_rules_since_4(rules: TableRules) -> DeckRules | None:
    """The deck rules of revision 4 on (a deck past its age is not dealt, a questioned stub
    count, the idle procedure): journals written before replay as they were written."""
    return rules.deck if rules.revision >= 4 else None


def _deck_too_old(rules: TableRules, s: TableState) -> decks.DeckEntry | None:
    return None if _deck_rules_since_4(rules) is None else decks.too_old_to_deal(s.deck)


def _deck_age_at_deal(
    rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]
) -> TableState:
    """The deal starts: a round opened before its deck's limit is not dealt after it
    (649a.3(c)). Journaled once per round; the round waits for a new deck (one introduced in
    place of it) or is void (`dealer void deck-age`)."""
    deck_rules = _deck_rules_since_4(rules)
    old = _deck_too_old(rules, s)
    if deck_rules is None or old is None or s.deck.age_held_round == s.round_id:
        return s
    rule = decks.age_rule(game)
    fx.append(
        trusted(
            rec.DeckAgeHold,
            round_id=s.round_id,
            deck_id=old.deck_id,
            age_ms=old.age_ms(s.deck.now_ms),
            max_age_ms=deck_rules.max_age_ms,
            rule=rule,
            action=f"not dealt from deck {old.deck_id}: introduce the deck that replaces it "
            f"(tablectl dealer new-deck --id ID --back COLOUR --replaces {old.deck_id}) and "
            "deal from it, or void the round (tablectl dealer void deck-age)",
        )
    )
    return _with_life(s, s.deck.replace(age_held_round=s.round_id))


def _deck_block(rules: TableRules, s: TableState) -> decks.DeckBlock | None:
    deck_rules = _deck_rules(rules)
    return None if deck_rules is None else decks.block(deck_rules, s.deck)


def _with_life(s: TableState, life: DeckLife) -> TableState:
    return s.replace(deck=life)


def _deck_asks(rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]) -> TableState:
    """Between rounds, a stub count that fell due is asked for, once (649a.8(f) ...)."""
    deck_rules = _deck_rules(rules)
    life = s.deck
    if deck_rules is None or s.phase is not Phase.CLOSED or life.stub_count_asked:
        return s
    if not decks.stub_count_due(deck_rules, life):
        return s
    fx.append(
        trusted(
            rec.StubCountDue,
            round_id=s.round_id,
            rounds=life.rounds_since_stub_count,
            rule=decks.stub_rules(game)[0],
        )
    )
    return _with_life(s, life.replace(stub_count_asked=True))


def _deck_round_opened(rules: TableRules, s: TableState) -> TableState:
    """A round opens on the deck due (649a.3(b)(3)), and counts toward the stub count."""
    deck_rules = _deck_rules(rules)
    if deck_rules is None:
        return s
    life = s.deck
    due = life.next_deck(deck_rules)
    counting = deck_rules.stub_count_every_rounds is not None
    return _with_life(
        s,
        life.replace(
            previous_round_deck=life.round_deck,
            round_deck=None if due is None else due.deck_id,
            rounds_since_stub_count=life.rounds_since_stub_count + int(counting),
            shoe_read=None,
        ),
    )


def _deck_input(
    rules: TableRules,
    game: TableGame,
    s: TableState,
    event: DeckIntroduced | DeckClock | DeckInPlay | StubCounted | TableIdle | IdleProcedureDone,
    fx: list[Effect],
) -> TableState:
    deck_rules = _deck_rules(rules)
    if deck_rules is None or (
        isinstance(event, TableIdle | IdleProcedureDone) and _deck_rules_since_4(rules) is None
    ):
        if isinstance(event, DeckClock | TableIdle):
            return s  # nothing ages at a table that keeps no decks
        raise Rejected(
            f"this table keeps no decks: its config has no [deck] section ({decks.chapter(game)}.3)"
        )
    match event:
        case DeckClock(at_ms=at_ms):
            return _deck_ages(game, deck_rules, _deck_time(s, at_ms), fx)
        case DeckIntroduced():
            return _deck_ages(game, deck_rules, _introduce(game, deck_rules, s, event, fx), fx)
        case DeckInPlay():
            return _deck_in_play(game, deck_rules, s, event, fx)
        case StubCounted():
            return _stub_counted(rules, game, deck_rules, s, event, fx)
        case TableIdle():
            return _table_idle(game, deck_rules, _deck_time(s, event.at_ms), event, fx)
        case IdleProcedureDone():
            return _idle_procedure_done(game, s, event, fx)


def _table_idle(
    game: TableGame, rules: DeckRules, s: TableState, event: TableIdle, fx: list[Effect]
) -> TableState:
    """649a.5(f): "If there is no gaming activity at a Three Card Poker table which is open
    for gaming, the cards shall be removed from the dealing shoe and discard rack and spread
    out on the table face down..." No round locked for the table's idle time: the procedure
    is due before the next round; a round open without a wager is closed (void)."""
    life = s.deck
    idle_ms = rules.idle_ms
    if idle_ms is None or life.idle_due_ms is not None:
        return s
    if s.phase is Phase.LOCKED or s.wagers or s.undecided:
        return s  # a round under way, or wagers on the layout: the table is not idle
    if event.at_ms - event.since_ms < idle_ms:
        return s
    rule = decks.idle_rule(game)
    betting = s.phase is Phase.BETTING
    fx.append(
        trusted(
            rec.IdleProcedureDue,
            since_ms=event.since_ms,
            idle_ms=idle_ms,
            round_voided=s.round_id if betting else None,
            rule=rule,
            action="spread the cards for inspection, then place the deck from the table in "
            "the shuffler and remove the one in it: tablectl dealer idle-procedure --by ID",
        )
    )
    s = _with_life(s, life.replace(idle_due_ms=event.at_ms))
    if betting:
        # Nobody has wagered on it: it is not played on cards that sat uninspected.
        s = _void_round(s, "table-idle", rule, "table", fx)
    return s


def _idle_procedure_done(
    game: TableGame, s: TableState, event: IdleProcedureDone, fx: list[Effect]
) -> TableState:
    """The dealer did the idle procedure: the deck from the table goes into the shuffler and
    is shuffled and counted before a round opens (649a.5(b), 649a.5(f)(2) of the 2011 text)."""
    if s.deck.idle_due_ms is None:
        raise Rejected("no idle procedure is due: the table has had rounds")
    fx.append(trusted(rec.IdleProcedureDoneRecord, rule=decks.idle_rule(game), by=event.by))
    s = _with_life(s, s.deck.replace(idle_due_ms=None))
    return _unverify(s) if s.phase is Phase.CLOSED else s


def _deck_time(s: TableState, at_ms: int) -> TableState:
    """The latest time heard; a clock set back never makes a deck younger."""
    now = at_ms if s.deck.now_ms is None else max(s.deck.now_ms, at_ms)
    return _with_life(s, s.deck.replace(now_ms=now))


def _deck_ages(game: TableGame, rules: DeckRules, s: TableState, fx: list[Effect]) -> TableState:
    """649a.3(c): a warning warn_before_ms ahead of a deck's limit; at the limit the deck
    holds the next round until it is replaced. Each journaled once."""
    life = s.deck
    rule = decks.age_rule(game)
    for deck in life.decks:
        age = deck.age_ms(life.now_ms)
        if not deck.warned and age >= rules.max_age_ms - rules.warn_before_ms:
            fx.append(
                trusted(
                    rec.DeckAgeWarning,
                    deck_id=deck.deck_id,
                    age_ms=age,
                    max_age_ms=rules.max_age_ms,
                    rule=rule,
                )
            )
            deck = deck.replace(warned=True)
        if not deck.expired and age >= rules.max_age_ms:
            fx.append(
                trusted(
                    rec.DeckAgeExpired,
                    deck_id=deck.deck_id,
                    age_ms=age,
                    max_age_ms=rules.max_age_ms,
                    rule=rule,
                    action=f"no round opens until it is replaced: tablectl dealer new-deck "
                    f"--id ID --back COLOUR --replaces {deck.deck_id}",
                )
            )
            deck = deck.replace(expired=True)
        life = life.with_deck(deck)
    return _with_life(s, life)


def _introduce(
    game: TableGame, rules: DeckRules, s: TableState, event: DeckIntroduced, fx: list[Effect]
) -> TableState:
    """A deck comes to the table; it replaces the one named, or the one removed or past its
    age, or joins the decks the table plays with."""
    life = _deck_time(s, event.at_ms).deck
    if life.find(event.deck_id) is not None:
        raise Rejected(f"deck {event.deck_id} is already at the table: give the new deck's id")
    replaced = _replaced(rules, s, life, event)
    staying = [d for d in life.decks if d.deck_id != replaced]
    if rules.alternate and any(d.back == event.back for d in staying):
        # 649a.3(b)(1): the backs of one deck are of a different colour than the other's.
        raise Rejected(
            f"deck {staying[0].deck_id} has {event.back} backs too: the two decks' backs "
            f"differ in colour ({decks.chapter(game)}.3(b)(1))"
        )
    new = decks.DeckEntry(deck_id=event.deck_id, back=event.back, introduced_ms=event.at_ms)
    fx.append(
        trusted(
            rec.DeckIntroducedRecord,
            deck_id=event.deck_id,
            back=event.back,
            at_ms=event.at_ms,
            max_age_ms=rules.max_age_ms,
            replaces=replaced,
            source=event.source,
            by=event.by,
            rule=f"{decks.chapter(game)}.3",
        )
    )

    def renamed(deck_id: str | None) -> str | None:
        return event.deck_id if deck_id is not None and deck_id == replaced else deck_id

    life = life.replace(
        decks=(*staying, new),
        round_deck=renamed(life.round_deck),
        previous_round_deck=renamed(life.previous_round_deck),
    )
    s = _with_life(s, life)
    if s.blocked is not None:
        fx.append(trusted(rec.DeckRegistered, replaces=s.blocked, by=event.by))
        s = s.replace(blocked=None)
    if s.phase is Phase.CLOSED:
        # 649a.5(b): a deck is played only once the shuffler has counted it.
        s = _unverify(s)
    return s


def _replaced(rules: DeckRules, s: TableState, life: DeckLife, event: DeckIntroduced) -> str | None:
    if event.replaces is not None:
        if life.find(event.replaces) is None:
            raise Rejected(
                f"deck {event.replaces} is not at the table; decks: "
                f"{', '.join(d.deck_id for d in life.decks) or 'none'}"
            )
        return event.replaces
    if len(life.decks) < decks.decks_needed(rules):
        return None
    expired = [d.deck_id for d in life.decks if d.age_ms(life.now_ms) >= rules.max_age_ms]
    if expired:
        return expired[0]
    if s.blocked is not None:
        # The deck removed: the one just counted by the shuffler, or the one in play.
        due = life.next_deck(rules)
        if s.blocked.startswith("deck-miscount") and due is not None:
            return due.deck_id
        if life.round_deck is not None:
            return life.round_deck
    raise Rejected(
        f"the table plays {decks.decks_needed(rules)} deck(s) "
        f"({', '.join(d.deck_id for d in life.decks)}): name the one this deck replaces "
        "(--replaces ID)"
    )


def _deck_in_play(
    game: TableGame, rules: DeckRules, s: TableState, event: DeckInPlay, fx: list[Effect]
) -> TableState:
    """The dealer names the deck the round is dealt from: the deck that played the previous
    round is refused (649a.3(b)(3): each deck is used for every other round)."""
    if s.phase is Phase.CLOSED:
        raise Rejected("no round in play: name its deck once betting has opened")
    life = s.deck
    if life.find(event.deck_id) is None:
        decks_here = ", ".join(d.deck_id for d in life.decks) or "none"
        raise Rejected(f"deck {event.deck_id} is not at the table; decks: {decks_here}")
    if rules.alternate and event.deck_id == life.previous_round_deck and event.source == "shuffler":
        # The shuffler delivered the deck that played the previous round: this round is not
        # played on it (649a.3(b)(3)); its wagers are returned and the decks go on alternating.
        rule = decks.alternation_rule(game)
        fx.append(
            trusted(
                rec.DeckAlternation,
                round_id=s.round_id,
                deck_id=event.deck_id,
                previous_round_deck=event.deck_id,
                round_voided=True,
                rule=rule,
            )
        )
        s = _void_round(s, "deck-alternation", rule, "shuffler", fx)
        return _with_life(s, s.deck.replace(round_deck=event.deck_id))
    if rules.alternate and event.deck_id == life.previous_round_deck:
        raise Rejected(
            f"deck {event.deck_id} played the previous round: the decks alternate, each used "
            f"for every other round ({decks.alternation_rule(game)}); deal round {s.round_id} "
            f"from deck {life.round_deck}"
        )
    if event.deck_id != life.round_deck:
        return _with_life(s, life.replace(round_deck=event.deck_id))
    return s


def _shoe_back(
    rules: TableRules,
    game: TableGame,
    s: TableState,
    event: ShoeCard | ShoeStackDealt | ShoeDealCompleted,
    fx: list[Effect],
) -> TableState | None:
    """A card whose back the shoe reports: of the deck in play, or the round stops. The other
    deck's back: the deck that played the previous round (649a.3(b)(3)), the round void. A
    back of no deck at the table: a foreign card, the deck removed (649a.10(f))."""
    deck_rules = _deck_rules(rules)
    if deck_rules is None or not isinstance(event, ShoeCard) or event.back is None:
        return None
    if not _dealing(s):
        return None
    life = s.deck
    in_play = life.find(life.round_deck)
    if in_play is not None and in_play.back == event.back:
        return None
    other = life.by_back(event.back)
    if other is not None and deck_rules.alternate:
        rule = decks.alternation_rule(game)
        fx.append(
            trusted(
                rec.DeckAlternation,
                round_id=s.round_id,
                deck_id=other.deck_id,
                previous_round_deck=life.previous_round_deck or other.deck_id,
                round_voided=True,
                rule=rule,
            )
        )
        return _void_round(s, "deck-alternation", rule, "shoe", fx)
    return _deck_irregular(game, s, "foreign-back", fx)


def _shoe_read(rules: TableRules, s: TableState) -> TableState:
    """The cards the shoe read this round: a stub count can be derived from them."""
    if _deck_rules(rules) is None or s.deal is None or not s.deal.complete:
        return s
    if s.deck.shoe_read == len(s.deal.cards):
        return s
    return _with_life(s, s.deck.replace(shoe_read=len(s.deal.cards)))


def _stub_counted(
    table_rules: TableRules,
    game: TableGame,
    rules: DeckRules,
    s: TableState,
    event: StubCounted,
    fx: list[Effect],
) -> TableState:
    """649a.8(g)-(h), 649a.9(e)-(f), 649a.10(e)-(f) (653a.8(g)-(h), 653a.9(e)-(f),
    653a.10(e)-(f); 643a the same): 52, the stub goes to the discard rack; otherwise all hands
    are void and the wagers returned, and unless the cards were misdealt the deck leaves."""
    every_rule, whole_rule, wrong_rule = decks.stub_rules(game)
    if rules.stub_count_every_rounds is None:
        raise Rejected(
            "the shuffler counts every deck after its shuffle (649a.5(b)): no stub count is "
            f"kept ({every_rule}); set deck.stub_count_every_rounds where it does not"
        )
    if s.phase is Phase.BETTING:
        raise Rejected(f"round {s.round_id} is taking bets: the stub is counted after the deal")
    if s.phase is Phase.LOCKED and not s.counted:
        raise Rejected(f"the count is not final: seats {list(s.undecided)} are still resting")
    life = s.deck
    derived = event.cards is None
    if event.cards is None and life.shoe_read is None:
        raise Rejected(
            "no shoe read this round's cards: count the stub and give the deck's count "
            "(`tablectl dealer stub-count 52`)"
        )
    cards = DECK_SIZE if event.cards is None else event.cards
    in_play = s.phase is Phase.LOCKED
    read = life.shoe_read
    if (
        _deck_rules_since_4(table_rules) is not None
        and read is not None
        and cards != DECK_SIZE
        and not event.confirmed
    ):
        # The shoe read `read` distinct cards of this deck: a whole deck leaves a stub of
        # 52 - read. A count that says otherwise is asked again, both shown; the dealer
        # confirms theirs (--confirm) or the shoe's (no count).
        if life.stub_questioned == cards:
            raise Rejected(
                f"your count of {cards} is questioned already: the shoe read {read} cards, a "
                f"whole deck leaves a stub of {DECK_SIZE - read}; confirm yours with "
                f"`tablectl dealer stub-count {cards} --confirm`, or the shoe's with "
                "`tablectl dealer stub-count`"
            )
        fx.append(
            trusted(
                rec.StubCountQuestioned,
                round_id=s.round_id,
                deck_id=life.round_deck,
                counted=cards,
                cards_read=read,
                stub_counted=cards - read,
                stub_expected=DECK_SIZE - read,
                rule=every_rule,
                by=event.by,
            )
        )
        return _with_life(s, life.replace(stub_questioned=cards))

    def record(outcome: str, rule: str) -> None:
        fx.append(
            trusted(
                rec.StubCountRecord,
                round_id=s.round_id,
                deck_id=life.round_deck,
                cards=cards,
                derived_from_shoe=derived,
                misdealt=event.misdealt,
                outcome=outcome,
                rule=rule,
                by=event.by,
            )
        )

    counted = life.replace(rounds_since_stub_count=0, stub_count_asked=False, stub_questioned=None)
    if cards == DECK_SIZE:
        if event.misdealt:
            raise Rejected(
                f"the count shows {DECK_SIZE} cards: the deck is whole ({whole_rule}); a hand "
                "dealt the wrong number of cards is voided with `tablectl dealer void "
                f"wrong-card-count` ({decks.chapter(game)}.13(c))"
            )
        record("correct", whole_rule)
        return _with_life(s, counted)
    if event.misdealt:
        if not in_play:
            raise Rejected(
                f"round {s.round_id} is settled: a misdeal is judged with the hands on the "
                f"layout ({wrong_rule}); without one, the count removes the deck"
            )
        record("misdealt-void", wrong_rule)
        return _void_round(_with_life(s, counted), "stub-count-misdeal", wrong_rule, event.by, fx)
    record("deck-removed", wrong_rule)
    removed = counted.replace(decks=tuple(d for d in counted.decks if d.deck_id != life.round_deck))
    s = _unverify(_with_life(s, removed)).replace(
        blocked=f"stub-count:{cards}", counters=s.counters.bump("deck_irregular")
    )
    if not in_play:
        return s
    return _void_round(s, "stub-count", wrong_rule, event.by, fx)


# --- a linked progressive (docs/linked-progressives.md) -------------------------------------


def _link_at_power_up(rules: TableRules, game: TableGame, s: TableState) -> TableState:
    """The meter the config says: on a link (not heard yet: LINK DOWN until it is), or local."""
    meter_rules = game.meter
    if meter_rules is None or s.meter is None:
        return s
    if rules.link is None:
        if isinstance(s.meter, LinkedMeter):  # taken off the link: a local meter again
            return s.replace(
                meter=_meter_for(rules, meter_rules.meter_id, meter_rules.initial_cents),
                link_silent=None,
                link_refused=None,
            )
        return s
    meter = s.meter
    if not isinstance(meter, LinkedMeter) or meter.link_id != rules.link.link_id:
        meter = _meter_for(rules, meter_rules.meter_id, meter_rules.initial_cents)
    return s.replace(meter=meter, link_silent="not heard since power-up")


def _link_parameters(
    rules: TableRules,
    game: TableGame,
    s: TableState,
    event: LinkParametersHeard,
    fx: list[Effect],
) -> TableState:
    """Take the link's parameters, or refuse them naming the rule (5321.18(b)(4))."""
    meter = s.meter
    if rules.link is None or not isinstance(meter, LinkedMeter):
        raise Rejected("this table's progressive is not on a link")
    if (event.parameters_version, event.parameters_sha256) == (
        meter.parameters_version,
        meter.parameters_sha256,
    ):
        return s
    if s.phase is Phase.LOCKED and meter.parameters_version:
        # The round's contributions were made under the parameters it holds: it is settled
        # (or voided) under them; the shell offers the new ones again after it.
        raise Rejected("the link's parameters cannot change in the middle of a round")
    problem = _parameters_problem(rules, game, meter, s, event)
    if problem is not None:
        reason, rule = problem
        fx.append(
            trusted(
                rec.LinkParametersRefused,
                link_id=rules.link.link_id,
                parameters_version=event.parameters_version,
                reason=reason,
                rule=rule,
            )
        )
        return s.replace(link_refused=f"link parameters refused: {reason}")
    levels = tuple(
        LinkLevel(
            level_id=lv.level_id,
            contribution_rate_bp=lv.contribution_rate_bp,
            initial_cents=lv.initial_cents,
            reset_cents=lv.reset_cents,
        )
        for lv in event.levels
    )
    fx.append(
        trusted(
            rec.LinkParametersAccepted,
            link_id=meter.link_id,
            parameters_version=event.parameters_version,
            parameters_sha256=event.parameters_sha256,
            levels=[f"{lv.level_id}:{lv.contribution_rate_bp}" for lv in levels],
        )
    )
    cents = meter.cents if meter.parameters_version else levels[0].initial_cents
    meter = meter.replace(
        parameters_version=event.parameters_version,
        parameters_sha256=event.parameters_sha256,
        wager_cents=event.wager_cents,
        levels=levels,
        cents=cents,
    )
    return s.replace(meter=meter, link_refused=None)


def _parameters_problem(
    rules: TableRules,
    game: TableGame,
    meter: LinkedMeter,
    s: TableState,
    p: LinkParametersHeard,
) -> tuple[str, str] | None:
    """What is wrong with a link's parameters for this table: (reason, rule), or None."""
    assert rules.link is not None
    if p.link_id != rules.link.link_id:
        return (
            f"they are link {p.link_id}'s; this table is on {rules.link.link_id}",
            "5321.18(b)(1)",
        )
    if rules.link.table_ref not in p.tables:
        return (
            f"the link does not list this table ({rules.link.table_ref})",
            "5321.18(b)(1)",  # the controller identifies each linked table
        )
    if p.game != game.name:
        return f"the link plays {p.game}; this table plays {game.name}", "5321.18(b)(4)"
    if p.wager_cents != game.wager_cents:
        return (
            f"the link's wager is {p.wager_cents} cents; this table takes {game.wager_cents}",
            "5321.18(b)(4)",
        )
    if not p.levels:
        return "the link has no level", "5321.18(b)(4)"
    if any(not 0 <= lv.contribution_rate_bp <= 10_000 for lv in p.levels):
        return "a level's contribution rate is not 0 to 100 %", "5321.18(b)(4)"
    if meter.parameters_version and s.link_silent is None and s.link_refused is None:
        # NY 9 NYCRR 5321.18(b)(4): no parameter change while the link is in operation.
        return (
            f"version {p.parameters_version} arrived while version "
            f"{meter.parameters_version} is in operation",
            "5321.18(b)(4)",
        )
    return None


def _link_lost(game: TableGame, s: TableState, reason: str, fx: list[Effect]) -> TableState:
    """5321.18(c), NJ 13:69E-1.39B(c): the progressive becomes unplayable; the game goes on.
    Wagers recognised this round and not yet counted are withdrawn (their lamps go out);
    counted ones stand: their contributions wait in the outbox for the link's return."""
    if not isinstance(s.meter, LinkedMeter) or s.link_silent is not None:
        return s if s.link_silent is None else s.replace(link_silent=reason)
    withdrawn: list[int] = []
    if s.phase is Phase.BETTING:
        withdrawn = sorted(s.wagers)
    fx.append(
        trusted(
            rec.LinkDown,
            link_id=s.meter.link_id,
            reason=reason,
            round_id=s.round_id,
            wagers_withdrawn=withdrawn,
            rule="5321.18(c)",
        )
    )
    for seat in withdrawn:
        s = _withdraw(s, seat, fx)
    return s.replace(link_silent=reason, counters=s.counters.bump("link_losses"))


def _link_answer(s: TableState, event: LinkClaimAnswer, fx: list[Effect]) -> TableState:
    """The controller answered a claim: the amount paid is its amount."""
    hit = next((h for h in s.hits_pending if h.hit_id == event.claim_id), None)
    if hit is None or not hit.link_claim or hit.answered or not isinstance(s.meter, LinkedMeter):
        raise Rejected(f"no claim {event.claim_id!r} awaits the link controller's answer")
    amount = event.amount_cents if event.status == "awarded" else 0
    fx.append(
        trusted(
            rec.LinkClaimAnswered,
            link_id=s.meter.link_id,
            claim_id=event.claim_id,
            status=event.status,
            amount_cents=amount,
            award_version=event.award_version,
            reason=event.reason,
        )
    )
    hit = hit.replace(answered=True, amount_cents=amount)
    return s.replace(
        hits_pending=tuple(hit if h.hit_id == hit.hit_id else h for h in s.hits_pending),
        hit_history=tuple(hit if h.hit_id == hit.hit_id else h for h in s.hit_history),
    )


def _link_contribution(
    meter: LinkedMeter, level: LinkLevel, round_id: int, seat: int, wager_cents: int
) -> rec.LinkContribution:
    return rec.LinkContribution(
        link_id=meter.link_id,
        level_id=level.level_id,
        parameters_version=meter.parameters_version,
        round_id=round_id,
        seat=seat,
        wager_cents=wager_cents,
        rate_bp=level.contribution_rate_bp,
        contribution_ten_thousandths_cent=wager_cents * level.contribution_rate_bp,
    )


def _link_reversal(
    contribution: rec.LinkContribution, reason: str, rule: str
) -> rec.LinkContributionReversed:
    return rec.LinkContributionReversed(
        link_id=contribution.link_id,
        level_id=contribution.level_id,
        parameters_version=contribution.parameters_version,
        round_id=contribution.round_id,
        seat=contribution.seat,
        wager_cents=contribution.wager_cents,
        rate_bp=contribution.rate_bp,
        contribution_ten_thousandths_cent=contribution.contribution_ten_thousandths_cent,
        reason=reason,
        rule=rule,
    )


def _link_claim(meter: LinkedMeter, round_id: int, entry: HitEntry, hit: Hit) -> rec.LinkClaim:
    level = meter.claim_level
    assert level is not None and hit.share is not None  # contributions needed parameters
    return rec.LinkClaim(
        link_id=meter.link_id,
        level_id=level.level_id,
        parameters_version=meter.parameters_version,
        claim_id=entry.hit_id,
        round_id=round_id,
        seat=hit.seat,
        hand=hit.hand,
        cards="".join(map(str, hit.cards)),
        share_percent=int(hit.share * 100),
        rule=hit.rule,
    )

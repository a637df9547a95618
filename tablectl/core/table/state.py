"""The table's state and its typed updates: what every room of the round machine reads. Pure.

`TableState` and the frozen models in it change only through each model's `replace`, whose
keywords are a `TypedDict` of its fields (mypy refuses a misspelt field or a wrong type), and
its counters through `Counters.bump` with a checked name. Below the models: the small updates
and questions several rooms share (a deck no longer verified, a device's stream flowing
again, whether the shoe is dealing) and `Context`, what each input's handler is given.
"""

from __future__ import annotations

import dataclasses
from enum import StrEnum
from typing import Any, Literal, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, model_serializer, model_validator

from tablectl.core import effects as rec
from tablectl.core import shuffle_fault
from tablectl.core.compat import later
from tablectl.core.decks import DeckLife
from tablectl.core.effects import Effect
from tablectl.core.events import Cards, DeckRules, TableRules
from tablectl.core.games.base import TableGame
from tablectl.core.journal_checks import RolledBack
from tablectl.core.stalls import Stall
from tablectl.rules.meters import LinkedMeter, LocalMeter, MeterState
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
    # SHUFFLE SUSPECT and a shuffler out of service (core/shuffle_fault.py).
    shuffle: shuffle_fault.ShuffleFault = later(shuffle_fault.ShuffleFault())

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
            meter=None if meter is None else meter_for(rules, meter.meter_id, meter.initial_cents),
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
    shuffle: shuffle_fault.ShuffleFault


# --- what a handler is given, and what several rooms share --------------------------------


@dataclasses.dataclass(slots=True)
class Context:
    """What every input's handler needs besides the input and the state. Not frozen: a frozen
    dataclass's __init__ sets each field through object.__setattr__ (~6 us of a cold step)."""

    rules: TableRules
    game: TableGame
    fx: list[Effect]  # the effects of this step so far, appended to


def meter_for(rules: TableRules, meter_id: str, initial_cents: int) -> MeterState:
    """The table's meter as the config says: on a link, or kept on the table PC."""
    if rules.link is not None:
        return LinkedMeter(meter_id=meter_id, link_id=rules.link.link_id)
    return LocalMeter(meter_id=meter_id, cents=initial_cents)


def reading_of(meter: MeterState | None) -> rec.MeterReading | None:
    """A round's record of its table's meter; a linked meter is the controller's to tell."""
    return None if meter is None or isinstance(meter, LinkedMeter) else reading(meter)


def reading(meter: MeterState, cents: int | None = None) -> rec.MeterReading:
    """What a record says of the meter it leaves (cents: a hit's, before later hits)."""
    return trusted(
        rec.MeterReading,
        meter_id=meter.meter_id,
        meter_cents=meter.cents if cents is None else cents,
        meter_carry=meter.carry,
    )


def unverify(s: TableState) -> TableState:
    """No deck is verified any more: only a shuffle that starts after this, and completes
    with a count of 52, makes one ready (649a.5(b), 649a.13(e)). Power-up, a shuffler fault
    or reboot, a deck removed or replaced, another shuffler: each comes through here."""
    return s.replace(
        deck_ready=False, shuffle_requested=False, shuffle_started=False, shuffle_refused=None
    )


def shuffler_unusable(s: TableState, code: str) -> TableState:
    """A shuffler fault: the deck is forgotten and the fault stands until a reshuffle."""
    return unverify(s).replace(shuffler_fault=code)


def shuffler_usable(s: TableState) -> bool:
    """Whether the shuffler may be asked for a deck now."""
    return (
        s.blocked is None
        and s.shuffler_fault is None
        and not s.devices_pending
        and "shuffler" not in s.events_refused
        and not s.shuffle.out_of_service
    )


def events_flow(s: TableState, device: str) -> TableState:
    """The device's stream starts over (a reboot) or was reset: no refusal stands."""
    if device not in s.events_refused:
        return s
    return s.replace(events_refused={k: v for k, v in s.events_refused.items() if k != device})


def refused_text(refused: RefusedEvent) -> str:
    """A refusal as a person reads it."""
    return f"event {refused.event_id} where {refused.expected_event_id} was due"


def without(stalled: dict[str, Stall], device: str) -> dict[str, Stall]:
    """The stalls with the device's wait ended."""
    return stalled if device not in stalled else {k: v for k, v in stalled.items() if k != device}


def dealing(s: TableState) -> bool:
    """Whether the shoe is dealing the round in play."""
    return s.phase is Phase.LOCKED and s.deal is not None and not s.deal.complete


def chapter(game: TableGame) -> str:
    """The game's chapter (649a, 653a, 643a), from the rule its irregularities cite."""
    return game.void_reasons()["shoe-jam"].split(".")[0]


def shoe_rule(game: TableGame, irregularity: str) -> str:
    """The game's section for a shoe irregularity: a shoe unusable, or a deck not whole."""
    return {
        "device-unusable": f"{chapter(game)}.13(g)",
        "deck": f"{chapter(game)}.10(f)",
    }[irregularity]


def decks_kept(rules: TableRules) -> DeckRules | None:
    """The deck rules in force: none before revision 3, so older journals replay as written."""
    return rules.deck if rules.revision >= 3 else None


def decks_kept_since_4(rules: TableRules) -> DeckRules | None:
    """The deck rules of revision 4 on (a deck past its age is not dealt, a questioned stub
    count, the idle procedure): journals written before replay as they were written."""
    return rules.deck if rules.revision >= 4 else None


def with_life(s: TableState, life: DeckLife) -> TableState:
    """The state with the decks' life replaced."""
    return s.replace(deck=life)

"""The table's round state machine: (state, event) -> (state, effects). Pure: no I/O, no clock.

A round opens when a verified deck is ready, accepts Progressive Payout Wagers until the
dealer's lock-out, books meter contributions at lock-out, then settles or is voided.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict

from tablectl.config import TableConfig
from tablectl.core.meters import LocalMeter
from tablectl.rules.cards import Card
from tablectl.rules.irregularities import Irregularity, NotApplicable, Ruling, rule_on
from tablectl.rules.paytables import TCP
from tablectl.rules.progressive import (
    EnvyBonus,
    ProgressivePayout,
    settle_tcp_progressive,
)

DECK_SIZE = 52


def _ruling(what: Irregularity) -> Ruling | None:
    try:
        return rule_on(TCP, what, face_up_cards=2)
    except NotApplicable:
        return None


METER_ID = "progressive"


@dataclass(frozen=True, slots=True)
class Rules:
    """What the core needs of a table's configuration."""

    seats: int
    wager_cents: int
    paytable: str
    rate_bp: int
    initial_cents: int
    reset_cents: int
    decks: int

    @classmethod
    def from_config(cls, config: TableConfig) -> Rules:
        p = config.progressive
        return cls(
            seats=config.table.seats,
            wager_cents=p.wager,
            paytable=p.paytable,
            rate_bp=p.rate_of_progression_percent,
            initial_cents=p.initial_amount,
            reset_cents=p.reset_amount,
            decks=config.shuffler.decks,
        )


# --- events -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PowerUp:
    """The daemon started; whatever it was doing before is treated as interrupted."""


@dataclass(frozen=True, slots=True)
class ChipSensed:
    seat: int
    present: bool  # already debounced: the chip has rested (or left) for the configured time


@dataclass(frozen=True, slots=True)
class LockoutPressed:
    """The dealer announced "no more bets" with the lock-out button."""


@dataclass(frozen=True, slots=True)
class ShuffleStarted:
    pass


@dataclass(frozen=True, slots=True)
class ShuffleCompleted:
    card_count: int


@dataclass(frozen=True, slots=True)
class ShufflerFault:
    code: str  # jam, stopped, cycle-incomplete, door-open


@dataclass(frozen=True, slots=True)
class ShufflerRebooted:
    pass


@dataclass(frozen=True, slots=True)
class ShuffleRequestFailed:
    reason: str


@dataclass(frozen=True, slots=True)
class Settle:
    """The dealer's entry of the shown hands (card reading comes later) and who folded."""

    hands: dict[int, tuple[Card, ...]]
    folded: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class VoidRound:
    reason: str  # e.g. shoe-jam (649a.13(f)), dealer-card-exposed (649a.13(d))


@dataclass(frozen=True, slots=True)
class NewDeckRegistered:
    """A replacement deck was brought to the table after a miscount (649a.5(b))."""


@dataclass(frozen=True, slots=True)
class ReshuffleRequested:
    """The dealer cleared a shuffler fault and asks for the reshuffle of 649a.13(e)."""


Event = (
    PowerUp
    | ChipSensed
    | LockoutPressed
    | ShuffleStarted
    | ShuffleCompleted
    | ShufflerFault
    | ShufflerRebooted
    | ShuffleRequestFailed
    | Settle
    | VoidRound
    | NewDeckRegistered
    | ReshuffleRequested
)

# --- effects ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Journal:
    """A domain event to append to the durable journal (and so publish)."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SeatLight:
    seat: int
    on: bool


@dataclass(frozen=True, slots=True)
class RequestShuffle:
    pass


@dataclass(frozen=True, slots=True)
class ReportRestingChips:
    """Betting opened: report chips already resting on sensors, placed before it opened."""


Effect = Journal | SeatLight | RequestShuffle | ReportRestingChips


class Rejected(Exception):
    """A dealer command that is not allowed now; the state is unchanged."""


# --- state ------------------------------------------------------------------------------


class Phase(StrEnum):
    CLOSED = "closed"  # between rounds: no wager is recognised
    BETTING = "betting"  # wagers are recognised and acknowledged
    LOCKED = "locked"  # "no more bets": wagers frozen, cards in play


class TableState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    phase: Phase = Phase.CLOSED
    round_id: int = 0
    wagers: dict[int, int] = {}  # seat -> accepted Progressive Payout Wager, cents
    round_contribution_units: int = 0  # booked at lock-out; reversed exactly on a void
    meter: LocalMeter
    deck_ready: bool = False
    shuffle_requested: bool = False
    shuffler_fault: str | None = None  # 649a.13(e): cleared only by a reshuffle request
    blocked: str | None = None  # 649a.5(b): the deck left the table; a new one is needed
    counters: dict[str, int] = {}

    @property
    def accepting_wagers(self) -> bool:
        return self.phase is Phase.BETTING

    @classmethod
    def initial(cls, rules: Rules) -> TableState:
        return cls(meter=LocalMeter(cents=rules.initial_cents))


def _count(state: TableState, name: str) -> dict[str, int]:
    return {**state.counters, name: state.counters.get(name, 0) + 1}


def _meter_data(meter: LocalMeter) -> dict[str, Any]:
    return {"meter_id": METER_ID, "meter_cents": meter.cents, "meter_carry": meter.carry}


# --- transitions ------------------------------------------------------------------------


def step(rules: Rules, state: TableState, event: Event) -> tuple[TableState, list[Effect]]:
    """Apply one event. Dealer commands that are not allowed now raise Rejected."""
    effects: list[Effect] = []
    state = _apply(rules, state, event, effects)
    state = _advance(rules, state, effects)
    return state, effects


def _apply(rules: Rules, s: TableState, event: Event, fx: list[Effect]) -> TableState:
    match event:
        case PowerUp():
            # Lock-out is the safe state: a round that was taking bets is closed at once.
            if s.phase is Phase.BETTING:
                s = _lock(rules, s, fx, cause="power-up")
            # Whatever the shuffler held before is unknown now: reshuffle.
            return s.model_copy(update={"deck_ready": False, "shuffle_requested": False})
        case ChipSensed(seat=seat, present=present):
            return _chip(rules, s, seat, present, fx)
        case LockoutPressed():
            if s.phase is not Phase.BETTING:
                return s.model_copy(update={"counters": _count(s, "lockout_presses_ignored")})
            return _lock(rules, s, fx, cause="lockout-button")
        case ShuffleStarted():
            fx.append(Journal("shuffle.started"))
            return s.model_copy(update={"shuffle_requested": True})
        case ShuffleCompleted(card_count=count):
            return _shuffle_completed(s, count, fx)
        case ShufflerFault(code=code):
            # 649a.13(e): jam, stop or incomplete cycle -> the cards shall be reshuffled.
            fx.append(Journal("shuffler.fault", {"code": code, "rule": "649a.13(e)"}))
            return s.model_copy(
                update={"deck_ready": False, "shuffle_requested": False, "shuffler_fault": code}
            )
        case ShufflerRebooted():
            fx.append(Journal("shuffler.rebooted"))
            return s.model_copy(update={"deck_ready": False, "shuffle_requested": False})
        case ShuffleRequestFailed(reason=reason):
            fx.append(Journal("shuffler.request_failed", {"reason": reason}))
            return s.model_copy(update={"shuffle_requested": False})
        case Settle():
            return _settle(rules, s, event, fx)
        case VoidRound(reason=reason):
            return _void(s, reason, fx)
        case NewDeckRegistered():
            if s.blocked is None:
                raise Rejected("no deck is waiting to be replaced")
            fx.append(Journal("deck.registered", {"replaces": s.blocked}))
            return s.model_copy(update={"blocked": None})
        case ReshuffleRequested():
            if s.shuffler_fault is None:
                raise Rejected("the shuffler reports no fault to recover from")
            fx.append(Journal("shuffler.fault_cleared", {"code": s.shuffler_fault}))
            return s.model_copy(update={"shuffler_fault": None})
    raise AssertionError(f"unhandled event {event!r}")


def _advance(rules: Rules, s: TableState, fx: list[Effect]) -> TableState:
    """Open the next round when a verified deck is ready, and keep a deck being shuffled."""
    usable = s.blocked is None and s.shuffler_fault is None
    if s.phase is Phase.CLOSED and s.deck_ready and usable:
        s = s.model_copy(
            update={
                "phase": Phase.BETTING,
                "round_id": s.round_id + 1,
                "deck_ready": False,
                "wagers": {},
                "round_contribution_units": 0,
            }
        )
        fx.append(Journal("round.opened", {"round_id": s.round_id}))
        fx.append(ReportRestingChips())
    # 649a.3(b)(2): with two decks, one is shuffled while the other is in play.
    decks_free = rules.decks - (0 if s.phase is Phase.CLOSED else 1)
    if usable and not s.deck_ready and not s.shuffle_requested and decks_free > 0:
        fx.append(RequestShuffle())
        s = s.model_copy(update={"shuffle_requested": True})
    return s


def _chip(rules: Rules, s: TableState, seat: int, present: bool, fx: list[Effect]) -> TableState:
    if not 1 <= seat <= rules.seats:
        return s.model_copy(update={"counters": _count(s, "unknown_seat_events")})
    if s.phase is not Phase.BETTING:
        if not present:
            return s
        # 649a.2(c)(2): a wager placed after "no more bets" is never recognised.
        reason = "after-lockout" if s.phase is Phase.LOCKED else "table-closed"
        fx.append(
            Journal("wager.rejected", {"round_id": s.round_id, "seat": seat, "reason": reason})
        )
        return s.model_copy(update={"counters": _count(s, "wagers_rejected")})
    if present and seat not in s.wagers:
        fx.append(
            Journal(
                "wager.accepted",
                {"round_id": s.round_id, "seat": seat, "wager_cents": rules.wager_cents},
            )
        )
        fx.append(SeatLight(seat, True))  # 649a.2(c)(1): the device acknowledges the wager
        return s.model_copy(update={"wagers": {**s.wagers, seat: rules.wager_cents}})
    if not present and seat in s.wagers:
        fx.append(Journal("wager.withdrawn", {"round_id": s.round_id, "seat": seat}))
        fx.append(SeatLight(seat, False))
        return s.model_copy(update={"wagers": {k: v for k, v in s.wagers.items() if k != seat}})
    return s


def _lock(rules: Rules, s: TableState, fx: list[Effect], cause: str) -> TableState:
    """649a.8(b)/649a.10(a)(2): no more bets; book each wager's contribution to the meter."""
    seats = sorted(s.wagers)
    fx.append(
        Journal(
            "round.locked",
            {
                "round_id": s.round_id,
                "cause": cause,
                # 649a.8(b): the dealer checks the chips against this count.
                "accepted_wagers": len(seats),
                "seats": seats,
                "total_wager_cents": sum(s.wagers.values()),
            },
        )
    )
    meter = s.meter
    booked = 0
    for seat in seats:
        meter, units = meter.contribute(s.wagers[seat], rules.rate_bp)
        booked += units
        fx.append(
            Journal(
                "meter.contribution",
                {
                    "round_id": s.round_id,
                    "seat": seat,
                    "wager_cents": s.wagers[seat],
                    "rate_bp": rules.rate_bp,
                    "contribution_ten_thousandths_cent": units,
                    **_meter_data(meter),
                },
            )
        )
    return s.model_copy(
        update={"phase": Phase.LOCKED, "meter": meter, "round_contribution_units": booked}
    )


def _shuffle_completed(s: TableState, count: int, fx: list[Effect]) -> TableState:
    ok = count == DECK_SIZE
    fx.append(Journal("shuffle.completed", {"card_count": count, "count_ok": ok}))
    if ok:
        return s.model_copy(update={"deck_ready": True, "shuffle_requested": False})
    # 649a.5(b): an incorrect count removes the deck from the table.
    fx.append(
        Journal(
            "irregularity",
            {
                "kind": "deck-miscount",
                "card_count": count,
                "expected": DECK_SIZE,
                "rule": "649a.5(b)",
                "action": "deck removed; register a new deck",
            },
        )
    )
    return s.model_copy(
        update={
            "deck_ready": False,
            "shuffle_requested": False,
            "blocked": f"deck-miscount:{count}",
            "counters": _count(s, "deck_miscounts"),
        }
    )


def _validate_settle(rules: Rules, s: TableState, event: Settle) -> None:
    if s.phase is not Phase.LOCKED:
        raise Rejected(f"no round to settle: the table is {s.phase.value}")
    seen: set[Card] = set()
    for seat, cards in event.hands.items():
        if not 1 <= seat <= rules.seats:
            raise Rejected(f"seat {seat} does not exist (1..{rules.seats})")
        if len(cards) != 3 or len(set(cards)) != 3:
            raise Rejected(f"seat {seat}: a hand is three different cards")
        if seen & set(cards):
            raise Rejected(f"seat {seat}: {sorted(map(str, seen & set(cards)))} already dealt")
        seen |= set(cards)
    both = event.folded & set(event.hands)
    if both:
        raise Rejected(f"seats {sorted(both)} cannot both fold and show a hand")
    missing = set(s.wagers) - set(event.hands) - event.folded
    if missing:
        raise Rejected(f"seats {sorted(missing)} have progressive wagers: give a hand or a fold")


def _settle(rules: Rules, s: TableState, event: Settle, fx: list[Effect]) -> TableState:
    _validate_settle(rules, s, event)
    meter, payouts = settle_tcp_progressive(
        paytable=rules.paytable,
        seats=rules.seats,
        reset_cents=rules.reset_cents,
        meter=s.meter,
        wagers=s.wagers,
        hands=event.hands,
        folded=event.folded,
    )
    paid = 0
    for p in payouts:
        paid += p.amount_cents
        match p:
            case ProgressivePayout():
                cards = "".join(map(str, event.hands[p.seat]))
                fx.append(
                    Journal(
                        "jackpot.hit",
                        {
                            "round_id": s.round_id,
                            "seat": p.seat,
                            "hand": p.hand.value,
                            "cards": cards,
                            "amount_cents": p.amount_cents,
                            "basis": "100%-of-meter" if p.from_meter else "odds-for-1",
                            "meter_before_cents": p.meter_before_cents,
                            "rule": "649a.12(e)",
                        },
                    )
                )
                if p.from_meter:
                    reset = s.meter.pay_share(Fraction(1), rules.reset_cents)[0]
                    fx.append(
                        Journal(
                            "meter.reset",
                            {
                                "round_id": s.round_id,
                                "paid_cents": p.amount_cents,
                                "reset_cents": rules.reset_cents,
                                **_meter_data(reset),
                            },
                        )
                    )
            case EnvyBonus():
                fx.append(
                    Journal(
                        "envy.bonus",
                        {
                            "round_id": s.round_id,
                            "seat": p.seat,
                            "for_seat": p.for_seat,
                            "hand": p.hand.value,
                            "amount_cents": p.amount_cents,
                            "rule": "649a.12(e)(5)",
                        },
                    )
                )
    fx.append(
        Journal(
            "round.settled",
            {
                "round_id": s.round_id,
                "progressive_paid_cents": paid,
                "folded": sorted(event.folded),
                **_meter_data(meter),
            },
        )
    )
    fx.extend(SeatLight(seat, False) for seat in sorted(s.wagers))
    return s.model_copy(
        update={
            "phase": Phase.CLOSED,
            "meter": meter,
            "wagers": {},
            "round_contribution_units": 0,
            "counters": _count(s, "rounds_settled"),
        }
    )


# Reasons a dealer may give for a void, each with the rule that voids the round.
VOID_RULES = {
    what.value: ruling.rule
    for what in Irregularity
    if (ruling := _ruling(what)) is not None and ruling.void_round
}


def _void(s: TableState, reason: str, fx: list[Effect]) -> TableState:
    """Void the round: every wager is returned, so its meter contribution is taken back."""
    if s.phase is Phase.CLOSED:
        raise Rejected("no round in play to void")
    if reason not in VOID_RULES:
        raise Rejected(f"unknown void reason {reason!r}; one of {sorted(VOID_RULES)}")
    meter = s.meter.reverse(s.round_contribution_units)
    fx.append(
        Journal(
            "round.voided",
            {
                "round_id": s.round_id,
                "reason": reason,
                "rule": VOID_RULES[reason],
                "wagers_returned": sorted(s.wagers),
                "contribution_reversed_ten_thousandths_cent": s.round_contribution_units,
                **_meter_data(meter),
            },
        )
    )
    fx.extend(SeatLight(seat, False) for seat in sorted(s.wagers))
    return s.model_copy(
        update={
            "phase": Phase.CLOSED,
            "meter": meter,
            "wagers": {},
            "round_contribution_units": 0,
            "counters": _count(s, "rounds_voided"),
        }
    )

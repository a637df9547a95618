"""A table's journal made by stepping the pure core, on a clock the session advances.

`JournaledTable` commits every step as the daemon does (the input, its records, the state),
stamped with the session's own clock and without an fsync per step: hours of play are
journaled in seconds, with every timestamp known (tests, bench/records_export.py).
`play_session` plays a long, seeded session of Three Card Poker with a dealing shoe and every
kind of row the record set reports: contributions, odds and meter hits (validated,
documented), resets, a shoe jam and a dealer's void, a miscount, a shuffler jam, a GPIO
fault, another shoe accepted, and a start-up with a changed rate of progression.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from tablectl.core import effects as rec
from tablectl.core.effects import DealCards, Effect, RequestShuffle
from tablectl.core.events import (
    ChipSensed,
    ClearGpioFault,
    ConfirmDocumentation,
    DealRequested,
    DeviceAccepted,
    DeviceIdentified,
    Event,
    GpioFault,
    LockoutPressed,
    LockoutReleased,
    NewDeckRegistered,
    PowerUp,
    ReshuffleRequested,
    Settle,
    ShoeCard,
    ShoeCleared,
    ShoeDealCompleted,
    ShoeFault,
    ShoeStackDealt,
    ShuffleCompleted,
    ShufflerFault,
    ShuffleStarted,
    TableRules,
    ValidateHit,
    VoidRound,
)
from tablectl.core.table import Phase, TableState, step
from tablectl.rules.cards import Card, parse_cards
from tablectl.service.api import journal_entries, journal_input
from tablectl.store.journal import Store

DECK = parse_cards("".join(f"{rank}{suit}" for suit in "cdhs" for rank in "23456789TJQKA"))


def tcp_rules(rate: str = "14.5", *, shoe: bool = True, seats: int = 6) -> TableRules:
    game = {
        "name": "three-card-poker",
        "dealing": "automated-shoe" if shoe else "hand",
        "progressive": {
            "wager": "1.00",
            "paytable": "A",
            "rate_of_progression_percent": rate,
            "initial_amount": "1000.00",
            "reset_amount": "1000.00",
        },
    }
    return TableRules.model_validate({"seats": seats, "decks": 2, "game": game, "shoe": shoe})


@dataclass
class JournaledTable:
    """The core and a store on a clock of its own: `at` moves only when told."""

    path: Path
    rules: TableRules
    at: datetime
    state: TableState = field(init=False)
    store: Store = field(init=False)
    records: list[rec.Record] = field(default_factory=list)
    _ns: int = 0
    _due: list[tuple[datetime, Event]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state = TableState.initial(self.rules)
        # A simulated journal need not survive a power cut: no fsync per step (10x faster).
        self.store = Store(self.path, boot_id="session", clock=lambda: self.at, durable=False)

    def close(self) -> None:
        self.store.close()

    def ns(self) -> int:
        self._ns += 1_000_000
        return self._ns

    def step(self, event: Event) -> list[Effect]:
        if isinstance(event, PowerUp):
            self.rules = event.rules
        self.state, effects = step(self.rules, self.state, event)
        self.store.commit(
            self.state.model_dump_json(), journal_entries(effects), journal_input(event)
        )
        self.records += [e for e in effects if isinstance(e, rec.Record)]
        return effects

    def later(self, seconds: float, event: Event) -> None:
        """Feed event after seconds (a shuffle that takes time)."""
        self._due.append((self.at + timedelta(seconds=seconds), event))
        self._due.sort(key=lambda d: d[0])

    def advance(self, seconds: float) -> None:
        """Let time pass; what falls due meanwhile is fed at its own time."""
        until = self.at + timedelta(seconds=seconds)
        while self._due and self._due[0][0] <= until:
            when, event = self._due.pop(0)
            self.at = max(self.at, when)
            self.feed(event)
        self.at = until

    def feed(self, event: Event) -> list[Effect]:
        effects = self.step(event)
        if RequestShuffle() in effects:
            self.feed(ShuffleStarted())
            self.later(SHUFFLE_S, ShuffleCompleted(card_count=52))
        return effects

    def wait_for_betting(self) -> None:
        while self.state.phase is not Phase.BETTING:
            assert self._due, f"nothing will open a round: {self.state}"
            self.advance((self._due[0][0] - self.at).total_seconds())


SHUFFLE_S = 45.0


@dataclass
class SessionFacts:
    """What the session did, to check the exports against."""

    rounds_settled: int = 0
    rounds_voided: int = 0
    hits: int = 0
    started: datetime | None = None
    ended: datetime | None = None


def deal_round(
    table: JournaledTable,
    rng: random.Random,
    rigged: dict[int, str] | None = None,
    players: tuple[int, ...] = (),
) -> list[Effect]:
    """The shoe deals the round's plan from a shuffled deck (rigged: seat -> its cards;
    players: seats in the round without a table-system wager)."""
    effects = table.feed(DealRequested(seats=players, by="D117 (alice)"))
    (deal,) = [e for e in effects if isinstance(e, DealCards)]
    seats = table.state.deal.seats if table.state.deal else ()
    deck: list[Card] = list(DECK)
    rng.shuffle(deck)
    for seat, text in (rigged or {}).items():
        for card in parse_cards(text):
            deck.remove(card)
        index = list(seats).index(seat) * 3
        deck[index:index] = list(parse_cards(text))
    cards = iter(deck)
    out: list[Effect] = []
    for n in deal.stacks:
        for _ in range(n):
            out += table.feed(ShoeCard(card=next(cards)))
        out += table.feed(ShoeStackDealt(cards=n))
    table.advance(rng.uniform(6, 10))
    out += table.feed(ShoeDealCompleted(cards=sum(deal.stacks)))
    return out


def play_session(
    path: Path, *, rounds: int, start: datetime, seed: int = 7
) -> tuple[JournaledTable, SessionFacts]:
    rng = random.Random(seed)
    table = JournaledTable(path, tcp_rules(), start)
    facts = SessionFacts(started=start)
    table.feed(PowerUp(rules=table.rules))
    table.feed(DeviceIdentified(device="shoe", model="S1", serial_number="SHOE-1", firmware="1"))
    for n in range(1, rounds + 1):
        table.wait_for_betting()
        if n == rounds // 2:
            # A restart with a new rate of progression (a parameter change): the round that
            # was taking bets is locked out with none; its players are dealt and settled.
            table.advance(120)
            table.feed(PowerUp(rules=tcp_rules("15.25")))
            deal_round(table, rng, players=(1, 3))
            table.advance(30)
            table.feed(Settle(by="D117 (alice)"))
            facts.rounds_settled += 1
            continue
        seats = sorted(rng.sample(range(1, 7), rng.randint(1, 4)))
        for seat in seats:
            table.advance(rng.uniform(1, 6))
            table.feed(ChipSensed(seat=seat, present=True, since_ns=table.ns()))
        if n % 97 == 40:  # a lost edge while betting: the round locks, play waits for a person
            table.feed(GpioFault(reason="edge-lost", at_ns=table.ns()))
            table.advance(180)
            table.feed(ClearGpioFault(by="T042 (tom)"))
        else:
            table.advance(rng.uniform(10, 25))
            table.feed(LockoutPressed(at_ns=table.ns()))
            table.advance(0.3)
            table.feed(LockoutReleased(at_ns=table.ns()))
        # The dealer collects the wagers before the cards are dealt (649a.8(b)).
        table.advance(2)
        for seat in seats:
            table.feed(ChipSensed(seat=seat, present=False, since_ns=table.ns()))
        if n % 61 == 30:  # the dealer exposes a card: void (649a.13(d))
            table.advance(5)
            table.feed(VoidRound(reason="dealer-card-exposed", by="D117 (alice)"))
            facts.rounds_voided += 1
            continue
        if n % 53 == 20:  # the shoe jams mid-deal: the table voids the round (649a.13(f))
            table.feed(DealRequested(by="D117 (alice)"))
            table.advance(3)
            table.feed(ShoeFault(code="jam"))
            facts.rounds_voided += 1
            table.advance(60)  # the dealer empties the shoe, then says so (649a.13(f))
            table.feed(ShoeCleared(by="D117 (alice)"))
            continue
        rigged = {seats[-1]: "AsKsQs"} if n % 45 == 0 else None  # a mini-royal in spades
        deal_round(table, rng, rigged)
        table.advance(rng.uniform(20, 50))
        effects = table.feed(Settle(by="D117 (alice)"))
        facts.rounds_settled += 1
        for hit in (e for e in effects if isinstance(e, rec.JackpotHit)):
            facts.hits += 1
            table.advance(90)
            table.feed(ValidateHit(hit_id=hit.hit_id, by="F042 (fran)"))
            if not hit.paid_from_table_inventory:
                table.advance(120)
                table.feed(ConfirmDocumentation(hit_id=hit.hit_id, by="F042 (fran)"))
        if n % 71 == 35:  # another shoe is connected: play waits for a technician
            table.feed(
                DeviceIdentified(device="shoe", model="S1", serial_number=f"SHOE-{n}", firmware="1")
            )
            table.advance(150)
            table.feed(DeviceAccepted(device="shoe", serial_number=f"SHOE-{n}", by="T042 (tom)"))
        if n % 83 == 50:  # the shuffler jams (649a.13(e)): the dealer asks for a reshuffle
            table.feed(ShufflerFault(code="jam"))
            table.advance(200)
            table.feed(ReshuffleRequested(by="D117 (alice)"))
        if n % 89 == 60:  # the next count is 51 (649a.5(b)): the deck leaves the table
            table._due = [(w, e) for w, e in table._due if not isinstance(e, ShuffleCompleted)]
            table.advance(30)
            table.feed(ShuffleCompleted(card_count=51))
            table.advance(300)
            table.feed(NewDeckRegistered(by="D117 (alice)"))
        table.advance(rng.uniform(2, 8))
    facts.ended = table.at
    return table, facts

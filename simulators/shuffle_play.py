"""Rounds of a shoe table played through the shuffle-integrity monitor, without devices.

The same path as the simulated table's (card_flow.py): the shuffler mixes the deck the dealer
collected, the shoe deals the game's plan from it and reads its stacks, the cards go back by
the game's pickup. Two decks alternate (649a.3(b)(3)); the players in each round are drawn
at random. Used by the bench, the calibration and the tests.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from tablectl.simulators.card_flow import CardFlow
from tablectl.simulators.shuffler import Mixing

from tablectl.core.games.base import DealPlan, Procedure, TableGame
from tablectl.core.shuffle_integrity.monitor import DeckUse, ShuffleMonitor, UseReport, card_index
from tablectl.core.shuffle_integrity.pickup import collected_order, recipients
from tablectl.rules.cards import Card


def shoe_plan(plan: DealPlan) -> tuple[DealPlan, tuple[int, ...]]:
    """The steps the shoe deals and reads, and where its cards are in the whole plan's order."""
    at, read = 0, list[int]()
    for step in plan.steps:
        if step.by_shoe:
            read += range(at, at + step.cards)
        at += step.cards
    shoe = DealPlan(plan.procedure, plan.rule, tuple(s for s in plan.steps if s.by_shoe))
    return shoe, tuple(read)


def deck_use(deck: str, round_id: int, plan: DealPlan, cards: list[Card]) -> DeckUse:
    """What the table knows of one deal: the shoe's reads and the game's pickup of them."""
    shoe, _ = shoe_plan(plan)
    return DeckUse(
        deck,
        round_id,
        tuple(card_index(c) for c in cards),
        collected_order(shoe),
        recipients(shoe),
    )


def seat_positions(plan: DealPlan) -> dict[int, tuple[int, ...]]:
    """Each recipient's positions in the deck as the whole plan deals it (0 = on top)."""
    out: dict[int, list[int]] = {}
    for at, who in enumerate(recipients(plan)):
        if who >= 0:
            out.setdefault(who, []).append(at)
    return {who: tuple(at) for who, at in out.items()}


@dataclass
class Played:
    deck: str
    use: int  # this deck's use, from 1 (the first after the mixing took over)
    report: UseReport


def play(
    game: TableGame,
    mixing: Mixing,
    rng: random.Random,
    *,
    seats: int = 6,
    decks: int = 2,
    monitor: ShuffleMonitor | None = None,
    warm_up: int = 0,
) -> Iterator[Played]:
    """Rounds for ever: `warm_up` rounds with a fair shuffler first (not yielded), then
    `mixing`. Each yields the monitor's report on the deal."""
    flow = CardFlow(decks)
    monitor = monitor or ShuffleMonitor()
    fair = Mixing()
    uses: dict[str, int] = {}
    round_id = 0
    plans: dict[int, DealPlan] = {}
    while True:
        round_id += 1
        players = sorted(rng.sample(range(1, seats + 1), rng.randint(1, seats)))
        plan = game.deal_plan(players, Procedure.AUTOMATED_SHOE if _has_shoe(game) else None)
        mixer = fair if round_id <= warm_up else mixing
        # The shuffler takes the deck that came back (collected by its own round's plan).
        deck_no = (round_id - 1) % decks
        deck = flow.next_to_shuffle()
        mixer.seat_positions = seat_positions(plan)  # only a steering cheat looks
        order = mixer.mix(deck, rng)
        _, read = shoe_plan(plan)
        cards = [order[i] for i in read]
        name = f"deck-{deck_no + 1}"
        report = monitor.observe(deck_use(name, round_id, plan, cards))
        plans[deck_no] = plan
        flow.to_shuffle.append(_collected(plan, order))
        if round_id > warm_up:
            uses[name] = uses.get(name, 0) + 1
            yield Played(name, uses[name], report)


def _collected(plan: DealPlan, order: list[Card]) -> list[Card]:
    dealt = order[: plan.cards]
    return [dealt[i] for i in collected_order(plan)] + order[plan.cards :]


def _has_shoe(game: TableGame) -> bool:
    return game.procedure in (Procedure.AUTOMATED_SHOE, Procedure.AUTOMATED_SHOE_COMMUNITY_FIRST)

"""A simulated dealer's deck: cards dealt through a game's deal plan, hits arranged on purpose.

The deck is dealt as the game's deal plan says (who receives which card, in which order), so
the hands are shaped as the game's text requires without the simulator knowing the game.
Wanted cards (a royal flush for seat 2, say) are stacked where the plan will deal them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from tablectl.core.games.base import DealPlan, RoundCards, To, form_hands
from tablectl.rules.cards import Card, full_deck, parse_cards

# Where wanted cards go: a seat number, or "community".
Wanted = Mapping[int | str, str]


def stacked_deal(plan: DealPlan, wanted: Wanted, rng: random.Random) -> list[Card]:
    """The cards in dealing order, with each wanted card where the plan gives it."""
    slots: list[tuple[int | str, int]] = []  # (recipient, position in its cards), per card
    counts: dict[int | str, int] = {}
    for step in plan.steps:
        key: int | str = (
            step.seat if step.to is To.SEAT and step.seat is not None else step.to.value
        )
        for i in range(step.cards):
            kept = i < step.cards - step.discard
            who: int | str = key if kept else "burn"
            slots.append((who, counts.get(who, 0)))
            counts[who] = counts.get(who, 0) + 1
    placed = {
        (who, i): card for who, text in wanted.items() for i, card in enumerate(parse_cards(text))
    }
    rest = [c for c in full_deck() if c not in placed.values()]
    rng.shuffle(rest)
    return [placed.get(slot) or rest.pop() for slot in slots]


def deal_round(plan: DealPlan, wanted: Wanted, rng: random.Random) -> RoundCards:
    return form_hands(plan, stacked_deal(plan, wanted, rng))


def as_request(cards: RoundCards) -> dict[str, object]:
    """The dealer's settle request for the cards shown."""
    return {
        "cmd": "settle",
        "hands": {str(seat): "".join(map(str, hand)) for seat, hand in cards.hands.items()},
        "community": "".join(map(str, cards.community)),
        "dealer": "".join(map(str, cards.dealer)),
    }


def by_shoe(plan: DealPlan, dealt: list[Card]) -> tuple[list[Card], RoundCards]:
    """Of a round's cards in dealing order: those the shoe deals (in its order), and the
    community cards the dealer deals from the hand (653a.10(c))."""
    shoe: list[Card] = []
    by_hand: list[Card] = []
    cards = iter(dealt)
    for step in plan.steps:
        taken = [next(cards) for _ in range(step.cards)]
        (shoe if step.by_shoe else by_hand).extend(taken)
    hand_plan = DealPlan(plan.procedure, plan.rule, tuple(s for s in plan.steps if not s.by_shoe))
    return shoe, form_hands(hand_plan, by_hand)

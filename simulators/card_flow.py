"""The cards' path at a shoe table: shuffler -> shoe -> layout -> discards -> shuffler.

The simulated shuffler shuffles the deck that came back to it (in the order the game's
pickup left it, core/shuffle_integrity/pickup.py), the simulated shoe deals exactly the order
the shuffler produced, following the round's deal plan, and the cards go back the way the
dealer collects them: a shuffler that does not mix shows in what the shoe reads, as on a real
table. One flow per table, shared by its shuffler and shoe simulators (and the bench).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from tablectl.core.games.base import DealPlan
from tablectl.core.shuffle_integrity.pickup import collected_order
from tablectl.rules.cards import Card, full_deck

# The round's whole plan (the shoe's stacks and the cards dealt by hand), from the stacks
# the shoe was asked for; None: the cards go back in the order dealt.
PlanFor = Callable[[tuple[int, ...]], DealPlan | None]


def collect(plan: DealPlan | None, deck: list[Card]) -> list[Card]:
    """The deck as the dealer puts it back into the shuffler: the round's cards picked up
    as the game's procedure says, on top of the stub."""
    if plan is None:
        return list(deck)
    dealt = deck[: plan.cards]
    return [dealt[i] for i in collected_order(plan)] + deck[plan.cards :]


class CardFlow:
    def __init__(self, decks: int = 2, plan_for: PlanFor | None = None) -> None:
        # Decks waiting in (or for) the shuffler, in the order they came back; new decks come
        # in the factory order.
        self.to_shuffle: deque[list[Card]] = deque(list(full_deck()) for _ in range(decks))
        self.shuffled: deque[list[Card]] = deque()  # shuffled, waiting for the shoe
        self.in_shoe: list[Card] | None = None  # the deck the shoe deals from
        self.stacks: tuple[int, ...] = ()  # what the shoe was last asked to deal
        self.plan_for = plan_for

    def next_to_shuffle(self) -> list[Card]:
        """The deck the shuffler takes now: the shoe's last deck is collected first. Asked
        again while every deck is shuffled and waiting (the table did not take a shuffle: a
        deck introduced meanwhile is shuffled before a round is dealt from it), the deck due
        next goes back in: the decks at the table stay the same decks."""
        self.collect_shoe()
        if self.to_shuffle:
            return self.to_shuffle.popleft()
        if self.shuffled:
            return self.shuffled.popleft()
        return list(full_deck())

    def back_in_shuffler(self, deck: list[Card]) -> None:
        """A shuffle that did not finish (a jam, a miscount): the deck stays in it."""
        self.to_shuffle.appendleft(deck)

    def done(self, deck: list[Card]) -> None:
        self.shuffled.append(deck)

    def deck_for_deal(self, stacks: tuple[int, ...]) -> list[Card] | None:
        """The deck the shoe deals this round's stacks from: the next one shuffled (the
        last one is collected first). None: nothing shuffled is waiting."""
        if not self.shuffled:
            return None
        self.collect_shoe()
        self.in_shoe = self.shuffled.popleft()
        self.stacks = stacks
        return list(self.in_shoe)

    def collect_shoe(self) -> None:
        """The round is over: its cards and the stub go back to the shuffler."""
        if self.in_shoe is None:
            return
        plan = self.plan_for(self.stacks) if self.plan_for is not None else None
        self.to_shuffle.append(collect(plan, self.in_shoe))
        self.in_shoe = None

"""The order in which a game's dealt cards go back into the shuffler. Pure.

The text says how a round is settled (649a.11(c), 653a.11(f), 643a.11: from the player
farthest to the dealer's right, counter-clockwise) and that cards go to the discard rack;
the model here is the procedure a dealer follows at a shoe table, the one the simulated table
plays (simulators/shuffler.py) and the first reference order the monitor tests against:

- burned cards and a discarded community card go to the discard rack as they are dealt
  (the bottom of the discards);
- the players' hands are picked up as the round is settled, from the dealer's right
  (the highest seat first), each hand as it lies (its cards in the order dealt), each onto
  the discards; then the dealer's hand; then the community cards;
- the discards go into the shuffler on top of the stub (the cards the shoe did not deal).

A dealer who does otherwise changes only how much the order tests can see, never their false
alarms: every null holds whatever the order that went in (docs/shuffle-integrity.md).
"""

from __future__ import annotations

from tablectl.core.games.base import DealPlan, To


def collected_order(plan: DealPlan) -> tuple[int, ...]:
    """Positions in the plan's dealing order (0 = the first card dealt), listed as the cards
    lie in the collected discards, top first."""
    burned: list[int] = []
    hands: dict[int, list[int]] = {}
    dealer: list[int] = []
    community: list[int] = []
    at = 0
    for step in plan.steps:
        cards = list(range(at, at + step.cards))
        at += step.cards
        kept, dropped = cards[: step.cards - step.discard], cards[step.cards - step.discard :]
        burned += dropped
        if step.to is To.SEAT and step.seat is not None:
            hands.setdefault(step.seat, []).extend(kept)
        elif step.to is To.DEALER:
            dealer += kept
        elif step.to is To.COMMUNITY:
            community += kept
        else:
            burned += kept
    # Each pile placed goes on top: the last placed is listed first.
    placed = [burned, *(hands[seat] for seat in sorted(hands, reverse=True)), dealer, community]
    return tuple(card for pile in reversed(placed) for card in pile)


DEALER = 0  # the recipient of the dealer's cards (seats count from 1)
AWAY = -1  # a burned or community card: no one's hand


def recipients(plan: DealPlan) -> tuple[int, ...]:
    """Who receives each card of the plan, in dealing order: the seat, DEALER, or AWAY."""
    out: list[int] = []
    for step in plan.steps:
        kept = step.cards - step.discard
        if step.to is To.SEAT and step.seat is not None:
            who = step.seat
        elif step.to is To.DEALER:
            who = DEALER
        else:
            who = AWAY
        out += [who] * kept + [AWAY] * step.discard
    return tuple(out)

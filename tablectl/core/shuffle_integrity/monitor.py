"""The shuffle-integrity monitor: each deck use's statistics against the deck's history.

Fed one `DeckUse` per deal a shoe read (the cards in dealing order, the deck they came
from); answers each test's figure and p-value and whether it alarms. Pure and
deterministic: no clock, no randomness, no I/O; the service keeps it off the hot path
(service/shuffle_monitor.py). Card identities stay inside: a `Finding` says how many, never
which (no card order may leave the table PC).

The tests (docs/shuffle-integrity.md says why these, and their power):
- order: the previous use's cards, listed as they went back into the shuffler (the game's
  pickup, the order dealt, its reverse) or the factory order, still in that order here:
  ascents of their new positions, i.e. rising sequences (Bayer & Diaconis): Eulerian, exact;
- order-window: the same summed over the last uses of both decks (Chernoff bound, exact
  convolution near a level);
- repeat: neighbouring cards, and cards at the same position, shared with one of the last
  deals of either deck (binomial-moment bounds);
- overlap: how many of this use's cards the deck's previous use dealt (hypergeometric,
  two-sided), and its sum over the last uses of both decks (as order-window);
- position: one card at one deal position, or the card from one place of the deck's last
  pickup at one deal position, over the last rounds (binomial, union bound);
- runs: neighbours of one suit, or one rank, within the deal (exact, inclusion-exclusion);
- next-card: "guess the next card" (Diaconis, Fulman & Holmes): each card dealt is bet to be
  followed by one of its neighbours in an order seen before; the bets' likelihood ratio is
  an e-value (mean 1 under a fair shuffle, exactly), over this use and the last uses (Markov);
- seat: one card, or one kind of hand (a pair, all of one suit), reaching one seat (or the
  dealer) over the last rounds, whatever seats play (binomial, union bound).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tablectl.core.shuffle_integrity import nulls
from tablectl.core.shuffle_integrity.thresholds import ALPHA
from tablectl.rules.cards import SUITS, Card

DECK = nulls.DECK
WINDOW_USES = 128  # the table's last deck uses (both decks) the windowed tests sum over
# The windowed tests look back over the last 4, 12, 32 and 128 uses (a scan, Bonferroni x4):
# a shuffler that failed lately is not diluted by the fair uses before it, and a slight one
# (three riffles read two cards a hand) adds up over the longest.
SPANS = (4, 12, 32, 128)
SCAN_Z = 3.0  # sums less far above their mean than this cannot alarm: no bound worked out
POSITION_ROUNDS = 100  # rounds the position test counts over
# A card held out of play (kept at the bottom, never dealt) shows only as a card dealt too
# seldom: at Ultimate Texas Hold 'Em (4 to 14 cards a deal) that needs more than 100 rounds.
WITHHELD_SPANS = (100, 400)
RECENT_DEALS = 6  # earlier deals (either deck) the repeat test compares with
FACTORY = tuple(range(DECK))  # the order a new deck comes in (rules.cards.full_deck)
FACTORY_NEIGHBOURS = tuple(
    frozenset(c for c in (card - 1, card + 1) if 0 <= c < len(FACTORY)) for card in FACTORY
)
NEIGHBOUR_DEALS = 12  # earlier deals (either deck) whose neighbours the next-card test bets on
# The next-card test's alternatives: the next card is a neighbour this many times as often
# as chance (capped at NEXT_CAP); their mixture (the mean) is itself an e-value.
NEXT_BOOSTS = (2.0, 4.0, 8.0)
NEXT_CAP = 0.9
MAX_RECIPIENTS = 8  # the dealer and up to 7 seats: the seat test's union bound is 52 x 8


def card_index(card: Card) -> int:
    """0..51 in the factory order (full_deck: clubs, diamonds, hearts, spades; 2 to ace)."""
    return SUITS.index(card.suit) * 13 + card.rank - 2


@dataclass(frozen=True, slots=True)
class DeckUse:
    """One deal read by the shoe from one deck: what the monitor is fed."""

    deck: str  # the deck's id (core/decks.py), or the slot the table alternates
    round_id: int
    cards: tuple[int, ...]  # card_index of each card, in dealing order
    # positions into `cards` as the game's pickup puts them back, top first (pickup.py)
    collected: tuple[int, ...]
    # who received each card (pickup.recipients: a seat, 0 the dealer, -1 no one); empty:
    # not known (a history kept before the seat test), the seat test skips the use
    seats: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Finding:
    """One test on one deck use: its figure (counts only, never a card), p-value, level."""

    test: str
    figure: str
    p_value: float
    alpha: float

    @property
    def alarm(self) -> bool:
        return self.p_value <= self.alpha


@dataclass(frozen=True, slots=True)
class UseReport:
    deck: str
    round_id: int
    cards: int  # how many were dealt (a count, not the cards)
    findings: tuple[Finding, ...]
    windows_restarted: bool = False  # after this use (restart_windows): what to replay

    @property
    def alarms(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.alarm)

    @property
    def worst(self) -> Finding | None:
        """The alarming finding furthest below its level, if any."""
        alarms = self.alarms
        return min(alarms, key=lambda f: f.p_value / f.alpha) if alarms else None


@dataclass(slots=True)
class _Window:
    """The table's last deck uses: per (reference order, kind), (cards compared, value,
    null mean, null variance); the overlaps with each deck's use before."""

    ascents: deque[dict[tuple[str, str], tuple[int, int, float, float]]] = field(
        default_factory=lambda: deque(maxlen=WINDOW_USES)
    )
    overlaps: deque[tuple[int, int, int]] = field(
        default_factory=lambda: deque(maxlen=WINDOW_USES)
    )  # (drawn, marked, seen)
    # Running sums since the start, one more than the window holds (the first is the base a
    # window's sum is taken from): per key (uses, value, steps, null mean, null variance).
    # A span's sum is a difference: the scan costs the same for 4 uses as for 128.
    ascent_sums: deque[dict[tuple[str, str], tuple[int, int, int, float, float]]] = field(
        default_factory=lambda: deque([{}], maxlen=WINDOW_USES + 1)
    )

    # (uses, seen, null mean, null variance) since the start, as ascent_sums
    overlap_sums: deque[tuple[int, int, float, float]] = field(
        default_factory=lambda: deque([(0, 0, 0.0, 0.0)], maxlen=WINDOW_USES + 1)
    )

    def add_overlap(self, drawn: int, marked: int, seen: int) -> None:
        self.overlaps.append((drawn, marked, seen))
        m, v = _moments(nulls.hypergeometric_pmf(drawn, marked))
        uses, total, mean, var = self.overlap_sums[-1]
        self.overlap_sums.append((uses + 1, total + seen, mean + m, var + v))

    def add_ascents(self, entry: dict[tuple[str, str], tuple[int, int, float, float]]) -> None:
        self.ascents.append(entry)
        sums = dict(self.ascent_sums[-1])
        for key, (n, value, m, v) in entry.items():
            uses, total, steps, mean, var = sums.get(key, (0, 0, 0, 0.0, 0.0))
            sums[key] = (uses + 1, total + value, steps + n - 1, mean + m, var + v)
        self.ascent_sums.append(sums)


def _ascents(seq: list[int]) -> int:
    return sum(1 for a, b in itertools.pairwise(seq) if b > a)


def _alternating_runs(seq: list[int]) -> int:
    runs, direction = 0, 0
    for a, b in itertools.pairwise(seq):
        now = 1 if b > a else -1
        if now != direction:
            runs, direction = runs + 1, now
    return runs


def _measures(positions: dict[int, int], reference: tuple[int, ...]) -> dict[str, tuple[int, int]]:
    """Of the reference's cards dealt now (n of them), each kind's value (see KINDS)."""
    rank = {card: r for r, card in enumerate(reference) if card in positions}
    by_reference = [positions[c] for c in reference if c in positions]
    by_deal = sorted(rank, key=positions.__getitem__)
    ranks = [rank[c] for c in by_deal]
    n = len(by_reference)
    return {
        "rising": (n, _ascents(by_reference)),
        "ascending": (n, _ascents(ranks)),
        "turns": (n, _alternating_runs(ranks)),
    }


# kind -> (the null's pmf for n cards, which tail is suspect, what the figure says). Each is
# a function of the dealt cards' relative order alone: uniform under a fair shuffle.
KINDS: dict[str, tuple[Callable[[int], tuple[float, ...]], str, str]] = {
    # rising sequences (Bayer & Diaconis): each next card of the reference dealt later
    "rising": (nulls.ascents_pmf, "upper", "{v} of {m} neighbours of the {ref} still in order"),
    # read in dealing order, the reference's order keeps rising (piles, interleaves)
    "ascending": (
        nulls.ascents_pmf,
        "upper",
        "{v} of {m} cards dealt after one earlier in the {ref}",
    ),
    # few up-and-down runs: long monotone stretches (a shelf shuffler's piles)
    "turns": (
        nulls.alternating_runs_pmf,
        "lower",
        "{v} up-and-down runs in {m} steps of the {ref}",
    ),
}


def _tail(kind: str, n: int, value: int) -> float:
    if kind == "turns":
        return nulls.alternating_runs_lower_tail(n, value)
    return nulls.ascents_upper_tail(n, value)


def _kept_neighbours(earlier: tuple[int, ...], positions: dict[int, int]) -> int:
    kept = 0
    for a, b in itertools.pairwise(earlier):
        pa, pb = positions.get(a), positions.get(b)
        if pa is not None and pb is not None and abs(pa - pb) == 1:
            kept += 1
    return kept


def _cantelli(z: float) -> float:
    """P(X - mean >= z sd) <= 1 / (1 + z^2) for any distribution (Cantelli's inequality)."""
    return 1.0 if z <= 0 else 1.0 / (1.0 + z * z)


@functools.cache
def _moments(pmf: tuple[float, ...]) -> tuple[float, float]:
    mean = sum(k * p for k, p in enumerate(pmf))
    return mean, sum((k - mean) ** 2 * p for k, p in enumerate(pmf))


class ShuffleMonitor:
    """The history the tests need, and the tests. One per table."""

    def __init__(self, alpha: dict[str, float] | None = None) -> None:
        self.alpha = dict(ALPHA if alpha is None else alpha)
        # The references a use is compared with: each alone is a fair test of the new deal
        # whatever came before (a fair deal is uniform given the past), so an alarm leaves
        # them as they are.
        self.last: dict[str, DeckUse] = {}
        self.recent: deque[DeckUse] = deque(maxlen=RECENT_DEALS)
        self.neighbour_deals: deque[tuple[int, ...]] = deque()
        # card -> its neighbours in the last deals, with how many deals saw them together
        self.neighbour_links: dict[int, dict[int, int]] = {}
        self.restart_windows()

    def restart_windows(self) -> None:
        """Empty what the tests sum or count over many uses. After an alarm the evidence
        is spent: one extreme use would otherwise keep its windows past their level for up
        to WINDOW_USES rounds, each a new alarm once the last is answered. From a restart
        only uses after it count, independent of what raised the alarm, so the table raises
        at most ALPHA of its rounds as alarms, and a shuffler that is bad raises a new one
        on new evidence (docs/shuffle-integrity.md, "Alarms, not rounds")."""
        self.window = _Window()
        self.position_rounds: deque[tuple[int, ...]] = deque()
        self.position_counts: dict[tuple[int, int], int] = {}
        self.dealt_beyond: list[int] = [0] * DECK  # rounds in the window dealing position p
        # per round in the window: (place in the deck's last pickup, position now) of each
        # card dealt in both, and (cards in that pickup, cards dealt now), None: no last use
        self.moved_rounds: deque[tuple[tuple[tuple[int, int], ...], tuple[int, int] | None]] = (
            deque()
        )
        self.moved_counts: dict[tuple[int, int], int] = {}
        # per span of WITHHELD_SPANS: the rounds in it, each card's rounds dealt, and how
        # many of its rounds dealt n cards (a card is dealt with probability n/52)
        self.held_rounds: deque[tuple[int, ...]] = deque()
        self.held_dealt = {span: [0] * DECK for span in WITHHELD_SPANS}
        self.held_sizes: dict[int, dict[int, int]] = {span: {} for span in WITHHELD_SPANS}
        self.moved_shapes: dict[tuple[int, int], int] = {}
        self.next_logs: deque[float] = deque(maxlen=max(SPANS))  # each use's log e-value
        # per round in the window: the (card, recipient) cells, each recipient's hand size
        self.seat_rounds: deque[
            tuple[tuple[tuple[int, int], ...], dict[int, int], tuple[tuple[int, str], ...]]
        ] = deque()
        self.seat_counts: dict[tuple[int, int], int] = {}
        self.seat_hands: dict[tuple[int, int], int] = {}  # (recipient, hand size) -> rounds
        self.seat_kinds: dict[tuple[int, str], int] = {}  # (recipient, kind of hand) -> rounds

    def forget(self, deck: str) -> None:
        """A deck left the table: its history goes (a new deck starts afresh)."""
        self.last.pop(deck, None)

    def observe(self, use: DeckUse, *, restart: bool | None = None) -> UseReport:
        """The tests on one use, then the use joins the history. The windows restart after
        a use that alarmed; `restart` overrides that (a replay restarts where the table
        did, whatever the shortened history it replays makes of the use)."""
        positions = {card: i for i, card in enumerate(use.cards)}
        findings: list[Finding] = []
        previous = self.last.get(use.deck)
        window = self.window
        findings += self._order(use, positions, previous, window)
        findings.append(self._repeat(use, positions))
        findings += self._overlap(use, positions, previous, window)
        findings.append(self._position(use, previous))
        findings.append(self._runs(use))
        findings.append(self._next_card(use, previous))
        findings.append(self._seat(use))
        self.last[use.deck] = use
        self.recent.append(use)
        self._remember_neighbours(use.cards)
        alarmed = any(f.alarm for f in findings)
        restarted = alarmed if restart is None else restart
        if restarted:
            self.restart_windows()
        return UseReport(use.deck, use.round_id, len(use.cards), tuple(findings), restarted)

    def _remember_neighbours(self, cards: tuple[int, ...]) -> None:
        links = self.neighbour_links
        if len(self.neighbour_deals) == NEIGHBOUR_DEALS:
            for a, b in itertools.pairwise(self.neighbour_deals.popleft()):
                for x, y in ((a, b), (b, a)):
                    if links[x][y] == 1:
                        del links[x][y]
                    else:
                        links[x][y] -= 1
        self.neighbour_deals.append(cards)
        for a, b in itertools.pairwise(cards):
            for x, y in ((a, b), (b, a)):
                mine = links.setdefault(x, {})
                mine[y] = mine.get(y, 0) + 1

    # --- the tests ----------------------------------------------------------------------

    def _finding(self, test: str, figure: str, p: float) -> Finding:
        return Finding(test, figure, min(1.0, p), self.alpha[test])

    def _order(
        self,
        use: DeckUse,
        positions: dict[int, int],
        previous: DeckUse | None,
        window: _Window,
    ) -> list[Finding]:
        references: dict[str, tuple[int, ...]] = {"factory order": FACTORY}
        if previous is not None:
            dealt = previous.cards
            references["pickup"] = tuple(dealt[i] for i in previous.collected)
            references["order dealt"] = dealt
            references["reverse of the order dealt"] = dealt[::-1]
        now = {
            (ref, kind): value
            for ref, order in references.items()
            for kind, value in _measures(positions, order).items()
        }
        tests = len(references) * len(KINDS)
        best: tuple[float, str] | None = None
        for (ref, kind), (n, value) in now.items():
            if n >= 3:
                p = _tail(kind, n, value) * tests
                if best is None or p < best[0]:
                    best = (p, KINDS[kind][2].format(v=value, m=n - 1, ref=ref))
        # Kept with each value: its null mean and variance (the window's scan reads them).
        window.add_ascents(
            {
                (ref, kind): (n, value, *_moments(KINDS[kind][0](n)))
                for (ref, kind), (n, value) in now.items()
                if n >= 3
            }
        )
        out = [
            self._finding("order", best[1], best[0])
            if best is not None
            else self._finding("order", "fewer than 3 cards to compare", 1.0)
        ]
        out.append(self._order_window(window))
        return out

    def _order_window(self, window: _Window) -> Finding:
        entries, cumulative = window.ascents, window.ascent_sums
        now = cumulative[-1]
        ends = sorted({min(span, len(entries)) for span in SPANS})
        sums: list[tuple[float, int, int, int, int, tuple[str, str]]] = []
        for key, (uses, total, steps, mean, var) in now.items():
            side = KINDS[key[1]][1]
            for end in ends:
                base = cumulative[-1 - end].get(key, (0, 0, 0, 0.0, 0.0))
                if uses - base[0] == 0:
                    continue
                z = (total - base[1] - (mean - base[3])) / (var - base[4]) ** 0.5
                z = z if side == "upper" else -z
                sums.append((z, end, total - base[1], steps - base[2], uses - base[0], key))
        if not sums:
            return self._finding("order-window", "no use to compare yet", 1.0)
        tests = len(now) * len(SPANS)
        sums.sort(key=lambda x: x[0], reverse=True)
        best: tuple[float, str] | None = None
        for z, end, total, steps, compared, key in sums:
            if best is not None and z < SCAN_Z:
                break
            ref, kind = key
            pmf_of, side, template = KINDS[kind]
            if z < SCAN_Z:
                p = _cantelli(z)  # far from any level: the cheap bound says as much
            else:
                counts: dict[int, int] = {}  # cards compared -> uses
                for entry in itertools.islice(reversed(entries), end):
                    got = entry.get(key)
                    if got is not None:
                        counts[got[0]] = counts.get(got[0], 0) + 1
                pmfs = [(pmf_of(n), c) for n, c in counts.items()]
                bound = nulls.sum_upper if side == "upper" else nulls.sum_lower
                p = bound(pmfs, total)
            figure = template.format(v=total, m=steps, ref=ref)
            figure += f" over {compared} uses"
            if best is None or p * tests < best[0]:
                best = (p * tests, figure)
        assert best is not None
        return self._finding("order-window", best[1], best[0])

    def _repeat(self, use: DeckUse, positions: dict[int, int]) -> Finding:
        if not self.recent:
            return self._finding("repeat", "no earlier deal to compare", 1.0)
        tests = 2 * len(self.recent)
        best: tuple[float, str] | None = None
        for back, earlier in enumerate(reversed(self.recent), start=1):
            kept = _kept_neighbours(earlier.cards, positions)
            pairs = len(earlier.cards) - 1
            p_kept = nulls.kept_neighbours_tail(pairs, len(use.cards), kept)
            same = sum(1 for a, b in zip(earlier.cards, use.cards, strict=False) if a == b)
            length = min(len(earlier.cards), len(use.cards))
            p_same = nulls.position_matches_tail(length, same)
            ago = f"the deal {back} before"
            for p, figure in (
                (p_kept, f"{kept} of {pairs} neighbouring pairs of {ago} neighbours again"),
                (p_same, f"{same} of {length} positions hold the card of {ago}"),
            ):
                if best is None or p < best[0]:
                    best = (p, figure)
        assert best is not None
        return self._finding("repeat", best[1], best[0] * tests)

    def _overlap(
        self,
        use: DeckUse,
        positions: dict[int, int],
        previous: DeckUse | None,
        window: _Window,
    ) -> list[Finding]:
        if previous is None:
            return [
                self._finding("overlap", "the deck's first use", 1.0),
                self._overlap_window(window),
            ]
        drawn, marked = len(use.cards), len(previous.cards)
        seen = sum(1 for c in previous.cards if c in positions)
        window.add_overlap(drawn, marked, seen)
        p = nulls.hypergeometric_two_sided(drawn, marked, seen)
        mean = drawn * marked / DECK
        figure = f"{seen} of {drawn} cards dealt last use (fair: {mean:.1f} on average)"
        return [self._finding("overlap", figure, p), self._overlap_window(window)]

    def _overlap_window(self, window: _Window) -> Finding:
        entries = window.overlaps
        if len(entries) < 2:
            return self._finding("overlap-window", "fewer than 2 uses to sum", 1.0)
        ends = sorted({min(span, len(entries)) for span in SPANS})
        cumulative = window.overlap_sums
        _, total, total_mean, total_var = cumulative[-1]
        sums: list[tuple[float, int, int, float]] = []
        for end in ends:
            _, base, base_mean, base_var = cumulative[-1 - end]
            seen, mean, var = total - base, total_mean - base_mean, total_var - base_var
            z = abs(seen - mean) / var**0.5 if var > 0 else 0.0
            sums.append((z, end, seen, mean))
        sums.sort(key=lambda x: x[0], reverse=True)
        best: tuple[float, str] | None = None
        for z, end, span_seen, span_mean in sums:
            if best is not None and z < SCAN_Z:
                break
            if z < SCAN_Z:
                p = _cantelli(z)
            else:
                span_counts: dict[tuple[int, int], int] = {}
                for drawn, marked, _ in itertools.islice(reversed(entries), end):
                    span_counts[drawn, marked] = span_counts.get((drawn, marked), 0) + 1
                pmfs = [(nulls.hypergeometric_pmf(d, m), c) for (d, m), c in span_counts.items()]
                bound = nulls.sum_upper if span_seen >= span_mean else nulls.sum_lower
                p = bound(pmfs, span_seen)
            p *= 2 * len(SPANS)
            figure = (
                f"{span_seen} cards dealt again over {end} uses (fair: {span_mean:.1f} on average)"
            )
            if best is None or p < best[0]:
                best = (p, figure)
        assert best is not None
        return self._finding("overlap-window", best[1], best[0])

    def _position(self, use: DeckUse, previous: DeckUse | None) -> Finding:
        """Two kinds of cell over the last rounds, each hit with probability 1/52 exactly
        in a round (a dealt card is uniform over the 52 places, whatever came before), so
        each count is at most Binomial(rounds, 1/52): one card at one deal position (a
        placed card, a stuck compartment); and the card from one place of the deck's last
        pickup dealt at one position now (a machine that applies the same permutation to
        whatever goes in: a fixed or stuck program, faro shuffles, fixed packets). And one
        card dealt too seldom (held out of play, `_withheld`). The union bound is over all
        of them (POSITION_CELLS)."""
        rounds = self.position_rounds
        counts = self.position_counts
        moved, shapes = self.moved_counts, self.moved_shapes
        if len(rounds) == POSITION_ROUNDS:
            for p, card in enumerate(rounds.popleft()):
                counts[card, p] -= 1
                self.dealt_beyond[p] -= 1
            gone_cells, gone_shape = self.moved_rounds.popleft()
            for cell in gone_cells:
                moved[cell] -= 1
            if gone_shape is not None:
                shapes[gone_shape] -= 1
        rounds.append(use.cards)
        worst = (1.0, "", 0, 0)  # tail, what, count, rounds
        for p, card in enumerate(use.cards):
            self.dealt_beyond[p] += 1
            n = counts[card, p] = counts.get((card, p), 0) + 1
            if n >= 3:
                trials = self.dealt_beyond[p]
                tail = _binomial_tail(trials, n, 1, DECK)
                if tail < worst[0]:
                    worst = (tail, f"one card at deal position {p + 1}", n, trials)
        cells: tuple[tuple[int, int], ...] = ()
        shape = None
        if previous is not None:
            at = {card: i for i, card in enumerate(use.cards)}
            pickup = (previous.cards[i] for i in previous.collected)
            cells = tuple((p, at[card]) for p, card in enumerate(pickup) if card in at)
            shape = (len(previous.collected), len(use.cards))
            shapes[shape] = shapes.get(shape, 0) + 1
        self.moved_rounds.append((cells, shape))
        for cell in cells:
            n = moved[cell] = moved.get(cell, 0) + 1
            if n >= 3:
                p, q = cell
                # the rounds in which the cell could be hit: a pickup place p, a position q
                trials = sum(k for (a, b), k in shapes.items() if a > p and b > q)
                tail = _binomial_tail(trials, n, 1, DECK)
                if tail < worst[0]:
                    what = f"the card from place {p + 1} of the deck's last pickup"
                    what += f" at deal position {q + 1}"
                    worst = (tail, what, n, trials)
        tail, what, n, trials = worst
        held = self._withheld(use.cards)
        if held is not None and held[0] < tail:
            return self._finding("position", held[1], held[0] * POSITION_CELLS)
        if n == 0:
            return self._finding("position", "no card twice at one position", 1.0)
        figure = f"{what} in {n} of the last {trials} rounds"
        return self._finding("position", figure, tail * POSITION_CELLS)

    def _withheld(self, cards: tuple[int, ...]) -> tuple[float, str] | None:
        """The card dealt in the fewest of the last rounds (each span): in a round of n
        cards every card is dealt with probability n/52 exactly, independently of the
        rounds before, so its count is a sum of independent Bernoulli(n/52), whose lower
        tail is bounded (Chernoff, exact near a level). None: no card far enough below."""
        rounds = self.held_rounds
        rounds.append(cards)
        best: tuple[float, str] | None = None
        for span in WITHHELD_SPANS:
            dealt, sizes = self.held_dealt[span], self.held_sizes[span]
            for card in cards:
                dealt[card] += 1
            sizes[len(cards)] = sizes.get(len(cards), 0) + 1
            if len(rounds) > span:
                gone = rounds[-1 - span]
                for card in gone:
                    dealt[card] -= 1
                sizes[len(gone)] -= 1
            low = min(dealt)
            mean = sum(k * n / DECK for n, k in sizes.items())
            var = sum(k * n / DECK * (1 - n / DECK) for n, k in sizes.items())
            if var <= 0 or (mean - low) / var**0.5 < SCAN_Z:
                continue
            pmfs = [((1 - n / DECK, n / DECK), k) for n, k in sizes.items() if k]
            p = nulls.sum_lower(pmfs, low)
            played = sum(sizes.values())
            figure = f"one card dealt in {low} of the last {played} rounds (fair: {mean:.1f})"
            if best is None or p < best[0]:
                best = (p, figure)
        if len(rounds) > max(WITHHELD_SPANS):
            rounds.popleft()
        return best

    def _runs(self, use: DeckUse) -> Finding:
        best: tuple[float, str] | None = None
        for name, divide, size in (("suit", True, 4), ("rank", False, 13)):
            labels = [c // 13 if divide else c % 13 for c in use.cards]
            sizes = [0] * size
            for label in labels:
                sizes[label] += 1
            runs = sum(1 for a, b in itertools.pairwise(labels) if a == b)
            p = nulls.adjacencies_upper_tail(tuple(sorted(sizes)), runs)
            figure = f"{runs} neighbours of one {name} among {len(use.cards)} cards"
            if best is None or p < best[0]:
                best = (p, figure)
        assert best is not None
        return self._finding("runs", best[1], best[0] * 2)

    def _next_card(self, use: DeckUse, previous: DeckUse | None) -> Finding:
        """Guess the next card: after each card dealt, bet that the next is one of its
        neighbours in the factory order, an earlier deal, or the previous use's pickup.
        Under a fair shuffle the next card is uniform over the cards not yet dealt, so the
        bet wins with probability exactly p = (neighbours not yet dealt) / (cards left); a
        bet at odds r / p (win) and (1 - r) / (1 - p) (lose) has mean 1, and so has the
        product over the deal and over any run of uses: an e-value, P(E >= 1/a) <= a
        (Markov). p-value: 1 / E, x4 for the spans (this use, the last 4, 12, 32)."""
        links = self.neighbour_links
        pickup = (
            tuple(previous.cards[i] for i in previous.collected) if previous is not None else ()
        )
        pickup_at = {card: i for i, card in enumerate(pickup)}
        dealt: set[int] = set()
        log_e = [0.0] * len(NEXT_BOOSTS)  # one product per alternative
        hits = bets = 0
        for before, card in itertools.pairwise(use.cards):
            dealt.add(before)
            guess = set(links.get(before, ())) | FACTORY_NEIGHBOURS[before]
            at = pickup_at.get(before)
            if at is not None:
                guess.update(pickup[max(0, at - 1) : at + 2])
            guess -= dealt
            left = DECK - len(dealt)
            if not guess or left <= len(guess):
                continue
            p = len(guess) / left
            won = card in guess
            bets += 1
            hits += won
            for i, boost in enumerate(NEXT_BOOSTS):
                r = min(NEXT_CAP, max(p, boost * p))
                log_e[i] += math.log(r / p) if won else math.log((1 - r) / (1 - p))
        # The mixture of the alternatives, in logs (no overflow).
        top = max(log_e)
        self.next_logs.append(top + math.log(sum(math.exp(x - top) for x in log_e) / len(log_e)))
        best_log, best_span = -math.inf, 1
        logs = list(self.next_logs)
        for span in (1, *SPANS):
            if span <= len(logs):
                total = sum(logs[-span:])
                if total > best_log:
                    best_log, best_span = total, span
        p_value = min(1.0, (1 + len(SPANS)) * math.exp(-min(best_log, 700.0)))
        over = "this use" if best_span == 1 else f"the last {best_span} uses"
        figure = f"{hits} of {bets} cards dealt next to a neighbour seen before ({over})"
        return self._finding("next-card", figure, p_value)

    def _seat(self, use: DeckUse) -> Finding:
        """One card at one seat (or the dealer) over the last rounds: each round, a card
        reaches a hand of h cards with probability h/52 exactly, whichever seats play;
        the count over the rounds the seat played is at most Binomial(rounds, hmax/52).
        And one kind of hand at one seat (nulls.HAND_FEATURES: a pair, all of one suit): a
        hand of h cards is a uniform h-subset, so it has the feature with the chance q(h)
        exactly, independently of the rounds before; the count is at most Binomial(rounds,
        max q). A rig that deals a confederate (or the dealer) a good hand, whatever its
        cards, is seen here and by no single card."""
        rounds, counts, hands = self.seat_rounds, self.seat_counts, self.seat_hands
        if len(rounds) == POSITION_ROUNDS:
            gone, gone_sizes, gone_kinds = rounds.popleft()
            for cell in gone:
                counts[cell] -= 1
            for hand in gone_sizes.items():
                hands[hand] -= 1
            for kind in gone_kinds:
                self.seat_kinds[kind] -= 1
        size: dict[int, int] = {}
        held: dict[int, list[int]] = {}
        for card, who in zip(use.cards, use.seats, strict=False):
            if who >= 0:
                size[who] = size.get(who, 0) + 1
                held.setdefault(who, []).append(card)
        for hand in size.items():
            hands[hand] = hands.get(hand, 0) + 1
        cells = tuple(
            (card, who) for card, who in zip(use.cards, use.seats, strict=False) if who >= 0
        )
        kinds = tuple(
            (who, feature)
            for who, cards in held.items()
            if len(cards) >= 2
            for feature in nulls.hand_features(cards)
        )
        rounds.append((cells, size, kinds))
        worst = (1.0, "", 0, 0)  # tail, what, count, rounds
        for cell in cells:
            n = counts[cell] = counts.get(cell, 0) + 1
            if n >= 3:
                who = cell[1]
                played = [(h, k) for (w, h), k in hands.items() if w == who and k]
                trials, biggest = sum(k for _, k in played), max(h for h, _ in played)
                tail = nulls.binomial_upper_tail(trials, n, biggest, DECK)
                if tail < worst[0]:
                    worst = (tail, f"one card in {_hand_of(who)}", n, trials)
        for kind in kinds:
            n = self.seat_kinds[kind] = self.seat_kinds.get(kind, 0) + 1
            who, feature = kind
            # the rounds it was dealt 2 cards or more (no kind of hand in fewer), and the
            # largest chance of the feature among their hand sizes (domination)
            played = [(h, k) for (w, h), k in hands.items() if w == who and k and h >= 2]
            trials = sum(k for _, k in played)
            chance = max(
                (nulls.hand_feature_chance(feature, h) for h, _ in played),
                key=lambda f: f[0] / f[1],
            )
            if n >= 3 and n > trials * chance[0] / chance[1]:
                tail = _binomial_tail(trials, n, *chance)
                if tail < worst[0]:
                    worst = (tail, f"{HAND_KINDS[feature]} in {_hand_of(who)}", n, trials)
        tail, what, n, played_rounds = worst
        if n == 0:
            return self._finding("seat", "no card or kind of hand three times in one seat", 1.0)
        figure = f"{what} in {n} of the {played_rounds} rounds it played"
        return self._finding("seat", figure, tail * SEAT_CELLS)


# the position test's union bound: card x position and pickup place x position cells, and
# each card dealt too seldom over each span
POSITION_CELLS = 2 * DECK * DECK + DECK * len(WITHHELD_SPANS)
HAND_KINDS = {"pair": "two cards of one rank", "suited": "every card of one suit"}
# the seat test's union bound: 52 cards and the kinds of hand, in each of 8 hands
SEAT_CELLS = (DECK + len(nulls.HAND_FEATURES)) * MAX_RECIPIENTS


def _hand_of(who: int) -> str:
    return "the dealer's hand" if who == 0 else f"seat {who}'s hand"


@functools.lru_cache(maxsize=4096)
def _binomial_tail(trials: int, k: int, p_num: int, p_den: int) -> float:
    return nulls.binomial_upper_tail(trials, k, p_num, p_den)

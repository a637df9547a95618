"""Every paytable of the regulations, as data, each citing its section. Pure.

"N to 1" pays the winnings on top of the returned wager; "N for 1" includes the wager
(the wager is collected at "no more bets", 649a.8(b)). Fixed dollar amounts are for a $1
wager (FIXED_AMOUNT_WAGER_CENTS), a larger wager paid in proportion, and come in the same two
kinds: "$25,000 for $1" is all a winner receives, the wager having been collected before the
deal (the Let It Ride Bonus, 643a.8(b)); "$100,000 to $1" is won with the wager returned
besides (649a.12(f) paytable E's Super Royals, whose wager stays on the layout). Shares of
the progressive meter are what they say. A paytable lists hands highest first; a hand pays
only its highest listed class (649a.12(e)(2), 653a.12(d)(2)).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction


class Hand(StrEnum):
    """Paying hand classes across the three games."""

    SUPER_ROYAL_DIAMONDS = "super-royal-of-diamonds"
    SUPER_ROYAL = "super-royal"
    ROYAL_FLUSH = "royal-flush"
    MINI_ROYAL_SPADES = "ace-king-queen-of-spades"
    MINI_ROYAL = "ace-king-queen-suited"
    STRAIGHT_FLUSH = "straight-flush"
    FOUR_OF_A_KIND = "four-of-a-kind"
    FULL_HOUSE = "full-house"
    FLUSH = "flush"
    STRAIGHT = "straight"
    THREE_OF_A_KIND = "three-of-a-kind"
    TWO_PAIR = "two-pair"
    PAIR_TENS_OR_BETTER = "pair-of-tens-or-better"
    PAIR = "pair"


class PayKind(StrEnum):
    TO = "to"  # winnings = wager x odds, the wager returned besides
    FOR = "for"  # the player receives wager x odds in all
    AMOUNT_TO = "amount-to"  # a fixed amount won per $1 wagered, the wager returned besides
    AMOUNT_FOR = "amount-for"  # a fixed amount received in all per $1 (the wager collected)
    METER = "meter"  # a share of the progressive meter
    PUSH = "push"  # the wager is returned


# The wager the regulations' fixed dollar amounts are for (643a.12(b), 649a.12(f) paytable E):
# the text names no wager, so an amount is read as per $1, a larger wager paid in proportion.
FIXED_AMOUNT_WAGER_CENTS = 100


@dataclass(frozen=True, slots=True)
class Pay:
    kind: PayKind
    odds: Fraction = Fraction(0)  # TO and FOR: the odds; METER: the share of the meter
    cents: int = 0  # AMOUNT_TO and AMOUNT_FOR: per FIXED_AMOUNT_WAGER_CENTS wagered

    def total_per_unit(self) -> Fraction:
        """What one unit wagered receives in all, the returned wager included."""
        match self.kind:
            case PayKind.TO:
                return 1 + self.odds
            case PayKind.FOR:
                return self.odds
            case PayKind.AMOUNT_TO:
                return 1 + Fraction(self.cents, FIXED_AMOUNT_WAGER_CENTS)
            case PayKind.AMOUNT_FOR:
                return Fraction(self.cents, FIXED_AMOUNT_WAGER_CENTS)
            case PayKind.PUSH:
                return Fraction(1)
        raise ValueError(f"{self} depends on the progressive meter")

    def paid_cents(self, wager_cents: int) -> int:
        """What a winning wager receives in all; a fraction of a cent is not paid."""
        total = self.total_per_unit()
        return wager_cents * total.numerator // total.denominator

    def __str__(self) -> str:
        if self.kind in (PayKind.AMOUNT_TO, PayKind.AMOUNT_FOR):
            word = "to" if self.kind is PayKind.AMOUNT_TO else "for"
            return f"${self.cents // 100:,} {word} ${FIXED_AMOUNT_WAGER_CENTS // 100}"
        if self.kind is PayKind.METER:
            return f"{self.odds * 100}% of meter"
        if self.kind is PayKind.PUSH:
            return "push"
        o = self.odds
        return f"{o.numerator} {self.kind.value} {o.denominator}"


def to(numerator: int, denominator: int = 1) -> Pay:
    return Pay(PayKind.TO, Fraction(numerator, denominator))


def for_(odds: int) -> Pay:
    return Pay(PayKind.FOR, Fraction(odds))


def dollars_to(amount: int) -> Pay:
    """A fixed amount won per $1 wagered, the wager returned besides."""
    return Pay(PayKind.AMOUNT_TO, cents=amount * 100)


def dollars_for(amount: int) -> Pay:
    """A fixed amount received in all per $1 wagered: the wager was collected before the deal."""
    return Pay(PayKind.AMOUNT_FOR, cents=amount * 100)


def meter(percent: int) -> Pay:
    return Pay(PayKind.METER, Fraction(percent, 100))


PUSH = Pay(PayKind.PUSH)


@dataclass(frozen=True, slots=True)
class Paytable:
    game: str
    wager: str
    letter: str
    rule: str
    pays: dict[Hand, Pay]

    def pay_for(self, hands: list[Hand]) -> tuple[Hand, Pay] | None:
        """The highest listed class among those the hand makes (hands: highest first)."""
        for hand in hands:
            if hand in self.pays:
                return hand, self.pays[hand]
        return None


H = Hand
TCP, UTH, LIR = "three-card-poker", "ultimate-texas-holdem", "let-it-ride"
PAYTABLES: dict[tuple[str, str, str], Paytable] = {}


def _add(game: str, wager: str, rule: str, columns: dict[str, dict[Hand, Pay]]) -> None:
    for letter, pays in columns.items():
        PAYTABLES[game, wager, letter] = Paytable(game, wager, letter, rule, pays)


def _cols(rows: list[tuple[Hand, list[Pay | None]]], letters: str) -> dict[str, dict[Hand, Pay]]:
    return {
        letter: {hand: pays[i] for hand, pays in rows if pays[i] is not None}  # type: ignore[misc]
        for i, letter in enumerate(letters)
    }


# --- Three Card Poker (2012 text) -------------------------------------------------------

_add(
    TCP,
    "ante-bonus",
    "649a.12(b)",
    _cols(
        [
            (H.STRAIGHT_FLUSH, [to(5), to(5), to(4)]),
            (H.THREE_OF_A_KIND, [to(4), to(3), to(3)]),
            (H.STRAIGHT, [to(1), to(1), to(1)]),
        ],
        "ABC",
    ),
)

# 649a.12(c): the Ante Bonus of the 649a.7(e) version. The straight pays on paytable A only:
# its row has one column in the 2012 text and reads "1 to 1 N/A N/A" in the 2011 text.
_add(
    TCP,
    "ante-bonus-649a7e",
    "649a.12(c)",
    _cols(
        [
            (H.MINI_ROYAL_SPADES, [to(50), to(50), to(50)]),
            (H.MINI_ROYAL, [to(5), to(50), to(10)]),
            (H.STRAIGHT_FLUSH, [to(4), to(8), to(6)]),
            (H.THREE_OF_A_KIND, [to(3), to(6), to(3)]),
            (H.STRAIGHT, [to(1), None, None]),
        ],
        "ABC",
    ),
)

_add(
    TCP,
    "pair-plus",
    "649a.12(d)",
    _cols(
        [
            (H.STRAIGHT_FLUSH, [to(35), to(40), to(40), to(40), to(40)]),
            (H.THREE_OF_A_KIND, [to(25), to(30), to(30), to(30), to(25)]),
            (H.STRAIGHT, [to(6), to(5), to(6), to(6), to(6)]),
            (H.FLUSH, [to(4), to(4), to(3), to(4), to(4)]),
            (H.PAIR, [to(1), to(1), to(1), to(1), to(1)]),
        ],
        "ABCDE",
    ),
)

_add(
    TCP,
    "progressive",
    "649a.12(e)",
    _cols(
        [
            (H.MINI_ROYAL_SPADES, [meter(100), meter(100)]),
            (H.MINI_ROYAL, [for_(500), for_(500)]),
            (H.STRAIGHT_FLUSH, [for_(70), for_(100)]),
            (H.THREE_OF_A_KIND, [for_(60), for_(90)]),
            (H.STRAIGHT, [for_(6), None]),
        ],
        "AB",
    ),
)

_add(
    TCP,
    "six-card-bonus",
    "649a.12(f)",
    _cols(
        [
            # Amounts among "to 1" odds on a wager that stays on the layout: won, wager returned.
            (H.SUPER_ROYAL_DIAMONDS, [None, None, None, None, dollars_to(1_000_000)]),
            (H.SUPER_ROYAL, [None, None, None, None, dollars_to(100_000)]),
            (H.ROYAL_FLUSH, [to(1000)] * 5),
            (H.STRAIGHT_FLUSH, [to(200)] * 5),
            (H.FOUR_OF_A_KIND, [to(50), to(100), to(100), to(50), to(50)]),
            (H.FULL_HOUSE, [to(25), to(20), to(20), to(25), to(20)]),
            (H.FLUSH, [to(20), to(15), to(15), to(15), to(15)]),
            (H.STRAIGHT, [to(10), to(9), to(10), to(10), to(10)]),
            (H.THREE_OF_A_KIND, [to(5), to(8), to(7), to(5), to(5)]),
        ],
        "ABCDE",
    ),
)

# 649a.12(e)(5): Envy Bonus by the receiving player's Progressive Payout Wager (cents).
TCP_ENVY_CENTS = {
    100: {H.MINI_ROYAL_SPADES: 10_000, H.MINI_ROYAL: 2_500},
    500: {H.MINI_ROYAL_SPADES: 50_000, H.MINI_ROYAL: 12_500},
}

# --- Ultimate Texas Hold 'Em (653a.12, 2012 text) -------------------------------------

_add(
    UTH,
    "blind",
    "653a.12(b)",
    _cols(
        [
            (H.ROYAL_FLUSH, [to(500), to(500)]),
            (H.STRAIGHT_FLUSH, [to(50), to(50)]),
            (H.FOUR_OF_A_KIND, [to(10), to(10)]),
            (H.FULL_HOUSE, [to(3), to(3)]),
            (H.FLUSH, [to(3, 2), to(3, 2)]),
            (H.STRAIGHT, [to(1), PUSH]),
        ],
        "AB",
    ),
)

_add(
    UTH,
    "trips",
    "653a.12(c)",
    _cols(
        [
            (H.ROYAL_FLUSH, [to(50)] * 4),
            (H.STRAIGHT_FLUSH, [to(40)] * 4),
            (H.FOUR_OF_A_KIND, [to(30), to(30), to(30), to(20)]),
            (H.FULL_HOUSE, [to(9), to(8), to(8), to(7)]),
            (H.FLUSH, [to(7), to(6), to(7), to(6)]),
            (H.STRAIGHT, [to(4), to(5), to(4), to(5)]),
            (H.THREE_OF_A_KIND, [to(3)] * 4),
        ],
        "ABCD",
    ),
)

_add(
    UTH,
    "progressive",
    "653a.12(d)",
    {
        "A": {
            H.ROYAL_FLUSH: meter(100),
            H.STRAIGHT_FLUSH: meter(10),
            H.FOUR_OF_A_KIND: for_(300),
            H.FULL_HOUSE: for_(50),
            H.FLUSH: for_(40),
            H.STRAIGHT: for_(30),
            H.THREE_OF_A_KIND: for_(9),
        }
    },
)

# 653a.12(d)(3): the initial and reset amount of the meter is at least $10,000.
UTH_MIN_RESET_CENTS = 1_000_000

# 653a.12(d)(5).
UTH_ENVY_CENTS = {
    100: {H.ROYAL_FLUSH: 100_000, H.STRAIGHT_FLUSH: 30_000},
    500: {H.ROYAL_FLUSH: 500_000, H.STRAIGHT_FLUSH: 150_000},
}

# --- Let It Ride (643a.12, 2011 text) ----------------------------------------------------

_add(
    LIR,
    "base",
    "643a.12(a)",
    _cols(
        [
            (H.ROYAL_FLUSH, [to(1000), to(500)]),
            (H.STRAIGHT_FLUSH, [to(200), to(200)]),
            (H.FOUR_OF_A_KIND, [to(50), to(50)]),
            (H.FULL_HOUSE, [to(11), to(11)]),
            (H.FLUSH, [to(8), to(8)]),
            (H.STRAIGHT, [to(5), to(5)]),
            (H.THREE_OF_A_KIND, [to(3), to(3)]),
            (H.TWO_PAIR, [to(2), to(2)]),
            (H.PAIR_TENS_OR_BETTER, [to(1), to(1)]),
        ],
        "AB",
    ),
)

# 643a.12(b): fixed amounts, all a winner receives: the Bonus Wager was collected into the
# table inventory before the deal (643a.8(b), 643a.9(a)(3), 643a.10(a)(2)). A $0 entry pays
# nothing, so it is left out.
_add(
    LIR,
    "bonus",
    "643a.12(b)",
    _cols(
        [
            (H.ROYAL_FLUSH, [dollars_for(25_000), dollars_for(20_000), dollars_for(20_000)]),
            (H.STRAIGHT_FLUSH, [dollars_for(2_500), dollars_for(2_000), dollars_for(2_000)]),
            (H.FOUR_OF_A_KIND, [dollars_for(400), dollars_for(200), dollars_for(100)]),
            (H.FULL_HOUSE, [dollars_for(200), dollars_for(75), dollars_for(75)]),
            (H.FLUSH, [dollars_for(50), dollars_for(50), dollars_for(50)]),
            (H.STRAIGHT, [dollars_for(25), dollars_for(25), dollars_for(25)]),
            (H.THREE_OF_A_KIND, [dollars_for(5), dollars_for(5), dollars_for(9)]),
            (H.TWO_PAIR, [None, dollars_for(4), dollars_for(6)]),
            (H.PAIR_TENS_OR_BETTER, [None, dollars_for(1), None]),
        ],
        "ABC",
    ),
)

_add(
    LIR,
    "three-card-bonus",
    "643a.12(c)",
    _cols(
        [
            (H.MINI_ROYAL, [to(40), to(40), to(40), to(50), to(50), to(50)]),
            (H.STRAIGHT_FLUSH, [to(40)] * 6),
            (H.THREE_OF_A_KIND, [to(30)] * 6),
            (H.STRAIGHT, [to(6), to(5), to(6), to(6), to(5), to(6)]),
            (H.FLUSH, [to(4), to(4), to(3), to(4), to(4), to(3)]),
            (H.PAIR, [to(1)] * 6),
        ],
        "ABCDEF",
    ),
)


def paytable(game: str, wager: str, letter: str) -> Paytable:
    """Look a paytable up; the error lists what exists."""
    try:
        return PAYTABLES[game, wager, letter]
    except KeyError:
        games = sorted({g for g, _, _ in PAYTABLES})
        if game not in games:
            raise KeyError(f"unknown game {game!r}; one of {games}") from None
        wagers = sorted({w for g, w, _ in PAYTABLES if g == game})
        if wager not in wagers:
            raise KeyError(f"unknown wager {wager!r} for {game}; one of {wagers}") from None
        letters = sorted(p for g, w, p in PAYTABLES if (g, w) == (game, wager))
        raise KeyError(
            f"unknown paytable {letter!r} for {game} {wager}; one of {letters}"
        ) from None


def parse_pay(text: str) -> Pay:
    """ "500 to 1", "3 to 2", "50 for 1", "$1,000" (won on $1, the wager returned, as
    "$1,000 to $1"), "$1,000 for $1" (received in all), "push" or "10% of meter"."""
    words = text.strip().lower().split()
    try:
        if words == ["push"]:
            return PUSH
        if words and words[0].startswith("$") and words[1:] in ([], ["to", "$1"], ["for", "$1"]):
            amount = int(words[0][1:].replace(",", ""))
            return dollars_for(amount) if words[1:2] == ["for"] else dollars_to(amount)
        if len(words) == 3 and words[1] in ("to", "for"):
            n, d = int(words[0].replace(",", "")), int(words[2])
            return to(n, d) if words[1] == "to" else Pay(PayKind.FOR, Fraction(n, d))
        if len(words) == 3 and words[0].endswith("%") and words[1:] == ["of", "meter"]:
            return meter(int(words[0][:-1]))
    except ValueError:
        pass
    raise ValueError(
        f"{text!r} is not a payout: write '500 to 1', '3 to 2', '50 for 1', '$1,000', "
        "'$1,000 for $1' or 'push'"
    )


def operator_paytable(game: str, wager: str, rule: str, pays: dict[str, str]) -> Paytable:
    """A paytable the regulations leave to the certificate holder's Rules Submission.

    Ultimate Texas Hold 'Em's Bad Beat Bonus (653a.12(g)) and Six Card Bonus (653a.12(f))
    are cited by the 2019 text of 653a.11 but their tables are not in the regulations we
    carry, so they have no default: the operator supplies them, highest hand first.
    """
    table: dict[Hand, Pay] = {}
    for name, text in pays.items():
        try:
            hand = Hand(name)
        except ValueError:
            valid = ", ".join(h.value for h in Hand)
            raise ValueError(f"{wager}: unknown hand {name!r}; one of {valid}") from None
        table[hand] = parse_pay(text)
    if not table:
        raise ValueError(f"{wager}: an operator paytable needs at least one paying hand")
    return Paytable(game, wager, "operator", rule, table)

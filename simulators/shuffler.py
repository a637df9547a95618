"""Simulated automated card shuffler: the device side of the reference protocol.

It shuffles a real 52-card deck, counts it, and speaks the production codec (in-process, on a
pseudo-terminal or over TCP). Knobs provoke every case: jams and incomplete cycles, a missing
card, a fault already showing at connect, reboots, and the line and protocol faults of
simulators/faults.py. How it mixes is a knob too (`Mixing`): fairly, or as a worn, misset or
tampered machine would (docs/shuffle-integrity.md); with a `CardFlow` it shuffles the deck
the dealer collected and hands its order to the simulated shoe.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import random
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from tablectl.drivers.reference.framing import Frame
from tablectl.drivers.reference.messages import (
    Identity,
    MsgType,
    NakReason,
    Status,
    encode_counted,
    encode_deck_info,
    encode_self_tested,
)
from tablectl.drivers.reference.shuffler_codec import EventKind, FaultCode, ShufflerState
from tablectl.simulators.card_flow import CardFlow
from tablectl.simulators.device import SimulatedDevice

from tablectl.rules.cards import Card, full_deck

MIXINGS = (
    "fair: every order equally likely",
    "riffle M: M riffle shuffles (Gilbert-Shannon-Reeds) of the deck as collected",
    "unshuffled: the deck comes out as it went in",
    "repeat: the same order as its last shuffle, whatever went in",
    "cut: only cut, once, about the middle",
    "place CARD POSITION: fair, then CARD moved to POSITION (1 = first dealt) every time",
    "shelf N: a shelf machine, N shelves (Diaconis, Fulman & Holmes 2013), one pass",
    "piles K: a pile shuffle, K piles dealt one card at a time, picked up in a random order",
    "clumpy M: M riffles whose halves drop in clumps (1 to 5 cards), a worn machine's",
    "steer CARD SEAT: fair, then CARD moved into SEAT's hand every time (a cheat with a "
    "confederate; needs the round's seats, which the bench's table gives it)",
    "pair SEAT: fair, then SEAT's hand (0: the dealer's) given a pair, a different one each "
    "time (a rig for a confederate or the house; needs the round's seats, as steer)",
    "python MODULE:NAME or python FILE.py:NAME: your own shuffler, a function "
    "(deck, rng) -> deck or a class of them (docs/shuffle-integrity.md, 'Your own bad shuffler')",
)

# A plugged-in shuffle: the deck as it went in (first card = first dealt if nothing moved
# it), the shuffler's random source; returns the same cards in the order the shoe deals them.
# One that takes a `seats` keyword is also given each seat's deck positions in the coming
# deal (0 = first dealt, seat 0 the dealer), where the caller knows them.
Shuffle = Callable[..., list[Card]]


class MixingError(ValueError):
    """A plugged-in shuffle that cannot be loaded, raised, or returned other cards."""


def load_shuffle(target: str) -> tuple[Shuffle, bool]:
    """`package.module:name` or `path/to/file.py:name` -> (the shuffle, whether it takes
    `seats`). A class is instantiated once, with no arguments, so it can keep state (the
    last order, a count of shuffles) from one shuffle to the next. Whatever cannot be called
    as a shuffle is refused here, before anything starts."""
    where, _, name = target.rpartition(":")
    if not where or not name:
        raise MixingError(f"python {target!r}: expected MODULE:NAME or FILE.py:NAME")
    try:
        module = _load_module(target, where)
        found: object = module
        for part in name.split("."):
            if not hasattr(found, part):
                raise MixingError(f"python {target!r}: {where} has no {name!r}")
            found = getattr(found, part)
        if inspect.isclass(found):
            found = found()
    except MixingError:
        raise
    except (Exception, SystemExit) as exc:  # the tester's code: what it raised is said
        raise MixingError(f"python {target!r}: cannot load {name}: {exc!r}") from exc
    if not callable(found):
        raise MixingError(f"python {target!r}: {name} is not callable")
    try:
        signature = inspect.signature(found)
    except (TypeError, ValueError):  # a builtin without a signature: (deck, rng) only
        return found, False
    takes_seats = any(
        p.name == "seats" or p.kind is inspect.Parameter.VAR_KEYWORD
        for p in signature.parameters.values()
    )
    try:
        signature.bind([], random.Random(), **({"seats": {}} if takes_seats else {}))
    except TypeError:
        raise MixingError(
            f"python {target!r}: {name} cannot be called as (deck, rng) or (deck, rng, *, seats)"
        ) from None
    return found, takes_seats


def _load_module(target: str, where: str) -> object:
    if not where.endswith(".py"):
        return importlib.import_module(where)
    path = Path(where).expanduser().resolve()
    if not path.is_file():
        raise MixingError(f"python {target!r}: no such file {path}")
    # Registered before it runs (a dataclass looks its module up there), its folder on the
    # path for the files beside it that it imports.
    module_name = f"tablectl_mixing_{path.stem}_{abs(hash(path)):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None  # a .py file that exists
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def riffle(deck: list[Card], rng: random.Random) -> list[Card]:
    """One GSR riffle: a binomial cut, then cards drop from each half with probability
    proportional to its size (Bayer & Diaconis 1992)."""
    cut = sum(1 for _ in deck if rng.random() < 0.5)
    left, right = deck[:cut], deck[cut:]
    out: list[Card] = []
    i = j = 0
    while i < len(left) or j < len(right):
        a, b = len(left) - i, len(right) - j
        if rng.random() * (a + b) < a:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    return out


def shelf(deck: list[Card], shelves: int, rng: random.Random) -> list[Card]:
    """One pass of a shelf shuffler (Diaconis, Fulman & Holmes 2013, section 2): the cards
    leave the bottom of the deck one at a time, each to a shelf chosen uniformly, placed on
    top of what the shelf holds or under it with probability 1/2; the shelves are then
    stacked, the first on top."""
    piles: list[list[Card]] = [[] for _ in range(shelves)]
    for card in reversed(deck):
        pile = piles[rng.randrange(shelves)]
        if rng.random() < 0.5:
            pile.insert(0, card)
        else:
            pile.append(card)
    return [card for pile in piles for card in pile]


def pile_shuffle(deck: list[Card], piles: int, rng: random.Random) -> list[Card]:
    """Dealt one card at a time onto `piles` piles (each pile reversed as it is dealt),
    the piles picked up in a random order."""
    dealt = [deck[i::piles][::-1] for i in range(piles)]
    rng.shuffle(dealt)
    return [card for pile in dealt for card in pile]


def clumpy_riffle(deck: list[Card], rng: random.Random) -> list[Card]:
    """A riffle whose halves drop in clumps: the GSR cut, then a half chosen in proportion
    to what it holds drops 1 to 5 cards at once (uniform), as a worn machine's rollers do."""
    cut = sum(1 for _ in deck if rng.random() < 0.5)
    halves = [deck[:cut], deck[cut:]]
    at = [0, 0]
    out: list[Card] = []
    while at[0] < len(halves[0]) or at[1] < len(halves[1]):
        a, b = len(halves[0]) - at[0], len(halves[1]) - at[1]
        side = 0 if rng.random() * (a + b) < a else 1
        clump = min(rng.randint(1, 5), (a, b)[side])
        out += halves[side][at[side] : at[side] + clump]
        at[side] += clump
    return out


@dataclass
class Mixing:
    """How the shuffler mixes a deck; `fair` unless a test or a trainer says otherwise."""

    kind: str = "fair"
    riffles: int = 7
    card: Card | None = None
    position: int = 0  # 0 = the first card dealt
    seat: int = 0  # steer: the seat the card is put into
    last: list[Card] | None = field(default=None, repr=False)  # its last output
    # steer: the positions (0 = first dealt) of each seat's cards in the coming deal, given
    # by whoever knows the round (the bench's table, simulators/shuffle_play.py)
    seat_positions: dict[int, tuple[int, ...]] = field(default_factory=dict, repr=False)
    plugin: str = ""  # python: where its shuffle came from, as given
    shuffle: Shuffle | None = field(default=None, repr=False, compare=False)
    shuffle_takes_seats: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def parse(cls, words: list[str]) -> Mixing:
        """`fair`, `riffle 3`, `unshuffled`, `repeat`, `cut`, `place As 1`, `shelf 10`,
        `piles 5`, `clumpy 3`, `steer As 3`, `pair 3`, `python mod:fn` (ValueError)."""
        kind, args = (words[0].lower(), words[1:]) if words else ("fair", [])
        if kind == "python" and args:
            target = " ".join(args)  # a path may hold spaces
            shuffle, takes_seats = load_shuffle(target)
            return cls(kind, plugin=target, shuffle=shuffle, shuffle_takes_seats=takes_seats)
        count = int(args[0]) if len(args) == 1 and args[0].isdigit() else 0
        if kind in ("riffle", "clumpy") and 1 <= count <= 20:
            return cls(kind, riffles=count)
        if kind in ("shelf", "piles") and 2 <= count <= 26:
            return cls(kind, riffles=count)
        if kind == "place" and len(args) == 2 and args[1].isdigit() and 1 <= int(args[1]) <= 52:
            return cls(kind, card=Card.parse(args[0]), position=int(args[1]) - 1)
        if kind == "steer" and len(args) == 2 and args[1].isdigit() and 1 <= int(args[1]) <= 7:
            return cls(kind, card=Card.parse(args[0]), seat=int(args[1]))
        if kind == "pair" and 0 <= count <= 7 and len(args) == 1 and args[0].isdigit():
            return cls(kind, seat=count)
        if kind in ("fair", "unshuffled", "repeat", "cut") and not args:
            return cls(kind)
        raise ValueError("a mixing is one of: " + "; ".join(MIXINGS))

    def __str__(self) -> str:
        if self.kind in ("riffle", "clumpy", "shelf", "piles"):
            return f"{self.kind} {self.riffles}"
        if self.kind == "steer":
            return f"steer {self.card} {self.seat}"
        if self.kind == "pair":
            return f"pair {self.seat}"
        if self.kind == "place":
            return f"place {self.card} {self.position + 1}"
        if self.kind == "python":
            return f"python {self.plugin}"
        return self.kind

    def mix(self, deck: list[Card], rng: random.Random) -> list[Card]:
        out = list(deck)
        match self.kind:
            case "riffle":
                for _ in range(self.riffles):
                    out = riffle(out, rng)
            case "clumpy":
                for _ in range(self.riffles):
                    out = clumpy_riffle(out, rng)
            case "shelf":
                out = shelf(out, self.riffles, rng)
            case "piles":
                out = pile_shuffle(out, self.riffles, rng)
            case "unshuffled":
                pass
            case "repeat" if self.last is not None and sorted(self.last) == sorted(out):
                out = list(self.last)
            case "cut":
                cut = max(1, min(len(out) - 1, sum(1 for _ in out if rng.random() < 0.5)))
                out = out[cut:] + out[:cut]
            case "python" if self.shuffle is not None:
                out = self._plugged(self.shuffle, out, rng)
            case _:
                rng.shuffle(out)
                if self.kind == "place" and self.card in out:
                    out.remove(self.card)
                    out.insert(self.position, self.card)
                into = self.seat_positions.get(self.seat, ())
                if self.kind == "steer" and self.card in out and into:
                    # swapped with one of the seat's cards: only the card's place changes
                    at, to = out.index(self.card), into[rng.randrange(len(into))]
                    out[at], out[to] = out[to], out[at]
                if self.kind == "pair" and len(into) >= 2:
                    # the hand's second card swapped for one of the first card's rank
                    first = out[into[0]]
                    mates = [c for c in out if c.rank == first.rank and c != first]
                    at = out.index(mates[rng.randrange(len(mates))])
                    if at not in into:
                        out[at], out[into[1]] = out[into[1]], out[at]
        self.last = list(out)
        return out

    def _plugged(self, shuffle: Shuffle, deck: list[Card], rng: random.Random) -> list[Card]:
        seats = {"seats": dict(self.seat_positions)} if self.shuffle_takes_seats else {}
        try:
            got = shuffle(list(deck), rng, **seats)
        except (Exception, SystemExit) as exc:
            # Its type only: its message may hold the cards it was given, and this one is
            # logged (the card order never leaves the table PC); the cause keeps it all.
            raise MixingError(
                f"mixing {self}: its shuffle raised {type(exc).__name__} (the cause, chained, "
                f"says more)"
            ) from exc
        # A shuffler only reorders: a lost or added card is a count, which the knobs make.
        if not _same_cards(got, deck):
            size = f" of {len(got)}" if isinstance(got, list | tuple) else ""
            raise MixingError(
                f"mixing {self}: its shuffle returned a {type(got).__name__}{size}, not a "
                f"reordering of the {len(deck)} cards it was given"
            )
        return list(got)


def _same_cards(got: object, deck: list[Card]) -> bool:
    return (
        isinstance(got, list | tuple)
        and all(type(card) is Card for card in got)
        and Counter(got) == Counter(deck)
    )


log = structlog.get_logger(__name__)
IDENTITY = Identity("tablectl-sim-shuffler", "SHF-0001", "1.0")
DECK_SIZE = len(full_deck())  # what a count expects (the deck built once, not at every poll)


@dataclass
class ShuffleFaults:
    jam_next_shuffle: bool = False
    incomplete_next_shuffle: bool = False
    stop_next_shuffle: bool = False


class ShufflerSimulator(SimulatedDevice):
    def __init__(
        self,
        *,
        shuffle_ms: int = 200,
        rng: random.Random | None = None,
        address: int = 1,
        identity: Identity = IDENTITY,
        flow: CardFlow | None = None,
    ) -> None:
        self.shuffle_ms = shuffle_ms
        self.knobs = ShuffleFaults()
        self.mixing = Mixing()
        # With a flow, the deck shuffled is the one the dealer collected (card_flow.py).
        self.flow = flow
        self.lost: Card | None = None  # falls on the floor from the next deck taken in
        self.deck: list[Card] = list(full_deck())
        self.shuffles = 0
        # Set to a report to make the self-test fail with it (a dirty sensor, say).
        self.self_test_failure: str | None = None
        # The decks it alternates, (id, back colour), reported to DECK; None: a shuffler that
        # knows no deck identity (it NAKs DECK as an unknown type, as older ones do).
        self.decks: list[tuple[str, str]] | None = None
        self.loaded: tuple[str, str] | None = None  # the deck of the last shuffle
        self.mixing_failed: str | None = None  # why a plugged-in shuffle failed, if one did
        super().__init__(identity, address=address, rng=rng)

    def _reboot_state(self, *, keep_boot_id: bool = False) -> None:
        super()._reboot_state(keep_boot_id=keep_boot_id)
        self.state = ShufflerState.IDLE
        self.fault = FaultCode.NONE
        self.last_count = 0

    # --- knobs --------------------------------------------------------------------------

    def remove_card(self) -> Card:
        """Lose a card from the deck (it fell on the floor): the next count is 51."""
        if self.flow is not None:
            self.lost = full_deck()[self.rng.randrange(DECK_SIZE)]
            return self.lost
        return self.deck.pop(self.rng.randrange(len(self.deck)))

    def load_full_deck(self) -> None:
        self.deck = list(full_deck())
        flow = self.flow
        if flow is not None:
            # The short deck leaves the shuffler; a new one takes its place.
            if flow.to_shuffle and len(flow.to_shuffle[0]) != DECK_SIZE:
                flow.to_shuffle.popleft()
            flow.back_in_shuffler(list(full_deck()))

    def fail(self, code: FaultCode, *, as_event: bool = True) -> None:
        """Go into fault now (as_event False: the fault only shows in STATUS)."""
        self.state, self.fault = ShufflerState.FAULT, code
        if as_event:
            self.event(EventKind.FAULT, code)

    # --- the protocol -------------------------------------------------------------------

    def status(self) -> Status:
        return Status(self.state, self.fault, self.last_count, DECK_SIZE, self.boot_id)

    def command(self, request: Frame) -> Frame:
        if request.type == MsgType.SHUFFLE:
            if self.state is ShufflerState.SHUFFLING:
                return self.nak(request, NakReason.BUSY)
            self.state, self.fault = ShufflerState.SHUFFLING, FaultCode.NONE
            self.event(EventKind.SHUFFLE_STARTED)
            self.spawn(self._shuffle(), "sim-shuffle")
            return self.reply(request, MsgType.ACK)
        if request.type == MsgType.DECK and self.decks is not None:
            return self.reply(request, MsgType.DECK_INFO, encode_deck_info(self.loaded))
        if request.type in (MsgType.COUNT, MsgType.SELF_TEST):
            # Diagnostics run on a machine at rest; a count needs the counter, not a fault.
            if self.state is ShufflerState.SHUFFLING:
                return self.nak(request, NakReason.BUSY)
            if request.type == MsgType.SELF_TEST:
                failure = self.self_test_failure
                report = f"FAILED: {failure}" if failure else "motors, sensors and counter ok"
                return self.reply(
                    request, MsgType.SELF_TESTED, encode_self_tested(failure is None, report)
                )
            if self.state is ShufflerState.FAULT:
                return self.nak(request, NakReason.ILLEGAL_IN_STATE)
            return self.reply(request, MsgType.COUNTED, encode_counted(len(self.deck), DECK_SIZE))
        return super().command(request)

    async def _shuffle(self) -> None:
        await asyncio.sleep(self.shuffle_ms / 1000)
        k = self.knobs
        code = (
            FaultCode.JAM
            if k.jam_next_shuffle
            else FaultCode.CYCLE_INCOMPLETE
            if k.incomplete_next_shuffle
            else FaultCode.STOPPED
            if k.stop_next_shuffle
            else None
        )
        if code is not None:
            # The deck stays in the shuffler, to be shuffled again (649a.13(e)).
            self.knobs = ShuffleFaults()
            self.fail(code)
            return
        if self.flow is not None:
            self.deck = self.flow.next_to_shuffle()
            if self.lost in self.deck:
                self.deck.remove(self.lost)
            self.lost = None
        try:
            self.deck = self.mixing.mix(self.deck, self.rng)
        except MixingError as exc:
            # A plugged-in shuffle that fails stops the machine, said, as a real one's
            # firmware fault would: the deck stays in it, the table sees a stopped shuffle.
            log.error("simulated shuffler: its mixing failed", error=str(exc))
            self.mixing_failed = str(exc)
            if self.flow is not None:
                self.flow.back_in_shuffler(self.deck)
            self.fail(FaultCode.STOPPED)
            return
        if self.flow is not None:
            if len(self.deck) == DECK_SIZE:
                self.flow.done(self.deck)
            else:
                self.flow.back_in_shuffler(self.deck)  # a miscounted deck stays in it
        if self.decks:
            self.loaded = self.decks[self.shuffles % len(self.decks)]  # 649a.3(b)(3)
        self.shuffles += 1
        self.last_count = len(self.deck)
        self.state = ShufflerState.READY
        self.event(EventKind.SHUFFLE_COMPLETE, self.last_count)

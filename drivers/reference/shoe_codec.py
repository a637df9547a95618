"""The reference dealing shoe's states, events, faults and card bytes, as core inputs. Pure.

A card travels as one byte, `suit << 4 | rank` (suits c, d, h, s = 0..3; ranks 2..14, ace
high); 0xFF is a card the shoe dealt but could not read. See docs/protocols/shoe.md.
"""

from __future__ import annotations

from enum import IntEnum

from tablectl.drivers.reference.messages import DeviceEvent, ProtocolError, Status

from tablectl.core.events import (
    CardRead,
    Event,
    ShoeCard,
    ShoeDealCompleted,
    ShoeFault,
    ShoeRebooted,
    ShoeStackDealt,
)
from tablectl.rules.cards import SUITS, Card

DEVICE = "shoe"
UNREAD = 0xFF
MAX_STACKS = 16
MAX_STACK = 8


class ShoeState(IntEnum):
    IDLE = 0
    DEALING = 1
    FAULT = 3


_STATE_NAMES = {int(s): s.name.lower() for s in ShoeState}  # (asked at every poll)


class ShoeEventKind(IntEnum):
    CARD = 1  # arg: card byte (0xFF unread)
    STACK_COMPLETE = 2  # arg: cards in the stack
    DEAL_COMPLETE = 3  # arg: cards dealt
    CARD_FACE_UP = 4  # arg: card byte; diverted to the discard rack, not dealt
    FAULT = 5  # arg: ShoeFaultCode


class ShoeFaultCode(IntEnum):
    NONE = 0
    JAM = 1
    STOPPED = 2  # stopped dealing
    INCOMPLETE = 3  # failed to deal all cards
    EMPTY = 4  # ran out of cards


FAULT_NAMES: dict[int, str] = {
    ShoeFaultCode.JAM: "jam",
    ShoeFaultCode.STOPPED: "stopped",
    ShoeFaultCode.INCOMPLETE: "incomplete",
    ShoeFaultCode.EMPTY: "empty",
}


def fault_name(code: int) -> str:
    return FAULT_NAMES.get(code, f"code-{code}")


def card_byte(card: Card) -> int:
    return SUITS.index(card.suit) << 4 | card.rank


def byte_card(value: int) -> Card | None:
    """The card a byte names, or None for a byte that names no card (foreign)."""
    suit, rank = value >> 4, value & 0x0F
    if suit >= len(SUITS) or not 2 <= rank <= 14:
        return None
    return Card(rank, SUITS[suit])


def encode_deal(stacks: tuple[int, ...]) -> bytes:
    if not 1 <= len(stacks) <= MAX_STACKS or not all(1 <= n <= MAX_STACK for n in stacks):
        raise ValueError(f"a deal is 1..{MAX_STACKS} stacks of 1..{MAX_STACK} cards: {stacks}")
    return bytes([len(stacks), *stacks])


def decode_deal(payload: bytes) -> tuple[int, ...]:
    if not payload or len(payload) != payload[0] + 1:
        raise ProtocolError("DEAL payload length disagrees", payload)
    stacks = tuple(payload[1:])
    if not 1 <= len(stacks) <= MAX_STACKS or not all(1 <= n <= MAX_STACK for n in stacks):
        raise ProtocolError("DEAL asks for impossible stacks", payload)
    return stacks


def _card_input(value: int, *, face_up: bool) -> ShoeCard:
    if value == UNREAD:
        return ShoeCard(read=CardRead.FACE_UP if face_up else CardRead.UNREAD)
    card = byte_card(value)
    if card is None:
        return ShoeCard(read=CardRead.FOREIGN)
    return ShoeCard(card=card, read=CardRead.FACE_UP if face_up else CardRead.READ)


class ShoeCodec:
    device = DEVICE

    def event_input(self, event: DeviceEvent, *, stale: bool) -> Event | None:
        # A deal survives a restart of the daemon: the shoe kept every card it read, in order.
        match event.kind:
            case ShoeEventKind.CARD:
                return _card_input(event.arg, face_up=False)
            case ShoeEventKind.CARD_FACE_UP:
                return _card_input(event.arg, face_up=True)
            case ShoeEventKind.STACK_COMPLETE:
                return ShoeStackDealt(cards=event.arg)
            case ShoeEventKind.DEAL_COMPLETE:
                return ShoeDealCompleted(cards=event.arg)
            case ShoeEventKind.FAULT:
                return ShoeFault(code=fault_name(event.arg))
        return None

    def is_fault_event(self, event: DeviceEvent) -> bool:
        return event.kind == ShoeEventKind.FAULT

    def fault_input(self, status: Status, *, at_connect: bool) -> Event | None:
        if status.state != ShoeState.FAULT:
            return None
        return ShoeFault(
            code=fault_name(status.fault), at_connect=at_connect, from_status=not at_connect
        )

    def rebooted_input(self) -> Event:
        return ShoeRebooted()

    def state_name(self, state: int) -> str:
        return _STATE_NAMES.get(state) or f"state-{state}"

    def acting(self, state: int) -> bool:
        return state == ShoeState.DEALING

    def awaited(self, state: int) -> bool:
        return state == ShoeState.DEALING  # the locked table waits for every hand

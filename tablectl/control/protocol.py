"""The control socket's requests: validated models, and the core inputs they ask for. Pure.

One JSON object per line in, one per line out: {"ok": true, "data": ...} or
{"ok": false, "error": "..."}. Types are strict: a seat is a whole number, never 1.7 or "1".
`watch` is the one request that keeps its connection: after its reply, one line per event.

Every request names the roles that may send it (`ROLES`); the server checks the caller's
groups against the `[access]` section of the config before anything else.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    model_validator,
)

from tablectl.core.events import (
    Back,
    ClearGpioFault,
    ClearStuckInput,
    ConfirmDocumentation,
    DealRequested,
    DeckId,
    DeckInPlay,
    DeckIntroduced,
    DeviceAccepted,
    Event,
    IdleProcedureDone,
    NewDeckRegistered,
    ReshuffleRequested,
    Settle,
    ShoeCleared,
    ShoeOutOfOrder,
    ShuffleAcknowledged,
    StubCounted,
    ValidateHit,
    VoidRound,
)
from tablectl.core.games import MAX_SEATS
from tablectl.rules.cards import parse_cards

# The bounds of the numbers a request carries; the CLI refuses past them at parse time,
# naming them (cli/common.py), before any request is sent.
SEATS_MOST = max(MAX_SEATS.values())  # 649a.2(a): seven betting positions, the most of any game
# A stub count of 52 is a whole deck (649a.8(g)); anything else is a wrong count (649a.8(h)),
# which may reach both of the table's decks mixed together (649a.3(b)): 104.
STUB_COUNT_MOST = 104
TEST_TIMEOUT_MOST_S = 600  # a walk test waits at most ten minutes for each step
DECK_CARDS = 52  # 649a.5(b): a deck is 52 cards (what a test deal may deal at most)

Seat = Annotated[StrictInt, Field(ge=1, le=SEATS_MOST)]
SeatKey = Annotated[str, Field(pattern=rf"^[1-{SEATS_MOST}]$")]


class Role(StrEnum):
    TECHNICIAN = "technician"
    DEALER = "dealer"
    FLOORPERSON = "floorperson"


EVERY_ROLE = frozenset(Role)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # Who may send it. A request that forgets to say is for root and the daemon's user only.
    ROLES: ClassVar[frozenset[Role]] = frozenset()
    # Who is acting, as they identify themselves (an employee id); the socket adds the
    # operating-system user it sees.
    by: str | None = Field(default=None, min_length=1, max_length=64)

    @model_validator(mode="after")
    def _by_is_printable(self) -> Self:
        # A name journaled and shown to people: no control characters (a NUL, an escape).
        if self.by is not None and not self.by.isprintable():
            raise ValueError(f"by: {self.by!r}: an employee id, printable characters only")
        return self


class StatusRequest(_Request):
    ROLES = EVERY_ROLE
    cmd: Literal["status"]


class DevicesRequest(_Request):
    """Every device's identity, link state, counters and last fault; the broker link."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["devices"]


class WatchRequest(_Request):
    """Live journal rows and device changes, one line each, until the client hangs up."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["watch"]


class ShufflerCountRequest(_Request):
    """Ask the shuffler to count the deck it holds."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["shuffler-count"]


class ShufflerSelfTestRequest(_Request):
    """Ask the shuffler to run its self-test."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["shuffler-self-test"]


# The shuffler's diagnostics (the daemon runs them on the driver, if it has them).
ShufflerTestRequest = ShufflerCountRequest | ShufflerSelfTestRequest


class ShufflerCount(BaseModel):
    """The reply to `shuffler-count`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    counted: int
    expected: int
    matches: bool


class ShufflerSelfTest(BaseModel):
    """The reply to `shuffler-self-test`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    passed: bool
    report: str


class SettleRequest(_Request):
    ROLES = frozenset({Role.DEALER})
    cmd: Literal["settle"]
    hands: dict[SeatKey, str] = {}
    community: str = ""
    dealer: str = ""
    folded: list[Seat] = []


class VoidRequest(_Request):
    ROLES = frozenset({Role.DEALER})
    cmd: Literal["void"]
    reason: str


class DeckRequest(_Request):
    """A new deck: after a miscount (649a.5(b)) without an id; with `deck_id` and `back`, a
    deck the table keeps (649a.3: alternation, age; docs/decks.md)."""

    ROLES = frozenset({Role.DEALER})
    cmd: Literal["new-deck", "reshuffle"]
    deck_id: DeckId | None = None
    back: Back | None = None
    replaces: DeckId | None = None


class StubCountRequest(_Request):
    """The dealer's stub count (649a.8(f)-(h) ...): the cards it shows in the deck, or none
    to confirm the count the shoe's reads give."""

    ROLES = frozenset({Role.DEALER})
    cmd: Literal["stub-count"]
    cards: StrictInt | None = Field(default=None, ge=0, le=STUB_COUNT_MOST)
    misdealt: StrictBool = False
    confirmed: StrictBool = False  # the dealer's count stands against the shoe's reads


class IdleProcedureRequest(_Request):
    """The idle procedure is done (649a.5(f)): the cards were spread for inspection, then the
    deck from the table went into the shuffler in place of the one in it."""

    ROLES = frozenset({Role.DEALER})
    cmd: Literal["idle-procedure"]


class DeckInPlayRequest(_Request):
    """The deck this round is dealt from (649a.3(b)(3): the decks alternate)."""

    ROLES = frozenset({Role.DEALER})
    cmd: Literal["deck-in-play"]
    deck_id: DeckId


class ClearFaultRequest(_Request):
    """The sensors were checked after a GPIO fault: betting may reopen. With `seat` or
    `lockout`: that stuck input was freed."""

    ROLES = frozenset({Role.DEALER, Role.TECHNICIAN})
    cmd: Literal["clear-fault"]
    seat: Seat | None = None
    lockout: StrictBool = False


class DealRequest(_Request):
    """The shoe deals the round: to every table-system wager's seat and to `seats`."""

    ROLES = frozenset({Role.DEALER})
    cmd: Literal["deal"]
    seats: list[Seat] = []


class ShoeRequest(_Request):
    """649a.13(g): the shoe is marked out of order (manual dealing), or back in service."""

    ROLES = frozenset({Role.DEALER, Role.TECHNICIAN})
    cmd: Literal["shoe-out-of-order", "shoe-in-service"]


class ClearShoeRequest(_Request):
    """649a.13(f): after a shoe fault the cards were taken out of the shoe; it may deal."""

    ROLES = frozenset({Role.DEALER, Role.TECHNICIAN})
    cmd: Literal["clear-shoe"]


class ResetLinkRequest(_Request):
    """A technician resets a device link stopped at refused events (docs/protocols)."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["reset-link"]
    device: Literal["shuffler", "shoe"]
    by: str = Field(min_length=1, max_length=64)  # the technician, always named


class AcceptDeviceRequest(_Request):
    """A technician accepts a device whose serial number differs from the last one seen."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["accept-device"]
    device: Literal["shuffler", "shoe"]
    serial_number: str = Field(min_length=1, max_length=64)
    by: str = Field(min_length=1, max_length=64)  # the technician, always named


class HitRequest(_Request):
    ROLES = frozenset({Role.FLOORPERSON})
    cmd: Literal["validate", "document"]
    hit_id: str = Field(min_length=1, max_length=32)
    by: str = Field(min_length=1, max_length=64)  # the floorperson, always named


class TestBeginRequest(_Request):
    """A technician's walk test takes the sensors (the table must not be taking bets)."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["test-begin"]
    test: Literal["sensors", "lockout", "shoe"]


class TestSeatRequest(_Request):
    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["test-seat"]
    seat: Seat
    timeout_s: float = Field(default=30, gt=0, le=TEST_TIMEOUT_MOST_S)


class TestLockoutRequest(_Request):
    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["test-lockout"]
    timeout_s: float = Field(default=30, gt=0, le=TEST_TIMEOUT_MOST_S)


class TestShoeRequest(_Request):
    """The shoe deals `cards` cards of a test deck outside any round and reports each read."""

    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["test-shoe"]
    cards: StrictInt = Field(default=5, ge=1, le=DECK_CARDS)
    timeout_s: float = Field(default=30, gt=0, le=TEST_TIMEOUT_MOST_S)


class TestEndRequest(_Request):
    ROLES = frozenset({Role.TECHNICIAN})
    cmd: Literal["test-end"]


class ShuffleAckRequest(_Request):
    """A floor supervisor acknowledges a SHUFFLE SUSPECT (play goes on with the shuffler), or
    takes the shuffler out of service, or puts it back (docs/shuffle-integrity.md)."""

    ROLES = frozenset({Role.FLOORPERSON})
    cmd: Literal["shuffle-acknowledge"]
    action: Literal["acknowledge", "out-of-service", "in-service"] = "acknowledge"
    by: str = Field(min_length=1, max_length=64)  # the floor supervisor, always named


AnyRequest = (
    StatusRequest
    | DevicesRequest
    | WatchRequest
    | ShufflerCountRequest
    | ShufflerSelfTestRequest
    | SettleRequest
    | VoidRequest
    | DeckRequest
    | StubCountRequest
    | IdleProcedureRequest
    | DeckInPlayRequest
    | ClearFaultRequest
    | TestBeginRequest
    | TestSeatRequest
    | TestLockoutRequest
    | TestShoeRequest
    | TestEndRequest
    | DealRequest
    | ShoeRequest
    | ClearShoeRequest
    | ResetLinkRequest
    | AcceptDeviceRequest
    | HitRequest
    | ShuffleAckRequest
)
Request = Annotated[AnyRequest, Field(discriminator="cmd")]
# The steps of a technician's walk test (tablectl.service.walk_test runs them).
TestRequest = (
    TestBeginRequest | TestSeatRequest | TestLockoutRequest | TestShoeRequest | TestEndRequest
)
REQUEST_TYPES: tuple[type[_Request], ...] = get_args(AnyRequest)


def commands(model: type[_Request]) -> tuple[str, ...]:
    """The `cmd` values a request model takes."""
    return get_args(model.model_fields["cmd"].annotation)


COMMANDS = tuple(cmd for model in REQUEST_TYPES for cmd in commands(model))


class RequestError(Exception):
    """A request that does not make sense; the message says what to send instead."""


class _Envelope(BaseModel):
    request: Request


def parse_request(raw: Any) -> AnyRequest:
    if not isinstance(raw, dict):
        raise RequestError("send one JSON object per line")
    cmd = raw.get("cmd")
    if cmd not in COMMANDS:
        raise RequestError(f"unknown command {cmd!r}; one of {', '.join(COMMANDS)}")
    try:
        return _Envelope.model_validate({"request": raw}).request
    except RecursionError:
        raise RequestError(f"{cmd}: nested too deeply") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][2:])
        raise RequestError(f"{cmd}: {where + ': ' if where else ''}{first['msg']}") from None


def _who(request: _Request, peer: str) -> str:
    return f"{request.by} ({peer})" if request.by else peer


def to_input(request: _Request, peer: str, *, now_ms: int = 0) -> Event:
    """The core input a command asks for; `peer` is the socket's operating-system user,
    now_ms the time it came (UTC milliseconds), which a new deck's age starts from."""
    by = _who(request, peer)
    try:
        match request:
            case SettleRequest():
                return Settle(
                    hands={int(seat): parse_cards(cards) for seat, cards in request.hands.items()},
                    community=parse_cards(request.community),
                    dealer=parse_cards(request.dealer),
                    folded=frozenset(request.folded),
                    by=by,
                )
            case VoidRequest():
                return VoidRound(reason=request.reason, by=by)
            case DealRequest():
                return DealRequested(seats=tuple(sorted(set(request.seats))), by=by)
            case ShoeRequest():
                return ShoeOutOfOrder(out_of_order=request.cmd == "shoe-out-of-order", by=by)
            case ClearShoeRequest():
                return ShoeCleared(by=by)
            case AcceptDeviceRequest():
                return DeviceAccepted(
                    device=request.device, serial_number=request.serial_number, by=by
                )
            case DeckRequest(cmd="new-deck", deck_id=None, back=None, replaces=None):
                return NewDeckRegistered(by=by)
            case DeckRequest(cmd="new-deck", deck_id=str(deck_id), back=str(back)):
                return DeckIntroduced(
                    deck_id=deck_id, back=back, replaces=request.replaces, at_ms=now_ms, by=by
                )
            case DeckRequest(cmd="new-deck"):
                raise RequestError("new-deck: give the deck's id and its back colour together")
            case StubCountRequest():
                return StubCounted(
                    cards=request.cards,
                    misdealt=request.misdealt,
                    confirmed=request.confirmed,
                    by=by,
                )
            case IdleProcedureRequest():
                return IdleProcedureDone(by=by)
            case DeckInPlayRequest():
                return DeckInPlay(deck_id=request.deck_id, by=by)
            case DeckRequest():
                return ReshuffleRequested(by=by)
            case ClearFaultRequest(seat=None, lockout=False):
                return ClearGpioFault(by=by)
            case ClearFaultRequest(seat=seat, lockout=lockout):
                if seat is not None and lockout:
                    raise RequestError("clear-fault: name a seat or the lock-out, not both")
                return ClearStuckInput(seat=seat, by=by)
            case HitRequest(cmd="validate"):
                return ValidateHit(hit_id=request.hit_id, by=by)
            case HitRequest():
                return ConfirmDocumentation(hit_id=request.hit_id, by=by)
            case ShuffleAckRequest():
                return ShuffleAcknowledged(action=request.action, by=by)
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    raise RequestError(f"{type(request).__name__} does not change the table")

"""The core's inputs: every event the round state machine steps on, as typed models.

Each input has a stable name (`TYPE`) and version. The daemon journals every input with the
outputs it produced, in one transaction, so `tablectl journal replay` can rebuild the state
from the inputs alone. Times are nanoseconds on the shell's one monotonic clock, stamped where
the edge happened; the core compares them but never reads a clock.
"""

from __future__ import annotations

from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, model_validator

from tablectl.core.compat import later
from tablectl.core.games import GameConfig
from tablectl.core.games.base import TableGame
from tablectl.rules.cards import Card, parse_cards


def _cards_in(value: object) -> tuple[Card, ...]:
    if isinstance(value, str):
        return parse_cards(value)
    if isinstance(value, tuple | list) and all(isinstance(c, Card) for c in value):
        return tuple(value)
    raise ValueError(f"cards are written as a run such as 'AsKsQs', not {value!r}")


# Cards travel and are journaled as a run of two-character cards ("AsKsQs").
Cards = Annotated[
    tuple[Card, ...],
    BeforeValidator(_cards_in),
    PlainSerializer(lambda cards: "".join(map(str, cards)), return_type=str),
]


class Input(BaseModel):
    """One core input. Subclasses name themselves with TYPE (stable) and VERSION; a field added
    later is declared `later(default)`, so older journals read and hash as they were written."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1


class SensorRules(BaseModel):
    """How the core watches the seat sensors for stuck inputs (the config's gpio section)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A seat sensor occupied during the betting of more rounds than this is stuck: the
    # dealer collects every wager before the cards are dealt (649a.8(b), 653a.8(b)).
    stuck_rounds: int = Field(default=1, ge=1)


class DeckRules(BaseModel):
    """The deck's life the core keeps (the config's deck section; docs/decks.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # 649a.3(c), 653a.3(c): changed at least every 4 hours dealt by hand, 8 from a shoe.
    max_age_ms: int = Field(gt=0)
    warn_before_ms: int = Field(default=15 * 60_000, ge=0)
    # 649a.8(f), 649a.9(d), 649a.10(d) and the other games': without a shuffler that counts
    # each deck, the stub is counted at least once every 5 rounds. None: the shuffler counts.
    stub_count_every_rounds: int | None = Field(default=None, ge=1, le=5)
    # 649a.3(b)(3): two decks alternate, each used for every other round.
    alternate: bool = False
    # 649a.5(f), 653a.5(f) (643a.5(f) by analogy): no round for this long and the idle
    # procedure is due before the next (None: not kept, a device that reshuffles by itself,
    # 649a.5(g); and every journal written before revision 4).
    idle_ms: int | None = later(None)


RULES_REVISION = 4


class LinkRules(BaseModel):
    """A table whose progressive wager is on a link (the config's [progressive] section)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    link_id: str
    table_ref: str  # site/table, as the link's parameters list the table
    link_timeout_ms: int  # silence after which the shell says LINK DOWN (5321.18(c))


class TableRules(BaseModel):
    """What the core needs of a table's configuration: seats, decks and its game's rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seats: int
    decks: int
    game: GameConfig
    # An automated dealing shoe reads the cards: hands are formed from what it read, and the
    # dealer types a hand only for a shoe marked out of order (649a.13(g), 643a.13(g)).
    shoe: bool = False
    # The core keeps each seat sensor's level and the lock-out button's, decides a chip that
    # rests before a round opens once (when it opens, or when it is lifted) and finds stuck
    # inputs. None only in journals written before it did (docs/gpio.md, Journals): those
    # replay as they were written.
    sensors: SensorRules | None = SensorRules()
    # The decks' identity, age and stub counts (core/decks.py); None: not kept (a config
    # without a deck section, and every journal written before revision 3).
    deck: DeckRules | None = later(None)
    # Which revision of the core's own rules the journal was written under, so a journal
    # replays as it was written: 1, before issue 14 (no sensor levels; a shoe fault did not
    # hold the table until `dealer clear-shoe`); 2 until issue 18; 3 until issue 27 (decks:
    # identity, alternation, age and stub counts hold the table; core/decks.py); 4 since (a
    # deck past its age is not dealt, a stub count the shoe's reads contradict is questioned,
    # an idle table asks for the idle procedure).
    revision: int = Field(default=RULES_REVISION, ge=1, le=RULES_REVISION)
    # The progressive wager is on a link: its meter is the link controller's.
    link: LinkRules | None = later(None)

    # The game of these rules, built once per rules object: the shell steps with one rules
    # object (its power-up's) for as long as it runs, and building the game at every step
    # (with what it works out once, its meter and paytables) was ~16 us of a cold one. The memo
    # lives on the object the caller holds, not in the core's modules: a cached_property is no
    # field, and pydantic leaves it out of validation, dumps, equality and hash. A copy with
    # fields updated carries its original's memo, so the memo keeps the config it was built
    # from and serves only while that is still this object's game.
    @cached_property
    def game_built(self) -> tuple[GameConfig, TableGame]:
        return self.game, self.game.table_game()

    @property
    def table_game(self) -> TableGame:
        """This table's game (core/games): what the round core asks of it."""
        built, game = self.game_built
        return game if built is self.game else self.game.table_game()


class PowerUp(Input):
    """The daemon started with these rules; whatever it was doing before was interrupted."""

    TYPE = "power_up"
    rules: TableRules

    @model_validator(mode="before")
    @classmethod
    def _journaled_before_sensor_rules(cls, data: Any) -> Any:
        # A power-up journaled before TableRules had `sensors` ran without them, under the
        # core's first revision.
        rules = data.get("rules") if isinstance(data, dict) else None
        if isinstance(rules, dict) and "sensors" not in rules:
            return {**data, "rules": {**rules, "sensors": None, "revision": 1}}
        return data


# --- seat sensors and the lock-out button --------------------------------------------


class ChipSensed(Input):
    """A seat sensor's contact episode ended in a decision.

    present: the chip has rested for chip_present_ms (or the seat has stayed empty that
    long). since_ns: the first edge of the episode, i.e. when the chip arrived or left.
    """

    TYPE = "chip_sensed"
    seat: int
    present: bool
    since_ns: int


class LockoutPressed(Input):
    """The dealer announced "no more bets" with the lock-out button (its leading edge).

    undecided_seats: seats whose chip arrived before the edge but has not yet rested;
    each is decided by its own ChipSensed later (649a.2(c)(2): placed before the edge).
    resolution_ns: the edge happened within (at_ns - resolution_ns, at_ns]: 1 for a kernel
    timestamp, the sampling period for a polled backend.
    """

    TYPE = "lockout_pressed"
    at_ns: int
    undecided_seats: tuple[int, ...] = ()
    resolution_ns: int = 1
    # Seats whose chip was on the sensor at the edge and had rested (docs/gpio.md, the
    # lock-out rule): with undecided_seats, the only seats that may count. A wager on any
    # other seat was lifted before the edge and is withdrawn. None: not reported (journals
    # written before it was, and locks without an edge): the wagers recognised so far count.
    resting_seats: tuple[int, ...] | None = None


class LockoutReleased(Input):
    """The lock-out button is up again (it stayed up for lockout_debounce_ms)."""

    TYPE = "lockout_released"
    at_ns: int


class LockoutHeld(Input):
    """The lock-out button has stayed down past gpio.lockout_hold_max_ms: a stuck input."""

    TYPE = "lockout_held"
    since_ns: int  # the press
    at_ns: int


def placed_before_lockout(since_ns: int, at_ns: int, resolution_ns: int) -> bool:
    """The tie rule (649a.2(c)(2)): a chip counts only if it surely arrived before the edge.

    Every stamp is the latest moment its edge can have happened; the lock-out edge may have
    happened up to resolution_ns before its stamp. A chip whose stamp falls within that
    (equal stamps included) is a tie, and a tie is refused: nothing placed after "no more
    bets" may count.
    """
    return since_ns <= at_ns - max(1, resolution_ns)


class GpioFault(Input):
    """The sensors cannot be trusted: an edge was lost (a gap in the kernel's sequence
    numbers), a read failed, or the link to the I/O went away. Betting stops until cleared."""

    TYPE = "gpio_fault"
    reason: str
    at_ns: int


# --- the shuffler ---------------------------------------------------------------------


class DeviceInput(Input):
    """From a device. stale: the device held it before this daemon started (power-up), so
    it is journaled but never makes a deck ready."""

    stale: bool = False


class ShuffleStarted(DeviceInput):
    TYPE = "shuffle_started"


class ShuffleCompleted(DeviceInput):
    TYPE = "shuffle_completed"
    card_count: int


class ShufflerFault(DeviceInput):
    TYPE = "shuffler_fault"
    code: str  # jam, stopped, cycle-incomplete, door-open
    at_connect: bool = False  # found in the STATUS read on connect, not as an event
    from_status: bool = later(False)  # found in a later STATUS (no event said so)


class ShufflerRebooted(Input):
    TYPE = "shuffler_rebooted"


class ShuffleRequestFailed(Input):
    """The shuffler would not take a SHUFFLE. retrying: the shell keeps asking (and says so
    again only when the reason changes); without it, the core asks again itself."""

    TYPE = "shuffle_request_failed"
    reason: str
    retrying: bool = later(False)


# --- every polled device ----------------------------------------------------------------


class DeviceIdentified(Input):
    """A device answered IDENTIFY on (re)connect. Another serial number than the accepted
    one blocks play until a technician accepts the device."""

    TYPE = "device_identified"
    device: str  # shuffler, shoe
    model: str
    serial_number: str
    firmware: str


class DeviceEventsRefused(Input):
    """A device's event broke its sequence (a gap, an absurd id, an unknown kind): refused,
    never taken as the device's report; the device is treated as faulted."""

    TYPE = "device_events_refused"
    device: str
    boot_id: int
    event_id: int
    expected_event_id: int
    kind: int


class DeviceReportConflict(Input):
    """A device reported one event id twice, differently (a count of 52, then 51): neither
    is a replay to skip; the device cannot be believed about it."""

    TYPE = "device_report_conflict"
    device: str
    boot_id: int
    event_id: int
    kind: int


# --- the automated dealing shoe -------------------------------------------------------


class CardRead(StrEnum):
    READ = "read"
    UNREAD = "unread"  # the shoe dealt a card it could not read
    FOREIGN = "foreign"  # not a card of a standard deck
    FACE_UP = "face-up"  # found face up: not used, to the discard rack (649a.13(a))


class ShoeCard(DeviceInput):
    """One card out of the shoe, in dealing order (never published: the order stays here)."""

    TYPE = "shoe_card"
    card: Annotated[
        Card | None,
        BeforeValidator(lambda v: Card.parse(v) if isinstance(v, str) else v),
        PlainSerializer(lambda c: None if c is None else str(c), return_type=str | None),
    ] = None
    read: CardRead = CardRead.READ
    back: str | None = later(None)  # the back's colour, where the shoe reports it (core/decks.py)


class ShoeStackDealt(DeviceInput):
    """The shoe finished a stack (a hand, the dealer's, the community's) of this many cards."""

    TYPE = "shoe_stack"
    cards: int


class ShoeDealCompleted(DeviceInput):
    TYPE = "shoe_deal_completed"
    cards: int


class ShoeFault(DeviceInput):
    TYPE = "shoe_fault"
    code: str  # jam, stopped, incomplete, empty
    at_connect: bool = False
    from_status: bool = later(False)  # found in a later STATUS (no event said so)


class ShoeRebooted(Input):
    TYPE = "shoe_rebooted"


class DealRequestFailed(Input):
    TYPE = "deal_request_failed"
    reason: str


class DeviceResumed(Input):
    """What a device said first after this power-up (its first STATUS, read against the cursor
    the journal kept): the facts that settle a command the journal says was issued to it and
    never confirmed (core/recovery.py). Its events in that STATUS come just before it."""

    TYPE = "device_resumed"
    device: str  # shuffler, shoe
    boot_id: int
    cursor_boot_id: int | None  # the boot the journal's cursor names (None: no cursor yet)
    state: str  # as the device names it: idle, dealing, shuffling, ready, fault
    acting: bool  # carrying out a command now (dealing, shuffling)
    events_held: int  # events past the journal's cursor it reported in that STATUS


class CommandStalled(Input):
    """A command a device took (SHUFFLE, DEAL) has not completed: nothing it reported reached
    the table for the configured time, or the device says it is done while the table still
    waits for its completion. The shell's clock decides (service/waits.py), as it decides a
    link lost; the core hears the decision with what the device's last STATUS said, and
    journals it as a fault only if it still waits."""

    TYPE = "command_stalled"
    device: Literal["shuffler", "shoe"]
    awaited: Literal["shuffle", "deal"]
    waited_ms: int = Field(ge=0)  # since the device took the command, or last progressed
    reported: str | None = None  # the device's state in its last STATUS (ready, idle, ...)
    card_count: int | None = None  # the count its last STATUS shows
    replayed: int = 0  # events it listed again under ids already taken, while awaited


# --- delivery to the backends ---------------------------------------------------------


class DeliveryFault(Input):
    """The broker refuses this table's rows (its ACL: another table's identity) or does not
    acknowledge them in time, as the MQTT relay saw it: they wait in the journal."""

    TYPE = "delivery_fault"
    reason: str


class DeliveryRestored(Input):
    """The broker took a row of this table's again."""

    TYPE = "delivery_restored"


class AckPastJournal(Input):
    """A registered backend acknowledged rows past the journal's end: it holds rows this
    journal does not, so the journal was put back from an older copy (or the backend's
    acknowledgement is wrong). The seqs the table would hand out next are rows that backend
    already holds with other content: nothing more is published, no round opens, until a
    technician has looked into it (`tablectl journal recover`)."""

    TYPE = "ack_past_journal"
    backend_id: str
    acked_through_seq: int
    last_seq: int  # the journal's end when the acknowledgement came


class JournalCheckPending(Input):
    """The daemon verifies the journal's hash chains in full, in the background (a journal
    too long to walk before it starts): no round opens until they pass."""

    TYPE = "journal_check_pending"
    through_seq: int  # the journal's end at the start: the rows the walk covers
    through_input: int


class JournalChainChecked(Input):
    """The full walk of both hash chains ended: whole, or broken where `broken` says."""

    TYPE = "journal_chain_checked"
    through_seq: int
    through_input: int
    broken: str | None = None  # the first problem found (store/integrity.py), or None


# --- a linked progressive: what the shell heard from the link controllers ---------------


class LinkLevelTerms(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    level_id: str
    contribution_rate_bp: int
    initial_cents: int
    reset_cents: int


class LinkParametersHeard(Input):
    """The link's parameters as the controllers broadcast them (retained), when they differ
    from the ones this table holds: validated by the core (5321.18(b)(4))."""

    TYPE = "link_parameters_heard"
    link_id: str
    parameters_version: int
    parameters_sha256: str
    game: str
    paytable: str | None
    wager_cents: int
    tables: tuple[str, ...]
    levels: tuple[LinkLevelTerms, ...]


class LinkLost(Input):
    """Neither a live `up` broadcast nor an ack heard for the link's timeout (the shell's
    clock decides; the core hears the decision): the progressive locks out (5321.18(c))."""

    TYPE = "link_lost"
    reason: str
    silent_ms: int


class LinkRestored(Input):
    """A live `up` broadcast or an ack heard again."""

    TYPE = "link_restored"
    heard: str  # state, ack


class LinkClaimAnswer(Input):
    """The controller's answer to one of this table's claims (`answers/{site}/{table}`)."""

    TYPE = "link_claim_answer"
    claim_id: str
    status: Literal["awarded", "refused"]
    amount_cents: int = 0
    award_version: int | None = None
    reason: str | None = None


# --- people: the dealer and the floorperson -------------------------------------------


class Command(Input):
    """A person's command; `by` names who gave it (the control socket's peer)."""

    by: str = "unknown"


class ShuffleSuspected(Input):
    """The shuffle-integrity monitor (service/shuffle_monitor.py) found a deck use whose order
    a fair shuffle gives less often than its test's level (649a.5(a): "randomly intermixed").
    Figures and p-values only: never a card. block: the config stops rounds on it."""

    TYPE = "shuffle_suspected"
    deck: str
    round_id: int
    test: str
    figure: str
    p_value: float
    alpha: float
    block: bool = False


class ShuffleAcknowledged(Command):
    """A floor supervisor looked at a SHUFFLE SUSPECT: play goes on with the shuffler, or it
    is taken out of service (out_of_service: no shuffle is asked of it until another is
    accepted or it is put back with `tablectl shuffle acknowledge --in-service`)."""

    TYPE = "shuffle_acknowledged"
    action: Literal["acknowledge", "out-of-service", "in-service"] = "acknowledge"


class Settle(Command):
    """The cards shown at the end of the round (entered, or read by a shoe) and the folds."""

    TYPE = "settle"
    hands: dict[int, Cards] = {}
    community: Cards = ()
    dealer: Cards = ()
    folded: frozenset[int] = frozenset()


class DealRequested(Command):
    """The dealer has the shoe deal this round (649a.10(b)): to the seats with a table-system
    wager and to `seats`, the other players in the round."""

    TYPE = "deal_requested"
    seats: tuple[int, ...] = ()
    # The boot of the shoe the deal is sent to, as the daemon knew it: after a power-up, a
    # shoe in another boot cannot show that it never dealt (core/recovery.py).
    shoe_boot_id: int | None = later(None)


class DeviceLinkReset(Command):
    """A technician resets a device link stuck on refused events: the events the device held
    (from_event_id + 1 .. to_event_id) are skipped, never taken as its reports, and the link
    takes what follows. The deck is not believed until a new shuffle (649a.13(e))."""

    TYPE = "device_link_reset"
    device: str
    boot_id: int
    from_event_id: int  # the last event journaled
    to_event_id: int  # the last event skipped: the link's cursor from now on


class DeviceAccepted(Command):
    """A technician accepts the device now connected (its serial number) for play."""

    TYPE = "device_accepted"
    device: str
    serial_number: str


class ShoeOutOfOrder(Command):
    """The shoe is covered or signed out of order (649a.13(g)): hands may be entered by hand;
    or, out_of_order false, it is back in service."""

    TYPE = "shoe_out_of_order"
    out_of_order: bool = True


class ShoeCleared(Command):
    """After a shoe fault the dealer removed the cards from the shoe (649a.13(f)): it may
    deal again."""

    TYPE = "shoe_cleared"


class VoidRound(Command):
    TYPE = "void_round"
    reason: str  # an irregularity that voids the round in this game, e.g. shoe-jam


class NewDeckRegistered(Command):
    """A replacement deck was brought to the table after a miscount (649a.5(b))."""

    TYPE = "new_deck_registered"


Back = Annotated[str, Field(pattern=r"^[a-z][a-z-]{0,23}$")]
DeckId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")]


class DeckIntroduced(Command):
    """A deck comes to the table (649a.3): its id and back colour, from the dealer or the
    shuffler; at_ms (UTC, milliseconds) starts its age (649a.3(c)). It replaces `replaces`,
    or the deck that was removed or is past its age, or joins the decks in play."""

    TYPE = "deck_introduced"
    deck_id: DeckId
    back: Back
    at_ms: int = Field(ge=0)
    replaces: DeckId | None = None
    source: Literal["dealer", "shuffler"] = "dealer"


class DeckClock(Input):
    """The time (UTC, milliseconds) as the shell read it: decks age on it (649a.3(c)). The
    shell sends one at power-up and whenever a deck's warning or limit falls due."""

    TYPE = "deck_clock"
    at_ms: int = Field(ge=0)


class DeckInPlay(Command):
    """This round is dealt from this deck (649a.3(b)(3): decks alternate): the dealer says so
    (refused for the deck of the previous round), or the shuffler reported the deck whose
    shuffle opened the round (that deck again: the round is void)."""

    TYPE = "deck_in_play"
    deck_id: DeckId
    source: Literal["dealer", "shuffler"] = "dealer"


class StubCounted(Command):
    """The dealer counted the stub (649a.8(f)-(h), 649a.9(d)-(f), 649a.10(d)-(f) and the
    other games'): the deck it shows. cards None: the count the shoe's reads give, confirmed.
    misdealt: a hand (or the community area) has more or fewer cards than the deal gives."""

    TYPE = "stub_counted"
    cards: int | None = Field(default=None, ge=0, le=104)
    misdealt: bool = False
    # The dealer's count stands against the shoe's reads that contradict it (it was
    # questioned: both shown, the dealer confirms which).
    confirmed: bool = later(False)


class TableIdle(Input):
    """No round was locked since since_ms (the last round's "no more bets", the last idle
    procedure or deck introduced), as the shell read the time at at_ms (UTC milliseconds):
    at a table that keeps its idle time, the idle procedure falls due (649a.5(f))."""

    TYPE = "table_idle"
    since_ms: int = Field(ge=0)
    at_ms: int = Field(ge=0)


class IdleProcedureDone(Command):
    """The dealer did the idle procedure (649a.5(f)): the cards were spread for inspection,
    then the deck from the table went into the shuffler and the one in it was removed."""

    TYPE = "idle_procedure_done"


class ReshuffleRequested(Command):
    """The dealer cleared a shuffler fault and asks for the reshuffle of 649a.13(e)."""

    TYPE = "reshuffle_requested"


class ClearGpioFault(Command):
    """The dealer or a technician checked the sensors after a GPIO fault: betting may reopen."""

    TYPE = "clear_gpio_fault"


class ClearStuckInput(Command):
    """The dealer or a technician freed a stuck input: the lock-out button (seat None), or a
    seat's sensor. Its bets are taken again."""

    TYPE = "clear_stuck_input"
    seat: int | None = None


class SensorTestStarted(Command):
    """A technician's walk test takes the sensors and lamps: no round opens meanwhile."""

    TYPE = "sensor_test_started"
    test: Literal["sensors", "lockout", "shoe"]


class SensorTestEnded(Command):
    TYPE = "sensor_test_ended"
    test: Literal["sensors", "lockout", "shoe"]
    # seats (the lock-out test: 0 when the press was seen; the shoe test: the cards, 1 to N)
    passed: tuple[int, ...] = ()
    failed: tuple[int, ...] = ()
    resolution_ns: int | None = None  # the coarsest edge resolution seen


class ValidateHit(Command):
    """A floorperson validated a progressive payout (649a.11(c)(5)(iii), 653a.11(k)(3))."""

    TYPE = "validate_hit"
    hit_id: str


class ConfirmDocumentation(Command):
    """The documentation of a payout not paid from the table inventory is complete."""

    TYPE = "confirm_documentation"
    hit_id: str


class JournalRecovered(Command):
    """A technician accepted what `tablectl journal recover` mends in a journal that failed its
    integrity checks (store/integrity.py): the checks that failed, what was accepted and what
    was done. The daemon refuses to start on such a journal until this is journaled."""

    TYPE = "journal_recovered"
    accepted: tuple[str, ...]
    problems: tuple[str, ...]
    done: tuple[str, ...]


Event = (
    PowerUp
    | ChipSensed
    | LockoutPressed
    | LockoutReleased
    | LockoutHeld
    | GpioFault
    | ClearGpioFault
    | ClearStuckInput
    | SensorTestStarted
    | SensorTestEnded
    | ShuffleStarted
    | ShuffleCompleted
    | ShufflerFault
    | ShufflerRebooted
    | ShuffleRequestFailed
    | DeviceIdentified
    | DeviceEventsRefused
    | DeviceReportConflict
    | DeviceLinkReset
    | ShoeCard
    | ShoeStackDealt
    | ShoeDealCompleted
    | ShoeFault
    | ShoeRebooted
    | DealRequestFailed
    | DeviceResumed
    | CommandStalled
    | DeliveryFault
    | DeliveryRestored
    | AckPastJournal
    | JournalCheckPending
    | JournalChainChecked
    | DealRequested
    | DeviceAccepted
    | ShoeOutOfOrder
    | ShoeCleared
    | Settle
    | VoidRound
    | NewDeckRegistered
    | ReshuffleRequested
    | ValidateHit
    | ConfirmDocumentation
    | JournalRecovered
    | DeckIntroduced
    | DeckClock
    | DeckInPlay
    | StubCounted
    | TableIdle
    | IdleProcedureDone
    | LinkParametersHeard
    | LinkLost
    | LinkRestored
    | LinkClaimAnswer
    | ShuffleSuspected
    | ShuffleAcknowledged
)

INPUT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        PowerUp,
        ChipSensed,
        LockoutPressed,
        LockoutReleased,
        LockoutHeld,
        GpioFault,
        ClearGpioFault,
        ClearStuckInput,
        SensorTestStarted,
        SensorTestEnded,
        ShuffleStarted,
        ShuffleCompleted,
        ShufflerFault,
        ShufflerRebooted,
        ShuffleRequestFailed,
        DeviceIdentified,
        DeviceEventsRefused,
        DeviceReportConflict,
        DeviceLinkReset,
        ShoeCard,
        ShoeStackDealt,
        ShoeDealCompleted,
        ShoeFault,
        ShoeRebooted,
        DealRequestFailed,
        DeviceResumed,
        CommandStalled,
        DeliveryFault,
        DeliveryRestored,
        AckPastJournal,
        JournalCheckPending,
        JournalChainChecked,
        DealRequested,
        DeviceAccepted,
        ShoeOutOfOrder,
        ShoeCleared,
        Settle,
        VoidRound,
        NewDeckRegistered,
        ReshuffleRequested,
        ValidateHit,
        ConfirmDocumentation,
        JournalRecovered,
        DeckIntroduced,
        DeckClock,
        DeckInPlay,
        StubCounted,
        TableIdle,
        IdleProcedureDone,
        LinkParametersHeard,
        LinkLost,
        LinkRestored,
        LinkClaimAnswer,
        ShuffleSuspected,
        ShuffleAcknowledged,
    )
}


def input_from_journal(type_: str, data: dict[str, Any]) -> Event:
    """Rebuild a journaled input (replay); unknown names are an error naming the known."""
    try:
        cls = INPUT_TYPES[type_]
    except KeyError:
        raise ValueError(f"unknown input {type_!r}; one of {sorted(INPUT_TYPES)}") from None
    return cls.model_validate(data)

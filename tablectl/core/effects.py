"""The core's outputs: typed journal records, and the effects the shell executes.

Every journal record is a model with a stable name (`TYPE`, as published on MQTT) and a
version; its JSON Schema comes from the model (`record_schemas`). Nothing untyped leaves the
core: the shell serialises these models, it never builds an event payload itself. The
effects it executes (lamps, a shuffle, a deal) are typed dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt

# --- journal records --------------------------------------------------------------------


class MeterReading(BaseModel):
    """The meter a record leaves, carried by every record that changes it (retained topic)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    meter_id: str
    meter_cents: int
    meter_carry: int  # ten-thousandths of a cent carried below the shown amount


class Record(BaseModel):
    """A domain event for the durable journal (and so for the backends)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    TYPE: ClassVar[str]
    VERSION: ClassVar[int] = 1

    def meter_reading(self) -> MeterReading | None:
        """The meter this record leaves, if it changes one."""
        return None


class MeterChange(Record):
    meter: MeterReading

    def meter_reading(self) -> MeterReading | None:
        return self.meter


class RoundOpened(Record):
    TYPE = "round.opened"
    round_id: int


class WagerAccepted(Record):
    """A table-system wager recognised; its seat's light acknowledges it (649a.2(c)(1))."""

    TYPE = "wager.accepted"
    round_id: int
    seat: int
    wager_cents: int
    # The chip arrived before "no more bets" and finished resting after it (649a.2(c)(2)).
    decided_after_lockout: bool = False


class WagerRejected(Record):
    TYPE = "wager.rejected"
    round_id: int
    seat: int
    reason: str  # after-lockout, table-closed (a chip lifted before any round opened), sensor-stuck
    rule: str


class WagerWithdrawn(Record):
    """A wager no longer counts: its chip was lifted while betting, or was not on its sensor
    at the lock-out edge, or left it before resting (docs/gpio.md, the lock-out rule)."""

    TYPE = "wager.withdrawn"
    round_id: int
    seat: int


class RoundLocked(Record):
    """ "No more bets": no later chip is recognised. Chips still resting are decided later."""

    TYPE = "round.locked"
    round_id: int
    cause: str  # lockout-button, power-up
    accepted_wagers: int  # recognised so far
    seats: list[int]
    undecided_seats: list[int]  # arrived before the edge, still resting
    rule: str


class WagersCounted(Record):
    """The final count the dealer checks the chips against (649a.8(b), 643a.8(b))."""

    TYPE = "wagers.counted"
    round_id: int
    accepted_wagers: int
    seats: list[int]
    total_wager_cents: int
    decided_after_lockout: list[int]
    rule: str


class MeterContribution(MeterChange):
    TYPE = "meter.contribution"
    round_id: int
    seat: int
    wager_cents: int
    rate_bp: int
    contribution_ten_thousandths_cent: int


class GpioFaultRecord(Record):
    """The sensors cannot be trusted; a round taking bets was locked out (649a.2(c)(2))."""

    TYPE = "gpio.fault"
    reason: str
    round_id: int
    round_locked: bool  # the round was taking bets and is locked out by this fault
    rule: str


class GpioFaultCleared(Record):
    TYPE = "gpio.fault_cleared"
    reason: str
    by: str


class InputStuck(Record):
    """A stuck input: the lock-out button held or never released (betting stays closed), or
    a seat's sensor occupied through too many rounds or while the cards are dealt (that
    seat's wagers are refused). It stands until a person frees the input and clears it."""

    TYPE = "gpio.input_stuck"
    input: str  # lock-out-button, seat-sensor
    seat: int | None
    cause: str  # held, not-released, occupied-rounds, occupied-during-deal
    round_id: int
    round_locked: bool  # the round was taking bets and is locked out by this fault
    rule: str


class InputStuckCleared(Record):
    TYPE = "gpio.input_stuck_cleared"
    input: str
    seat: int | None
    cause: str
    by: str


class SensorTestStartedRecord(Record):
    TYPE = "gpio.test_started"
    test: str
    by: str


class SensorTestEndedRecord(Record):
    TYPE = "gpio.test_ended"
    test: str
    passed: list[int]
    failed: list[int]
    resolution_ns: int | None
    by: str


class ShuffleStartedRecord(Record):
    TYPE = "shuffle.started"
    stale: bool = False  # held by the shuffler since before this power-up


class ShuffleCompletedRecord(Record):
    TYPE = "shuffle.completed"
    card_count: int
    count_ok: bool
    # A completion opens no round unless a shuffle started since the last power-up, fault
    # or reboot and no fault stands (649a.13(e)); why not, when it does not.
    deck_ready: bool
    not_ready_because: str | None = None


class ShufflerFaultRecord(Record):
    TYPE = "shuffler.fault"
    code: str
    rule: str


class ShufflerRebootedRecord(Record):
    TYPE = "shuffler.rebooted"


class ShuffleRequestFailedRecord(Record):
    TYPE = "shuffler.request_failed"
    reason: str


class ShufflerFaultCleared(Record):
    TYPE = "shuffler.fault_cleared"
    code: str
    by: str


class DeckMiscount(Record):
    """The shuffler's count is not 52: the deck leaves the table (649a.5(b))."""

    TYPE = "irregularity.deck_miscount"
    card_count: int
    expected: int
    rule: str
    action: str


class DeviceIdentifiedRecord(Record):
    """A device was seen for the first time, or another one took its place (play is blocked
    until a technician accepts it), or the accepted one is back."""

    TYPE = "device.identified"
    device: str
    model: str
    serial_number: str
    firmware: str
    accepted: bool
    previous_serial_number: str | None


class DeviceAcceptedRecord(Record):
    TYPE = "device.accepted"
    device: str
    serial_number: str
    replaces: str | None
    by: str


class DeviceEventsRefusedRecord(Record):
    """A device broke its event sequence: its report is refused and it counts as faulted."""

    TYPE = "device.events_refused"
    device: str
    boot_id: int
    event_id: int
    expected_event_id: int
    kind: int


class DeviceReportConflictRecord(Record):
    """A device reported one event id twice with different contents: never a replay; the
    device is faulted and, for the shuffler, the deck it counted is removed."""

    TYPE = "device.report_conflict"
    device: str
    boot_id: int
    event_id: int
    kind: int


class DeviceLinkResetRecord(Record):
    """A technician reset a link stuck on refused events: these events were skipped."""

    TYPE = "device.link_reset"
    device: str
    boot_id: int
    skipped_from_event_id: int
    skipped_to_event_id: int
    by: str


class DealStarted(Record):
    """The shoe is asked to deal the round's plan (no card identities leave the table PC)."""

    TYPE = "deal.started"
    round_id: int
    seats: list[int]
    stacks: list[int]
    procedure: str
    rule: str
    by: str


class DealCompleted(Record):
    TYPE = "deal.completed"
    round_id: int
    cards_read: int
    hands_read: int


class DealRequestFailedRecord(Record):
    TYPE = "deal.request_failed"
    round_id: int
    reason: str


class DealResolved(Record):
    """A deal the journal had asked of the shoe, unconfirmed at a power-up, settled by what
    the shoe said first after it (core/recovery.py): asked again (it showed it never dealt),
    dealing (its cards decide), or the round void (it cannot show that, 649a.13(f))."""

    TYPE = "deal.resolved"
    round_id: int
    outcome: str  # reissued, dealing, voided
    why: str
    boot_id: int  # the shoe's, as it reported
    state: str
    events_held: int
    rule: str


class CommandStalledRecord(Record):
    """A command a device took never completed (core/stalls.py): a shuffle is a shuffler
    fault (649a.13(e), the cards reshuffled), a deal a shoe fault that voids the round
    (649a.13(f)). What the device last said is kept with it."""

    TYPE = "device.stalled"
    device: str
    awaited: str  # shuffle, deal
    waited_ms: int
    reported: str | None  # the device's state in its last STATUS
    card_count: int | None  # the count its last STATUS shows
    replayed: int  # events it listed again under ids already taken
    round_id: int | None  # the round a stalled deal voids
    rule: str
    action: str


class DeliveryFaultRecord(Record):
    """The broker refuses this table's rows or does not acknowledge them (its ACL, another
    table's identity, a broker that stopped answering): they wait in the journal."""

    TYPE = "delivery.fault"
    reason: str


class DeliveryFaultCleared(Record):
    """The broker takes this table's rows again: those that waited go out."""

    TYPE = "delivery.fault_cleared"
    reason: str  # the fault that stood


class CardFaceUp(Record):
    """One card found face up while dealing: not used, to the discard rack (649a.13(a))."""

    TYPE = "irregularity.card_face_up"
    round_id: int
    action: str
    rule: str


class DeckIrregular(Record):
    """The shoe read a card twice or a card of no standard deck: the deck leaves the table."""

    TYPE = "irregularity.deck"
    round_id: int
    reason: str  # duplicate-card, foreign-card
    rule: str
    action: str


class ShoeFaultRecord(Record):
    TYPE = "shoe.fault"
    code: str
    round_id: int | None
    round_voided: bool
    rule: str
    at_connect: bool = False


class ShoeFaultCleared(Record):
    """The dealer removed the cards from the shoe after its fault (649a.13(f))."""

    TYPE = "shoe.fault_cleared"
    code: str
    by: str


class ShuffleSuspect(Record):
    """SHUFFLE SUSPECT: a deck's order fails a shuffle-integrity test (649a.5(a)). Figures and
    p-values only (docs/shuffle-integrity.md): the card order never leaves the table PC."""

    TYPE = "shuffle.suspect"
    deck: str
    round_id: int
    test: str
    figure: str
    p_value: float
    alpha: float
    blocks: bool
    rule: str


class ShuffleSuspectCleared(Record):
    """A floor supervisor acknowledged the SHUFFLE SUSPECT, or took the shuffler out of (or
    back into) service."""

    TYPE = "shuffle.acknowledged"
    action: str
    test: str | None
    by: str


class ShoeRebootedRecord(Record):
    TYPE = "shoe.rebooted"


class ShoeOutOfOrderRecord(Record):
    TYPE = "shoe.out_of_order"
    out_of_order: bool
    rule: str
    by: str


class DeckRegistered(Record):
    TYPE = "deck.registered"
    replaces: str
    by: str


class DeckIntroducedRecord(Record):
    """A deck came to the table (649a.3): its age starts at at_ms (UTC milliseconds)."""

    TYPE = "deck.introduced"
    deck_id: str
    back: str
    at_ms: int
    max_age_ms: int
    replaces: str | None
    source: str  # dealer, shuffler
    by: str
    rule: str


class DeckAgeWarning(Record):
    """A deck nears its age limit (649a.3(c)): the next deck should be brought."""

    TYPE = "deck.age_warning"
    deck_id: str
    age_ms: int
    max_age_ms: int
    rule: str


class DeckAgeExpired(Record):
    """A deck reached its age limit (649a.3(c)): no round opens until it is replaced."""

    TYPE = "deck.age_expired"
    deck_id: str
    age_ms: int
    max_age_ms: int
    rule: str
    action: str


class DeckAlternation(Record):
    """A round dealt (or about to be) from the deck that played the previous round: refused,
    the decks alternate each round (649a.3(b)(3)); a round under way is void."""

    TYPE = "irregularity.deck_alternation"
    round_id: int
    deck_id: str
    previous_round_deck: str
    round_voided: bool
    rule: str


class StubCountDue(Record):
    """The stub has not been counted for `rounds` rounds: no round opens until it is
    (649a.8(f), 649a.9(d), 649a.10(d) and the other games': at least once every 5 rounds)."""

    TYPE = "deck.stub_count_due"
    round_id: int
    rounds: int
    rule: str


class StubCountRecord(Record):
    """The dealer's stub count (649a.8(f)-(h) and the other games'): 52, or the round void
    and, unless misdealt, the deck removed."""

    TYPE = "deck.stub_count"
    round_id: int
    deck_id: str | None
    cards: int
    derived_from_shoe: bool
    misdealt: bool
    outcome: str  # correct, misdealt-void, deck-removed
    rule: str
    by: str


class DeckAgeHold(Record):
    """The round's deck reached its age limit after the round opened and before its cards were
    dealt: it is not dealt from it (649a.3(c)). The round waits for a new deck or is void."""

    TYPE = "deck.age_hold"
    round_id: int
    deck_id: str
    age_ms: int
    max_age_ms: int
    rule: str
    action: str


class StubCountQuestioned(Record):
    """The dealer's stub count contradicts the shoe's reads of the round: both are shown and
    nothing is decided until the dealer confirms which (649a.10(d)-(f) and the others')."""

    TYPE = "deck.stub_count_questioned"
    round_id: int
    deck_id: str | None
    counted: int  # the cards the dealer's count shows in the deck
    cards_read: int  # the cards the shoe read this round
    stub_counted: int  # the stub the dealer's count gives (counted - cards_read)
    stub_expected: int  # the stub a whole deck leaves after those reads
    rule: str
    by: str


class IdleProcedureDue(Record):
    """No round for the table's idle time: the idle procedure is due before the next round
    (649a.5(f)); a round open without a wager is closed (void, nothing to return)."""

    TYPE = "deck.idle_procedure_due"
    since_ms: int  # the last activity: a round's "no more bets", an idle procedure, a deck
    idle_ms: int
    round_voided: int | None
    rule: str
    action: str


class IdleProcedureDoneRecord(Record):
    TYPE = "deck.idle_procedure_done"
    rule: str
    by: str


class WagerOutcome(StrEnum):
    WON = "won"
    LOST = "lost"
    FORFEITED = "forfeited"  # folded (649a.11(b)(2))
    RETURNED = "returned"


class WagerSettled(Record):
    """The result of one table-system wager: every wager gets exactly one."""

    TYPE = "wager.settled"
    round_id: int
    seat: int
    wager: str  # progressive, bonus
    wager_cents: int
    outcome: WagerOutcome
    paid_cents: int  # what the player receives (the wager was collected at lock-out)
    hand: str | None
    rule: str


class JackpotHit(Record):
    """A progressive payout; the table holds until a floorperson validates it."""

    TYPE = "jackpot.hit"
    hit_id: str
    round_id: int
    seat: int
    hand: str
    cards: str  # the evidence: the cards of the winning hand
    amount_cents: int
    basis: str  # odds-for-1, 100%-of-meter, 10%-of-meter
    meter_before_cents: int
    paid_from_table_inventory: bool  # not for a share of the meter (649a.11(c)(5)(iv))
    rule: str


class MeterReset(MeterChange):
    """A 100 % hit: the meter restarts at the reset amount."""

    TYPE = "meter.reset"
    round_id: int
    hit_id: str
    paid_cents: int
    reset_cents: int


class MeterSharePaid(MeterChange):
    """A hit paid as a share of the meter (UTH's 10 % straight flush): not a reset."""

    TYPE = "meter.share_paid"
    round_id: int
    hit_id: str
    share_percent: str
    paid_cents: int


class EnvyBonusPaid(Record):
    TYPE = "envy.bonus"
    round_id: int
    seat: int
    for_seat: int
    hand: str
    amount_cents: int
    rule: str


class RoundSettled(Record):
    TYPE = "round.settled"
    round_id: int
    paid_cents: int  # everything the table-system wagers received this round
    folded: list[int]
    hits_pending: list[str]
    meter: MeterReading | None
    by: str
    hands_read_by_shoe: int = 0  # the hands formed from the cards the shoe read
    hands_entered: int = 0  # the hands the dealer entered (no shoe, or one out of order)

    def meter_reading(self) -> MeterReading | None:
        return self.meter


class RoundVoided(Record):
    TYPE = "round.voided"
    round_id: int
    reason: str
    rule: str
    wagers_returned: list[int]
    contribution_reversed_ten_thousandths_cent: int
    meter: MeterReading | None
    by: str

    def meter_reading(self) -> MeterReading | None:
        return self.meter


class JackpotValidated(Record):
    TYPE = "jackpot.validated"
    hit_id: str
    by: str


class JackpotDocumented(Record):
    """The hand may leave the table: the payout's documentation is complete."""

    TYPE = "jackpot.documented"
    hit_id: str
    by: str


class JackpotReleased(Record):
    """Every hit of the round is validated (and documented): the table may play on."""

    TYPE = "jackpot.released"
    round_id: int


class JournalRecoveredRecord(Record):
    """The journal failed its integrity checks and a technician had it mended (`tablectl
    journal recover`): what was found, what was accepted, what was done, and who."""

    TYPE = "journal.recovered"
    problems: list[str]
    accepted: list[str]
    done: list[str]
    by: str


# --- a linked progressive (docs/linked-progressives.md) -----------------------------------
# The link contract's records (tablectl/link/contract.py re-exports them): a linked table
# journals them in its ordinary evt stream, so they are durable, ordered by seq and sent
# again until the link controller acknowledges them on ack/{backend_id}.

_LINK_ID = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"  # mqtt.contract.ID_PATTERN


class JournalRolledBack(Record):
    """A registered backend acknowledged past the journal's end: the journal was put back from
    an older copy (docs/design.md, what a rollback shows). Nothing more is published and no
    round opens until `tablectl journal recover`."""

    TYPE = "journal.rolled_back"
    backend_id: str
    acked_through_seq: int
    last_seq: int
    action: str


class JournalChainVerified(Record):
    """The full walk of both hash chains at this start passed (a long journal, walked while
    the table was up with its rounds held)."""

    TYPE = "journal.chain_verified"
    through_seq: int
    through_input: int


class JournalChainBroken(Record):
    """The full walk at this start found a chain broken: no round opens on this journal."""

    TYPE = "journal.chain_broken"
    through_seq: int
    through_input: int
    problem: str
    action: str


class LinkRecord(Record):
    """A linked table's journal record: strict types, as it is read from the network."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class LinkContribution(LinkRecord):
    """One counted wager's share to one level of a link, at "no more bets" (the cut-off).

    `contribution_ten_thousandths_cent` = `wager_cents` x `rate_bp`, where `rate_bp` is the
    level's `contribution_rate_bp` in the parameters of `parameters_version`: the rate to the
    meter shown plus the hidden reserve rate. The controller applies it exactly once, keyed by
    the row's (table, seq); a contribution that does not match the link's parameters is
    recorded as refused, with the reason, and acknowledged like any other row.
    """

    TYPE = "link.contribution"
    link_id: str = Field(pattern=_LINK_ID)
    level_id: str = Field(pattern=_LINK_ID)
    parameters_version: StrictInt = Field(ge=1)
    round_id: StrictInt = Field(ge=0)
    seat: StrictInt = Field(ge=1, le=7)
    wager_cents: StrictInt = Field(ge=1)
    rate_bp: StrictInt = Field(ge=0, le=10_000)
    contribution_ten_thousandths_cent: StrictInt = Field(ge=0)


class LinkContributionReversed(LinkRecord):
    """A counted contribution taken back: its round was voided, so its wager was returned.

    One per `link.contribution` of the round, naming it by (round, seat, level) and carrying
    its exact amount; the controller applies it once, keyed by the row's (table, seq), and
    takes off the link exactly what that contribution put on (docs/linked-progressives.md,
    "A voided round"). `rule` is the section the void was made under.
    """

    TYPE = "link.contribution_reversed"
    link_id: str = Field(pattern=_LINK_ID)
    level_id: str = Field(pattern=_LINK_ID)
    parameters_version: StrictInt = Field(ge=1)
    round_id: StrictInt = Field(ge=0)
    seat: StrictInt = Field(ge=1, le=7)
    wager_cents: StrictInt = Field(ge=1)
    rate_bp: StrictInt = Field(ge=0, le=10_000)
    contribution_ten_thousandths_cent: StrictInt = Field(ge=0)
    reason: str = Field(max_length=200, description="the void's reason")
    rule: str = Field(max_length=200, description="the section the round was voided under")


class LinkClaim(LinkRecord):
    """A qualifying hand at a table: a claim on a level of the link.

    Journaled after the round's contributions, so every contribution of the round counts
    toward the meter it is paid from. The controller answers it on
    `{link_id}/answers/{site}/{table}`: awarded (the amount locked by the first claim
    committed, see `Award`) or refused (with the reason). The table holds the hand until a
    floorperson validates it (`jackpot.validated` with `hit_id` = `claim_id`).
    """

    TYPE = "link.claim"
    link_id: str = Field(pattern=_LINK_ID)
    level_id: str = Field(pattern=_LINK_ID)
    parameters_version: StrictInt = Field(ge=1)
    claim_id: str = Field(pattern=_LINK_ID, description="the table's hit id; unique per table")
    round_id: StrictInt = Field(ge=0)
    seat: StrictInt = Field(ge=1, le=7)
    hand: str = Field(max_length=64)
    cards: str = Field(max_length=64, description="the evidence: the cards of the hand")
    share_percent: StrictInt = Field(
        ge=1, le=100, description="of the meter: 100 (a reset) or a share such as UTH's 10"
    )
    rule: str = Field(max_length=64)


class LinkParametersAccepted(Record):
    """The link's parameters this table contributes with from now on (5321.18(b)(4))."""

    TYPE = "link.parameters"
    link_id: str
    parameters_version: int
    parameters_sha256: str
    levels: list[str]  # level_id:contribution_rate_bp, in the link's order


class LinkParametersRefused(Record):
    """Parameters this table will not play with; the progressive stays locked out."""

    TYPE = "link.parameters_refused"
    link_id: str
    parameters_version: int
    reason: str
    rule: str


class LinkDown(Record):
    """LINK DOWN: the progressive is unplayable until the link returns; the game goes on."""

    TYPE = "link.down"
    link_id: str
    reason: str
    round_id: int
    wagers_withdrawn: list[int]  # recognised this round, not yet counted
    rule: str


class LinkUp(Record):
    TYPE = "link.up"
    link_id: str


class LinkClaimAnswered(Record):
    """The link controller's answer to a claim: the amount paid is the controller's."""

    TYPE = "link.claim_answered"
    link_id: str
    claim_id: str
    status: str  # awarded, refused
    amount_cents: int
    award_version: int | None
    reason: str | None


RECORD_TYPES: dict[str, type[Record]] = {
    cls.TYPE: cls
    for cls in (
        RoundOpened,
        WagerAccepted,
        WagerRejected,
        WagerWithdrawn,
        RoundLocked,
        WagersCounted,
        MeterContribution,
        GpioFaultRecord,
        GpioFaultCleared,
        InputStuck,
        InputStuckCleared,
        SensorTestStartedRecord,
        SensorTestEndedRecord,
        ShuffleStartedRecord,
        ShuffleCompletedRecord,
        ShufflerFaultRecord,
        ShufflerRebootedRecord,
        ShuffleRequestFailedRecord,
        ShufflerFaultCleared,
        DeckMiscount,
        DeckRegistered,
        DeviceIdentifiedRecord,
        DeviceAcceptedRecord,
        DeviceEventsRefusedRecord,
        DeviceReportConflictRecord,
        DeviceLinkResetRecord,
        DealStarted,
        DealCompleted,
        DealRequestFailedRecord,
        DealResolved,
        CommandStalledRecord,
        DeliveryFaultRecord,
        DeliveryFaultCleared,
        CardFaceUp,
        DeckIrregular,
        ShoeFaultRecord,
        ShoeFaultCleared,
        ShoeRebootedRecord,
        ShoeOutOfOrderRecord,
        WagerSettled,
        JackpotHit,
        MeterReset,
        MeterSharePaid,
        EnvyBonusPaid,
        RoundSettled,
        RoundVoided,
        JackpotValidated,
        JackpotDocumented,
        JackpotReleased,
        JournalRecoveredRecord,
        JournalRolledBack,
        JournalChainVerified,
        JournalChainBroken,
        DeckIntroducedRecord,
        DeckAgeWarning,
        DeckAgeExpired,
        DeckAlternation,
        StubCountDue,
        StubCountRecord,
        DeckAgeHold,
        StubCountQuestioned,
        IdleProcedureDue,
        IdleProcedureDoneRecord,
        LinkContribution,
        LinkContributionReversed,
        LinkClaim,
        LinkParametersAccepted,
        LinkParametersRefused,
        LinkDown,
        LinkUp,
        LinkClaimAnswered,
        ShuffleSuspect,
        ShuffleSuspectCleared,
    )
}


def parse_record(type_: str, data: dict[str, Any]) -> Record | None:
    """The typed record of a journal row; None for a type or data this version cannot read."""
    cls = RECORD_TYPES.get(type_)
    if cls is None:
        return None
    try:
        return cls.model_validate(data)
    except ValueError:  # pydantic's ValidationError is one
        return None


def record_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of every record's data, by its published name."""
    return {name: cls.model_json_schema() for name, cls in sorted(RECORD_TYPES.items())}


# --- effects the shell executes -----------------------------------------------------------
# Never journaled nor read from outside: the core builds them from values it holds, so they
# are plain frozen dataclasses, not models validated at every step.


class Lamp(StrEnum):
    OFF = "off"
    ON = "on"  # the wager is recognised (649a.2(c)(1))
    WIN = "win"  # a progressive payout to verify (649a.11(c)(5)(ii)): the lamp blinks


@dataclass(frozen=True, slots=True)
class SeatLamp:
    seat: int
    lamp: Lamp


@dataclass(frozen=True, slots=True)
class RequestShuffle:
    pass


@dataclass(frozen=True, slots=True)
class DealCards:
    """Have the shoe deal these stacks, in order (the by-shoe steps of the deal plan)."""

    stacks: tuple[int, ...]


Effect = Record | SeatLamp | RequestShuffle | DealCards

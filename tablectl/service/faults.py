"""What stands in the way at a running daemon, as status, `tablectl devices` and systemd's
STATUS= show it (the `Status` model, tablectl/status.py, carries it).

`table_faults` is the one place that turns the table's state (the core's `TableState`, the
devices' links, the broker) into `FaultView`s: each says what is wrong, on which device, why
(with the rule), since when (the journal row that recorded it), what it stops, and the
command that clears it. `status`, `devices`, their `--json` and systemd's `STATUS=` all show
these. A new kind of fault is one more function in `_FROM_STATE` (or `_from_links`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tablectl.drivers.api import DEFAULT_EVENT_ID_MAX

from tablectl.core.stalls import Stall
from tablectl.core.table import Phase, RefusedEvent, StuckCause, StuckInput, TableState
from tablectl.rules.irregularities import Irregularity, NotApplicable, rule_on
from tablectl.status import KNOWN_DEVICES, BrokerLink, DeviceStatus, FaultView, Stops
from tablectl.util.money import dollars

WHO = "--by ID"  # every command that changes the table is journaled with who gave it


# The last durable journal row of one of these types whose data holds these values: its seq,
# time and data (JournalReader.last_row).
JournalLookup = Callable[
    [tuple[str, ...], Mapping[str, Any]], tuple[int, str, dict[str, Any]] | None
]


@dataclass(frozen=True, slots=True)
class _Found:
    fault: FaultView
    recorded_by: tuple[str, ...] = ()  # journal row types that record it...
    where: Mapping[str, Any] | None = None  # ...with these values


@dataclass(frozen=True, slots=True)
class _IdMaxima:
    """The largest event id each device's driver declares (`Driver.event_id_max`, by role):
    a driver's fact, not the table's; a device with none declared has the API's default."""

    by_device: Mapping[str, int]

    def of(self, device: str) -> int:
        return self.by_device.get(device, DEFAULT_EVENT_ID_MAX)

    def at_the_last(self, device: str, refused: RefusedEvent) -> bool:
        """Refused at the last id its protocol carries: a link reset cannot go on from it."""
        return refused.event_id >= self.of(device)


def table_faults(
    state: TableState,
    *,
    shoe: bool,
    devices: Mapping[str, DeviceStatus],
    broker: BrokerLink,
    journal: JournalLookup | None = None,
    awaited: frozenset[str] = frozenset(),
    event_id_max: Mapping[str, int] | None = None,
) -> list[FaultView]:
    """Everything that stands in the way, in the order to clear it. shoe: the table has one;
    devices: each device's link; broker: the relay's link; awaited: devices
    not heard from since this power-up (service/recovery.py); event_id_max: the largest
    event id each device's driver declares (`Driver.event_id_max`; else the API's default)."""
    ids = _IdMaxima(event_id_max or {})
    found = [f for source in _FROM_STATE for f in source(state, shoe, ids)]
    found += _unconfirmed(state, shoe, awaited)
    found += _from_links(devices, broker)
    return [_dated(f, journal) for f in found]


def _dated(found: _Found, journal: JournalLookup | None) -> FaultView:
    if journal is None or not found.recorded_by:
        return found.fault
    row = journal(found.recorded_by, found.where or {})
    if row is None:
        return found.fault
    seq, ts, data = row
    rule = data.get("rule") if isinstance(data.get("rule"), str) else None
    return found.fault.model_copy(
        update={"since": ts, "seq": seq, "rule": found.fault.rule or rule}
    )


# --- from the core's state ------------------------------------------------------------------


def _deck(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    if s.blocked is None:
        return
    kind, _, detail = s.blocked.partition(":")
    if kind == "stub-count":
        yield _Found(
            FaultView(
                what="deck-removed",
                device="deck",
                cause=f"the stub count showed {detail} cards in the deck, not 52, and the cards "
                "were not misdealt: the deck left the table",
                stops=Stops.ROUNDS,
                remedy="bring a new deck to the shuffler and introduce it",
                command=f"tablectl dealer new-deck --id ID --back COLOUR {WHO}",
            ),
            ("deck.stub_count",),
            {"outcome": "deck-removed"},
        )
        return
    if kind == "deck-miscount":
        yield _Found(
            FaultView(
                what="deck-miscount",
                device="shuffler",
                cause=f"the shuffler counted {detail} cards, not 52: the deck left the table",
                stops=Stops.ROUNDS,
                remedy="bring a new deck of 52 cards to the shuffler, then register it (it is "
                "shuffled and counted before a round opens)",
                command=f"tablectl dealer new-deck {WHO}",
            ),
            ("irregularity.deck_miscount",),
        )
        return
    why = {
        "duplicate-card": "the shoe read a card twice: not one deck of 52 distinct cards",
        "foreign-card": "the shoe read a card of no standard deck",
        "conflicting-count": "the shuffler reported one count two ways (a fault, never a replay)",
    }
    yield _Found(
        FaultView(
            what="deck-irregular",
            device="shoe" if detail in ("duplicate-card", "foreign-card") else "shuffler",
            cause=f"{why.get(detail, detail)}: the deck left the table, a round on it was void",
            stops=Stops.ROUNDS,
            remedy="bring a new deck to the shuffler, then register it",
            command=f"tablectl dealer new-deck {WHO}",
        ),
        ("irregularity.deck",),
        {"reason": detail},
    )


def _refused(device: str, refused: RefusedEvent, then: str, ids: _IdMaxima) -> _Found:
    cause = (
        f"the {device}'s event {refused.event_id} came where {refused.expected_event_id} "
        f"was due (boot {refused.boot_id}): nothing it reports from there is taken, and "
        f"{then} cannot fix that"
    )
    if ids.at_the_last(device, refused):
        # Acknowledging the last id would let the device drop every later event unread: a
        # reset cannot go on from there (the driver's reset_point refuses it).
        view = FaultView(
            what="events-refused",
            device=device,
            cause=f"{cause}; its ids cannot go on from {ids.of(device)}, so a link reset "
            "cannot help",
            stops=Stops.ROUNDS,
            remedy=f"power the {device} off and on: its new boot's events are taken from "
            f"their first, and {then} follows",
            command=None,
        )
    else:
        view = FaultView(
            what="events-refused",
            device=device,
            cause=cause,
            stops=Stops.ROUNDS,
            remedy=f"reset its link (or reboot the {device}): the events it holds are skipped, "
            f"journaled as skipped, and {then} follows",
            command=f"tablectl devices reset-link {device} {WHO}",
        )
    return _Found(
        view,
        ("device.events_refused",),
        {"device": device, "event_id": refused.event_id},
    )


def _shuffler(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    refused = s.events_refused.get("shuffler")
    if refused is not None:
        yield _refused("shuffler", refused, "a reshuffle", ids)
    code = s.shuffler_fault
    stall = s.stalls.get("shuffler")
    if code is not None:
        what = {
            "event-sequence": "its events broke their sequence",
            "event-conflict": "it reported one event two ways",
        }.get(code, f"it reported {code}")
        first = (
            ""
            if refused is None
            else "once it has rebooted (above), "
            if ids.at_the_last("shuffler", refused)
            else "once its link is reset (above), "
        )
        physical = (
            ""  # nothing jammed: its reports were not believable
            if code.startswith("event-")
            else "clear the shuffler (take out any jammed card, close its door), then "
        )
        if code == "stalled" and stall is not None:
            what, physical = _shuffle_stalled(stall)
        yield _Found(
            FaultView(
                what="shuffler-fault",
                device="shuffler",
                cause=f"{what}: the cards are reshuffled before any is dealt",
                stops=Stops.ROUNDS,
                remedy=f"{first}{physical}ask for the reshuffle",
                command=f"tablectl dealer reshuffle {WHO}",
                rule="649a.13(e)",
            ),
            ("shuffler.fault",),
            {"code": code},
        )
    if s.shuffle_refused is not None:
        yield _Found(
            FaultView(
                what="shuffle-refused",
                device="shuffler",
                cause=f"the shuffler will not shuffle: {s.shuffle_refused}",
                stops=Stops.SHUFFLING,
                remedy="it is asked again by itself; if the shuffler shows a fault or is "
                "busy, see to it there",
                command=None,
            ),
            ("shuffler.request_failed",),
            {"reason": s.shuffle_refused},
        )


def _shoe(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    refused = s.events_refused.get("shoe")
    if refused is not None:
        yield _refused("shoe", refused, "clearing the shoe", ids)
    code = s.shoe_fault
    stall = s.stalls.get("shoe")
    if code is not None:
        what = {
            "incomplete": "the shoe failed to deal all the cards of the deal plan",
            "unread-card": "the shoe dealt a card it could not read",
            "replaced": "another shoe was connected in the middle of a deal",
            "rebooted": "the shoe restarted in the middle of a deal",
            "event-sequence": "the shoe's events broke their sequence",
            "event-conflict": "the shoe reported one event two ways",
            "deal-unconfirmed": "the shoe could not show whether it dealt the round asked of it "
            "before a power-up",
        }.get(code, f"the shoe reported {code}")
        first = ""
        if code == "stalled" and stall is not None:
            what = _deal_stalled(stall)
            if stall.reported == "idle":  # its events are lost: clearing it is not enough
                first = (
                    "power the shoe off and on (its new boot's events are taken from their "
                    "first), then "
                )
        out_of_order = s.shoe_out_of_order
        yield _Found(
            FaultView(
                what="shoe-fault",
                device="shoe",
                cause=f"{what}; a round it was dealing is void, its wagers returned, and "
                "its cards are reshuffled with those dealt",
                stops=Stops.NOTHING if out_of_order else Stops.ROUNDS,
                remedy=(
                    "the shoe is out of order: hands are dealt by hand; to use it again, "
                    if out_of_order
                    else ""
                )
                + first
                + "take every card out of the shoe, then confirm it is clear (or mark it out "
                "of order, `tablectl dealer shoe-out-of-order`, and deal by hand)",
                command=f"tablectl dealer clear-shoe {WHO}",
            ),
            ("shoe.fault",),
            {"code": code},
        )
    if s.deal_refused is not None and s.deal is None and s.phase is Phase.LOCKED:
        yield _Found(
            FaultView(
                what="deal-refused",
                device="shoe",
                cause=f"the shoe did not take the deal: {s.deal_refused}",
                stops=Stops.DEALING,
                remedy="see to the shoe (a fault above, its link), then ask again",
                command="tablectl dealer deal",
            ),
            ("deal.request_failed",),
            {"reason": s.deal_refused},
        )


def _waited(stall: Stall) -> str:
    seconds = stall.waited_ms // 1000
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"


def _lost(stall: Stall) -> str:
    """Why a device that says it is done left the table waiting."""
    again = (
        f"; it listed {stall.replayed} event(s) again under ids already taken, skipped as replays"
        if stall.replayed
        else ""
    )
    return (
        f"its completion never reached the table{again}: its events are lost on the way (a "
        "device that restarts keeping its boot id drops its new events on the table's old "
        "acknowledgement)"
    )


def _shuffle_stalled(stall: Stall) -> tuple[str, str]:
    """A shuffle that never completed (core/stalls.py): what happened, and the step first."""
    count = "" if stall.card_count is None else f" with {stall.card_count} cards"
    match stall.reported:
        case "ready":
            return (
                f"it took the shuffle and says it is ready{count}, but {_lost(stall)}",
                "power the shuffler off and on (its new boot's events are taken from their "
                "first), then ",
            )
        case "shuffling":
            return (
                f"it has been shuffling for {_waited(stall)} without finishing",
                "clear the shuffler (take out any jammed card, close its door), then ",
            )
        case _:
            state = stall.reported or "nothing"
            return (
                f"it took the shuffle {_waited(stall)} ago and reports {state}: nothing of the "
                "shuffle reached the table",
                "check that the deck is in the shuffler and it is not in fault, then ",
            )


def _deal_stalled(stall: Stall) -> str:
    if stall.reported == "idle":
        return f"the shoe took the deal and says it is idle, but {_lost(stall)}"
    return f"no card of the deal it took reached the table for {_waited(stall)}"


def _unconfirmed(s: TableState, shoe: bool, awaited: frozenset[str]) -> Iterator[_Found]:
    """A deal asked of the shoe before a power-up, on which the shoe has not yet spoken:
    its first report settles it (core/recovery.py); until then a person is told what to do."""
    deal = s.deal
    if s.phase is not Phase.LOCKED or deal is None or deal.complete or s.shoe_out_of_order:
        return
    if shoe and "shoe" not in awaited:
        return  # the shoe has spoken since the power-up: its cards, or the core, decide
    try:
        rule = rule_on(s.game, Irregularity.SHOE_JAM).rule
    except NotApplicable:
        rule = None
    yield _Found(
        FaultView(
            what="deal-unconfirmed",
            device="shoe",
            cause=f"round {s.round_id} was asked of the shoe before the daemon restarted and "
            "the shoe has not said since whether it dealt: its first report decides (dealt "
            "again if it never dealt, else the round is void and its wagers returned)",
            stops=Stops.DEALING,
            remedy="bring the shoe's link back (power, cable); if it cannot be, void the "
            "round, take every card out of the shoe and reshuffle them",
            command=f"tablectl dealer void shoe-jam {WHO}",
            rule=rule,
        ),
        ("deal.started",),
        {"round_id": s.round_id},
    )


def _gpio(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    if s.gpio_fault is not None:
        yield _Found(
            FaultView(
                what="gpio-fault",
                device="gpio",
                cause=f"{s.gpio_fault}: the wagering sensors cannot be trusted",
                stops=Stops.ROUNDS,
                remedy="check the sensors, the lock-out button and their cable, then reopen "
                "betting",
                command=f"tablectl dealer clear-fault {WHO}",
            ),
            ("gpio.fault",),
            {"reason": s.gpio_fault},
        )
    if s.sensor_test is not None:
        yield _Found(
            FaultView(
                what="sensor-test",
                device="gpio",
                cause=f"a technician's {s.sensor_test} test holds the sensors",
                stops=Stops.ROUNDS,
                remedy="finish the test: it ends when `tablectl test` exits",
                command=None,
            ),
            ("gpio.test_started",),
        )


STUCK_WHAT = {
    StuckCause.HELD: "held down past gpio.lockout_hold_max_ms",
    StuckCause.NOT_RELEASED: "still down when the next round would open",
    StuckCause.OCCUPIED_ROUNDS: "occupied through more rounds than gpio.sensor_stuck_rounds",
    StuckCause.OCCUPIED_DURING_DEAL: "occupied while the cards were dealt",
}


def _stuck(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    """A stuck lock-out button closes betting; a stuck seat sensor refuses that seat's wagers
    (649a.2(c)): each until a person frees the input and clears it (docs/gpio.md)."""
    for stuck in s.stuck_inputs:
        yield _stuck_input(stuck)
    if (
        s.lockout_held
        and s.phase is Phase.CLOSED
        and not any(f.seat is None for f in s.stuck_inputs)
    ):
        yield _Found(
            FaultView(
                what="lockout-held",
                device="gpio",
                cause="the lock-out button is down: it could not lock a round out",
                stops=Stops.ROUNDS,
                remedy="release the lock-out button",
                command=None,
            )
        )


def _stuck_input(stuck: StuckInput) -> _Found:
    lockout = stuck.seat is None
    name = "lock-out button" if lockout else f"seat {stuck.seat} sensor"
    return _Found(
        FaultView(
            what="stuck-input",
            device="gpio",
            cause=f"{name} {STUCK_WHAT[stuck.cause]} (since round {stuck.round_id})",
            stops=Stops.ROUNDS if lockout else Stops.SEAT,
            remedy="free the button" if lockout else "lift the chip or repair the sensor",
            command="tablectl dealer clear-fault "
            + ("--lockout" if lockout else f"--seat {stuck.seat}")
            + f" {WHO}",
        ),
        ("gpio.input_stuck",),
        {"seat": stuck.seat, "cause": stuck.cause.value}
        if not lockout
        else {"cause": stuck.cause.value},
    )


def _people(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    for hit in s.hits_pending:
        validate = hit.validated_by is None
        verb = "validate" if validate else "document"
        yield _Found(
            FaultView(
                what="jackpot-pending",
                device="floor",
                cause=f"hit {hit.hit_id}: seat {hit.seat} {hit.hand} {dollars(hit.amount_cents)} "
                f"({hit.basis}, "
                + (
                    "table inventory"
                    if hit.paid_from_table_inventory
                    else "not the table inventory"
                )
                + "), "
                + (
                    "not validated"
                    if validate
                    else f"validated by {hit.validated_by}, its documentation not confirmed"
                ),
                stops=Stops.ROUNDS,
                remedy="a floorperson "
                + ("validates the payout" if validate else "completes the payout's documentation"),
                command=f"tablectl floor {verb} {hit.hit_id} {WHO}",
                rule="649a.11(c)(5)(iii)" if validate else "649a.11(c)(5)(iv)",
            ),
            ("jackpot.hit",),
            {"hit_id": hit.hit_id},
        )
    for device, waiting in sorted(s.devices_pending.items()):
        accepted = s.devices.get(device)
        yield _Found(
            FaultView(
                what="device-swap",
                device=device,
                cause=f"another {device} is connected: serial {waiting} "
                f"(the one accepted for play: {accepted})",
                stops=Stops.ROUNDS,
                remedy=f"a technician checks it is this table's {device} and accepts it "
                f"(or reconnects {accepted})",
                command=f"tablectl devices accept {device} {waiting} {WHO}",
            ),
            ("device.identified",),
            {"device": device, "serial_number": waiting, "accepted": False},
        )


def _delivery(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    if s.delivery_fault is not None:
        yield _Found(
            FaultView(
                what="delivery-fault",
                device="broker",
                cause=f"{s.delivery_fault}: no backend receives this table's events; they "
                "wait in the journal, nothing is lost",
                stops=Stops.NOTHING,
                remedy="what the cause names: a broker that refuses the table, its certificate "
                "(its common name), mqtt.username and the broker's ACL, which must all name "
                "this table (`tablectl config check` warns of a username that does not); a "
                "broker whose limits cannot take the table's messages, those limits; the relay "
                "tries again by itself and the fault clears once the broker takes a row",
                command=None,
            ),
            ("delivery.fault",),
            {"reason": s.delivery_fault},
        )


def _journal(s: TableState, shoe: bool, ids: _IdMaxima) -> Iterator[_Found]:
    """What the journal's checks found while the table runs (core/journal_checks.py)."""
    rolled = s.rolled_back
    if rolled is not None:
        yield _Found(
            FaultView(
                what="journal-rolled-back",
                device="journal",
                cause=f"backend {rolled.backend_id} acknowledged rows through seq "
                f"{rolled.acked_through_seq}; this journal ended at seq {rolled.last_seq}: it "
                "was put back from an older copy (or the backend's acknowledgement is wrong), "
                f"and the seqs past {rolled.last_seq} are rows that backend holds with other "
                "content: nothing more is published",
                stops=Stops.ROUNDS,
                remedy="stop the daemon and put back the newest copy of the database with its "
                "mark (a backup); only if the backend's acknowledgement was wrong and has been "
                "withdrawn (its retained ack cleared), accept it",
                command=f"tablectl journal recover {WHO} --accept acks",
            ),
            ("journal.rolled_back",),
            {"backend_id": rolled.backend_id},
        )
    if s.chain_pending is not None:
        yield _Found(
            FaultView(
                what="journal-verifying",
                device="journal",
                cause=f"the journal's hash chains through seq {s.chain_pending} are being "
                "walked in full since this start: no round opens until they pass",
                stops=Stops.ROUNDS,
                remedy="wait: it clears by itself when the walk passes",
                command=None,
            )
        )
    if s.chain_broken is not None:
        yield _Found(
            FaultView(
                what="journal-chain-broken",
                device="journal",
                cause=f"the full walk at this start found {s.chain_broken}",
                stops=Stops.ROUNDS,
                remedy="stop the daemon; `tablectl journal verify` names where it breaks; put "
                "back the database with its mark from a backup",
                command="tablectl journal verify",
            ),
            ("journal.chain_broken",),
        )


# Each maps the core's state to the faults it holds; a new kind of fault is one more here.
_FROM_STATE: tuple[Callable[[TableState, bool, _IdMaxima], Iterator[_Found]], ...] = (
    _deck,
    _shuffler,
    _shoe,
    _gpio,
    _stuck,
    _people,
    _delivery,
    _journal,
)


def message_too_large(message: str, size: int, limit: int) -> FaultView:
    """A retained message (birth, health, pace) larger than the broker accepts: not sent
    (mqtt/publishing.py); the journal's rows are not held up by it."""
    return FaultView(
        what="message-too-large",
        device="broker",
        cause=f"the table's retained {message} message ({size} bytes) is larger than the "
        f"broker accepts ({limit} bytes, its Maximum Packet Size): backends do not get it; "
        "the journal's rows still flow",
        stops=Stops.NOTHING,
        remedy=f"raise the broker's limit above {size} bytes (Mosquitto: max_packet_size); "
        f"the fault clears once a {message} message goes out",
        command=None,
    )


# --- from the links -------------------------------------------------------------------------


def _from_links(devices: Mapping[str, DeviceStatus], broker: BrokerLink) -> list[_Found]:
    found = []
    for name in KNOWN_DEVICES:
        info = devices.get(name)
        if info is None or info.link != "down":
            continue
        why = info.last_error or "it does not answer"
        found.append(
            _Found(
                FaultView(
                    what="link-down",
                    device=name,
                    cause=f"the {name} link is down: {why}",
                    stops=Stops.SHUFFLING if name == "shuffler" else Stops.DEALING,
                    remedy=f"check the {name}'s power and cable at {info.port}; the link "
                    "comes back by itself once it answers (`tablectl devices` shows it)",
                    command=None,
                    since=info.link_since,
                )
            )
        )
    if not broker.connected:
        found.append(
            _Found(
                FaultView(
                    what="broker-down",
                    device="broker",
                    cause=f"the MQTT broker {broker.broker} is not connected: events "
                    "wait in the journal, nothing is lost",
                    stops=Stops.NOTHING,
                    remedy="check the broker and the network; the relay reconnects by itself",
                    command=None,
                )
            )
        )
    return found

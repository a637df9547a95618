"""The daemon's status as one typed model: what `tablectl status` shows, the control socket
sends, systemd's STATUS= line says, and the relay reads of the shuffler.

`Status` is built by the service (`Daemon.status()`), sent over the control socket as
`model_dump(mode="json")` and read back by the CLI with `Status.model_validate`; nothing
else reads status by string keys. Its JSON Schema is docs/status.schema.json
(`tablectl status --schema`). The views that used to read the dict (the devices, the links,
the STATUS= line) are methods here.

This module sits below the control socket and the relay (docs/design.md, "Layers") so that
both, the service and the CLI may import it; it imports only the core's types (the phase,
the lamps, a hit) and the records' pace figures.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from tablectl.drivers.api import ROLES

from tablectl.core.effects import Lamp
from tablectl.core.table import HitEntry, Phase
from tablectl.records.pace import PaceFigures

# The device roles a driver fills (tablectl.drivers.api): any driver, one of these each.
KNOWN_DEVICES = ROLES


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- faults ---------------------------------------------------------------------------------


class Stops(StrEnum):
    """What a fault stops until it is cleared."""

    ROUNDS = "rounds"  # no round opens
    DEALING = "dealing"  # the shoe does not deal
    SHUFFLING = "shuffling"  # no deck is shuffled and counted
    SEAT = "seat"  # one seat's wagers are refused; the other seats play on
    NOTHING = "nothing"  # shown, but the table plays on (e.g. the broker: events wait)


class FaultView(_Model):
    """One thing wrong at the table: what, where, why, since when, and what clears it."""

    what: str  # a stable name: deck-miscount, shoe-fault, link-down, ... (docs/design.md)
    device: str  # shuffler, shoe, gpio, deck, floor, broker
    cause: str  # what happened, in words, with the rule it follows
    stops: Stops
    remedy: str  # what a person does
    command: str | None  # the command that clears it; None: it clears by itself
    since: str | None = None  # when it was recorded (UTC, ISO 8601)
    seq: int | None = None  # the journal row that recorded it
    rule: str | None = None

    @property
    def title(self) -> str:
        return self.what.replace("-", " ").upper()


# --- the devices ----------------------------------------------------------------------------


# The keys a driver's health() gives besides its counters (api.DeviceDriver.health).
_DEVICE_NAMED = (
    "link",
    "link_since",
    "port",
    "connection",
    "last_error",
    "boot_id",
    "state",
    "model",
    "serial_number",
    "firmware",
    "event_cursor",
    "reconnects",
    "card_count",
)


class DeviceStatus(_Model):
    """A serial device's link (shuffler, shoe), as its driver reports it, with its last
    fault. The driver's own counters (frames, retransmits, ...) are in `counters`: they
    differ from driver to driver."""

    link: Literal["up", "down"]
    link_since: str = Field(description="when the link last went up or down (UTC)")
    port: str
    connection: str = Field(description="the reconnector's state")
    last_error: str | None
    boot_id: int | None = Field(description="the device's boot id; a change: it restarted")
    state: str | None
    model: str | None
    serial_number: str | None
    firmware: str | None
    event_cursor: int = Field(description="the last event id taken from the device")
    reconnects: int
    card_count: int | None = Field(
        default=None, description="the count its last STATUS shows (a shuffler's deck)"
    )
    counters: dict[str, int]
    last_fault: str | None = Field(
        default=None, description="the fault standing, else the last journaled (cleared)"
    )

    @classmethod
    def of(cls, health: Mapping[str, Any], last_fault: str | None = None) -> DeviceStatus:
        """From a driver's health() (the drivers' seam is a plain mapping): its named keys,
        and every other whole number as a counter."""
        named = {key: health.get(key) for key in _DEVICE_NAMED}
        counters = {
            key: value
            for key, value in health.items()
            if key not in _DEVICE_NAMED and isinstance(value, int) and not isinstance(value, bool)
        }
        return cls.model_validate({**named, "counters": counters, "last_fault": last_fault})


class GpioStatus(_Model):
    """The sensors' backend (drivers/gpio): what it is, where, and the edges it saw."""

    backend: str = Field(description="gpiod, gpiod-poll, gpiozero, mock")
    where: str = Field(description="the chip, the pin factory, the simulator's socket")
    polled: bool
    resolution_ns: int
    kernel_sequence: bool
    edges: int
    coarsest_resolution_ns: int
    faults: int
    last_fault: str | None


class DeviceAcceptance(_Model):
    """The serial number accepted for play and another one connected, to be accepted."""

    accepted: str
    waiting: str | None


class DeviceView(_Model):
    """One device as `tablectl devices` shows it: its link and the faults it holds."""

    link: str = Field(description="up, down; the sensors: up or fault")
    serial: DeviceStatus | None = Field(default=None, description="a serial device's link")
    acceptance: DeviceAcceptance | None = None
    gpio: GpioStatus | None = Field(default=None, description="the sensors' backend")
    faults: list[FaultView]


# --- the broker, the journal, the control socket ----------------------------------------------


class BacklogAlarm(_Model):
    """A backend whose unacknowledged rows passed the retention bound (as on `health`)."""

    backend_id: str
    behind_rows: int
    oldest_unacked_ts: str | None


class RedeliveryView(_Model):
    """One backend's redelivery (mqtt/redelivery.py)."""

    state: Literal["ok", "replaying", "dormant"]
    heals: int
    replaying: tuple[int, int] | None = Field(description="rows sent of a replay, and its end")
    held: int | None = Field(description="a replay request waiting for the rate limit")


class BrokerLink(_Model):
    """The relay's link to the broker: all a fault needs of it."""

    connected: bool
    broker: str = Field(description="host:port")


class BrokerStats(BrokerLink):
    """The relay's link to the broker and how far each backend has the journal."""

    published_through_seq: int
    handed_through_seq: int
    acked_through_seq: int = Field(description="every registered backend has rows through it")
    acked: dict[str, int] = Field(description="backend -> acknowledged through seq")
    backlog_alarms: list[BacklogAlarm]
    delivery_fault: str | None
    redelivery: dict[str, RedeliveryView]
    last_error: str | None
    counters: dict[str, int] = Field(description="the relay's counters (mqtt/relay.py)")


class JournalStats(_Model):
    last_seq: int
    commits: int
    steps_committed: int


class ControlStats(_Model):
    """The control socket's connections and what became of its requests."""

    open: int
    watchers: int
    requests: int
    errors: int
    denied: int
    dropped: int
    timeouts: int


class WaitView(_Model):
    """Something the table waits for from a device, against what the device reports
    (service/waits.py): a device that says it is done while the table waits disagrees."""

    device: str
    awaited: str = Field(description="shuffle, deal")
    waited_s: float | None = Field(description="since the device took it or last progressed")
    stall_after_s: float = Field(description="a wait this long is a stall (a fault)")
    device_reports: str | None = Field(description="its state in its last STATUS; None: down")
    card_count: int | None
    disagrees: bool = Field(description="the device says it is done; the table still waits")


class Devices(_Model):
    """The reply to `devices`: every device, the broker link and the control socket."""

    devices: dict[str, DeviceView]
    broker: BrokerStats
    control: ControlStats | None = None  # the server adds it


# --- the round and the table -----------------------------------------------------------------


class MeterStatus(_Model):
    meter_id: str
    cents: int
    carry: int = Field(description="ten-thousandths of a cent")


class Dealing(_Model):
    """The shoe's deal of the round in play."""

    seats: list[int]
    stacks: list[int]
    cards_read: int
    complete: bool


class DeckView(_Model):
    deck_id: str
    back: str
    introduced_utc: str
    age_ms: int
    to_limit_ms: int  # 0 once past it
    in_play: bool  # the deck of the round in play (or of the last round)
    next: bool  # the deck the next round is dealt from


class DecksView(_Model):
    """The decks at the table (core/decks.py), as `tablectl status` shows them."""

    decks: list[DeckView]
    max_age_ms: int
    warn_before_ms: int
    alternate: bool
    stub_count_every_rounds: int | None
    rounds_since_stub_count: int
    stub_count_due: bool
    rounds_to_stub_count: int | None
    # With a reading shoe: the stub the shoe's reads give (52 less the cards dealt).
    stub_expected: int | None
    # The dealer's count the shoe's reads contradict, until the dealer confirms which.
    stub_questioned: int | None = None
    idle_minutes: int | None = Field(
        default=None, description="no round this long: the idle procedure (649a.5(f))"
    )
    idle_procedure_due_utc: str | None = None
    blocked_by: str | None


class PaceStatus(_Model):
    """Game pace as last computed (service/pace.py): the rolling period, the shift now."""

    ts: str
    rolling: PaceFigures
    shift: str | None
    shift_figures: PaceFigures | None


class LinkLevel(_Model):
    level_id: str
    title: str
    amount_cents: int
    amount_units: int
    reset_cents: int


class LinkPending(_Model):
    """An award awaiting validation on the link: JACKPOT PENDING on every table."""

    table: str = Field(description="site/table")
    seat: int
    amount_cents: int


class LinkView(_Model):
    """A linked progressive as the table hears it (service/link.py)."""

    link_id: str
    state: Literal["up", "LINK DOWN"]
    reason: str | None = Field(description="why LINK DOWN (5321.18(c))")
    broker_connected: bool = Field(
        description="the table's own connection to the broker for the link's messages; "
        "true while LINK DOWN: the broker answers, the link controllers do not vouch for "
        "the link (silent, or saying their ledger takes no writes)"
    )
    last_heard_ms_ago: int | None = Field(
        description="since a live `up` broadcast or an ack last reached the table (null: "
        "none since power-up)"
    )
    controllers_say: str | None = Field(
        description="the last state broadcast heard: up, closed, or down with the "
        "controller's reason (e.g. no primary takes writes)"
    )
    amounts_as_of: str | None = Field(
        description="when the controller that broadcast the amounts shown sent them: during "
        "LINK DOWN they are the last known, not the link's now"
    )
    parameters_version: int | None
    amount_cents: int | None
    levels: list[LinkLevel]
    jackpot_pending: list[LinkPending]
    messages_refused: int


class Hit(_Model):
    """A progressive payout and where its floor workflow stands (core/table/state.py `HitEntry`)."""

    hit_id: str
    round_id: int
    seat: int
    hand: str
    amount_cents: int
    basis: str
    paid_from_table_inventory: bool
    validated_by: str | None
    documented_by: str | None
    link_claim: bool = Field(
        description="a claim on a linked meter: JACKPOT PENDING until answered"
    )
    answered: bool

    @classmethod
    def of(cls, hit: HitEntry) -> Hit:
        return cls(
            hit_id=hit.hit_id,
            round_id=hit.round_id,
            seat=hit.seat,
            hand=hit.hand,
            amount_cents=hit.amount_cents,
            basis=hit.basis,
            paid_from_table_inventory=hit.paid_from_table_inventory,
            validated_by=hit.validated_by,
            documented_by=hit.documented_by,
            link_claim=hit.link_claim,
            answered=hit.answered,
        )


class Status(_Model):
    """What the running daemon is doing: `tablectl status --json`."""

    table: str
    site: str
    game: str
    boot_id: str
    uptime_s: float
    phase: Phase
    accepting_wagers: bool
    round_id: int
    table_wager: str
    wagers: dict[str, int] = Field(description="seat -> accepted wager, cents")
    undecided_seats: list[int]
    count_final: bool
    seat_lamps: list[Lamp]
    meter: MeterStatus | None
    hits_pending: list[Hit]
    hit_history: list[Hit] = Field(description="newest first")
    deck_ready: bool
    shuffle_requested: bool
    shuffler_fault: str | None
    shoe_fault: str | None
    gpio_fault: str | None
    lockout_held: bool
    sensor_test: str | None
    gpio: GpioStatus
    blocked: str | None
    dealing: Dealing | None
    shoe_out_of_order: bool
    device_acceptance: dict[str, DeviceAcceptance]
    counters: dict[str, int] = Field(description="the core's counters")
    journal: JournalStats
    shuffler: DeviceStatus | None
    shoe: DeviceStatus | None
    mqtt: BrokerStats
    faults: list[FaultView]
    waits: list[WaitView] = Field(
        default=[], description="what the table waits for from its devices, and what they say"
    )
    decks: DecksView | None
    pace: PaceStatus | None
    link: LinkView | None

    # --- views -------------------------------------------------------------------------

    def serial_devices(self) -> dict[str, DeviceStatus]:
        found = {"shuffler": self.shuffler, "shoe": self.shoe}
        return {name: device for name, device in found.items() if device is not None}

    def devices(self) -> dict[str, DeviceView]:
        """Every device the status names, each with its link state and its faults."""
        found = {
            name: DeviceView(
                link=device.link,
                serial=device,
                acceptance=self.device_acceptance.get(name),
                faults=[f for f in self.faults if f.device == name],
            )
            for name, device in self.serial_devices().items()
        }
        found["gpio"] = DeviceView(  # the sensors, lamps and lock-out button
            link="fault" if self.gpio_fault else "up",
            gpio=self.gpio,
            faults=[f for f in self.faults if f.device == "gpio"],
        )
        return found

    def links(self) -> dict[str, str]:
        """name -> "up"/"down" for every device, and the broker as "connected"/"disconnected"."""
        out = {name: view.link for name, view in self.devices().items()}
        out["broker"] = "connected" if self.mqtt.connected else "disconnected"
        return out

    def headline(self) -> Headline:
        return Headline(
            phase=self.phase,
            round_id=self.round_id,
            links=self.links(),
            link_down=None if self.link is None else self.link.reason,
            faults=self.faults,
        )

    def status_line(self) -> str:
        return self.headline().status_line()


class Headline(_Model):
    """The status in a line: systemd's STATUS=, and the links watchers hear of. The daemon
    builds it each second from what it holds (no journal read, no counters: a full Status
    is about half a millisecond of its loop); Status.headline() is the same."""

    phase: Phase
    round_id: int
    links: dict[str, str] = Field(description="as Status.links()")
    link_down: str | None = Field(description="why the progressive link is down")
    faults: list[FaultView]

    def status_line(self) -> str:
        """systemd's STATUS=: the phase, each device's link, the broker, and what stands in
        the way with the command that clears it."""
        parts = [f"{self.phase.value} (round {self.round_id})"]
        parts += [
            f"{name} {state}" if name == "broker" else f"{name} link {state}"
            for name, state in self.links.items()
        ]
        if self.link_down is not None:
            parts.append(f"progressive LINK DOWN: {self.link_down}")  # 5321.18(c)
        for fault in self.faults:
            if fault.what not in ("link-down", "broker-down"):  # said above
                parts.append(f"{fault.what}: {fault.command or fault.remedy}")
        return "; ".join(parts)


def schema_json() -> str:
    """The JSON Schema of `Status` as docs/status.schema.json holds it."""
    return json.dumps(Status.model_json_schema(mode="serialization"), indent=2) + "\n"

"""tablectl's public driver API, version 1: everything a device driver may import from tablectl.

A driver is a Python package of its own (the reference drivers are registered the same way):
it declares a `Driver` under the entry-point group `tablectl.drivers`

    [project.entry-points."tablectl.drivers"]
    vendor-x = "vendor_x.driver:DRIVER"

and a table's config chooses it by that name (`[shuffler] driver = "vendor-x"`). Every other
key of the section is the driver's own, validated by its `settings` model (a `DriverSettings`
subclass, pydantic) and reported by `tablectl config check` with its field path
(`shuffler.line_timeout_ms: ...`). A driver imports this module only: nothing else of
tablectl is promised to stay (examples/tablectl-asciishuffler/.importlinter holds
the example package to it).

What a driver does (the roles, `ShufflerDriver`, `ShoeDriver`, and the GPIO's `TableIO`):
- keep its device reachable on its own (reconnect with backoff; never raise out of `run`
  for a device that is unplugged, silent, or talks garbage: that is a link down);
- turn every device event into a core input (`DeviceReport`, the event types re-exported
  here), in the device's order, each at most once, carrying the cursor (boot id, event id) it
  moves to; a device's event is dropped on the device only once `acknowledge` says that the
  report is journaled;
- tell a reboot (`ShufflerRebooted`/`ShoeRebooted`), a fault the device shows
  (`ShufflerFault`/`ShoeFault`, whether by event or only in its status), an event id reused
  with another meaning (`DeviceReportConflict`), an event out of order (`DeviceEventsRefused`)
  and its identity at every connect (`DeviceIdentified`: a swapped device is not played
  until a technician accepts it);
- raise only the fault vocabulary below from a command: `LinkDown` (it cannot be reached),
  `CommandRefused` (it answered no), `DeviceFault` (it is in fault, with the cause), any
  other `LinkError` for an answer the protocol does not allow.

What the core guarantees in return (docs/drivers.md):
- one command at a time per device, and a command only while `link_up` (else `LinkDown` is
  expected, and the table asks again once `wait_link_up` returns);
- every report is journaled (SQLite, synchronous) before `acknowledge` is called for it, in
  the order emitted; `emit` never blocks and never raises;
- the cursor given at start is the last report journaled: go on from it, a reboot seen
  meanwhile included;
- no round opens on a deck the shuffler did not count right (51/53 cards, a jam, an unknown
  device, a link down all stop shuffling and rounds until cleared; each fault is shown by
  `tablectl status` with the command that clears it); the daemon never dies of a driver's
  `LinkError`, `OSError` or `TimeoutError`.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator
from tablectl.drivers.gpio.backend import BackendInfo, Edge, EdgeSink, GpioBackend

from tablectl.core.events import (
    CardRead,
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceReportConflict,
    Event,
    ShoeCard,
    ShoeDealCompleted,
    ShoeFault,
    ShoeRebooted,
    ShoeStackDealt,
    ShuffleCompleted,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
)

# 1.1: Driver.shoe_simulator, Driver.event_id_max, ShoeSimulator, SHOE_COMMANDS (the shoe's
# conformance scenarios; a device's event id maximum declared by its driver).
API_VERSION: tuple[int, int] = (1, 1)
"""(major, minor): a driver built for another major is refused; a minor adds only."""

ENTRY_POINT_GROUP = "tablectl.drivers"
Role = Literal["shuffler", "shoe"]
ROLES: tuple[Role, ...] = ("shuffler", "shoe")
PATH_MAX_BYTES = 4095  # Linux: PATH_MAX 4096 bytes with the NUL
# The largest event id a device's protocol can carry, unless its driver declares another
# (`Driver.event_id_max`): an unsigned 32-bit id, as most devices' counters are.
DEFAULT_EVENT_ID_MAX = 0xFFFF_FFFF

__all__ = [
    "API_VERSION",
    "DEFAULT_EVENT_ID_MAX",
    "ENTRY_POINT_GROUP",
    "ROLES",
    "SHOE_COMMANDS",
    "SHUFFLER_COMMANDS",
    "BackendInfo",
    "CardRead",
    "CommandRefused",
    "DeviceDriver",
    "DeviceEventsRefused",
    "DeviceFault",
    "DeviceIdentified",
    "DeviceReport",
    "DeviceReportConflict",
    "Driver",
    "DriverContext",
    "DriverSettings",
    "Edge",
    "EdgeSink",
    "Event",
    "FirstWord",
    "LinkDown",
    "LinkError",
    "ResetRefused",
    "Role",
    "ShoeCard",
    "ShoeDealCompleted",
    "ShoeDriver",
    "ShoeFault",
    "ShoeRebooted",
    "ShoeSimulator",
    "ShoeStackDealt",
    "ShuffleCompleted",
    "ShuffleStarted",
    "ShufflerDiagnostics",
    "ShufflerDriver",
    "ShufflerFault",
    "ShufflerRebooted",
    "ShufflerSimulator",
    "TableIO",
    "Trace",
    "UnknownDriver",
    "cursor_key",
    "discover",
    "load_driver",
    "parse_cursor",
]

# --- the fault vocabulary -------------------------------------------------------------------


class LinkError(Exception):
    """The device cannot be reached or did not answer as its protocol says."""

    @property
    def summary(self) -> str:
        """What went wrong in the same words each time it happens (journaled once per change)."""
        return str(self)


class LinkDown(LinkError):
    """The device cannot be reached now; the table asks again once the link is back."""

    def __init__(self, device: str, cause: str | None = None) -> None:
        super().__init__(f"the {device} link is down" + (f": {cause}" if cause else ""))
        self.device = device

    @property
    def summary(self) -> str:
        return f"the {self.device} link is down"


class CommandRefused(LinkError):
    """The device answered a command with no; `reason` in its own words."""

    def __init__(self, device: str, command: str, reason: str) -> None:
        super().__init__(f"the {device} refused {command}: {reason}")
        self.device = device
        self.command = command
        self.reason = reason


class DeviceFault(LinkError):
    """The device is in fault and cannot carry out a command; `cause` names the fault."""

    def __init__(self, device: str, cause: str) -> None:
        super().__init__(f"the {device} is in fault: {cause}")
        self.device = device
        self.cause = cause


class ResetRefused(LinkError):
    """The link cannot be reset now; the message says why and what to do instead."""


# --- what a driver hands the core -----------------------------------------------------------


def cursor_key(device: str) -> str:
    """The journal's key for a device's cursor (stored with the report that moves it)."""
    return f"device.{device}.cursor"


def parse_cursor(value: str | None) -> tuple[int, int] | None:
    """The stored cursor (boot id, last journaled event id), or None."""
    if not value:
        return None
    boot, _, event = value.partition(":")
    return int(boot), int(event)


@dataclass(frozen=True, slots=True)
class DeviceReport:
    """A core input from a device, with the cursor to store in the same transaction."""

    device: str  # the role: shuffler, shoe
    input: Event
    boot_id: int | None = None
    event_id: int | None = None  # with boot_id: the cursor this input moves to

    @property
    def cursor_key(self) -> str:
        return cursor_key(self.device)

    @property
    def cursor_value(self) -> str | None:
        if self.boot_id is None or self.event_id is None:
            return None
        return f"{self.boot_id}:{self.event_id}"


@dataclass(frozen=True, slots=True)
class FirstWord:
    """What a device said first after this start, once every event it held is journaled: the
    facts that settle a command the journal says was issued to it (core/recovery.py)."""

    device: str
    boot_id: int
    cursor_boot_id: int | None  # the boot of the cursor the journal kept (None: none yet)
    state: str
    acting: bool  # it is carrying out a command (shuffling, dealing)
    events_held: int  # events past the journal's cursor it reported since this start


class Trace(Protocol):
    """A field trace (`trace_file` in the config): a driver writes its bytes and comments."""

    def comment(self, text: str) -> None: ...

    def received(self, data: bytes) -> None: ...

    def sent(self, data: bytes) -> None: ...


# --- the roles ------------------------------------------------------------------------------


class DeviceDriver(Protocol):
    """What every polled device's driver does for the table (a shuffler, a shoe)."""

    @property
    def link_up(self) -> bool: ...

    async def run(self) -> None:
        """Keep the device reachable and its events coming, until cancelled."""
        ...

    async def wait_link_up(self) -> None: ...

    @property
    def boot_id(self) -> int | None:
        """The device's boot as last read (None: not read since this start, and no cursor)."""
        ...

    def on_first_word(self, callback: Callable[[FirstWord], None]) -> None:
        """Call back once after this start, at the first status that lists no event (all it
        held is journaled): what it said first (service/recovery.py)."""
        ...

    @property
    def first_word_due(self) -> bool:
        """The device has not yet said its first word since this start."""
        ...

    def acknowledge(self, report: DeviceReport) -> None:
        """The report is journaled: the device may drop its event."""
        ...

    def fault_showing(self) -> Event | None:
        """The fault the device's last status shows (None: none, or the link is down)."""
        ...

    def reset_point(self) -> tuple[int, int, int]:
        """(boot, last event journaled, last event to skip) for a reset of a link stopped at
        refused events. Raises ResetRefused saying why it cannot be reset."""
        ...

    def reset_to(self, boot_id: int, event_id: int) -> None:
        """The reset is journaled: take the device's events after event_id."""
        ...

    def health(self) -> dict[str, Any]:
        """For `tablectl devices` (tablectl.status.DeviceStatus): the keys link ("up"/"down"),
        link_since (ISO 8601 UTC), port, connection, last_error, boot_id, state, model,
        serial_number, firmware, event_cursor, reconnects, card_count; every other whole
        number is shown as one of the driver's counters."""
        ...


class ShufflerDriver(DeviceDriver, Protocol):
    """A card shuffler: shuffles on request, reports each shuffle with its count."""

    async def shuffle(self) -> None:
        """Ask for a shuffle (safe to retry). Raises LinkError when it cannot be asked."""
        ...

    async def deck_loaded(self) -> tuple[str, str] | None:
        """The deck it holds, (id, back colour), where its protocol reports one; else None.
        Raises LinkError when it cannot be asked."""
        ...


@runtime_checkable
class ShufflerDiagnostics(Protocol):
    """Optional: `tablectl shuffler count` and `self-test`, for a shuffler that has them."""

    async def count_deck(self) -> tuple[int, int]:
        """Count the cards the shuffler holds: (counted, expected)."""
        ...

    async def self_test(self) -> tuple[bool, str]:
        """Run the device's self-test: (passed, the device's report)."""
        ...


class ShoeDriver(DeviceDriver, Protocol):
    """An automated dealing shoe: deals stacks on request and reports every card it reads."""

    async def deal(self, stacks: tuple[int, ...]) -> None:
        """Deal these stacks, in order (safe to retry). Raises LinkError when refused."""
        ...


# Table I/O (sensors, lamps, the lock-out button): edges carry the kernel's timestamp and
# sequence number (`Edge`), a backend lights lamps (`set_lamp`); see drivers/gpio/backend.py.
TableIO = GpioBackend


# --- a driver and its settings ---------------------------------------------------------------


class DriverSettings(BaseModel):
    """A driver's own settings (the keys of its section that are not the table's); subclass
    with your fields. `port` is where the device is (a serial device, socket://HOST:PORT)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    port: str = Field(min_length=1, description="where the device is")

    @field_validator("port")
    @classmethod
    def _port_is_a_path(cls, port: str) -> str:
        """No NUL (no path and no URL holds one), no longer than a path may be."""
        shown = repr(port[:80]) + ("..." if len(port) > 80 else "")
        if "\0" in port:
            raise ValueError(f"{shown} contains a NUL character, which no path can hold")
        if len(os.fsencode(port)) > PATH_MAX_BYTES:
            raise ValueError(f"{shown} is longer than a path may be ({PATH_MAX_BYTES:,} bytes)")
        return port


@dataclass(frozen=True, slots=True, kw_only=True)
class DriverContext:
    """What the table gives a driver it builds."""

    emit: Callable[[DeviceReport], None]  # never blocks; journaled in order
    cursor: tuple[int, int] | None = None  # (boot id, event id) last journaled
    trace: Trace | None = None
    # Drivers' private extras, by name (the reference shoe's USB test backend).
    extras: Mapping[str, Any] = field(default_factory=dict)


ShufflerFactory = Callable[[Any, DriverContext], ShufflerDriver]
ShoeFactory = Callable[[Any, DriverContext], ShoeDriver]


@dataclass(frozen=True, slots=True, kw_only=True)
class Driver:
    """What a driver package registers under the `tablectl.drivers` entry-point group."""

    name: str
    description: str
    settings: dict[Role, type[DriverSettings]]  # the settings model per role it drives
    shuffler: ShufflerFactory | None = None
    shoe: ShoeFactory | None = None
    api_version: tuple[int, int] = API_VERSION
    # Conformance scenarios (tablectl.conformance) it does not support, each with the reason
    # (as a SQLAlchemy dialect's requirements.py): only those are skipped, by name.
    unsupported: Mapping[str, str] = field(default_factory=dict)
    # "module:callable" making its ShufflerSimulator for the conformance kit (a string: the
    # simulator may live where the driver must not import it from).
    simulator: str | None = None
    # The same for its ShoeSimulator, if it drives a shoe (the kit's shoe scenarios).
    shoe_simulator: str | None = None
    # The largest event id its protocol carries: a device stopped at an event refused with
    # this id cannot go on past it (acknowledging it would let the device drop every later
    # event unread), so the table offers a power cycle, not `devices reset-link`.
    event_id_max: int = DEFAULT_EVENT_ID_MAX

    def roles(self) -> tuple[Role, ...]:
        return tuple(r for r in ROLES if self.factory(r) is not None)

    def factory(self, role: Role) -> ShufflerFactory | ShoeFactory | None:
        return self.shuffler if role == "shuffler" else self.shoe


# --- what the conformance kit drives (tablectl.conformance) -----------------------------------

# The commands the link can be closed under, in the kit's words (each driver maps its own).
SHUFFLER_COMMANDS: tuple[str, ...] = ("identify", "status", "shuffle", "count")


class ShufflerSimulator(Protocol):
    """A driver's simulator, as the conformance kit drives it: the device speaking the
    driver's protocol, with knobs to misbehave. Named by `Driver.simulator`."""

    async def start(self) -> dict[str, Any]:
        """Serve; the driver's settings that reach it (its `port`, and any other key)."""
        ...

    def close(self) -> None: ...

    def idle(self) -> bool:
        """Not shuffling, and holding no event the host has not acknowledged."""
        ...

    def next_counts(self, counts: Sequence[int]) -> None:
        """The next shuffles count these cards (then 52 again)."""
        ...

    def jam_next(self, *, by_event: bool) -> None:
        """The next shuffle jams: with a fault event, or shown only in its status."""
        ...

    def restate_last(self) -> None:
        """Report the last acknowledged event again, under its id, saying another count."""
        ...

    def reboot(self, *, keep_boot_id: bool = False) -> None:
        """Power cycle; keep_boot_id: a faulty restart that keeps its boot id."""
        ...

    def silent(self, on: bool) -> None: ...

    def garbage(self, on: bool) -> None:
        """Noise that is not the protocol's before every answer."""
        ...

    def close_on(self, command: str) -> None:
        """Close the connection the next time it is asked this (SHUFFLER_COMMANDS)."""
        ...

    def swap(self, serial: str) -> None:
        """Another unit (this serial number) in its place, as if replugged."""
        ...

    def wind_seq(self, driver: ShufflerDriver) -> None:
        """Put the host's sequence number a few short of its maximum (the driver's own)."""
        ...


SHOE_COMMANDS: tuple[str, ...] = ("identify", "status", "deal")


class ShoeSimulator(Protocol):
    """A shoe driver's simulator, as the conformance kit drives it (`Driver.shoe_simulator`):
    the shoe speaking the driver's protocol, a deck inside, with knobs to misbehave. Each
    deal knob applies to the next deal only."""

    async def start(self) -> dict[str, Any]:
        """Serve; the driver's settings that reach it (its `port`, and any other key)."""
        ...

    def close(self) -> None: ...

    def idle(self) -> bool:
        """Not dealing, and holding no event the host has not acknowledged."""
        ...

    def jam_next(self, *, by_event: bool) -> None:
        """The next deal jams after its first cards: with a fault event, or shown only in
        its status."""
        ...

    def fail_to_deal_next(self) -> None:
        """The next deal stops a card short and says it is complete."""
        ...

    def unread_next(self) -> None:
        """A card of the next deal is dealt but not read (the shoe reports it unread)."""
        ...

    def restate_last(self) -> None:
        """Report the last acknowledged event again, under its id, saying something else."""
        ...

    def reboot(self, *, keep_boot_id: bool = False) -> None: ...

    def silent(self, on: bool) -> None: ...

    def garbage(self, on: bool) -> None: ...

    def close_on(self, command: str) -> None:
        """Close the connection the next time it is asked this (SHOE_COMMANDS)."""
        ...

    def swap(self, serial: str) -> None: ...


class UnknownDriver(LookupError):
    """No installed driver has that name for that role (the message lists those that do)."""


def discover() -> dict[str, Driver]:
    """Every installed driver, by its entry-point name (read anew: a package may have been
    installed since). A driver that fails to load or is built for another API major is left
    out, and named by load_driver when asked for."""
    found: dict[str, Driver] = {}
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            driver = entry.load()
        except Exception:  # noqa: BLE001, S112 -- a broken package must not stop the others
            continue
        if isinstance(driver, Driver) and driver.api_version[0] == API_VERSION[0]:
            found[entry.name] = driver
    return found


def load_driver(name: str, role: Role) -> Driver:
    """The installed driver `name` for `role`; raises UnknownDriver saying what is there."""
    entries = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP, name=name)
    for entry in entries:
        try:
            driver = entry.load()
        except Exception as exc:
            raise UnknownDriver(f"driver {name!r} does not load: {exc}") from exc
        if not isinstance(driver, Driver):
            raise UnknownDriver(f"driver {name!r} ({entry.value}) is not a tablectl Driver")
        if driver.api_version[0] != API_VERSION[0]:
            raise UnknownDriver(
                f"driver {name!r} is built for driver API {driver.api_version[0]}, "
                f"this tablectl has {API_VERSION[0]}"
            )
        if driver.factory(role) is None:
            raise UnknownDriver(f"driver {name!r} drives no {role}")
        return driver
    names = sorted(n for n, d in discover().items() if d.factory(role) is not None)
    raise UnknownDriver(f"unknown driver {name!r}; one of {', '.join(names)}")

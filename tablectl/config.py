"""Table configuration: one TOML file per table, validated against the regulations.

Every model rejects unknown keys. Regulatory limits are validators whose message names the
field and cites the rule, so `tablectl config check` tells a technician exactly what to fix.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import time
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Self, TypeVar, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from tablectl.drivers.api import DriverSettings, Role, UnknownDriver, load_driver
from tablectl.drivers.gpio.settings import GpioSettings

from tablectl.core.decks import (
    HOUR_MS,
    MAX_ROUNDS_BETWEEN_STUB_COUNTS,
    age_rule,
    chapter,
    max_age_ms,
)
from tablectl.core.events import DeckRules, LinkRules, SensorRules, TableRules
from tablectl.core.games import MAX_SEATS, SEAT_RULES, GameConfig
from tablectl.util.files import permission_advice
from tablectl.util.money import Strict

_NO_CONFIG_HINT = (
    "give --config FILE, set TABLECTL_CONFIG, or start from an example in "
    "/usr/share/doc/tablectl/examples/ (or config/ in the source)"
)

# What a config may say is bounded so that a file `config check` accepts never crashes `run`
# (issue 16): no number reaches timedelta, asyncio or termios that overflows them, no path or
# string reaches the OS with a NUL in it or longer than the kernel takes. One type per kind.

# A duration or rate as a TOML float: inf and nan are refused (timedelta(hours=inf) and
# asyncio.timeout(nan) raise); each field adds its own ge/le.
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]

# Linux: PATH_MAX 4096 bytes with the NUL, NAME_MAX 255 per component. sun_path holds 108
# bytes with its terminating NUL, so a Unix socket's path has 107 (unix(7)).
PATH_MAX_BYTES = 4095
NAME_MAX_BYTES = 255
UNIX_SOCKET_PATH_MAX_BYTES = 107
# Room kept under PATH_MAX for the names the daemon puts in data_dir (tablectl.sqlite3-wal...).
_DATA_DIR_MAX_BYTES = PATH_MAX_BYTES - NAME_MAX_BYTES - 1


def _path_problem(text: str, most: int = PATH_MAX_BYTES) -> str | None:
    """Why the OS would refuse this path (a NUL, too long), or None."""
    if "\0" in text:
        return "contains a NUL character, which no path can hold"
    size = len(os.fsencode(text))
    if size > most:
        return f"is {size:,} bytes long; at most {most:,}"
    longest = max((len(os.fsencode(part)) for part in text.split("/")), default=0)
    if longest > NAME_MAX_BYTES:
        return f"has a name of {longest} bytes between slashes; at most {NAME_MAX_BYTES}"
    return None


def _cut(message: str, most: int = 300) -> str:
    """A message a person can read on one screen: its middle left out if long (the TOML
    reader quotes a 500-level key whole), its end kept (where in the file)."""
    if len(message) <= most:
        return message
    return f"{message[: most // 2]} ... {message[-most // 3 :]}"


def _shown(text: str) -> str:
    """A value quoted in a message, cut short if long (a 4 kB path is not read, it is counted)."""
    return repr(text[:80]) + ("..." if len(text) > 80 else "")


def _usable_path(path: Path, most: int = PATH_MAX_BYTES) -> Path:
    problem = _path_problem(str(path), most)
    if problem:
        raise ValueError(f"{_shown(str(path))} {problem}")
    return path


def _given_path(value: object) -> object:
    """An empty string is no path (pathlib would read it as ".", the current directory)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("is empty: give the directory's absolute path, e.g. /var/lib/tablectl")
    return value


def _given_file(value: object) -> object:
    """An empty string is no file name (pathlib would read it as ".", a directory)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("is empty: give the file's path, or leave the key out")
    return value


def _usable_data_dir(path: Path) -> Path:
    # The daemon runs from / under systemd and the CLI from wherever it is typed: a relative
    # data_dir would put the journal in two places.
    if not path.is_absolute():
        raise ValueError(
            f"{_shown(str(path))} is relative: give the directory's absolute path, "
            "e.g. /var/lib/tablectl"
        )
    return _usable_path(path, _DATA_DIR_MAX_BYTES)


def _socket_path(path: Path) -> Path:
    return _usable_path(path, UNIX_SOCKET_PATH_MAX_BYTES)


# A file or directory the daemon opens or creates.
FsPath = Annotated[Path, AfterValidator(_usable_path)]


def _in_a_directory(path: Path) -> Path:
    if not path.parent.is_dir():
        raise ValueError(f"{_shown(str(path.parent))} is not a directory: create it first")
    return path


# A file the daemon creates at start (a trace): its directory must be there.
NewFile = Annotated[
    Path,
    BeforeValidator(_given_file),
    AfterValidator(_usable_path),
    AfterValidator(_in_a_directory),
]
DataDir = Annotated[Path, BeforeValidator(_given_path), AfterValidator(_usable_data_dir)]
# A Unix socket the daemon binds or connects to: the AF_UNIX limit, as the path is written
# (bind() takes it as given, relative or not).
UnixSocketPath = Annotated[Path, AfterValidator(_socket_path)]


def socket_path_problem(path: Path) -> str | None:
    """Why bind() would refuse this Unix socket path, or None (for resolved defaults)."""
    return _path_problem(str(path), UNIX_SOCKET_PATH_MAX_BYTES)


# RFC 1123 2.1: letters, digits and hyphens, not at either end; underscores too, as the
# names of containers and service records have them and getaddrinfo resolves them.
_HOST_LABEL = re.compile(rb"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def host_name(text: str) -> str:
    """A host name or address as getaddrinfo takes it (it raises on NUL or a 64-byte label;
    a name with a space it looks up, and never finds)."""
    if "\0" in text:
        raise ValueError("contains a NUL character, which no host name can hold")
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        pass
    if any(c.isspace() for c in text):
        raise ValueError(f"{_shown(text)} has whitespace in it: no host name does")
    not_a_name = ValueError(
        f"{_shown(text)} is not a host name: labels of 1 to 63 letters, digits and hyphens "
        "between dots, or an IP address"
    )
    try:
        encoded = text.encode("idna")  # a name in another script as DNS spells it: xn--...
    except UnicodeError:
        raise not_a_name from None
    if not 1 <= len(encoded) <= 253:
        raise ValueError("a host name is 1 to 253 characters")
    if not all(_HOST_LABEL.fullmatch(label) for label in encoded.removesuffix(b".").split(b".")):
        raise not_a_name
    return text


Host = Annotated[str, AfterValidator(host_name)]


def _mqtt_text(text: str) -> str:
    """An MQTT UTF-8 string: no U+0000 (MQTT 5 1.5.4), at most 65,535 bytes (its length prefix)."""
    if "\0" in text:
        raise ValueError("contains a NUL character, which MQTT strings cannot (MQTT 5 1.5.4)")
    if len(text.encode()) > 65_535:
        raise ValueError("longer than an MQTT string's 65,535 bytes")
    return text


MqttText = Annotated[str, AfterValidator(_mqtt_text)]


class TableSection(Strict):
    site_id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    table_id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    seats: int = Field(ge=1, le=7, description="betting positions; seat 1 is dealt first")


class DeviceSection(Strict):
    """A device and the driver that speaks its protocol (docs/drivers.md).

    The table's own keys are `driver`, `stall_timeout_s` and `trace_file` (and a shuffler's
    `decks`); every other key of the section is the driver's, validated by the driver's own
    settings model (`port`, and the reference driver's `baudrate`, `poll_interval_ms`, ...).
    Its errors name the key as the file does (`shuffler.baudrate`)."""

    ROLE: ClassVar[Role]

    driver: str = Field(
        default="reference", description="the device's driver (an installed tablectl.drivers)"
    )
    # A shuffle or deal the device took and never completed is a fault after this long
    # (649a.13(e), (f)): no progress reported, the link up (service/waits.py).
    stall_timeout_s: int = Field(
        default=120, ge=5, le=3600, description="a command taken and never completed: a fault"
    )
    trace_file: NewFile | None = Field(
        default=None, description="record the link's bytes and the core inputs (a field trace)"
    )
    settings: DriverSettings = Field(description="the driver's own keys, in the section itself")

    @model_validator(mode="before")
    @classmethod
    def _driver_keys(cls, raw: object) -> object:
        """The keys that are not the table's are the driver's (its settings)."""
        if not isinstance(raw, dict) or "settings" in raw:
            return raw
        own = {name for name in cls.model_fields if name != "settings"}
        return {
            **{k: v for k, v in raw.items() if k in own},
            "settings": {k: v for k, v in raw.items() if k not in own},
        }

    @field_validator("driver")
    @classmethod
    def _known_driver(cls, name: str) -> str:
        try:
            load_driver(name, cls.ROLE)
        except UnknownDriver as exc:
            raise ValueError(str(exc)) from None
        return name

    @field_validator("settings", mode="plain")
    @classmethod
    def _driver_settings(cls, value: object, info: ValidationInfo) -> DriverSettings:
        if isinstance(value, DriverSettings):
            return value
        name = info.data.get("driver")
        model = (
            DriverSettings
            if name is None  # the driver's own error stands; its keys are checked once it loads
            else load_driver(name, cls.ROLE).settings.get(cls.ROLE, DriverSettings)
        )
        return model.model_validate(value)

    @classmethod
    def keys(cls, driver: str = "reference") -> dict[str, FieldInfo]:
        """Every key the section may hold with this driver: the table's and the driver's."""
        own = {name: info for name, info in cls.model_fields.items() if name != "settings"}
        return {**own, **load_driver(driver, cls.ROLE).settings[cls.ROLE].model_fields}

    @property
    def port(self) -> str:
        """Where the device is (every driver's settings have one)."""
        return self.settings.port

    def with_port(self, port: str) -> Self:
        """The same section with the device elsewhere (a simulator's pseudo-terminal)."""
        settings = type(self.settings).model_validate({**self.settings.model_dump(), "port": port})
        return self.model_copy(update={"settings": settings})


class ShufflerSection(DeviceSection):
    ROLE: ClassVar[Role] = "shuffler"
    # 649a.3(b): with a shuffler, two decks may alternate, one shuffled while the other plays.
    decks: Literal[1, 2] = 2


class ShoeSection(DeviceSection):
    """An automated dealing shoe (649a.10, 653a.10, 643a.10): it reads every card it deals."""

    ROLE: ClassVar[Role] = "shoe"


def _gpio_line(value: object) -> int | str:
    """A line: its offset on the chip (a whole number), or its name (gpioinfo shows both)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("a line is an offset (a whole number) or a line name in quotes")
    if isinstance(value, int) and not 0 <= value <= 1023:
        raise ValueError(f"line offset {value} is outside 0 to 1023")
    if isinstance(value, str) and not re.fullmatch(r"[A-Za-z0-9_.:\-]{1,63}", value):
        raise ValueError(f"line name {value!r}: letters, digits, _ . : - (at most 63)")
    return value


GpioLine = Annotated[int | str, PlainValidator(_gpio_line)]


def _backend(value: object) -> object:
    if value == "native":
        raise ValueError(
            '"native" is gone: "auto" (libgpiod on any Linux board) or "gpiozero" '
            "(Raspberry Pi only)"
        )
    return value


class GpioSection(Strict):
    # auto: libgpiod where /dev/gpiochip* exists (polled if the chip has no interrupts);
    # mock: edges from `tablectl simulate table` (docs/gpio.md).
    backend: Annotated[
        Literal["auto", "gpiod", "gpiod-poll", "gpiozero", "mock"], BeforeValidator(_backend)
    ] = "auto"
    chip: str | None = Field(
        default=None,
        pattern=r"^(/dev/)?gpiochip[0-9]{1,3}$",
        description="default: the one chip, or the one holding the named lines",
    )
    seat_sensor_pins: list[GpioLine]
    seat_light_pins: list[GpioLine]
    lockout_pin: GpioLine
    active_low: bool = True
    chip_present_ms: int = Field(default=150, ge=10, le=2000)
    # After the lock-out edge a chip still settling may open this long at a time and still
    # be the chip that was there at the edge (contact bounce); longer, it left (docs/gpio.md).
    chip_bounce_ms: int = Field(default=5, ge=0, le=100)
    lockout_debounce_ms: int = Field(default=50, ge=0, le=1000)
    # The lock-out button held longer than this is stuck: betting stays closed until cleared.
    lockout_hold_max_ms: int = Field(default=5_000, ge=500, le=60_000)
    # A seat sensor occupied during the betting of more rounds than this is stuck: the
    # dealer collects every wager before the deal (649a.8(b)). Its seat's wagers are refused.
    sensor_stuck_rounds: int = Field(default=1, ge=1, le=10)
    # gpiod-poll: a press must last longer than this to be seen; it is each edge's resolution.
    poll_period_ms: int = Field(default=2, ge=1, le=20)
    # mock: default data_dir / "table-simulator.sock"
    simulator_socket: UnixSocketPath | None = None

    @model_validator(mode="after")
    def _times_fit(self) -> Self:
        if self.chip_bounce_ms >= self.chip_present_ms:
            raise ValueError(
                f"chip_bounce_ms ({self.chip_bounce_ms}) must be shorter than "
                f"chip_present_ms ({self.chip_present_ms}): a chip that is away longer than "
                "it takes to rest has left"
            )
        if self.lockout_hold_max_ms <= self.lockout_debounce_ms:
            raise ValueError(
                f"lockout_hold_max_ms ({self.lockout_hold_max_ms}) must be longer than "
                f"lockout_debounce_ms ({self.lockout_debounce_ms})"
            )
        return self

    def driver_settings(self) -> GpioSettings:
        """What the GPIO drivers are told (they never see the config)."""
        return GpioSettings(
            backend=self.backend,
            chip=self.chip,
            seat_sensor_pins=tuple(self.seat_sensor_pins),
            seat_light_pins=tuple(self.seat_light_pins),
            lockout_pin=self.lockout_pin,
            active_low=self.active_low,
            chip_present_ms=self.chip_present_ms,
            chip_bounce_ms=self.chip_bounce_ms,
            lockout_debounce_ms=self.lockout_debounce_ms,
            lockout_hold_max_ms=self.lockout_hold_max_ms,
            poll_period_ms=self.poll_period_ms,
        )


BackendId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]


def _readable_file(path: Path | None) -> Path | None:
    if path is None:
        return None
    _usable_path(path)
    if not path.is_file():
        raise ValueError(f"{path} does not exist (or is not a file)")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{path} is not readable by this user")
    return path


ReadableFile = Annotated[Path | None, AfterValidator(_readable_file)]


class MqttSection(Strict):
    host: Host = "127.0.0.1"
    port: int = Field(default=1883, ge=1, le=65535)
    client_id: MqttText | None = Field(default=None, description="default tablectl-{site}-{table}")
    # The table's id (docs/mqtt.md, config/mosquitto/): the ACL keys on the username, which the
    # shipped broker takes from the certificate's common name (it ignores these two then).
    username: MqttText | None = None
    password: MqttText | None = None
    keepalive_s: int = Field(default=30, ge=5, le=600)
    tls: bool = False
    ca_file: ReadableFile = None  # the CA that signed the broker's certificate (default: system)
    cert_file: ReadableFile = None  # this table's client certificate ...
    key_file: ReadableFile = None  # ... and its private key
    reconnect_max_s: FiniteFloat = Field(default=30, ge=1, le=600)
    # QoS 1 publishes in flight to the broker at once: deep enough to keep the pipe full.
    publish_window: int = Field(default=256, ge=1, le=10_000)
    # The backends that acknowledge on ack/{backend_id}; a row is outstanding until all have.
    backends: list[BackendId] = Field(default=["pgs"], min_length=1)
    # The retention bound: past it, status, health and the log raise an alarm.
    # At most a billion rows or a year: past that the bound no longer bounds anything (and
    # timedelta(hours=1e300) overflowed the relay).
    backlog_alarm_rows: int = Field(default=100_000, ge=1, le=1_000_000_000)
    backlog_alarm_hours: FiniteFloat = Field(default=24, gt=0, le=366 * 24)
    health_counters_interval_s: FiniteFloat = Field(default=60, ge=1, le=3600)
    # A backend whose ack has not moved this long while later rows were out is sent them
    # again from its ack (docs/mqtt.md, Delivery). Below half a second a healthy backend's
    # once-per-burst ack would look stalled; past an hour dropped rows wait too long.
    ack_stall_s: FiniteFloat = Field(default=10, ge=0.5, le=3600)

    @model_validator(mode="after")
    def _tls_files(self) -> Self:
        files = {"ca_file": self.ca_file, "cert_file": self.cert_file, "key_file": self.key_file}
        named = [name for name, path in files.items() if path is not None]
        if named and not self.tls:
            raise ValueError(f"{named[0]} is set but tls is false: set tls = true")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: set both or neither")
        if len(set(self.backends)) != len(self.backends):
            raise ValueError(f"backends lists an id twice: {self.backends}")
        return self


class StorageSection(Strict):
    data_dir: DataDir
    # Default: data_dir / "control.sock"; either way within the AF_UNIX limit.
    control_socket: UnixSocketPath | None = Field(default=None, validate_default=True)

    @field_validator("control_socket")
    @classmethod
    def _default_socket_fits(cls, path: Path | None, info: ValidationInfo) -> Path | None:
        data_dir = info.data.get("data_dir")
        if path is None and data_dir is not None:
            problem = socket_path_problem(data_dir / "control.sock")
            if problem:
                raise ValueError(
                    f"unset, it is data_dir/control.sock, which {problem} (a Unix socket's "
                    "path): set control_socket to a shorter path"
                )
        return path

    @property
    def socket_path(self) -> Path:
        return self.control_socket or self.data_dir / "control.sock"

    @property
    def database(self) -> Path:
        return self.data_dir / "tablectl.sqlite3"

    @property
    def run_lock(self) -> Path:
        """Held by the one `tablectl run` of this table (util/instance_lock.py)."""
        return self.data_dir / "tablectl-run.lock"


GroupName = Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")]


class AccessSection(Strict):
    """Who may do what on the control socket: the Unix groups that hold each role.

    The daemon reads the caller's uid, gid and supplementary groups from the socket
    (SO_PEERCRED, SO_PEERGROUPS). root and the daemon's own user hold every role.
    """

    technician: tuple[GroupName, ...] = ("tablectl-technician",)
    dealer: tuple[GroupName, ...] = ("tablectl-dealer",)
    floorperson: tuple[GroupName, ...] = ("tablectl-floor",)
    # A client must send its request within this time; then it is disconnected.
    request_timeout_s: FiniteFloat = Field(default=5, ge=0.1, le=60)
    # Open control connections at most; past it the longest-waiting idle one is dropped.
    max_connections: int = Field(default=64, ge=4, le=512)
    max_watchers: int = Field(default=8, ge=1, le=64)

    @model_validator(mode="after")
    def _watchers_leave_room(self) -> Self:
        if self.max_watchers >= self.max_connections:
            raise ValueError(
                f"max_watchers {self.max_watchers} must be below max_connections "
                f"{self.max_connections}, or watchers could keep status from answering"
            )
        return self


def _time_zone(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file
        raise ValueError(
            f"{name!r} is not a time zone name of the IANA database, e.g. America/New_York"
        ) from None
    return name


def _clock_time(value: object) -> time:
    """A time of day: TOML's local time (06:00:00) or a string "06:00"."""
    if isinstance(value, time):
        return value
    if isinstance(value, str):
        try:
            return time.fromisoformat(value)
        except ValueError:
            pass
    raise ValueError(f'{value!r} is not a time of day such as "06:00"')


ShiftStart = Annotated[time, BeforeValidator(_clock_time)]


class RecordsSection(Strict):
    """The table's records and game pace (docs/records.md)."""

    # Reports show local times in this zone (the journal itself is UTC); default: this
    # machine's zone, named in every report and manifest.
    time_zone: Annotated[str | None, AfterValidator(_time_zone)] = None
    # Each shift runs from its start to the next one's, in time_zone: game pace per shift.
    shift_starts: list[ShiftStart] = Field(
        default=[time(6), time(14), time(22)], min_length=1, max_length=24
    )
    # The table's Ed25519 key that signs each export; default: data_dir/records-signing.key.
    signing_key: FsPath | None = None
    pace_rolling_minutes: int = Field(default=60, ge=5, le=24 * 60)

    @field_validator("shift_starts")
    @classmethod
    def _shifts_in_order(cls, starts: list[time]) -> list[time]:
        if any(t.tzinfo is not None for t in starts):
            raise ValueError("shift starts are local times in records.time_zone: drop the offset")
        if starts != sorted(set(starts)):
            raise ValueError(f"shift starts must be in order, each once: {starts}")
        return starts


class DeckSection(Strict):
    """The decks' life the table keeps (docs/decks.md): identity, alternation, age and stub
    counts. Without this section the table keeps no decks (configs from before it)."""

    # 649a.3(c), 653a.3(c): at most 4 hours dealt by hand, 8 from a shoe (game.dealing);
    # default: that limit. Lower is allowed, higher is refused.
    max_age_hours: FiniteFloat | None = Field(default=None, gt=0)
    # A warning this long before a deck's limit, so the next deck is brought in time.
    warn_before_minutes: int = Field(default=15, ge=0, le=240)
    # Without a shuffler that counts each deck after its shuffle: the dealer counts the stub
    # at least once every this many rounds (649a.8(f), 653a.8(f), 643a.8(f): at most 5).
    # Unset: the shuffler counts (649a.5(b)) and no stub count is asked for.
    stub_count_every_rounds: int | None = Field(default=None, ge=1)
    # 649a.3(b)(3): two decks alternate, each used for every other round. Unset: as the
    # shuffler plays (shuffler.decks = 2).
    alternate: bool | None = None
    # 649a.5(f), 653a.5(f): no round for this long and the cards are spread for inspection
    # and the deck in the shuffler replaced by the one from the table before the next round
    # (`tablectl dealer idle-procedure`). 0: not kept (a device that reshuffles by itself,
    # 649a.5(g)).
    idle_minutes: int = Field(default=30, ge=0, le=24 * 60)

    @field_validator("stub_count_every_rounds")
    @classmethod
    def _at_most_five_rounds(cls, rounds: int | None) -> int | None:
        if rounds is not None and rounds > MAX_ROUNDS_BETWEEN_STUB_COUNTS:
            raise ValueError(
                f"{rounds} rounds between stub counts: the stub is counted at least once every "
                f"{MAX_ROUNDS_BETWEEN_STUB_COUNTS} rounds (649a.8(f), 649a.9(d), 649a.10(d), "
                "653a.8(f), 643a.8(f)); set 1 to 5"
            )
        return rounds


class ShuffleIntegritySection(Strict):
    """The shuffle-integrity monitor (docs/shuffle-integrity.md): each deck use the shoe reads
    is tested for the order a fair shuffle would leave (649a.5(a), 653a.5(a), 643a.5(a))."""

    # Off: no test is run (a table without a shoe never has any to run).
    enabled: bool = True
    # What a SHUFFLE SUSPECT does: "alarm" journals and shows it, play goes on; "block" also
    # stops rounds until a floor supervisor acknowledges it.
    on_alarm: Literal["alarm", "block"] = "alarm"


def deck_problems(deck: DeckSection, game: GameConfig, decks: int) -> list[str]:
    """The deck section against the game's dealing and the shuffler's decks."""
    problems = []
    table_game = game.table_game()
    limit_ms = max_age_ms(table_game.procedure)
    hours = limit_ms // HOUR_MS
    if deck.max_age_hours is not None and deck.max_age_hours * HOUR_MS > limit_ms:
        problems.append(
            f"deck.max_age_hours {deck.max_age_hours:g}: with game.dealing = "
            f"{table_game.procedure.value}, decks are changed at least every {hours} hours "
            f"({age_rule(table_game)}); set at most {hours}"
        )
    if deck.alternate and decks != 2:
        problems.append(
            f"deck.alternate: two decks alternate only with two in play "
            f"({chapter(table_game)}.3(b)); shuffler.decks is {decks}"
        )
    age_ms = limit_ms if deck.max_age_hours is None else round(deck.max_age_hours * HOUR_MS)
    if deck.warn_before_minutes * 60_000 >= age_ms:
        problems.append(
            f"deck.warn_before_minutes {deck.warn_before_minutes}: the warning must come before "
            f"the deck's limit of {age_ms / HOUR_MS:g} hours"
        )
    return problems


class ProgressiveSection(Strict):
    """[progressive]: the table's progressive wager on a link (docs/linked-progressives.md)."""

    link: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$",
        description="the link's id (its controller config's link_id); its meter, levels, "
        "rates, reset and initial amounts are the controller's (5321.18(b)(4))",
    )
    # The id the link controllers acknowledge under (the link's backend_id): it joins
    # mqtt.backends, so this table keeps every row until they have applied it.
    backend_id: str = Field(default="link", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
    # Silence (no live broadcast, no ack) after which the progressive locks out: 5321.18(c),
    # NJ 13:69E-1.39B(c). At least a second: the controllers broadcast once a second.
    link_timeout_ms: int = Field(default=5000, ge=1000, le=60_000)


class TableConfig(Strict):
    table: TableSection
    game: GameConfig
    shuffler: ShufflerSection
    shoe: ShoeSection | None = None  # without one, the dealer enters the hands shown
    gpio: GpioSection
    mqtt: MqttSection = MqttSection()
    storage: StorageSection
    access: AccessSection = AccessSection()
    records: RecordsSection = RecordsSection()
    deck: DeckSection | None = None
    shuffle_integrity: ShuffleIntegritySection = ShuffleIntegritySection()

    @model_validator(mode="after")
    def _deck_within_the_text(self) -> Self:
        if self.deck is not None and (
            problems := deck_problems(self.deck, self.game, self.shuffler.decks)
        ):
            raise ValueError("\n".join(problems))
        return self

    progressive: ProgressiveSection | None = None  # None: the meter is this table's own

    @model_validator(mode="wrap")
    @classmethod
    def _link_backend_registered(cls, data: object, handler: ValidatorFunctionWrapHandler) -> Self:
        """A linked table's rows wait for the link controllers' acks too (docs/mqtt.md):
        progressive.backend_id joins mqtt.backends. One of those already, the acks of two
        parties would be one: either's would release rows the other never applied."""
        if not isinstance(data, dict) or not isinstance(data.get("progressive"), dict):
            return cast(Self, handler(data))
        backend = data["progressive"].get("backend_id", "link")
        given = data.get("mqtt")
        mqtt: dict[str, object] = given if isinstance(given, dict) else {}
        backends = mqtt.get("backends", ["pgs"])
        if not isinstance(backends, list) or backend not in backends:
            if isinstance(backends, list):
                data = {**data, "mqtt": {**mqtt, "backends": [*backends, backend]}}
            return cast(Self, handler(data))
        handler(data)  # the file's other problems are listed with this one (load_toml_model)
        raise ValueError(
            f"progressive.backend_id {backend!r} is also in mqtt.backends: the progressive's "
            "controllers acknowledge under an id of their own (it joins mqtt.backends by "
            "itself), or another backend's acks would release rows they never applied; give "
            "it another id, or take it out of mqtt.backends"
        )

    @model_validator(mode="after")
    def _sections_agree(self) -> Self:
        problems = cross_section_problems(self.table, self.game, self.gpio)
        if self.gpio.backend == "mock" and self.gpio.simulator_socket is None:
            problem = socket_path_problem(self.simulator_socket)
            if problem:
                problems.append(
                    f"gpio.simulator_socket: unset, it is storage.data_dir/table-simulator.sock, "
                    f"which {problem} (a Unix socket's path): set it to a shorter path"
                )
        if self.progressive is not None and self.game.table_game().meter is None:
            problems.append(
                f"progressive.link: a {self.game.name} table has no progressive meter to link"
            )
        if problems:
            raise ValueError("\n".join(problems))  # one line each in `config check`
        return self

    @property
    def simulator_socket(self) -> Path:
        """Where `tablectl simulate table` serves the mock backend's edges."""
        return self.gpio.simulator_socket or self.storage.data_dir / "table-simulator.sock"

    @property
    def simulator_lock(self) -> Path:
        """Held by the one `tablectl simulate table` of this table (util/instance_lock.py)."""
        return self.storage.data_dir / "table-simulator.lock"

    @property
    def signing_key(self) -> Path:
        """The table's records-signing key (`tablectl records key`)."""
        return self.records.signing_key or self.storage.data_dir / "records-signing.key"

    def rules(self) -> TableRules:
        """What the round core needs of this config (journaled with every power-up)."""
        return TableRules(
            seats=self.table.seats,
            decks=self.shuffler.decks,
            game=self.game,
            shoe=self.shoe is not None,
            sensors=SensorRules(stuck_rounds=self.gpio.sensor_stuck_rounds),
            deck=self.deck_rules(),
            link=None
            if self.progressive is None
            else LinkRules(
                link_id=self.progressive.link,
                table_ref=f"{self.table.site_id}/{self.table.table_id}",
                link_timeout_ms=self.progressive.link_timeout_ms,
            ),
        )

    def deck_rules(self) -> DeckRules | None:
        """The deck section as the core keeps it (core/decks.py), or None without one."""
        deck = self.deck
        if deck is None:
            return None
        limit_ms = max_age_ms(self.game.table_game().procedure)
        return DeckRules(
            max_age_ms=limit_ms
            if deck.max_age_hours is None
            else round(deck.max_age_hours * HOUR_MS),
            warn_before_ms=deck.warn_before_minutes * 60_000,
            stub_count_every_rounds=deck.stub_count_every_rounds,
            alternate=self.shuffler.decks == 2 if deck.alternate is None else deck.alternate,
            idle_ms=deck.idle_minutes * 60_000 or None,
        )


def cross_section_problems(table: TableSection, game: GameConfig, gpio: GpioSection) -> list[str]:
    """What the sections say about each other: seats the game allows, a sensor and a light
    per seat, no GPIO line used twice. Every problem, each naming its fields."""
    problems = []
    most = MAX_SEATS[game.name]
    if table.seats > most:
        problems.append(
            f"table.seats {table.seats}: a table of {game.name} has at most {most} betting "
            f"positions ({SEAT_RULES[game.name]})"
        )
    # 649a.2(c)(1): a wagering device at each betting position.
    for name in ("seat_sensor_pins", "seat_light_pins"):
        pins = getattr(gpio, name)
        if len(pins) != table.seats:
            problems.append(
                f"gpio.{name} lists {len(pins)} pins for {table.seats} seats: 649a.2(c)(1) "
                "needs a wagering device at each betting position"
            )
    users: dict[int | str, list[str]] = {}
    for field, line in _gpio_lines(gpio):
        users.setdefault(line, []).append(field)
    for line, fields in users.items():
        if len(fields) > 1:
            problems.append(f"gpio: line {line!r} is used by {' and '.join(fields)}: one each")
    return problems


def _gpio_lines(gpio: GpioSection) -> list[tuple[str, int | str]]:
    """Every GPIO line the config assigns, by its field path (any `*_pin` or `*_pins`)."""
    lines: list[tuple[str, int | str]] = []
    for name in type(gpio).model_fields:
        value = getattr(gpio, name)
        if name.endswith("_pin") and isinstance(value, int | str):
            lines.append((f"gpio.{name}", value))
        elif name.endswith("_pins") and isinstance(value, list):
            lines += [(f"gpio.{name}[{i}]", v) for i, v in enumerate(value)]
    return lines


def _cross_checks_of_what_is_valid(raw: object) -> list[str]:
    """When some sections are invalid, the cross-section checks still run on the ones that
    are, so one `config check` reports every error, not three and then the next ones."""
    if not isinstance(raw, dict):
        return []
    try:
        table = TableSection.model_validate(raw.get("table"))
        game = TypeAdapter(GameConfig).validate_python(raw.get("game"))
        gpio = GpioSection.model_validate(raw.get("gpio"))
    except (ValidationError, RecursionError):
        return []  # those sections' own errors are already listed
    return cross_section_problems(table, game, gpio)


class ConfigError(Exception):
    """A config file that cannot be used; `errors` holds one line per problem."""

    def __init__(self, path: Path, errors: list[str]) -> None:
        super().__init__(f"{path}: " + "; ".join(errors))
        self.path = path
        self.errors = errors


def field_path(loc: tuple[int | str, ...]) -> str:
    """A field as the file names it: gpio.seat_sensor_pins[3], link[0].level[1].title."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else part
    return path


def _describe(err: dict[str, object]) -> list[str]:
    """One line per problem: its field path and what to do."""
    parts = list(err["loc"])  # type: ignore[call-overload]
    if parts[:1] == ["game"] and parts[1:2] and parts[1] in MAX_SEATS:
        del parts[1]  # the union's tag: the file says game.progressive, not game.<name>...
    if parts[:1] in (["shuffler"], ["shoe"]) and parts[1:2] == ["settings"]:
        del parts[1]  # a driver's own keys are written in its device's section
    loc = field_path(tuple(parts))
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key (not part of the configuration schema)"
    if err["type"] == "union_tag_invalid":
        msg = f"game.name must be one of {', '.join(MAX_SEATS)}"
    return [f"{loc}: {line}" if loc else line for line in msg.splitlines()]


def load_config(path: Path) -> TableConfig:
    """Read and validate a table config; raises ConfigError listing every problem."""
    return load_toml_model(path, TableConfig)


M = TypeVar("M", bound=BaseModel)


def load_toml_model(path: Path, model: type[M]) -> M:
    """Read a TOML file and validate it as `model` (a table's config, the link controller's);
    raises ConfigError listing every problem, each naming its field."""
    text = ""
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
    except PermissionError as exc:
        raise ConfigError(path, [f"cannot read: {permission_advice(path)}"]) from exc
    except FileNotFoundError as exc:
        raise ConfigError(path, [f"cannot read: {exc.strerror}; {_NO_CONFIG_HINT}"]) from exc
    except OSError as exc:
        raise ConfigError(path, [f"cannot read: {exc.strerror}"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(path, [f"not UTF-8 text (byte {exc.start}): save it as UTF-8"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [f"not valid TOML: {_cut(str(exc))}"]) from exc
    except ValueError as exc:  # e.g. a NUL byte in the path
        raise ConfigError(path, [f"cannot read: {exc}"]) from exc
    except RecursionError:
        raise ConfigError(path, [_too_deep(text)]) from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = [line for e in exc.errors() for line in _describe(dict(e))]
        try:
            valid_part, more = _behind_the_first_errors(raw, model, exc)
            errors += [p for p in more if p not in errors]
            if model is TableConfig:
                errors += [p for p in _cross_checks_of_what_is_valid(valid_part) if p not in errors]
        except RecursionError:
            pass  # pydantic's errors stand; the ones behind them show once those are fixed
        raise ConfigError(path, errors) from None
    except RecursionError:
        raise ConfigError(path, [_nested_too_deeply(raw)]) from None


def _behind_the_first_errors(
    raw: object, model: type[BaseModel], exc: ValidationError
) -> tuple[object, list[str]]:
    """The problems pydantic does not reach while a section has a bad field (a section's own
    cross-field rules run only once its fields are valid): each bad field is taken out (its
    default stands in) and the rest validated again, so `config check` lists every problem
    at once. A problem that names a field taken out is not the file's, and is not listed.
    Returns the file without its bad fields, and the problems found."""
    if not isinstance(raw, dict):
        return raw, []
    raw = _copy_tree(raw)
    removed: set[tuple[object, ...]] = set()
    found: list[str] = []
    for _ in range(_MAX_REVALIDATIONS):
        taken = {loc for e in exc.errors() if (loc := _removable(raw, e)) and loc not in removed}
        if not taken:
            break
        for loc in sorted(taken, key=len):  # a table taken out takes its keys with it
            parent: object = raw
            for key in loc[:-1]:
                parent = parent.get(key) if isinstance(parent, dict) else None
            if isinstance(parent, dict):
                parent.pop(loc[-1], None)
        removed |= taken
        try:
            model.model_validate(raw)
            break
        except ValidationError as again:
            exc = again
        except RecursionError:
            break
        names = {str(loc[-1]) for loc in removed}
        for error in exc.errors():  # a taken-out field's own "Field required" names it
            lines = _describe(dict(error))
            if not any(re.search(rf"\b{re.escape(n)}\b", line) for n in names for line in lines):
                found += [line for line in lines if line not in found]
    return raw, found


_MAX_REVALIDATIONS = 4


def _copy_tree(value: object) -> object:
    """Dicts copied (they are pruned); other values shared. Without recursion: a dotted
    header can nest tables as deep as the line is long."""
    if not isinstance(value, dict):
        return value
    root: dict[object, object] = {}
    pending: list[tuple[dict[object, object], dict[object, object]]] = [(value, root)]
    while pending:
        source, copy = pending.pop()
        for key, inner in source.items():
            if isinstance(inner, dict):
                copy[key] = {}
                pending.append((inner, copy[key]))  # type: ignore[arg-type]
            else:
                copy[key] = inner
    return root


def _raw_loc(raw: object, loc: tuple[int | str, ...]) -> tuple[object, ...] | None:
    """An error's location as keys of the parsed file (the game's union tag dropped), up to
    the last table key: a bad list element takes its whole list out."""
    keys: list[object] = []
    node = raw
    for part in loc:
        if not isinstance(node, dict):
            break
        if keys == ["game"] and part in MAX_SEATS and part not in node:
            continue  # the union's tag
        if part not in node:
            return None  # a key the file lacks: nothing to take out
        keys.append(part)
        node = node[part]
    return tuple(keys) or None


def _removable(raw: object, error: Mapping[str, object]) -> tuple[object, ...] | None:
    """Where to take a bad field out; None for a section's own rule (its table stays)."""
    loc = _raw_loc(raw, error["loc"])  # type: ignore[arg-type]
    if loc is None:
        return None
    node = raw
    for key in loc:
        node = node[key]  # type: ignore[index]
    if isinstance(node, dict) and error["type"] in ("value_error", "assertion_error"):
        return None
    return loc


_MAX_NESTING_SHOWN = 64


def _nested_too_deeply(raw: object) -> str:
    """Where a value nests deepest, named as the file does (link[0].level[0].initial_amount.a
    ...), found without recursion: the value is too deep for a recursive walk."""
    deepest: tuple[int, tuple[int | str, ...]] = (0, ())
    pending: list[tuple[object, tuple[int | str, ...], int]] = [(raw, (), 0)]
    while pending:
        node, loc, depth = pending.pop()
        if depth > deepest[0]:
            deepest = (depth, loc)
        items: list[tuple[int | str, object]] = []
        if isinstance(node, dict):
            items = [(str(k), v) for k, v in node.items()]
        elif isinstance(node, list):
            items = list(enumerate(node))
        # The first parts name the setting; the rest are only counted.
        pending += [
            (v, (*loc, k) if len(loc) <= _PARTS_SHOWN else loc, depth + 1) for k, v in items
        ]
    depth, loc = deepest
    shown = field_path(loc[:_PARTS_SHOWN]) + ("..." if len(loc) > _PARTS_SHOWN else "")
    return (
        f"{shown or 'the file'}: nested too deeply ({depth:,} levels of lists or tables); "
        "no setting nests that deep"
    )


_PARTS_SHOWN = 8


def _too_deep(text: str) -> str:
    """Which key holds a value nested too deeply for the TOML reader (a RecursionError),
    named as the file does: gpio.seat_sensor_pins: ... (line 37)."""
    table: list[str] = []
    key = ""
    depth = 0
    quote = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if depth == 0 and not quote:
            stripped = line.strip()
            header = re.fullmatch(r"\[\[?\s*([^\]\s]+)\s*\]\]?\s*(#.*)?", stripped)
            if header:
                table = [re.sub(r"[\"']", "", header[1])]
                continue
            assignment = re.match(r"\s*([A-Za-z0-9_.\"'-]+?)\s*=", line)
            if assignment:
                key = ".".join([*table, re.sub(r"[\"']", "", assignment[1])])
        i = 0
        while i < len(line):
            char = line[i]
            if quote:
                if char == "\\" and quote == '"':
                    i += 1
                elif char == quote:
                    quote = ""
            elif char in "\"'":
                quote = char
            elif char == "#":
                break
            elif char in "[{" and (depth or "=" in line[:i]):
                depth += 1
                if depth > _MAX_NESTING_SHOWN:
                    return (
                        f"{key or 'the file'}: nested too deeply (more than "
                        f"{_MAX_NESTING_SHOWN} levels of lists or tables, line {number}); "
                        "no setting nests that deep"
                    )
            elif char in "]}" and depth:
                depth -= 1
            i += 1
        if quote != '"""':
            quote = ""  # a quote does not run on past its line (multi-line strings aside)
    return "not valid TOML: a value is nested too deeply"

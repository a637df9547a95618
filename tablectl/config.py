"""Table configuration: one TOML file per table, validated against the regulations.

Every model rejects unknown keys. Regulatory limits are validators whose message names the
field and cites the rule, so `tablectl config check` tells a technician exactly what to fix.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from datetime import time
from pathlib import Path
from typing import Annotated, Literal, Self, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from tablectl.core.events import SensorRules, TableRules
from tablectl.core.games import MAX_SEATS, SEAT_RULES, GameConfig
from tablectl.drivers.gpio.settings import GpioSettings
from tablectl.drivers.reference.link import LinkSettings
from tablectl.drivers.registry import SHOES, SHUFFLERS, DeviceSettings, check_port
from tablectl.util.files import permission_advice
from tablectl.util.money import Strict

_NO_CONFIG_HINT = (
    "give --config FILE, set TABLECTL_CONFIG, or start from an example in "
    "/usr/share/doc/tablectl/examples/ (or config/ in the source)"
)


class TableSection(Strict):
    site_id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    table_id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    seats: int = Field(ge=1, le=7, description="betting positions; seat 1 is dealt first")


class DeviceSection(Strict):
    """A polled device on the reference link (docs/protocols/)."""

    driver: str = Field(default="reference", description="the device's protocol module")
    port: str = Field(
        min_length=1,
        description="a serial device, usb:VVVV:PPPP[:SERIAL], socket://HOST:PORT (a simulator)",
    )
    baudrate: int = Field(default=115200, gt=0)
    address: int = Field(default=1, ge=0, le=255)
    poll_interval_ms: int = Field(default=150, ge=100, le=200)
    response_timeout_ms: int = Field(default=250, ge=50, le=5000)
    retries: int = Field(default=3, ge=0, le=10)
    missed_polls_for_link_down: int = Field(default=3, ge=1, le=20)
    trace_file: Path | None = Field(
        default=None, description="record the link's bytes and the core inputs (a field trace)"
    )

    @field_validator("port")
    @classmethod
    def _port_parses(cls, port: str) -> str:
        check_port(port)
        return port

    def driver_settings(self) -> DeviceSettings:
        """What the device's driver is told (the drivers never see the config)."""
        return DeviceSettings(
            driver=self.driver,
            port=self.port,
            baudrate=self.baudrate,
            link=LinkSettings(
                address=self.address,
                poll_interval_ms=self.poll_interval_ms,
                response_timeout_ms=self.response_timeout_ms,
                retries=self.retries,
                missed_polls_for_link_down=self.missed_polls_for_link_down,
            ),
        )


class ShufflerSection(DeviceSection):
    # 649a.3(b): with a shuffler, two decks may alternate, one shuffled while the other plays.
    decks: Literal[1, 2] = 2

    @field_validator("driver")
    @classmethod
    def _known_driver(cls, name: str) -> str:
        return _known(name, SHUFFLERS)


class ShoeSection(DeviceSection):
    """An automated dealing shoe (649a.10, 653a.10, 643a.10): it reads every card it deals."""

    usb_read_timeout_ms: int = Field(default=10, ge=1, le=100)

    @field_validator("driver")
    @classmethod
    def _known_driver(cls, name: str) -> str:
        return _known(name, SHOES)

    def driver_settings(self) -> DeviceSettings:
        return replace(super().driver_settings(), usb_read_timeout_ms=self.usb_read_timeout_ms)


def _known(name: str, drivers: Mapping[str, object]) -> str:
    if name not in drivers:
        raise ValueError(f"unknown driver {name!r}; one of {', '.join(sorted(drivers))}")
    return name


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
    simulator_socket: Path | None = None  # mock: default data_dir / "table-simulator.sock"

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
    if not path.is_file():
        raise ValueError(f"{path} does not exist (or is not a file)")
    if not os.access(path, os.R_OK):
        raise ValueError(f"{path} is not readable by this user")
    return path


ReadableFile = Annotated[Path | None, AfterValidator(_readable_file)]


class MqttSection(Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=1883, ge=1, le=65535)
    client_id: str | None = Field(default=None, description="default tablectl-{site}-{table}")
    # The table's id (docs/mqtt.md, config/mosquitto/): the ACL keys on the username, which the
    # shipped broker takes from the certificate's common name (it ignores these two then).
    username: str | None = None
    password: str | None = None
    keepalive_s: int = Field(default=30, ge=5, le=600)
    tls: bool = False
    ca_file: ReadableFile = None  # the CA that signed the broker's certificate (default: system)
    cert_file: ReadableFile = None  # this table's client certificate ...
    key_file: ReadableFile = None  # ... and its private key
    reconnect_max_s: float = Field(default=30, ge=1, le=600)
    # QoS 1 publishes in flight to the broker at once: deep enough to keep the pipe full.
    publish_window: int = Field(default=256, ge=1, le=10_000)
    # The backends that acknowledge on ack/{backend_id}; a row is outstanding until all have.
    backends: list[BackendId] = Field(default=["pgs"], min_length=1)
    # The retention bound: past it, status, health and the log raise an alarm.
    backlog_alarm_rows: int = Field(default=100_000, ge=1)
    backlog_alarm_hours: float = Field(default=24, gt=0)
    health_counters_interval_s: float = Field(default=60, ge=1, le=3600)
    # A backend whose ack has not moved this long while later rows were out is sent them
    # again from its ack (docs/mqtt.md, Delivery). Below half a second a healthy backend's
    # once-per-burst ack would look stalled; past an hour dropped rows wait too long.
    ack_stall_s: float = Field(default=10, ge=0.5, le=3600)

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
    data_dir: Path
    control_socket: Path | None = None  # default: data_dir / "control.sock"

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
    request_timeout_s: float = Field(default=5, gt=0, le=60)
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
    except (ZoneInfoNotFoundError, ValueError):
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
    signing_key: Path | None = None
    pace_rolling_minutes: int = Field(default=60, ge=5, le=24 * 60)

    @field_validator("shift_starts")
    @classmethod
    def _shifts_in_order(cls, starts: list[time]) -> list[time]:
        if any(t.tzinfo is not None for t in starts):
            raise ValueError("shift starts are local times in records.time_zone: drop the offset")
        if starts != sorted(set(starts)):
            raise ValueError(f"shift starts must be in order, each once: {starts}")
        return starts


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

    @model_validator(mode="after")
    def _sections_agree(self) -> Self:
        problems = cross_section_problems(self.table, self.game, self.gpio)
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


def _describe(err: dict[str, object]) -> list[str]:
    """One line per problem: its field path and what to do."""
    parts = [str(part) for part in err["loc"]]  # type: ignore[attr-defined]
    if parts[:1] == ["game"] and parts[1:2] and parts[1] in MAX_SEATS:
        del parts[1]  # the union's tag: the file says game.progressive, not game.<name>...
    loc = ".".join(parts)
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
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except PermissionError as exc:
        raise ConfigError(path, [f"cannot read: {permission_advice(path)}"]) from exc
    except FileNotFoundError as exc:
        raise ConfigError(path, [f"cannot read: {exc.strerror}; {_NO_CONFIG_HINT}"]) from exc
    except OSError as exc:
        raise ConfigError(path, [f"cannot read: {exc.strerror}"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(path, [f"not UTF-8 text (byte {exc.start}): save it as UTF-8"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [f"not valid TOML: {exc}"]) from exc
    except ValueError as exc:  # e.g. a NUL byte in the path
        raise ConfigError(path, [f"cannot read: {exc}"]) from exc
    except RecursionError:
        raise ConfigError(path, ["not valid TOML: nested too deeply"]) from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        errors = [line for e in exc.errors() for line in _describe(dict(e))]
        errors += [p for p in _cross_checks_of_what_is_valid(raw) if p not in errors]
        raise ConfigError(path, errors) from exc
    except RecursionError:
        raise ConfigError(path, ["a value is nested too deeply"]) from None

"""Table configuration: one TOML file per table, validated against the regulations.

Every model rejects unknown keys. Regulatory limits are validators whose message names the
field and cites the rule, so `tablectl config check` tells a technician exactly what to fix.
"""

from __future__ import annotations

import tomllib
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tablectl.rules.progressive import MIN_RATE_BP, MIN_RESET_CENTS, PROGRESSIVE_WAGERS_CENTS


def _scaled_decimal(value: object, scale: int, what: str, example: str) -> int:
    """A decimal written as a string or a whole number (never a float), times scale, exactly."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"write {what} as a quoted decimal such as {example}, not {value!r}")
    try:
        scaled = Decimal(value) * scale
    except InvalidOperation:
        raise ValueError(f"{value!r} is not {what}") from None
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value!r} is more precise than {what} can be ({example})")
    return int(scaled)


def _to_cents(value: object) -> int:
    """Money: "1000.00" or whole dollars (1000), held as integer cents."""
    return _scaled_decimal(value, 100, "money", '"1000.00" or whole dollars')


def _to_basis_points(value: object) -> int:
    """A percentage with at most two decimals ("14.25"), held as basis points."""
    return _scaled_decimal(value, 100, "a percentage", '"14.5"')


Cents = Annotated[int, BeforeValidator(_to_cents)]
BasisPoints = Annotated[int, BeforeValidator(_to_basis_points)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TableSection(_Strict):
    site_id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    table_id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    game: Literal["three-card-poker"]
    # 649a.2(a): betting positions for no more than seven players.
    seats: int = Field(ge=1, le=7, description="649a.2(a): at most seven betting positions")


class ProgressiveSection(_Strict):
    wager: Cents
    paytable: Literal["A", "B"]
    rate_of_progression_percent: BasisPoints
    initial_amount: Cents
    reset_amount: Cents

    @field_validator("wager")
    @classmethod
    def _wager_has_envy_table(cls, cents: int) -> int:
        if cents not in PROGRESSIVE_WAGERS_CENTS:
            raise ValueError(
                "the Progressive Payout Wager must be $1 or $5: 649a.12(e)(5) defines "
                "Envy Bonuses for those two amounts only"
            )
        return cents

    @field_validator("initial_amount", "reset_amount")
    @classmethod
    def _at_least_minimum(cls, cents: int) -> int:
        if cents < MIN_RESET_CENTS:
            raise ValueError(
                f"${Decimal(cents) / 100:,.2f} is below the $1,000.00 minimum "
                "initial and reset amount of 649a.12(e)(3)"
            )
        return cents

    @model_validator(mode="after")
    def _rate_at_least_minimum(self) -> Self:
        minimum = MIN_RATE_BP[self.paytable]
        rate = self.rate_of_progression_percent
        if rate < minimum:
            raise ValueError(
                f"rate_of_progression_percent {Decimal(rate) / 100}% is below the "
                f"{Decimal(minimum) / 100}% minimum for paytable {self.paytable} "
                "(649a.12(e)(3))"
            )
        if rate > 10_000:
            raise ValueError("rate_of_progression_percent cannot exceed 100%")
        return self


class ShufflerSection(_Strict):
    port: str = Field(min_length=1, description="serial device, or a pyserial URL (socket://)")
    baudrate: int = Field(default=115200, gt=0)
    address: int = Field(default=1, ge=0, le=255)
    # 649a.3(b): with a shuffler, two decks may alternate, one shuffled while the other plays.
    decks: Literal[1, 2] = 2
    poll_interval_ms: int = Field(default=150, ge=100, le=200)
    response_timeout_ms: int = Field(default=250, ge=50, le=5000)
    retries: int = Field(default=3, ge=0, le=10)
    missed_polls_for_link_down: int = Field(default=3, ge=1, le=20)


class GpioSection(_Strict):
    backend: Literal["native", "mock"] = "native"
    seat_sensor_pins: list[int]
    seat_light_pins: list[int]
    lockout_pin: int
    active_low: bool = True
    chip_present_ms: int = Field(default=150, ge=10, le=2000)
    lockout_debounce_ms: int = Field(default=50, ge=0, le=1000)


class MqttSection(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=1883, ge=1, le=65535)
    username: str | None = None
    password: str | None = None
    keepalive_s: int = Field(default=30, ge=5, le=600)
    tls: bool = False
    ca_file: Path | None = None
    reconnect_max_s: float = Field(default=30, ge=1, le=600)
    publish_window: int = Field(default=8, ge=1, le=100)


class StorageSection(_Strict):
    data_dir: Path
    control_socket: Path | None = None  # default: data_dir / "control.sock"

    @property
    def socket_path(self) -> Path:
        return self.control_socket or self.data_dir / "control.sock"

    @property
    def database(self) -> Path:
        return self.data_dir / "tablectl.sqlite3"


class TableConfig(_Strict):
    table: TableSection
    progressive: ProgressiveSection
    shuffler: ShufflerSection
    gpio: GpioSection
    mqtt: MqttSection = MqttSection()
    storage: StorageSection

    @model_validator(mode="after")
    def _one_sensor_and_light_per_seat(self) -> Self:
        seats = self.table.seats
        gpio = self.gpio
        # 649a.2(c)(1): a wagering device at each betting position.
        for name, pins in (
            ("seat_sensor_pins", gpio.seat_sensor_pins),
            ("seat_light_pins", gpio.seat_light_pins),
        ):
            if len(pins) != seats:
                raise ValueError(
                    f"gpio.{name} lists {len(pins)} pins for {seats} seats: 649a.2(c)(1) "
                    "needs a wagering device at each betting position"
                )
        every = [*gpio.seat_sensor_pins, *gpio.seat_light_pins, gpio.lockout_pin]
        dupes = sorted({p for p in every if every.count(p) > 1})
        if dupes:
            raise ValueError(f"gpio pins used twice: {dupes}")
        return self


class ConfigError(Exception):
    """A config file that cannot be used; `errors` holds one line per problem."""

    def __init__(self, path: Path, errors: list[str]) -> None:
        super().__init__(f"{path}: " + "; ".join(errors))
        self.path = path
        self.errors = errors


def _describe(err: dict[str, object]) -> str:
    loc = ".".join(str(part) for part in err["loc"])  # type: ignore[attr-defined]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key (not part of the configuration schema)"
    return f"{loc}: {msg}" if loc else msg


def load_config(path: Path) -> TableConfig:
    """Read and validate a table config; raises ConfigError listing every problem."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(path, [f"cannot read: {exc.strerror}"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [f"not valid TOML: {exc}"]) from exc
    try:
        return TableConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(path, [_describe(dict(e)) for e in exc.errors()]) from exc

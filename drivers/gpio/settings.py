"""What the GPIO drivers are told: the wiring and timings, typed and already validated.

The application's `[gpio]` config section is parsed and checked in `tablectl.config`, which
hands the drivers one of these (`GpioSection.driver_settings()`); the drivers never import
the application's config (docs/design.md, "Layers").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GpioLine = int | str  # an offset on the chip, or a line name (gpioinfo shows both)
BackendName = Literal["auto", "gpiod", "gpiod-poll", "gpiozero", "mock"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GpioSettings:
    backend: BackendName = "auto"
    chip: str | None = None  # None: the one chip, or the one holding the named lines
    seat_sensor_pins: tuple[GpioLine, ...]
    seat_light_pins: tuple[GpioLine, ...]
    lockout_pin: GpioLine
    active_low: bool = True
    chip_present_ms: int = 150
    chip_bounce_ms: int = 5
    lockout_debounce_ms: int = 50
    lockout_hold_max_ms: int = 5_000
    poll_period_ms: int = 2

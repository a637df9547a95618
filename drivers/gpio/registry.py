"""The config chooses a GPIO backend: auto, gpiod, gpiod-poll, gpiozero or mock.

`auto` takes libgpiod wherever a /dev/gpiochip* exists, and polls where the chip's lines
cannot raise interrupts (ENXIO); it never tries gpiozero's default pin factory, which only
works on a Raspberry Pi. Without any GPIO chip it says what it looked for.
"""

from __future__ import annotations

import glob
from collections.abc import Callable
from pathlib import Path

import structlog
from tablectl.drivers.gpio.backend import GpioBackend, GpioUnavailable, Levels
from tablectl.drivers.gpio.gpiod_backend import (
    ChipPort,
    EdgesUnsupported,
    GpiodBackend,
    GpiodChip,
    GpiodPollBackend,
)
from tablectl.drivers.gpio.gpiozero_backend import GpiozeroBackend
from tablectl.drivers.gpio.mock import SimulatorLinkBackend
from tablectl.drivers.gpio.settings import GpioSettings

log = structlog.get_logger(__name__)
CHIPS_GLOB = "/dev/gpiochip*"
NO_GPIO_HINT = (
    'without GPIO hardware, set gpio.backend = "mock" and start '
    "`tablectl simulate table --config FILE`"
)


def chip_path(config: GpioSettings, chips: list[str], open_chip: Callable[[str], ChipPort]) -> str:
    """The one chip that carries every sensor and the lock-out (one request: one order)."""
    if config.chip:
        return config.chip if config.chip.startswith("/") else f"/dev/{config.chip}"
    if not chips:
        raise GpioUnavailable(f"no GPIO chip: looked for {CHIPS_GLOB}, found none; {NO_GPIO_HINT}")
    if len(chips) == 1:
        return chips[0]
    lines = [config.lockout_pin, *config.seat_sensor_pins, *config.seat_light_pins]
    if not any(isinstance(line, str) for line in lines):
        raise GpioUnavailable(
            f"{len(chips)} GPIO chips ({', '.join(chips)}) and the lines are given by offset: "
            "set gpio.chip to the chip the sensors are wired to (gpiodetect lists them)"
        )
    for path in chips:
        try:
            chip = open_chip(path)
        except GpioUnavailable:
            continue
        try:
            chip.resolve(lines)
        except GpioUnavailable:
            continue
        finally:
            chip.close()
        return path
    raise GpioUnavailable(
        f"no GPIO chip has every line named in [gpio]: looked in {', '.join(chips)} "
        "(gpioinfo lists the names)"
    )


async def open_backend(
    config: GpioSettings,
    *,
    seats: int,
    simulator_socket: Path,
    chips: list[str] | None = None,
    open_chip: Callable[[str], ChipPort] = GpiodChip,
) -> tuple[GpioBackend, Levels]:
    """The configured backend with its lines claimed, and their levels now."""
    sensors, lockout = config.seat_sensor_pins, config.lockout_pin
    lamps, active_low = config.seat_light_pins, config.active_low
    backend: GpioBackend
    if config.backend == "mock":
        backend = SimulatorLinkBackend(simulator_socket, seats)
        return backend, await backend.open()
    if config.backend == "gpiozero":
        backend = GpiozeroBackend(
            sensors=sensors, lockout=lockout, lamps=lamps, active_low=active_low
        )
        return backend, await backend.open()
    path = chip_path(config, sorted(glob.glob(CHIPS_GLOB)) if chips is None else chips, open_chip)
    if config.backend != "gpiod-poll":
        backend = GpiodBackend(
            open_chip(path), sensors=sensors, lockout=lockout, lamps=lamps, active_low=active_low
        )
        try:
            return backend, await backend.open()
        except EdgesUnsupported as exc:
            backend.close()
            if config.backend == "gpiod":
                raise GpioUnavailable(
                    f'{exc}; set gpio.backend = "gpiod-poll" (or "auto") to poll it'
                ) from None
            log.warning(
                "GPIO chip has no edge interrupts: polling",
                chip=path,
                error=str(exc),
                poll_period_ms=config.poll_period_ms,
            )
    backend = GpiodPollBackend(
        open_chip(path),
        sensors=sensors,
        lockout=lockout,
        lamps=lamps,
        active_low=active_low,
        period_ms=config.poll_period_ms,
    )
    return backend, await backend.open()

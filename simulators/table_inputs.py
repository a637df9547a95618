"""Simulated chip sensors and lock-out button: drives gpiozero mock pins as hardware would."""

from __future__ import annotations

from typing import Any

from tablectl.config import GpioSection


class MockTableInputs:
    """Players' chips and the dealer's button, on the daemon's MockFactory pins."""

    def __init__(self, pin_factory: Any, config: GpioSection) -> None:
        self._factory = pin_factory
        self._config = config

    def _drive(self, pin: int, active: bool) -> None:
        mock_pin = self._factory.pin(pin)
        high = active != self._config.active_low
        mock_pin.drive_high() if high else mock_pin.drive_low()

    def place_chip(self, seat: int) -> None:
        self._drive(self._config.seat_sensor_pins[seat - 1], True)

    def remove_chip(self, seat: int) -> None:
        self._drive(self._config.seat_sensor_pins[seat - 1], False)

    def bounce_chip(self, seat: int, times: int = 3) -> None:
        """A chip tossed onto the sensor: contacts chatter before it rests (or rolls off)."""
        for _ in range(times):
            self.place_chip(seat)
            self.remove_chip(seat)

    def press_lockout(self) -> None:
        pin = self._config.lockout_pin
        self._drive(pin, True)
        self._drive(pin, False)

    def light_is_on(self, seat: int) -> bool:
        return bool(self._factory.pin(self._config.seat_light_pins[seat - 1]).state)

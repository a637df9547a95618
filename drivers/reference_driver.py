"""The reference shuffler and shoe (docs/protocols/) as a driver like any vendor's: registered
under the `tablectl.drivers` entry point `reference` (pyproject.toml), with its own settings."""

from __future__ import annotations

from typing import Any

import serial
from pydantic import Field, field_validator
from tablectl.drivers.api import Driver as DriverSpec
from tablectl.drivers.api import DriverContext, DriverSettings
from tablectl.drivers.reference.link import LinkSettings
from tablectl.drivers.reference.messages import MAX_EVENT_ID
from tablectl.drivers.registry import check_port, connector_for
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.drivers.transport.base import TraceWriter

# Serial line speed. pyserial's Serial.BAUDRATES are the standard rates termios names, 50 to
# 4,000,000 on Linux; pyserial also sets any rate between (termios2 BOTHER), so every whole
# number in that range is accepted; beyond it the kernel's speed_t overflows (10**21 crashed).
BAUDRATE_MIN = min(serial.Serial.BAUDRATES)
BAUDRATE_MAX = max(serial.Serial.BAUDRATES)


class ReferenceSettings(DriverSettings):
    """A polled device on the reference link (docs/protocols/)."""

    port: str = Field(
        min_length=1,
        description="a serial device, usb:VVVV:PPPP[:SERIAL], socket://HOST:PORT (a simulator)",
    )
    baudrate: int = Field(default=115200, ge=BAUDRATE_MIN, le=BAUDRATE_MAX)
    address: int = Field(default=1, ge=0, le=255)
    poll_interval_ms: int = Field(default=150, ge=100, le=200)
    response_timeout_ms: int = Field(default=250, ge=50, le=5000)
    retries: int = Field(default=3, ge=0, le=10)
    missed_polls_for_link_down: int = Field(default=3, ge=1, le=20)

    @field_validator("port")
    @classmethod
    def _port_parses(cls, port: str) -> str:
        check_port(port)
        return port

    def link(self) -> LinkSettings:
        return LinkSettings(
            address=self.address,
            poll_interval_ms=self.poll_interval_ms,
            response_timeout_ms=self.response_timeout_ms,
            retries=self.retries,
            missed_polls_for_link_down=self.missed_polls_for_link_down,
        )


class ReferenceShoeSettings(ReferenceSettings):
    usb_read_timeout_ms: int = Field(default=10, ge=1, le=100)


def _trace(context: DriverContext) -> TraceWriter | None:
    trace = context.trace
    return trace if isinstance(trace, TraceWriter) else None


def make_shuffler(settings: Any, context: DriverContext) -> ReferenceShuffler:
    assert isinstance(settings, ReferenceSettings)
    connector = connector_for(
        settings.port, baudrate=settings.baudrate, usb_backend=context.extras.get("usb_backend")
    )
    return ReferenceShuffler(
        connector, context.emit, settings.link(), context.cursor, _trace(context)
    )


def make_shoe(settings: Any, context: DriverContext) -> ReferenceShoe:
    assert isinstance(settings, ReferenceShoeSettings)
    connector = connector_for(
        settings.port,
        baudrate=settings.baudrate,
        usb_backend=context.extras.get("usb_backend"),
        usb_read_timeout_ms=settings.usb_read_timeout_ms,
    )
    return ReferenceShoe(connector, context.emit, settings.link(), context.cursor, _trace(context))


DRIVER = DriverSpec(
    name="reference",
    description="tablectl's reference shuffler and shoe (binary frames, CRC-16, polled)",
    settings={"shuffler": ReferenceSettings, "shoe": ReferenceShoeSettings},
    shuffler=make_shuffler,
    shoe=make_shoe,
    simulator="tablectl.simulators.conformance:shuffler",
    shoe_simulator="tablectl.simulators.conformance:shoe",
    event_id_max=MAX_EVENT_ID,
)

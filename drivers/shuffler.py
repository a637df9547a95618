"""Shuffler driver: serial link, polling for events, SHUFFLE command -> table events."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import serial
import serial_asyncio_fast
import structlog
from tablectl.drivers.link import Link, LinkError, LinkTimeout
from tablectl.drivers.protocol import (
    EventKind,
    FaultCode,
    MsgType,
    ProtocolError,
    decode_status,
    encode_poll,
)

from tablectl.config import ShufflerSection
from tablectl.core.events import (
    Event,
    ShuffleCompleted,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
)
from tablectl.util.backoff import Backoff

log = structlog.get_logger(__name__)

FAULT_NAMES = {
    FaultCode.JAM: "jam",
    FaultCode.STOPPED: "stopped",
    FaultCode.CYCLE_INCOMPLETE: "cycle-incomplete",
    FaultCode.DOOR_OPEN: "door-open",
}


class ShufflerDriver:
    """Keeps a link to the shuffler, polls it, and emits table events in device order."""

    def __init__(self, config: ShufflerSection, emit: Callable[[Event], None]) -> None:
        self._config = config
        self._emit = emit
        self._link: Link | None = None
        self._acked_event_id = 0
        self._boot_id: int | None = None
        self.link_up = False
        self._link_ready = asyncio.Event()
        self.bad_replies = 0
        self.reconnects = 0
        self.last_state: str | None = None

    def health(self) -> dict[str, Any]:
        return {
            "link": "up" if self.link_up else "down",
            "port": self._config.port,
            "boot_id": self._boot_id,
            "state": self.last_state,
            "bad_replies": self.bad_replies,
            "reconnects": self.reconnects,
            **(self._link.stats() if self._link else {}),
        }

    async def wait_link_up(self) -> None:
        await self._link_ready.wait()

    async def shuffle(self) -> None:
        """Ask for a shuffle. Safe to retry: the device answers a repeated SEQ from its cache."""
        if self._link is None:
            raise LinkError("the shuffler link is down")
        await self._link.request(MsgType.SHUFFLE)

    async def run(self) -> None:
        backoff = Backoff(initial_s=0.2, max_s=5.0)
        while True:
            try:
                reader, writer = await serial_asyncio_fast.open_serial_connection(
                    url=self._config.port, baudrate=self._config.baudrate
                )
            except (OSError, serial.SerialException) as exc:
                self._set_link(False)
                level = log.warning if backoff.first_failure else log.debug
                level("shuffler port unavailable", port=self._config.port, error=str(exc))
                await asyncio.sleep(backoff.next_delay())
                continue
            link = Link(
                reader,
                writer,
                address=self._config.address,
                response_timeout_ms=self._config.response_timeout_ms,
                retries=self._config.retries,
            )
            self._link = link
            try:
                async with asyncio.TaskGroup() as tasks:
                    tasks.create_task(link.read_forever(), name="shuffler-read")
                    tasks.create_task(self._poll_forever(link, backoff), name="shuffler-poll")
            except* (LinkError, OSError, serial.SerialException) as group:
                log.warning("shuffler link lost", error=str(group.exceptions[0]))
            finally:
                self._link = None
                self._set_link(False)
                writer.close()
            self.reconnects += 1
            await asyncio.sleep(backoff.next_delay())

    def _set_link(self, up: bool) -> None:
        if up != self.link_up:
            log.info("shuffler link " + ("up" if up else "down"), port=self._config.port)
        self.link_up = up
        if up:
            self._link_ready.set()
        else:
            self._link_ready.clear()

    async def _poll_forever(self, link: Link, backoff: Backoff) -> None:
        missed = 0
        interval_s = self._config.poll_interval_ms / 1000
        while True:
            try:
                reply = await link.request(
                    MsgType.POLL, encode_poll(self._boot_id or 0, self._acked_event_id)
                )
                if reply.type != MsgType.STATUS:
                    raise ProtocolError(f"POLL answered with type {reply.type:#x}", reply.payload)
                status = decode_status(reply.payload)
            except LinkTimeout:
                missed += 1
                if missed >= self._config.missed_polls_for_link_down:
                    self._set_link(False)
                # Keep polling, more slowly, until the device answers again.
                await asyncio.sleep(min(2.0, interval_s * 2 ** min(missed, 4)))
                continue
            except ProtocolError as exc:
                self.bad_replies += 1
                log.warning("bad shuffler reply", error=str(exc))
                await asyncio.sleep(interval_s)
                continue
            missed = 0
            backoff.reset()
            self._set_link(True)
            self.last_state = status.state.name.lower()
            if self._boot_id is not None and status.boot_id != self._boot_id:
                # The device rebooted: its event ids start over and its deck state is unknown.
                self._acked_event_id = 0
                self._emit(ShufflerRebooted())
            self._boot_id = status.boot_id
            for ev in status.events:
                if ev.event_id <= self._acked_event_id:
                    continue
                self._acked_event_id = ev.event_id
                if ev.kind is EventKind.SHUFFLE_STARTED:
                    self._emit(ShuffleStarted())
                elif ev.kind is EventKind.SHUFFLE_COMPLETE:
                    self._emit(ShuffleCompleted(card_count=ev.arg))
                elif ev.kind is EventKind.FAULT:
                    code = FaultCode(ev.arg) if ev.arg in FaultCode._value2member_map_ else None
                    self._emit(ShufflerFault(code=FAULT_NAMES.get(code, f"code-{ev.arg}")))  # type: ignore[arg-type]
            await asyncio.sleep(interval_s)

"""Reconnection as one component: connect, serve until the connection fails, back off, again.

Modelled on aioesphomeapi's reconnect_logic: a state a technician can read, the error's class
choosing the backoff, the first failure of a run logged loudly and the repeats quietly. The
devices' links use it (shuffler, shoe); any other client can. Time is the loop's, so a test
runs it on virtual time and asserts when each attempt happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

import structlog

from tablectl.util.backoff import Backoff

log = structlog.get_logger(__name__)
C = TypeVar("C")


class ReconnectState(StrEnum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"


class Permanent(Exception):
    """A failure that waiting will not cure soon (wrong device, refused handshake):
    the next attempt waits the longest backoff."""


@dataclass
class ReconnectCounters:
    attempts: int = 0
    connects: int = 0
    failures: int = 0  # attempts that did not connect
    drops: int = 0  # connections that ended


@dataclass
class Reconnector(Generic[C]):
    """Runs connect() then serve(connection) forever, backing off between attempts.

    connect raises on failure (any of `retry_on`); serve returns or raises when the
    connection is over. Any other exception propagates: it is a bug, not a bad line.
    """

    name: str
    connect: Callable[[], Awaitable[C]]
    serve: Callable[[C], Awaitable[None]]
    close: Callable[[C], Awaitable[None]]
    backoff: Backoff = field(default_factory=lambda: Backoff(initial_s=0.1, max_s=1.0))
    retry_on: tuple[type[BaseException], ...] = (OSError,)
    state: ReconnectState = ReconnectState.DISCONNECTED
    counters: ReconnectCounters = field(default_factory=ReconnectCounters)
    last_error: str | None = None
    next_attempt_at: float | None = None  # loop time of the scheduled attempt

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self.state = ReconnectState.CONNECTING
            self.counters.attempts += 1
            try:
                conn = await self.connect()
            except self.retry_on as exc:
                self.state = ReconnectState.DISCONNECTED
                self.counters.failures += 1
                await self._wait(loop, self._delay(exc), exc, "cannot connect")
                continue
            self.state = ReconnectState.CONNECTED
            self.counters.connects += 1
            self.backoff.reset()
            self.last_error = None
            log.info(f"{self.name} connected")
            error: BaseException | None = None
            try:
                await self.serve(conn)
            except self.retry_on as exc:
                error = exc
            finally:
                self.state = ReconnectState.DISCONNECTED
                self.counters.drops += 1
                await self.close(conn)
            await self._wait(loop, self._delay(error), error, "connection lost")

    def _delay(self, exc: BaseException | None) -> float:
        if isinstance(exc, Permanent):
            self.backoff.failures = max(self.backoff.failures, 30)
        return self.backoff.next_delay()

    async def _wait(
        self, loop: asyncio.AbstractEventLoop, delay: float, exc: BaseException | None, what: str
    ) -> None:
        self.last_error = None if exc is None else f"{type(exc).__name__}: {exc}"
        # The first failure of a run is news; its repeats are not.
        level = log.warning if self.backoff.failures <= 1 else log.debug
        level(f"{self.name} {what}", error=self.last_error, retry_in_s=round(delay, 3))
        self.next_attempt_at = loop.time() + delay
        try:
            await asyncio.sleep(delay)
        finally:
            self.next_attempt_at = None

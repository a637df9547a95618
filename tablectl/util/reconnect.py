"""Reconnection as one component: connect, serve until the connection fails, back off, again.

Modelled on aioesphomeapi's reconnect_logic: a state a technician can read, the error's class
choosing the backoff, and the log saying a thing once. A refusal that waiting will not cure
(`Permanent`: refused credentials or certificate, the wrong device) waits the longest backoff
and is logged as an error once; a network failure (the device or broker not there yet) is
retried soon and quietly: a warning for the first, debug for the repeats. A network failure's
backoff is capped low where the peer is near (a broker on the site's LAN: `Backoff.max_s` of
a couple of seconds finds it within that of its return) while a refusal waits
`refused_wait_s`. Every client uses it: the devices' links (shuffler, shoe), the MQTT relay,
the table's link listener, the link controller's broker connection, the reference backend
and the simulated table's GPIO link.
Time is the loop's, so a test runs it on virtual time and asserts when each attempt happened.
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
    """A failure that waiting will not cure soon (refused credentials or certificate, the
    wrong device): the next attempt waits the longest backoff, and it is logged as an error
    once, not at every attempt."""


@dataclass
class ReconnectCounters:
    attempts: int = 0
    connects: int = 0
    failures: int = 0  # attempts that did not connect
    drops: int = 0  # connections that ended
    refusals: int = 0  # failures that were Permanent


@dataclass
class Reconnector(Generic[C]):
    """Runs connect() then serve(connection) forever, backing off between attempts.

    connect raises on failure (any of `retry_on`); serve returns or raises when the
    connection is over; close is called once per connection, whatever ended it. Any other
    exception propagates: it is a bug, not a bad line.
    """

    name: str
    connect: Callable[[], Awaitable[C]]
    serve: Callable[[C], Awaitable[None]]
    close: Callable[[C], Awaitable[None]]
    backoff: Backoff = field(default_factory=lambda: Backoff(initial_s=0.1, max_s=1.0))
    retry_on: tuple[type[BaseException], ...] = (OSError,)
    # The wait after a refusal (`Permanent`); None: the backoff's longest.
    refused_wait_s: float | None = None
    state: ReconnectState = ReconnectState.DISCONNECTED
    counters: ReconnectCounters = field(default_factory=ReconnectCounters)
    last_error: str | None = None
    next_attempt_at: float | None = None  # loop time of the scheduled attempt
    _last_kind: str | None = None  # "refused" or "network": what the last failure was
    # The last refusal, kept across a connection that it ended (a broker that lets us in and
    # refuses what we publish): the same refusal again is not news.
    _last_refusal: str | None = None

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        while True:
            self.state = ReconnectState.CONNECTING
            self.counters.attempts += 1
            cancelling = task.cancelling() if task is not None else 0
            try:
                conn = await self.connect()
            except self.retry_on as exc:
                if task is not None and task.cancelling() > cancelling:
                    # Told to stop while the attempt was failing, and the failure came out
                    # instead of the cancellation (asyncio.wait_for on Python 3.11 can do
                    # that): stop, as asked, rather than retry for ever.
                    raise asyncio.CancelledError from None
                self.state = ReconnectState.DISCONNECTED
                self.counters.failures += 1
                await self._wait(loop, exc, "cannot connect")
                continue
            self.state = ReconnectState.CONNECTED
            self.counters.connects += 1
            self.backoff.reset()
            self.last_error = None
            self._last_kind = None
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
            await self._wait(loop, error, "connection lost")

    async def _wait(
        self, loop: asyncio.AbstractEventLoop, exc: BaseException | None, what: str
    ) -> None:
        refused = isinstance(exc, Permanent)
        kind = "refused" if refused else "network"
        changed = kind != self._last_kind
        if changed:
            self.backoff.reset()  # a new kind of trouble: its own backoff from the start
        if refused:
            self.counters.refusals += 1
            self.backoff.failures = max(self.backoff.failures, 30)
        delay = self.backoff.next_delay()
        if refused and self.refused_wait_s is not None:
            delay = self.refused_wait_s
        self.last_error = None if exc is None else f"{type(exc).__name__}: {exc}"
        # News once: a refusal is an error someone must fix, a network failure a warning;
        # their repeats are not news.
        if refused:
            changed = changed and self.last_error != self._last_refusal
            self._last_refusal = self.last_error
        else:
            self._last_refusal = None
        level = (log.error if refused else log.warning) if changed else log.debug
        level(f"{self.name} {what}", error=self.last_error, retry_in_s=round(delay, 3))
        self._last_kind = kind
        self.next_attempt_at = loop.time() + delay
        try:
            await asyncio.sleep(delay)
        finally:
            self.next_attempt_at = None

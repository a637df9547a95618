"""What runs once a step is on disk (the dispatcher's `AfterCommit`): the relay hands the
rows on, the device hears its report was taken, the core's effects are carried out (lamps, a
shuffle wanted, a deal asked of the shoe), watchers hear, and whoever asked hears back.

The core only says what should happen (core/effects.py); this is the one place it happens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import structlog

from tablectl.core.effects import DealCards, Effect, RequestShuffle, SeatLamp
from tablectl.core.events import ShuffleCompleted
from tablectl.util.faultpoint import fault_point

if TYPE_CHECKING:
    from tablectl.drivers.gpio.table_io import TableGpio

    from tablectl.mqtt.relay import Relay
    from tablectl.service.devices import DeviceSupervisor
    from tablectl.service.dispatcher import Stepped
    from tablectl.service.shuffle_monitor import ShuffleWatch
    from tablectl.service.watch import Hub
    from tablectl.store.journal import JournalRow


log = structlog.get_logger(__name__)


class EffectsTable(Protocol):
    """The parts of a running table the effects act on (the daemon is one)."""

    @property
    def relay(self) -> Relay: ...
    @property
    def gpio(self) -> TableGpio | None: ...
    @property
    def supervisor(self) -> DeviceSupervisor: ...
    @property
    def hub(self) -> Hub: ...
    @property
    def shuffle_watch(self) -> ShuffleWatch: ...


class EffectRunner:
    """The dispatcher's `AfterCommit`: a committed step's consequences, in order."""

    def __init__(self, table: EffectsTable, publishing: Callable[[], bool]) -> None:
        """publishing: whether rows may leave (False once a rollback was found)."""
        self._table = table
        self._publishing = publishing

    def durable(self, rows: list[JournalRow]) -> None:
        # The relay hands the rows to the broker first, rather than waiting behind the
        # lamps, replies and log lines of committed() (docs/mqtt.md, Performance).
        if self._publishing():
            self._table.relay.offer(rows)

    def committed(self, item: Stepped, rows: list[JournalRow]) -> None:
        """A step is on disk (input, rows and device cursor): its device hears it was taken,
        its effects run, and whoever asked for it hears back."""
        t = self._table
        report = item.sub.report
        if report is not None:
            t.supervisor.acknowledge(report)
        if item.refusal is not None:
            item.sub.answer(error=item.refusal)
            return
        t.hub.publish_rows(rows)
        for row in rows:
            log.info(row.type, **row.data)
        event = item.sub.event
        if isinstance(event, ShuffleCompleted) and not event.stale:
            t.supervisor.shuffled(opened=any(row.type == "round.opened" for row in rows))
        item.sub.followup = self._execute(item.effects)
        t.shuffle_watch.committed(item.state, rows)
        item.sub.answer([{"seq": r.seq, "type": r.type, "data": r.data} for r in rows])

    def _execute(self, effects: list[Effect]) -> asyncio.Task[str | None] | None:
        """Run a step's effects; the deal request, if any, for whoever waits on it."""
        gpio, supervisor = self._table.gpio, self._table.supervisor
        assert gpio is not None
        deal: asyncio.Task[str | None] | None = None
        for effect in effects:
            fault_point("effect", type(effect).__name__)  # a test's power cut, not yet sent
            if isinstance(effect, SeatLamp):
                gpio.set_lamp(effect.seat, effect.lamp)
            elif isinstance(effect, RequestShuffle):
                supervisor.want_shuffle()
            elif isinstance(effect, DealCards):
                deal = supervisor.deal(effect.stacks)
        return deal

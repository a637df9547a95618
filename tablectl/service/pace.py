"""Game pace while the table runs (issue 18, game pace): computed from the journal at most once
a minute, published retained on `pace` and shown by `tablectl status`.

The figures come from records/pace.py, the same code `tablectl pace` runs, over a read-only
snapshot of the journal (records/source.py) taken in a worker thread: the daemon's loop and
its writer never wait on it, and a pace can never differ from what the journal says. Each
minute reads only the rows written since the last (`LivePace`): the work and the memory are
those of a minute of play and of the windows, not of the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

from tablectl.config import RecordsSection
from tablectl.records.pace import PACE_RECORD_TYPES, LivePace, Pace
from tablectl.records.source import EventRow, read_rows_after
from tablectl.records.zones import report_zone

log = structlog.get_logger(__name__)

# The contract's bound: `pace` is published at most once a minute (docs/asyncapi.json).
INTERVAL_S = 60.0


class PaceReporter:
    """Keeps the latest pace and hands each new one to `publish`."""

    def __init__(
        self,
        database: Path,
        records: RecordsSection,
        publish: Callable[[Pace], None],
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._database = database
        self._live = LivePace(
            report_zone(records.time_zone),
            records.shift_starts,
            timedelta(minutes=records.pace_rolling_minutes),
        )
        self._publish = publish
        self._clock = clock
        self.latest: Pace | None = None
        self.failures = 0
        self._refresh = asyncio.Event()

    @property
    def rows_read(self) -> int:
        """Journal rows read for pace since the start: each computation reads the new ones."""
        return self._live.rows_read

    def compute(self) -> Pace:
        """In a worker thread, one at a time (`run`)."""
        return self._live.update(self._clock(), self._rows_after)

    def _rows_after(self, after_seq: int, start: datetime, end: datetime) -> list[EventRow]:
        return read_rows_after(self._database, after_seq, start, end, PACE_RECORD_TYPES)

    async def run(self) -> None:
        while True:
            try:
                pace = await asyncio.to_thread(self.compute)
            except (sqlite3.Error, OSError) as exc:
                # Pace is a report: a read that fails is logged and tried next minute.
                self.failures += 1
                log.warning("game pace not computed", error=str(exc))
            else:
                self.latest = pace
                self._publish(pace)
            self._refresh.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(INTERVAL_S):
                    await self._refresh.wait()

    def refresh(self) -> None:
        """Compute and publish now, not at the minute (a technician's or a test's wish)."""
        self._refresh.set()

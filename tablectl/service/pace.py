"""Game pace while the table runs (issue 18, game pace): computed from the journal at most once
a minute, published retained on `pace` and shown by `tablectl status`.

The figures come from records/pace.py, the same code `tablectl pace` runs, over a read-only
snapshot of the journal (records/source.py) taken in a worker thread: the daemon's loop and
its writer never wait on it, and a pace can never differ from what the journal says.
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
from tablectl.records.pace import Pace, current_pace
from tablectl.records.source import read_entries
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
        self._zone = report_zone(records.time_zone)
        self._shift_starts = list(records.shift_starts)
        self._rolling = timedelta(minutes=records.pace_rolling_minutes)
        self._publish = publish
        self._clock = clock
        self.latest: Pace | None = None
        self.failures = 0
        self._refresh = asyncio.Event()

    def compute(self) -> Pace:
        return current_pace(
            lambda start, end: read_entries(self._database, start, end),
            self._clock(),
            self._zone,
            self._shift_starts,
            self._rolling,
        )

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

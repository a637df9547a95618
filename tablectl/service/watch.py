"""Live events for `tablectl watch`: journal rows as they are committed, device changes.

Each watcher has a bounded queue. The daemon never waits for a watcher: one that falls more
than `capacity` events behind is cut off (told so) rather than slowing the table or growing
memory; `tablectl journal tail` shows what it missed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from tablectl.store.journal import JournalRow


class Subscription:
    def __init__(self, hub: Hub, capacity: int) -> None:
        self._hub = hub
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(capacity + 1)
        self._capacity = capacity
        self.lagged = False

    def offer(self, item: dict[str, Any]) -> None:
        if self.lagged:
            return
        if self._queue.qsize() >= self._capacity:
            self.lagged = True
            self._queue.put_nowait(None)  # the one slot kept for saying so
            return
        self._queue.put_nowait(item)

    async def get(self) -> dict[str, Any] | None:
        """The next event, or None once this watcher has fallen too far behind."""
        return await self._queue.get()

    def close(self) -> None:
        self._hub.unsubscribe(self)


class Hub:
    def __init__(self, capacity: int = 1000) -> None:
        self._capacity = capacity
        self._subscribers: set[Subscription] = set()

    def __len__(self) -> int:
        return len(self._subscribers)

    def subscribe(self) -> Subscription:
        sub = Subscription(self, self._capacity)
        self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.discard(sub)

    def publish(self, item: dict[str, Any]) -> None:
        for sub in list(self._subscribers):
            sub.offer(item)

    def publish_rows(self, rows: Iterable[JournalRow]) -> None:
        if not self._subscribers:
            return
        for row in rows:
            self.publish(journal_event(row))


def journal_event(row: JournalRow) -> dict[str, Any]:
    return {
        "event": "journal",
        "seq": row.seq,
        "ts": row.ts,
        "type": row.type,
        "data": row.data,
    }

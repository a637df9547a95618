"""Redelivery: rows sent again to a backend that lacks them, paced by its acknowledgements.

A PUBACK only means the broker has a row; past its queue for a slow subscriber Mosquitto drops
rows silently (docs/mqtt.md, Delivery). The relay hands each row to the broker once per
connection, so a row dropped on its way to one backend would wait for that backend to ask
(`cmd/replay`) or for the next reconnect. This module decides what goes out again:

- **A stalled acknowledgement heals by itself.** A backend whose ack has not moved for
  `mqtt.ack_stall_s` while rows past it were handed to the broker is sent them again from its
  ack (a *heal*).
- **Paced by the backend, in a window that adapts.** A replay for a named backend keeps at
  most its *window* of rows past its ack; each ack lets the next ones go. The window is the
  backend's own (`_Flow`) and learns what its queue at the broker holds, as TCP's congestion
  window does: it starts small, doubles with each window acknowledged, and after a loss grows
  by one row a window. A window is *lost* when the backend's ack stops short of what was sent
  and stays put longer than its acks have been coming (twice their interval, measured): the
  broker dropped the rest (its queue is shared with whatever else the backend subscribes to,
  its own ack echoes and the table's status included). The replay then goes back to the ack
  and the window halves, within seconds, not at the stall timer. Rows re-sent for one backend
  reach every subscriber (one topic); backends deduplicate on seq.
- **Nobody is sent rows for ever.** A backend whose ack stays put through `FRUITLESS_HEALS`
  heals in a row is *dormant*: offline, or unable to take rows. It is sent nothing again until
  it shows life (its ack moves, or it asks for a replay); its rows stay in the journal and
  the retention alarm (`mqtt.backlog_alarm_rows`, `_hours`) is what tells the operator.
- **Requests are rate-limited per backend.** A `cmd/replay` starts at most one replay per
  requester every `interval_s`; one that comes sooner is held and started then (the lowest
  `from_seq` of those held), and one that a running replay already covers restarts nothing.
  A request that names no backend (`backend_id` absent) cannot be paced by acks: it is sent as
  fast as the publish window allows, under one shared rate limit; so are rows a backend asks
  for again though its ack says it has them (it lost them: no ack of its can move until it
  holds them all again).

Pure: the relay tells it the time, what it handed to the broker and the acks (the `AckBook`'s
dict, read live); it answers what to send again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from tablectl.status import RedeliveryView

# Rows re-sent past a backend's ack at once, at most: below any broker's queue for one
# subscriber (Mosquitto: 1,000 by default, 100,000 in config/mosquitto). The window starts at
# INITIAL_WINDOW and adapts between MIN_WINDOW and this (see `_Flow`).
REPLAY_WINDOW = 100
INITIAL_WINDOW = 10
MIN_WINDOW = 2
# A window is lost when the ack stays put twice its usual interval, plus this, at least
# MIN_QUIET_S (and at most half the stall time: the stall rule stays the last resort).
QUIET_SLACK_S = 0.5
MIN_QUIET_S = 1.0
FIRST_QUIET_S = 2.0  # before an interval has been measured
# A backend whose ack stays put through this many heals in a row is sent nothing more.
FRUITLESS_HEALS = 3
# At most one replay requested by one backend starts this often.
REPLAY_INTERVAL_S = 1.0
ANONYMOUS = ""  # the requester of a `cmd/replay` that names no backend


class Asked(StrEnum):
    """What became of a replay request."""

    STARTED = "started"
    RUNNING = "running"  # a replay already under way covers it: nothing restarted
    HELD = "held"  # inside the rate limit: starts when it allows


@dataclass
class Replay:
    """Rows (start, until] going out again for one requester; `sent` is the last re-sent.
    Past `paced_from` each goes only once the requester's ack is within the window of it;
    below it (rows a backend asks for again though it acknowledged them, or any row for a
    requester that names no backend) there is no ack to wait for."""

    start: int
    sent: int
    until: int
    paced_from: int
    sent_at: float = 0.0  # when rows last went out for it

    @property
    def paced(self) -> bool:
        return self.sent >= self.paced_from


@dataclass
class _Flow:
    """How much one backend takes at once: its replay window, and how often its ack moves."""

    window: float = INITIAL_WINDOW
    threshold: float = REPLAY_WINDOW  # below it the window doubles a round, above it grows by one
    ack: int = 0  # its ack as last seen ...
    ack_at: float = 0.0  # ... and when it moved
    interval_s: float | None = None  # smoothed time between its ack's moves while rows were out
    losses: int = 0

    @property
    def size(self) -> int:
        return int(self.window)

    def moved(self, ack: int, now: float, busy: bool) -> None:
        """Its ack moved to `ack`; busy: a paced replay had rows out past the old one."""
        rows = ack - self.ack
        if busy and rows > 0:
            sample = now - self.ack_at
            self.interval_s = (
                sample if self.interval_s is None else 0.7 * self.interval_s + 0.3 * sample
            )
            grow = rows if self.window < self.threshold else rows / self.window
            self.window = min(REPLAY_WINDOW, self.window + grow)
        self.ack, self.ack_at = ack, now

    def lost(self) -> None:
        self.losses += 1
        self.threshold = max(MIN_WINDOW, self.window / 2)
        self.window = self.threshold

    def quiet_limit(self, stall_s: float) -> float:
        """How long its ack may stay put, rows out past it, before they count as lost."""
        guess = FIRST_QUIET_S if self.interval_s is None else 2 * self.interval_s + QUIET_SLACK_S
        return min(stall_s / 2, max(MIN_QUIET_S, guess))


@dataclass
class _Watch:
    """One backend's acknowledgement as the stall rule sees it."""

    ack: int  # its ack when the watch (re)started ...
    handed: int  # ... the last seq handed to the broker then ...
    since: float  # ... and when
    fruitless: int = 0  # heals in a row after which its ack did not move
    dormant: bool = False
    heals: int = 0


@dataclass(frozen=True)
class Started:
    """A replay that started: for the log and the counters."""

    requester: str
    after: int
    until: int
    heal: bool  # started by the stall rule, not asked for


@dataclass(frozen=True)
class Rewound:
    """A paced replay's window was lost: it goes on from the backend's ack, `window` rows at
    a time."""

    backend: str
    after: int
    window: int


@dataclass(frozen=True)
class Dormant:
    """A backend whose ack stayed put through every heal: it is sent nothing more."""

    backend: str


class Redelivery:
    def __init__(
        self,
        acked: Mapping[str, int],
        *,
        stall_s: float,
        window: int = REPLAY_WINDOW,
        interval_s: float = REPLAY_INTERVAL_S,
        now: float = 0.0,
    ) -> None:
        self._acked = acked
        self._stall_s = stall_s
        self._window = window
        self._interval_s = interval_s
        self.handed = 0  # the last seq handed to the broker on this connection
        self._watch = {b: _Watch(ack, 0, now) for b, ack in acked.items()}
        self._flow = {b: _Flow(ack=ack, ack_at=now) for b, ack in acked.items()}
        self.replays: dict[str, Replay] = {}
        self._started_at: dict[str, float] = {}
        self._held: dict[str, int] = {}  # requester -> re-send after this seq, once allowed
        self.checks = 0  # times the stall rule has looked (tests wait on it)

    # --- what the relay tells it ---------------------------------------------------------

    def session(self, cursor: int, now: float) -> None:
        """A new connection: rows after `cursor` go out live; each replay starts over (rows
        it had sent may have died with the old connection), and so does each watch."""
        self.handed = cursor
        self.replays.clear()
        for backend, watch in self._watch.items():
            watch.ack, watch.handed, watch.since = self._acked[backend], cursor, now
            self._flow[backend].ack_at = now

    def handed_through(self, seq: int) -> None:
        self.handed = max(self.handed, seq)

    def floor(self, handed_mark: int) -> int:
        """Where a new connection starts sending: the lowest ack of a backend not dormant
        (with every backend dormant, after the last row ever handed: they ask when back)."""
        live = [self._acked[b] for b, w in self._watch.items() if not w.dormant]
        return min(live) if live else handed_mark

    def request(self, requester: str, from_seq: int, now: float) -> Asked:
        """A backend's `cmd/replay` (requester: its id, or ANONYMOUS)."""
        after = from_seq - 1
        watch = self._watch.get(requester)
        if watch is not None:  # it is alive, whatever it lacks
            watch.dormant, watch.fruitless = False, 0
        running = self.replays.get(requester)
        if running is not None and running.start <= after:
            if (
                running.paced
                and after < running.sent
                and now - self._started_at.get(requester, -math.inf) >= self._interval_s
            ):
                # It lacks rows this replay sent: they were dropped, as a lost window is.
                self._started_at[requester] = now
                self._rewind(requester, running, now)
            return Asked.RUNNING
        if now - self._started_at.get(requester, -math.inf) < self._interval_s:
            self._held[requester] = min(after, self._held.get(requester, after))
            return Asked.HELD
        self._start(requester, after, now)
        return Asked.STARTED

    def ack_moved(self, backend: str, now: float) -> bool:
        """A backend's ack was taken (the book already holds it): True when a paced replay of
        its waits on it (the next rows may go)."""
        replay = self.replays.get(backend)
        flow = self._flow[backend]
        busy = replay is not None and replay.paced and replay.sent > flow.ack
        flow.moved(self._acked[backend], now, busy)
        return self.waits_on(backend)

    def _rewind(self, backend: str, replay: Replay, now: float) -> Rewound:
        flow = self._flow[backend]
        flow.lost()
        replay.sent = max(replay.paced_from, self._acked[backend])
        replay.sent_at = now
        return Rewound(backend, replay.sent, flow.size)

    def tick(self, now: float) -> list[Started | Dormant | Rewound]:
        """Apply the stall rule, go back on a lost window, and start the held requests the
        rate limit now allows."""
        self.checks += 1
        started: list[Started | Dormant | Rewound] = []
        for backend, replay in self.replays.items():
            flow = self._flow.get(backend)
            if flow is None or not replay.paced or replay.sent <= self._acked[backend]:
                continue
            quiet = now - max(flow.ack_at, replay.sent_at)
            if quiet >= flow.quiet_limit(self._stall_s):
                started.append(self._rewind(backend, replay, now))
        for requester, after in list(self._held.items()):
            if now - self._started_at.get(requester, -math.inf) >= self._interval_s:
                del self._held[requester]
                started += self._start(requester, after, now)
        for backend, watch in self._watch.items():
            ack = self._acked[backend]
            if ack != watch.ack:  # it moved: alive, and the watch starts over
                watch.ack, watch.handed, watch.since = ack, self.handed, now
                watch.fruitless, watch.dormant = 0, False
                continue
            if watch.handed <= ack:  # nothing was out past its ack when the watch started
                watch.handed, watch.since = self.handed, now
                continue
            if watch.dormant or now - watch.since < self._stall_s:
                continue
            watch.handed, watch.since = self.handed, now
            if watch.fruitless >= FRUITLESS_HEALS:
                watch.dormant = True
                self.replays.pop(backend, None)
                started.append(Dormant(backend))
                continue
            watch.fruitless += 1
            watch.heals += 1
            started += self._start(backend, ack, now, heal=True)
        return started

    def _start(
        self, requester: str, after: int, now: float, *, heal: bool = False
    ) -> list[Started]:
        self._started_at[requester] = now
        self._held.pop(requester, None)
        if after >= self.handed:
            self.replays.pop(requester, None)
            return []  # nothing handed past it: the live rows will bring the rest
        acked = self._acked.get(requester)
        paced_from = self.handed if acked is None else max(after, acked)
        self.replays[requester] = Replay(after, after, self.handed, paced_from, now)
        return [Started(requester, after, self.handed, heal)]

    # --- what it answers --------------------------------------------------------------------

    def next_batch(self, limit: int) -> tuple[int, int] | None:
        """The rows to re-send now, (after, count), for the replay furthest behind; None when
        every replay waits for an ack or is done."""
        best: tuple[int, int] | None = None
        for requester, replay in list(self.replays.items()):
            if self._done(requester, replay):
                del self.replays[requester]
                continue
            low, high = replay.sent, replay.until
            if replay.paced:
                ack = self._acked[requester]
                low = replay.sent = max(replay.sent, ack)  # what it holds needs no copy
                window = min(self._window, self._flow[requester].size)
                high = min(high, ack + window)
            else:
                high = min(high, replay.paced_from)
            if high > low and (best is None or low < best[0]):
                best = (low, min(limit, high - low))
        return best

    def _done(self, requester: str, replay: Replay) -> bool:
        """Every row sent, and for a paced replay acknowledged too (a window lost at the end
        is found only while the replay waits for its ack)."""
        if replay.sent < replay.until:
            return False
        if requester not in self._flow or replay.paced_from >= replay.until:
            return True  # nothing of it was paced: no ack to wait for
        return self._acked[requester] >= replay.until

    def sent(self, after: int, through: int, now: float) -> None:
        """Rows (after, through] went out again: every replay that stood at `after` has them."""
        for requester, replay in list(self.replays.items()):
            if replay.sent == after:
                replay.sent, replay.sent_at = through, now
                if self._done(requester, replay):
                    del self.replays[requester]

    def waits_on(self, backend: str) -> bool:
        """A paced replay waits for this backend's next ack."""
        replay = self.replays.get(backend)
        return replay is not None and replay.sent >= replay.paced_from

    def dormant(self, backend: str) -> bool:
        return self._watch[backend].dormant

    def window(self, backend: str) -> int:
        """The backend's replay window now."""
        return min(self._window, self._flow[backend].size)

    def view(self) -> dict[str, RedeliveryView]:
        """Each backend's redelivery state, for `tablectl status`."""
        out: dict[str, RedeliveryView] = {}
        for backend, watch in self._watch.items():
            replay = self.replays.get(backend)
            out[backend] = RedeliveryView(
                state="dormant" if watch.dormant else "replaying" if replay else "ok",
                heals=watch.heals,
                replaying=None if replay is None else (replay.sent, replay.until),
                held=self._held.get(backend),  # a request waiting for the rate limit
            )
        return out

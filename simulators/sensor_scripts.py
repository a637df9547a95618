"""Chips and the lock-out button as they physically happen, seen through each GPIO backend.

A script is the true timeline of a table's contacts around a lock-out press: (t_ns, line,
level) edges, the press on line 0. `Stamping.observe` turns it into the batches of edges a
backend delivers: exact kernel stamps (gpiod, mock), gpiozero's callbacks stamped up to a
millisecond late and gathered for a millisecond, or a polled chip that sees only the levels
at each read. `truly_late` judges a chip that counted against the true timeline: was it
absent at the press, or away for longer than the bounce time after it before it had rested?

The patterns are the adversary's (docs/gpio.md, the lock-out rule): a touch before the edge
and a chip placed after it, a chip placed before and bouncing across the edge, one that
slides off and back, 10 kHz contact bursts. tests/test_lockout_rule.py and
bench/lockout_window.py drive SeatInputs and the core with them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from tablectl.drivers.gpio.backend import LOCKOUT, Edge

MS = 1_000_000
US = 1_000
TrueEdge = tuple[int, int, bool]  # (t_ns, line, level): what really happened, when


Delivery = tuple[int, list[Edge]]  # when a batch reaches the loop, and its edges


@dataclass(frozen=True, slots=True)
class Stamping:
    """How one backend stamps and delivers edges (docs/gpio.md, Backends)."""

    name: str
    resolution_ns: int
    polled: bool = False
    # gpiozero: each edge stamped up to resolution_ns late on its pin's thread and handed to
    # the loop up to half of that later again: edges of different lines arrive out of order.
    threads: bool = False

    @property
    def reorder_ns(self) -> int:
        """What the backend says of its order (BackendInfo.reorder_ns)."""
        return 2 * self.resolution_ns if self.threads else 0

    def observe(
        self, edges: Sequence[TrueEdge], rng: random.Random | None = None, phase_ns: int = 0
    ) -> list[Delivery]:
        """The batches the backend hands to SeatInputs, in the order they arrive. phase_ns:
        where the reads of a polled backend fall (they are every resolution_ns)."""
        ordered = sorted(edges, key=lambda e: e[0])
        if self.polled:
            return self._polled(ordered, phase_ns)
        if self.threads:
            return self._threads(ordered, rng or random.Random(0))
        out: list[Delivery] = []  # a kernel read takes the edges of one moment together
        for t, line, level in ordered:
            edge = Edge(line, level, t, None, 1)
            if out and out[-1][0] == t:
                out[-1][1].append(edge)
            else:
                out.append((t, [edge]))
        return out

    def _threads(self, ordered: Sequence[TrueEdge], rng: random.Random) -> list[Delivery]:
        last: dict[int, int] = {}
        out: list[Delivery] = []
        for t, line, level in ordered:
            # A pin's callbacks run in order on its thread: its stamps never go back.
            stamp = max(t + rng.randrange(self.resolution_ns), last.get(line, t) + 1)
            arrival = max(stamp + rng.randrange(self.resolution_ns // 2), last.get(line, t) + 1)
            last[line] = arrival
            out.append((arrival, [Edge(line, level, stamp, None, self.resolution_ns)]))
        out.sort(key=lambda delivery: delivery[0])
        return out

    def _polled(self, ordered: Sequence[TrueEdge], phase_ns: int) -> list[Delivery]:
        if not ordered:
            return []
        period = self.resolution_ns
        levels: dict[int, bool] = {}
        seen: dict[int, bool] = {}
        out: list[Delivery] = []
        read = ordered[0][0] - (ordered[0][0] - phase_ns) % period  # the read before the first
        i = 0
        while i < len(ordered) or levels != seen:
            read += period
            while i < len(ordered) and ordered[i][0] < read:
                _, line, level = ordered[i]
                levels[line] = level
                i += 1
            # One read of every line, the lock-out (line 0) first, as GpiodPollBackend does.
            batch = [
                Edge(line, level, read, None, period)
                for line, level in sorted(levels.items())
                if seen.get(line, False) != level
            ]
            seen.update(levels)
            if batch:
                out.append((read, batch))
        return out


GPIOD = Stamping("gpiod", 1)  # the kernel's stamps; the mock backend's are the same
GPIOZERO = Stamping("gpiozero", 1 * MS, threads=True)
POLLED_2MS = Stamping("gpiod-poll 2 ms", 2 * MS, polled=True)
POLLED_20MS = Stamping("gpiod-poll 20 ms", 20 * MS, polled=True)
STAMPINGS = (GPIOD, GPIOZERO, POLLED_2MS, POLLED_20MS)


def press(at_ns: int, held_ns: int = 80 * MS) -> list[TrueEdge]:
    return [(at_ns, LOCKOUT, True), (at_ns + held_ns, LOCKOUT, False)]


def contacts(seat: int, start_ns: int, durations: Sequence[int]) -> list[TrueEdge]:
    """A seat's contact from start_ns: closed for durations[0], open for durations[1], ...;
    an edge starts each (so the last lasts for ever)."""
    out, t = [], start_ns
    for i, duration in enumerate(durations):
        out.append((t, seat, i % 2 == 0))
        t += duration
    return out


def burst(
    seat: int,
    start_ns: int,
    edges: int,
    *,
    closing_first: bool = True,
    half_period_ns: int = 50 * US,
) -> list[TrueEdge]:
    """Contact chatter at 10 kHz (50 µs closed, 50 µs open)."""
    return [
        (start_ns + i * half_period_ns, seat, (i % 2 == 0) == closing_first) for i in range(edges)
    ]


def level_at(edges: Sequence[TrueEdge], seat: int, t_ns: int) -> bool | None:
    """The seat's true level just before t_ns; None if an edge falls exactly at t_ns."""
    level = False
    for t, line, lvl in sorted(edges):
        if line != seat:
            continue
        if t == t_ns:
            return None
        if t > t_ns:
            break
        level = lvl
    return level


def _runs(edges: Sequence[TrueEdge], seat: int) -> Iterator[tuple[int, int | None, int | None]]:
    """(closed at, opened at or None, closed again at or None) for each closing of the seat."""
    mine = [(t, lvl) for t, line, lvl in sorted(edges) if line == seat]
    for i, (t, lvl) in enumerate(mine):
        if lvl:
            opened = mine[i + 1][0] if i + 1 < len(mine) else None
            again = mine[i + 2][0] if i + 2 < len(mine) else None
            yield t, opened, again


def truly_late(
    edges: Sequence[TrueEdge],
    seat: int,
    press_ns: int,
    *,
    bounce_ns: int,
    hold_ns: int,
    rest_slack_ns: int = 0,
) -> bool:
    """A chip counted on `seat` against the truth: absent at the press (or touching it at
    that very moment), or away for longer than bounce_ns after it before it had rested.
    rest_slack_ns: how much shorter a true rest may be than hold_ns and still be one (the
    backend measures rests on its stamps: up to its resolution off)."""
    if not level_at(edges, seat, press_ns):
        return True
    runs = list(_runs(edges, seat))
    # The contact the press fell in: the last closing before it, and back across bounces.
    current = max(i for i, (t, _, _) in enumerate(runs) if t < press_ns)
    first = current
    while first > 0:
        _, opened, again = runs[first - 1]
        assert opened is not None and again is not None
        if again - opened > bounce_ns:
            break
        first -= 1
    for closed, opened, again in runs[first:]:
        if opened is None or opened - closed >= hold_ns - rest_slack_ns:
            return False  # it rested, and was away no longer than a bounce until then
        if again is None or again - opened > bounce_ns:
            return True  # it left (after the press: it was there then) before it had rested
    return True

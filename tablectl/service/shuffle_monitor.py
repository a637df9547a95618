"""The shuffle-integrity monitor on the table PC, off the hot path.

After each commit that completed a shoe's deal (`deal.completed`), the deal's cards (in the
state the step left: the shoe's reads, in dealing order) and the deck they came from (the
deck life cycle's round deck, core/decks.py; without one, the slot the two decks alternate
in) go into a bounded queue. One task takes them, runs the statistics
(core/shuffle_integrity/) in a worker thread and keeps each use's figures and p-values in
`shuffle-integrity.sqlite` beside the journal, with the last uses' card orders so that a
restart keeps its windows: the card order stays on this PC, in no log line and no message.
A test that alarms becomes a core input (`ShuffleSuspected`): journaled, shown by `status`
and `devices`, published as figures and p-values (docs/shuffle-integrity.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from tablectl.config import TableConfig
from tablectl.core.events import Event, ShuffleSuspected
from tablectl.core.games.base import DealPlan, TableGame
from tablectl.core.shuffle_integrity.monitor import DeckUse, ShuffleMonitor, UseReport, card_index
from tablectl.core.shuffle_integrity.pickup import collected_order, recipients
from tablectl.core.table import TableState
from tablectl.status import FaultView, Stops
from tablectl.store.journal import JournalRow
from tablectl.store.page_cache import SHUFFLE_MONITOR_KIB, bound_page_cache

log = structlog.get_logger(__name__)
QUEUE_LIMIT = 64  # deck uses waiting for the statistics; past it the oldest waiting is dropped
HISTORY_KEPT = 400  # card orders kept for a restart: the longest window (a card held out, 400)
FILE_NAME = "shuffle-integrity.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS uses (
    id INTEGER PRIMARY KEY,
    ts_ms INTEGER NOT NULL,
    round_id INTEGER NOT NULL,
    deck TEXT NOT NULL,
    shuffler TEXT,
    cards INTEGER NOT NULL,
    alarm TEXT,
    findings TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS uses_ts ON uses (ts_ms);
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY,
    deck TEXT NOT NULL,
    round_id INTEGER NOT NULL,
    cards TEXT NOT NULL,
    collected TEXT NOT NULL
);
"""
# Added for the seat test; a file written before it gets the column, its rows no seats.
SEATS_COLUMN = "ALTER TABLE history ADD COLUMN seats TEXT NOT NULL DEFAULT '[]'"
# Whether the monitor's windows restarted after the use (an alarm spent its evidence), so a
# restart of the daemon restarts them at the same use; NULL in a file written before it:
# the replay decides by the use's alarm.
RESTARTED_COLUMN = "ALTER TABLE history ADD COLUMN restarted INTEGER"


def database(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


@dataclass(frozen=True, slots=True)
class _Pending:
    use: DeckUse
    shuffler: str | None
    ts_ms: int


def shoe_plan(game: TableGame, seats: tuple[int, ...]) -> DealPlan:
    plan = game.deal_plan(seats)
    return DealPlan(plan.procedure, plan.rule, tuple(s for s in plan.steps if s.by_shoe))


class ShuffleWatch:
    """What the daemon runs: fed after commits, posts an alarm as a core input."""

    def __init__(
        self,
        config: TableConfig,
        game: TableGame,
        post: Callable[[Event], None],
        state: Callable[[], TableState | None],
    ) -> None:
        self.section = config.shuffle_integrity
        self.enabled = self.section.enabled and config.shoe is not None
        self.game = game
        self.post = post
        self.state = state
        self.decks = config.shuffler.decks
        self.path = database(config.storage.data_dir)
        self.monitor = ShuffleMonitor()
        self.queue: asyncio.Queue[_Pending] = asyncio.Queue(QUEUE_LIMIT)
        self.deals = 0
        self.dropped = 0
        self.observed = 0
        self.last: UseReport | None = None
        self._judged = asyncio.Event()  # set at each report
        self._db: sqlite3.Connection | None = None

    # --- on the loop, after a commit ---------------------------------------------------

    def committed(self, state: TableState, rows: list[JournalRow]) -> None:
        """Cheap: take the completed deal's reads, queue them for the statistics."""
        if not self.enabled or not any(row.type == "deal.completed" for row in rows):
            return
        deal = state.deal
        if deal is None or not deal.cards:
            return
        self.deals += 1
        deck = state.deck.round_deck or f"slot-{(self.deals - 1) % self.decks + 1}"
        plan = shoe_plan(self.game, deal.seats)
        use = DeckUse(
            deck,
            state.round_id,
            tuple(card_index(c) for c in deal.cards),
            collected_order(plan),
            recipients(plan),
        )
        pending = _Pending(use, state.devices.get("shuffler"), time.time_ns() // 1_000_000)
        if self.queue.full():
            self.queue.get_nowait()  # the oldest waiting goes: the statistics fell behind
            self.dropped += 1
        self.queue.put_nowait(pending)

    async def run(self) -> None:
        if not self.enabled:
            return
        await asyncio.to_thread(self._open)
        try:
            while True:
                pending = await self.queue.get()
                # The thread writes on the db: a stop while it runs waits for it before the
                # db is closed below (closing under it crashed the process: the kit's shoe
                # scenarios, a daemon stopped just after a deal).
                observing = asyncio.ensure_future(asyncio.to_thread(self._observe, pending))
                try:
                    report = await asyncio.shield(observing)
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):
                        await observing
                    raise
                self.observed += 1
                self.last = report
                self._alarm(report)
                self._judged.set()
        finally:
            if self._db is not None:
                self._db.close()

    async def caught_up(self) -> UseReport | None:
        """Once every deal queued so far is judged (or dropped): the last report."""
        while self.observed + self.dropped < self.deals:
            self._judged.clear()
            await self._judged.wait()
        return self.last

    def _alarm(self, report: UseReport) -> None:
        worst = report.worst
        if worst is None:
            return
        log.warning("shuffle suspect", deck=report.deck, test=worst.test, p_value=worst.p_value)
        state = self.state()
        if state is not None and state.shuffle.suspect is not None:
            return  # one stands: the supervisor sees it; the evidence is in the report
        self.post(
            ShuffleSuspected(
                deck=report.deck,
                round_id=report.round_id,
                test=worst.test,
                figure=worst.figure,
                p_value=worst.p_value,
                alpha=worst.alpha,
                block=self.section.on_alarm == "block",
            )
        )

    # --- in a worker thread -----------------------------------------------------------

    def _open(self) -> None:
        self._db = db = sqlite3.connect(self.path, check_same_thread=False)
        bound_page_cache(db, SHUFFLE_MONITOR_KIB)
        db.executescript(SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(history)")}
        for name, add in (("seats", SEATS_COLUMN), ("restarted", RESTARTED_COLUMN)):
            if name not in columns:
                with db:
                    db.execute(add)
        rows = db.execute(
            "SELECT deck, round_id, cards, collected, seats, restarted FROM history ORDER BY id"
        ).fetchall()
        for deck, round_id, cards, collected, seats, restarted in rows:  # the windows, as before
            self.monitor.observe(
                DeckUse(
                    deck,
                    round_id,
                    tuple(json.loads(cards)),
                    tuple(json.loads(collected)),
                    tuple(json.loads(seats)),
                ),
                restart=None if restarted is None else bool(restarted),
            )

    def _observe(self, pending: _Pending) -> UseReport:
        use = pending.use
        report = self.monitor.observe(use)
        db = self._db
        assert db is not None
        worst = report.worst
        findings = [
            {"test": f.test, "figure": f.figure, "p_value": f.p_value, "alpha": f.alpha}
            for f in report.findings
        ]
        with db:
            db.execute(
                "INSERT INTO uses (ts_ms, round_id, deck, shuffler, cards, alarm, findings) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    pending.ts_ms,
                    use.round_id,
                    use.deck,
                    pending.shuffler,
                    len(use.cards),
                    None if worst is None else worst.test,
                    json.dumps(findings),
                ),
            )
            db.execute(
                "INSERT INTO history (deck, round_id, cards, collected, seats, restarted) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    use.deck,
                    use.round_id,
                    json.dumps(use.cards),
                    json.dumps(use.collected),
                    json.dumps(use.seats),
                    int(report.windows_restarted),
                ),
            )
            db.execute(
                "DELETE FROM history WHERE id <= (SELECT MAX(id) FROM history) - ?",
                (HISTORY_KEPT,),
            )
        return report


# The last journal row of these types whose data holds these values: (seq, ts, data).
JournalLookup = Callable[
    [tuple[str, ...], Mapping[str, Any]], tuple[int, str, dict[str, Any]] | None
]


def faults(state: TableState, journal: JournalLookup | None = None) -> list[FaultView]:
    """SHUFFLE SUSPECT and a shuffler out of service, as status and devices show them,
    dated by the journal row that recorded them."""
    return [_dated(f, kind, journal) for f, kind in _faults(state)]


def _dated(fault: FaultView, kind: Mapping[str, Any], journal: JournalLookup | None) -> FaultView:
    row = None if journal is None else journal(("shuffle.suspect", "shuffle.acknowledged"), kind)
    if row is None:
        return fault
    seq, ts, data = row
    rule = data.get("rule") if isinstance(data.get("rule"), str) else None
    return fault.model_copy(update={"since": ts, "seq": seq, "rule": rule})


def _faults(state: TableState) -> list[tuple[FaultView, Mapping[str, Any]]]:
    found: list[tuple[FaultView, Mapping[str, Any]]] = []
    fault = state.shuffle
    if fault.suspect is not None:
        s = fault.suspect
        found.append(
            (
                FaultView(
                    what="shuffle-suspect",
                    device="shuffler",
                    cause=f"deck {s.deck}, round {s.round_id}: the {s.test} test fired "
                    f"({s.figure}; p = {s.p_value:.2g}, level {s.alpha:g}): the cards may not "
                    "be randomly intermixed",
                    stops=Stops.ROUNDS if s.blocks else Stops.NOTHING,
                    remedy="look at the shuffler and `tablectl shuffle report`; acknowledge "
                    "to play on with it, or take it out of service",
                    command="tablectl shuffle acknowledge --by ID [--out-of-service]",
                ),
                {"round_id": s.round_id, "test": s.test},
            )
        )
    if fault.out_of_service:
        found.append(
            (
                FaultView(
                    what="shuffler-out-of-service",
                    device="shuffler",
                    cause="a floor supervisor took the shuffler out of service after a SHUFFLE "
                    "SUSPECT: no deck is shuffled",
                    stops=Stops.SHUFFLING,
                    remedy="repair or replace the shuffler, then put it back in service",
                    command="tablectl shuffle acknowledge --in-service --by ID",
                ),
                {"action": "out-of-service"},
            )
        )
    return found


# --- the technician's report (`tablectl shuffle report`) -----------------------------


@dataclass(frozen=True, slots=True)
class TestSummary:
    test: str
    uses: int
    alarms: int
    smallest_p: float
    figure: str  # of the use with the smallest p-value
    alpha: float


@dataclass(frozen=True, slots=True)
class DeckSummary:
    deck: str
    shuffler: str | None
    uses: int
    alarms: int
    verdict: str
    tests: tuple[TestSummary, ...]


def verdict(alarms: int, smallest: float) -> str:
    if alarms:
        return "SUSPECT: the order failed a test a fair shuffle fails once in 10 million rounds"
    if smallest <= 1e-4:
        return "watch: unusual, not an alarm (fair shuffles show this now and then)"
    return "consistent with a fair shuffle"


def report(path: Path, since_ms: int) -> list[DeckSummary]:
    """Per deck and shuffler since a time: each test's uses, alarms, smallest p-value."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        rows = db.execute(
            "SELECT deck, shuffler, alarm, findings FROM uses WHERE ts_ms >= ? ORDER BY id",
            (since_ms,),
        ).fetchall()
    groups: dict[tuple[str, str | None], list[tuple[str | None, list[dict[str, object]]]]] = {}
    for deck, shuffler, alarm, findings in rows:
        groups.setdefault((deck, shuffler), []).append((alarm, json.loads(findings)))
    out = []
    for (deck, shuffler), uses in groups.items():
        tests = list(_tests(uses))
        alarms = sum(1 for alarm, _ in uses if alarm)
        smallest = min((t.smallest_p for t in tests), default=1.0)
        out.append(
            DeckSummary(deck, shuffler, len(uses), alarms, verdict(alarms, smallest), tuple(tests))
        )
    return out


def _tests(uses: list[tuple[str | None, list[dict[str, object]]]]) -> Iterator[TestSummary]:
    names: dict[str, list[dict[str, object]]] = {}
    for _, findings in uses:
        for f in findings:
            names.setdefault(str(f["test"]), []).append(f)
    for name, found in names.items():
        best = min(found, key=lambda f: float(str(f["p_value"])))
        alpha = float(str(best["alpha"]))
        yield TestSummary(
            name,
            len(found),
            sum(1 for f in found if float(str(f["p_value"])) <= alpha),
            float(str(best["p_value"])),
            str(best["figure"]),
            alpha,
        )

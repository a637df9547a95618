"""The dispatcher: one order for every input, and "no more bets" that waits for nothing.

A lock-out is stepped the moment the GPIO hands it over, with every input queued before it,
rather than at the consumer's next turn: it waits for no commit and no after-commit work
(649a.2(c)(2)). The order the core sees, and the journal keeps, is still the order posted.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
import sqlite3
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tablectl.drivers.transport.memory import memory_port
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.core.effects import Effect
from tablectl.core.events import ChipSensed, Event, LockoutPressed
from tablectl.core.table import Phase, TableState
from tablectl.service.daemon import Daemon
from tablectl.service.dispatcher import GIL_SWITCH_S, JournalThread
from tablectl.store.journal import Store
from tablectl.store.mark import JournalMark

from .conftest import EXAMPLE_CONFIG, SimulatedTable


async def test_a_lockout_is_stepped_at_once_with_what_was_queued_before_it(
    table: SimulatedTable,
) -> None:
    await table.wait_phase(Phase.BETTING)
    seen: list[str] = []

    def observe(event: Event, state: TableState, effects: list[Effect]) -> None:
        seen.append(event.TYPE)

    table.daemon.observers.append(observe)
    taken = table.daemon.steps_taken
    # Posted from one loop callback, as the GPIO hands over a batch of edges: a chip, the
    # lock-out, a chip after it. Nothing is awaited in between.
    table.daemon.post(ChipSensed(seat=2, present=True, since_ns=1))
    table.daemon.post(LockoutPressed(at_ns=2, resolution_ns=1))
    stepped_at_post = list(seen)
    table.daemon.post(ChipSensed(seat=3, present=True, since_ns=3))
    assert stepped_at_post == ["chip_sensed", "lockout_pressed"]
    assert seen == stepped_at_post  # the chip after it waits for the consumer's turn
    assert table.daemon.steps_taken == taken + 2

    await table.daemon.wait_until(lambda s: table.daemon.steps_done >= taken + 3, 10)
    ours = ("chip_sensed", "lockout_pressed")  # the shuffler's reports come in between
    assert [t for t in seen if t in ours] == ["chip_sensed", "lockout_pressed", "chip_sensed"]
    assert table.state.phase is Phase.LOCKED
    # The journal holds the inputs in the order they were posted, each once.
    assert table.daemon.store is not None
    inputs = [row.type for row in table.daemon.store.inputs() if row.type in ours]
    assert inputs[-3:] == ["chip_sensed", "lockout_pressed", "chip_sensed"]


async def test_a_lockout_while_commits_are_in_flight_keeps_their_order(
    table: SimulatedTable,
) -> None:
    """Chips stepped and being written, more queued, then the lock-out: every input is
    journaled once, in the order posted, and the lock-out's own commit follows theirs."""
    await table.wait_phase(Phase.BETTING)
    taken = table.daemon.steps_taken
    posted = []
    for n in range(200):
        table.daemon.post(ChipSensed(seat=1 + n % 6, present=n // 6 % 2 == 0, since_ns=n))
        posted.append("chip_sensed")
        if n % 40 == 39:  # the consumer takes a batch and hands it to the journal
            await asyncio.sleep(0.002)
    table.daemon.post(LockoutPressed(at_ns=10_000, resolution_ns=1))
    posted.append("lockout_pressed")
    stepped = table.daemon.steps_taken  # the press is stepped at once, after what was queued
    assert stepped >= taken + len(posted)
    await table.daemon.wait_until(lambda s: table.daemon.steps_done >= stepped, 15)
    assert table.daemon.store is not None
    ours = ("chip_sensed", "lockout_pressed")  # the shuffler's reports come in between
    journaled = [row.type for row in table.daemon.store.inputs() if row.type in ours]
    assert journaled[-len(posted) :] == posted
    assert len(journaled) == len(posted)  # each once, and nothing else of ours


async def test_a_lockout_while_the_consumer_is_between_slices_steps_the_rest_at_once(
    table: SimulatedTable,
) -> None:
    """A burst is stepped a slice per loop turn; a lock-out posted meanwhile steps what is
    still queued and itself at once, and the journal keeps the order posted."""
    await table.wait_phase(Phase.BETTING)
    taken = table.daemon.steps_taken
    burst = 400
    for n in range(burst):
        table.daemon.post(ChipSensed(seat=1 + n % 6, present=n // 6 % 2 == 0, since_ns=n))
    for _ in range(3):  # the consumer takes a slice or two, not all of them
        await asyncio.sleep(0)
    between = table.daemon.steps_taken - taken
    table.daemon.post(LockoutPressed(at_ns=10_000, resolution_ns=1))
    assert 0 < between < burst, "the burst was not cut into slices: the test proves nothing"
    stepped = table.daemon.steps_taken
    assert stepped - taken >= burst + 1  # everything queued (the shuffler's too), and the press
    await table.daemon.wait_until(lambda s: table.daemon.steps_done >= stepped, 15)
    assert table.daemon.store is not None
    ours = ("chip_sensed", "lockout_pressed")
    journaled = [row.type for row in table.daemon.store.inputs() if row.type in ours]
    assert journaled[-(burst + 1) :] == ["chip_sensed"] * burst + ["lockout_pressed"]


@dataclass
class _Commits:
    """Each commit from now on: the thread it ran in and the inputs it held. With hold, the
    first commit holding a chip waits (in its thread) until release is set."""

    hold: bool = False
    seen: list[tuple[str, list[str]]] = field(default_factory=list)
    holding: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> _Commits:
        real_commit = Store.commit_steps

        def commit(store: Store, steps: Any, **options: Any) -> Any:
            types = [step.step_input.type for step in steps if step.step_input is not None]
            self.seen.append((threading.current_thread().name, types))
            if self.hold and not self.holding.is_set() and "chip_sensed" in types:
                self.holding.set()
                self.release.wait(10)
            return real_commit(store, steps, **options)

        monkeypatch.setattr(Store, "commit_steps", commit)
        return self

    def ours(self) -> list[tuple[str, list[str]]]:
        """The commits of the test's own inputs, and only those inputs of each (the
        shuffler's reports come in between, or share a commit with ours)."""
        mine = ("chip_sensed", "lockout_pressed")
        return [
            (thread, [t for t in types if t in mine])
            for thread, types in self.seen
            if set(types) & set(mine)
        ]


async def test_a_lockout_while_nothing_is_written_is_committed_on_the_loop_at_once(
    table: SimulatedTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing being written: the lock-out's commit runs in the loop's own thread, within
    the post (no hop to the journal thread and back), and its rows reach the relay from it."""
    await table.wait_phase(Phase.BETTING)
    await table.wait_backend_caught_up()
    store = table.daemon.store
    assert store is not None
    async with asyncio.timeout(10):
        while table.daemon.dispatcher.writing:  # noqa: ASYNC110 -- the journal thread's state
            await asyncio.sleep(0.001)
    # Counted from here: a commit still being written while we waited is not the lock-out's.
    commits = _Commits().install(monkeypatch)
    offered = table.daemon.relay.counters.offered
    seq = store.last_seq
    real_mark_write = JournalMark.write
    marked: list[tuple[str, int]] = []

    def mark_write(mark: JournalMark, gen: int, *rest: Any) -> None:
        real_mark_write(mark, gen, *rest)
        marked.append((threading.current_thread().name, gen))

    monkeypatch.setattr(JournalMark, "write", mark_write)
    before = store.mark().record
    assert before is not None
    table.daemon.post(LockoutPressed(at_ns=1, resolution_ns=1))
    # Journaled, and handed to the broker, before the post returned.
    # (A shuffler report queued at that moment may share the commit: ours() leaves it out.)
    assert commits.ours() == [(threading.current_thread().name, ["lockout_pressed"])]
    assert store.last_seq > seq
    assert table.daemon.relay.counters.offered - offered == store.last_seq - seq
    assert "lockout_pressed" in [row.type for row in store.inputs()][-len(commits.seen[0][1]) :]
    # The mark's record of it (a second fdatasync) is the journal thread's, not the loop's.
    async with asyncio.timeout(10):
        while table.daemon.dispatcher.writing:  # noqa: ASYNC110 -- the journal thread's state
            await asyncio.sleep(0.001)
    assert marked[0] == ("journal", before.gen + 1)
    after = store.mark().record
    assert after is not None and after.gen >= before.gen + 1
    await table.daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 10)
    await table.wait_backend_caught_up()
    assert sorted(table.backend.events) == list(range(1, store.last_seq + 1))


async def test_a_lockout_while_a_commit_is_written_follows_it_in_the_journal_thread(
    table: SimulatedTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chip's commit being written: the lock-out is stepped at once all the same, but its
    commit waits its turn in the journal thread, after the chip's."""
    await table.wait_phase(Phase.BETTING)
    await table.wait_backend_caught_up()
    commits = _Commits(hold=True).install(monkeypatch)
    table.daemon.post(ChipSensed(seat=2, present=True, since_ns=1))
    assert await asyncio.to_thread(commits.holding.wait, 10)  # the chip's commit under way
    taken = table.daemon.steps_taken
    table.daemon.post(LockoutPressed(at_ns=2, resolution_ns=1))
    assert table.daemon.steps_taken == taken + 1  # stepped at once
    assert commits.ours() == [("journal", ["chip_sensed"])]  # not written here
    commits.release.set()
    await table.daemon.wait_until(lambda s: table.daemon.steps_done >= taken + 1, 10)
    assert commits.ours() == [("journal", ["chip_sensed"]), ("journal", ["lockout_pressed"])]
    assert table.daemon.store is not None
    ours = ("chip_sensed", "lockout_pressed")  # the shuffler's reports come in between
    inputs = [row.type for row in table.daemon.store.inputs() if row.type in ours]
    assert inputs[-2:] == ["chip_sensed", "lockout_pressed"]


async def test_a_served_daemon_freezes_its_start_up_and_takes_the_gil_back_soon(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    """serve() owns the process: once ready, what start-up made is frozen, so a full
    collection never walks it with a lock-out waiting, and the journal thread's Python (a
    burst's JSON) is asked for the GIL back within about one step's dump, not CPython's
    default 5 ms; run() (a test's) leaves the collector and the switch interval alone."""
    gc.unfreeze()
    default_switch = sys.getswitchinterval()
    assert GIL_SWITCH_S <= 0.0002 < default_switch
    try:
        for serve in (False, True):
            port = f"gc-freeze-{serve}"
            memory_port(port).plug(ShufflerSimulator(shuffle_ms=10, rng=random.Random(3)))
            cfg = simulated_config(
                load_config(EXAMPLE_CONFIG),
                port=f"memory://{port}",
                broker=broker,
                data_dir=tmp_path / port,
            )
            inputs = SimulatedTableInputs(cfg.table.seats)
            daemon = Daemon(cfg, gpio_backend=inputs.backend())
            task = asyncio.create_task(daemon.serve() if serve else daemon.run())
            await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
            if serve:  # most of what is tracked was there at start-up
                assert gc.get_freeze_count() > len(gc.get_objects())
                assert sys.getswitchinterval() == pytest.approx(GIL_SWITCH_S)
            else:
                assert gc.get_freeze_count() == 0
                assert sys.getswitchinterval() == default_switch
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            assert sys.getswitchinterval() == default_switch  # the process's again
    finally:
        gc.unfreeze()


def test_the_journal_thread_runs_a_job_in_the_callers_thread_only_when_idle() -> None:
    journal = JournalThread()
    ran: list[str] = []
    assert journal.run_here_if_idle(lambda: ran.append(threading.current_thread().name))
    assert ran == [threading.current_thread().name]
    started, release = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        release.wait(10)
        ran.append("slow")

    journal.put(slow)
    assert started.wait(10)
    assert not journal.run_here_if_idle(lambda: ran.append("not now"))  # one is running
    journal.put(lambda: ran.append("queued"))
    release.set()
    journal.close()  # the jobs put run to their end
    assert ran[1:] == ["slow", "queued"]
    assert journal.run_here_if_idle(lambda: ran.append("idle again"))
    assert ran[-1] == "idle again"


async def test_every_row_reaches_the_backend_once_in_order_from_the_commit_or_the_journal(
    table: SimulatedTable,
) -> None:
    """Rows go to the broker straight from their commit while the relay is idle, and from
    the journal when it is behind (a burst): the backend has each seq once, in order."""
    await table.wait_phase(Phase.BETTING)
    await table.wait_backend_caught_up()
    relay, store = table.daemon.relay, table.daemon.store
    assert store is not None
    offered = relay.counters.offered
    for n in range(30):  # one at a time: each lands while the relay is idle
        before = store.steps_committed

        def committed(_: TableState, before: int = before) -> bool:
            return store.steps_committed > before

        table.daemon.post(ChipSensed(seat=1 + n % 6, present=n // 6 % 2 == 0, since_ns=n))
        await table.daemon.wait_until(committed, 5)
        await table.wait_backend_caught_up()
    assert relay.counters.offered - offered >= 20
    burst_from = store.steps_committed
    for n in range(2000):  # a burst: the journal's turn
        table.daemon.post(ChipSensed(seat=1 + n % 6, present=n // 6 % 2 == 0, since_ns=n))
    await table.daemon.wait_until(lambda _: store.steps_committed >= burst_from + 2000, 30)
    await table.wait_backend_caught_up()
    last = store.last_seq
    assert sorted(table.backend.events) == list(range(1, last + 1))
    # Sent as new once each, in seq order; anything more was a replay the backend asked for
    # at its connect (flagged so, as consumers deduplicate on seq).
    new = [seq for seq, replay in table.backend.deliveries if not replay]
    assert new == list(range(new[0], last + 1)), relay.counters
    assert table.backend.duplicates <= relay.counters.redelivered


async def test_after_a_failed_commit_nothing_more_is_written_and_the_daemon_stops(
    tmp_path: Path, broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches stepped behind a commit assumed it: when it fails (the disk), none of them is
    written, and the daemon ends with the commit's error."""
    memory_port("failed-commit").plug(ShufflerSimulator(shuffle_ms=10, rng=random.Random(5)))
    cfg = simulated_config(
        load_config(EXAMPLE_CONFIG),
        port="memory://failed-commit",
        broker=broker,
        data_dir=tmp_path / "data",
    )
    real_commit = Store.commit_steps
    failing, held, release = threading.Event(), threading.Event(), threading.Event()
    reached: list[int] = []  # commits that reached the database once it began to fail

    def commit(self: Store, steps: Any, **options: Any) -> Any:
        if failing.is_set():
            reached.append(len(steps))
            if len(reached) == 1:
                held.set()
                release.wait(10)
                raise sqlite3.OperationalError("disk I/O error")
        return real_commit(self, steps, **options)

    monkeypatch.setattr(Store, "commit_steps", commit)
    inputs = SimulatedTableInputs(cfg.table.seats)
    daemon = Daemon(cfg, gpio_backend=inputs.backend())
    task = asyncio.create_task(daemon.run())
    await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
    failing.set()
    daemon.post(ChipSensed(seat=1, present=True, since_ns=1))
    async with asyncio.timeout(10):
        while not held.is_set():  # noqa: ASYNC110 -- a thread's event
            await asyncio.sleep(0.001)
    for n in range(20):  # stepped and handed on behind it (up to COMMITS_IN_FLIGHT batches)
        daemon.post(ChipSensed(seat=2 + n % 4, present=n % 8 < 4, since_ns=2 + n))
        await asyncio.sleep(0.001)
    assert daemon.steps_taken > daemon.steps_done + 1  # batches wait behind the failing one
    release.set()
    with pytest.raises(ExceptionGroup) as ended:
        await task
    assert ended.group_contains(sqlite3.OperationalError)
    assert len(reached) == 1  # nothing after the failed commit reached the database


@dataclass
class _HeldCommit:
    daemon: Daemon
    release: threading.Event
    commits: list[list[str]]  # from the held one on: each commit's inputs, by type


@contextlib.asynccontextmanager
async def _one_commit_held(
    tmp_path: Path, broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch, name: str
) -> AsyncIterator[_HeldCommit]:
    """A daemon in betting whose commit of a chip is held in the journal thread (until
    release), so that what the test posts next finds a commit under way."""
    memory_port(name).plug(ShufflerSimulator(shuffle_ms=10, rng=random.Random(6)))
    cfg = simulated_config(
        load_config(EXAMPLE_CONFIG),
        port=f"memory://{name}",
        broker=broker,
        data_dir=tmp_path / "data",
    )
    real_commit = Store.commit_steps
    holding, held, release = threading.Event(), threading.Event(), threading.Event()
    commits: list[list[str]] = []

    def commit(self: Store, steps: Any, **options: Any) -> Any:
        if holding.is_set():
            commits.append([s.step_input.type if s.step_input else "" for s in steps])
            if len(commits) == 1:
                held.set()
                release.wait(10)
        return real_commit(self, steps, **options)

    monkeypatch.setattr(Store, "commit_steps", commit)
    inputs = SimulatedTableInputs(cfg.table.seats)
    daemon = Daemon(cfg, gpio_backend=inputs.backend())
    task = asyncio.create_task(daemon.run())
    try:
        await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
        holding.set()
        daemon.post(ChipSensed(seat=1, present=True, since_ns=1))
        async with asyncio.timeout(10):
            while not held.is_set():  # noqa: ASYNC110 -- a thread's event
                await asyncio.sleep(0.001)
        yield _HeldCommit(daemon, release, commits)
    finally:
        release.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_lockout_behind_a_commit_is_written_with_every_batch_waiting_in_the_next(
    tmp_path: Path, broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock-out that finds a commit under way waits for that one commit only: the batches
    handed on behind it and the lock-out's are written together in the next one (one fsync
    and one mark), not one commit each."""
    async with _one_commit_held(tmp_path, broker, monkeypatch, "lockout-leads") as held:
        daemon = held.daemon
        taken = daemon.steps_taken
        for n in range(12):  # batches handed on behind the commit under way
            daemon.post(ChipSensed(seat=2 + n % 4, present=n % 8 < 4, since_ns=2 + n))
            await asyncio.sleep(0.002)
        daemon.post(LockoutPressed(at_ns=100))
        behind = daemon.steps_taken - taken
        assert daemon.dispatcher.writing and behind >= 13  # (and any device report)
        held.release.set()
        await daemon.wait_until(lambda s: s.phase is Phase.LOCKED, 10)
        await daemon.wait_until(lambda _: daemon.steps_done >= daemon.steps_taken, 10)
        # The held commit, then one for all that was stepped behind it, the lock-out last.
        assert len(held.commits[1]) == behind and held.commits[1][-1] == LockoutPressed.TYPE, (
            held.commits
        )
        assert daemon.dispatcher.batches_joined >= 1


async def test_what_comes_after_a_lockout_is_not_written_in_its_commit(
    tmp_path: Path, broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock-out's commit ends with it: inputs handed on after it, while the commit before
    it is on disk, wait for the next commit (their JSON does not put off its fsync)."""
    async with _one_commit_held(tmp_path, broker, monkeypatch, "lockout-ends") as held:
        daemon = held.daemon
        for n in range(3):  # queued, then stepped with the lock-out in its batch
            daemon.post(ChipSensed(seat=2 + n, present=True, since_ns=2 + n))
        daemon.post(LockoutPressed(at_ns=100))
        handed_before = daemon.dispatcher._in_flight
        for n in range(4):  # late chips: each stepped and handed on behind the lock-out's
            daemon.post(ChipSensed(seat=5, present=n % 2 == 0, since_ns=200 + n))
            await asyncio.sleep(0.005)
        assert daemon.dispatcher._in_flight > handed_before  # they wait with it
        held.release.set()
        await daemon.wait_until(lambda s: s.phase is Phase.LOCKED, 10)
        await daemon.wait_until(lambda _: daemon.steps_done >= daemon.steps_taken, 10)
        assert held.commits[1][-1] == LockoutPressed.TYPE, held.commits
        assert [t for c in held.commits[2:] for t in c].count(ChipSensed.TYPE) >= 1, held.commits

"""The dispatcher: one queue, the core's steps, and the group commit.

Every input -- a debounced chip, the lock-out button, a device's report, a person's command --
goes through one queue and one consumer, so the core sees them in a single order. Each step's
input, new state and journal rows are committed *before* its effects run (seat lamps, shuffle
commands) and before the relay may publish them. Inputs that queue up while a commit is on
disk are stepped in order and committed together (group commit: one fsync for all of them).

The consumer steps the next inputs while the commit before them is still being written, so a
lock-out edge waits neither for a commit nor for its after-commit work; commits stay in order
(one journal thread). A lock-out is stepped the moment it is posted, with everything queued
before it. The moment SQLite's commit returns (before the journal's mark is written:
store/journal.py), the journal thread hands the batch to the loop in one callback, which
gives the relay its rows first: nothing but that fsync and one thread -> loop hop stands
between a step and its publication. A lock-out's batch, when nothing else is being written,
is committed on the loop itself, so not even the hops stand there. When a commit is under
way, the batches handed on behind it are written together in the next one, the lock-out's
with them (`_write_pending`): a lock-out waits for at most the one commit under way, never
for a queue of them, each with its fsync and its mark's; and its commit ends with it (the
batches handed on after it go to the next), so no JSON of later inputs is made ahead of its
fsync. What each step does next
(the daemon's `AfterCommit`) follows in `finish_commits`. A burst is stepped, and its
after-commit work run, a slice per loop turn (util/slices.py), so an edge never waits behind
a whole burst.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import structlog
from tablectl.drivers.api import DeviceReport

from tablectl.core.effects import Effect, Record
from tablectl.core.events import Event, LockoutPressed, TableRules
from tablectl.core.table import Rejected, TableState, step
from tablectl.store.journal import JournalRow, StepCommit, StepInput, Store
from tablectl.util.faultpoint import fault_point
from tablectl.util.slices import Slices

log = structlog.get_logger(__name__)
T = TypeVar("T")
# At most this many inputs share one commit (a burst is gathered across loop turns); batches
# waiting for the journal thread are written together up to it. A lock-out behind a commit
# waits for it whole: its JSON (about 0.1 ms a step, cold) and its fsync.
MAX_STEPS_PER_COMMIT = 128
# Batches stepped ahead of the one being written: enough that a lock-out never waits for a
# commit, few enough that a slow disk holds the inputs back (in the queue) rather than memory.
COMMITS_IN_FLIGHT = 4
# How long the loop may wait for the GIL while the journal thread runs Python (a burst's
# JSON: ~0.1 ms a step, cold). CPython's default, 5 ms, lets a lock-out edge that reached the
# loop wait behind a whole batch's JSON; at 0.1 ms the journal thread is asked to let go
# within one step's dump (bench/lockout_latency.py, edge -> on the loop under load).
GIL_SWITCH_S = 0.0001

StepObserver = Callable[[Event, TableState, list[Effect]], None]
# The rows a command journaled, as its caller hears them: seq, type and data.
ReplyRows = list[dict[str, Any]]


def journal_entries(effects: list[Effect]) -> list[tuple[str, dict[str, Any]]]:
    """The typed records of a step, as the journal stores (and the relay publishes) them."""
    return [(e.TYPE, e.model_dump(mode="json")) for e in effects if isinstance(e, Record)]


def journal_input(event: Event) -> StepInput:
    return StepInput(event.TYPE, event.model_dump(mode="json"))


class JournalFailed(Exception):
    """A commit failed before this one: the steps behind it are not written."""


AFTER_FAILURE = "an earlier commit failed: nothing more is written"


@dataclass
class Submission:
    event: Event
    # Resolves to the rows the command produced, or raises Rejected.
    reply: asyncio.Future[ReplyRows] | None = None
    # A device's report: its cursor is committed with the input, then the device is told.
    report: DeviceReport | None = None
    # Key-values a command commits with its input (a link reset's new cursor).
    kv: dict[str, str] | None = None
    # What a command set going that its caller waits for (a deal: did the shoe take it?).
    followup: asyncio.Task[str | None] | None = None

    def answer(self, rows: ReplyRows | None = None, *, error: Exception | None = None) -> None:
        """Tell whoever asked. A caller that gave up (a client gone, a timeout) cancelled
        its wait: the step stands, and there is no one to tell."""
        if self.reply is None or self.reply.done():
            return
        if error is not None:
            self.reply.set_exception(error)
        else:
            self.reply.set_result(rows or [])


@dataclass
class Stepped:
    """One input the core stepped on, waiting for the commit it shares with others."""

    sub: Submission
    state: TableState  # the state the step left
    effects: list[Effect]
    kv: dict[str, str] | None  # key-values committed with it (a device's cursor)
    refusal: Rejected | None = None  # a device report the core refused: only its cursor moves

    def commit(self) -> StepCommit:
        """What the journal writes for it. Made in the journal thread, not on the loop: the
        state's JSON (for its hash) and the records' are most of a step's cost."""
        if self.refusal is not None:
            return StepCommit(self.state.model_dump_json(), [], None, self.kv)
        return StepCommit(
            self.state.model_dump_json(),
            journal_entries(self.effects),
            journal_input(self.sub.event),
            self.kv,
        )


@dataclass
class _Batch:
    """Inputs stepped together and the commit that makes them durable, under way. In the
    after-commit work it also marks where the batch ends."""

    stepped: list[Stepped]
    refused: list[tuple[Submission, Rejected]]
    state: TableState  # the state after the batch: what others read once it is on disk
    # It holds a lock-out: its commit takes no batch handed on after it (`_take_pending`).
    lockout: bool = False


def _resolve(future: asyncio.Future[T], result: T) -> None:
    """A journal job's result, on the loop, for a caller that may have stopped waiting."""
    if not future.done():
        future.set_result(result)


def _reject(future: asyncio.Future[T], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


class AfterCommit(Protocol):
    """What the daemon does once a batch is on disk."""

    def durable(self, rows: list[JournalRow]) -> None:
        """The batch's rows are on disk: the relay may hand them on (before the rest below)."""

    def committed(self, item: Stepped, rows: list[JournalRow]) -> None:
        """One step on disk: its device is told, its effects run, its caller answered."""


class JournalThread:
    """Where every database write runs, one job at a time, in the order put: the journal
    thread, or -- when it has nothing to do -- the caller's (`run_here_if_idle`). A job is a
    plain callable: a batch's commit reports its own landing to the loop, so no future is
    made or chained per commit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # Jobs put and not finished, or one running in the caller's thread: a job runs
        # outside the journal thread only while this is 0, so writes never overlap and
        # none overtakes one put before it.
        self._pending = 0
        self._pending_lock = threading.Lock()

    def put(self, job: Callable[[], None]) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="journal", daemon=True)
            self._thread.start()
        with self._pending_lock:
            self._pending += 1
        self._jobs.put(job)

    def idle(self) -> bool:
        """No job is queued or running."""
        with self._pending_lock:
            return self._pending == 0

    def run_here_if_idle(self, job: Callable[[], None]) -> bool:
        """Run job now, in this thread, if no job is queued or running; False if one is
        (then nothing ran). Spares a job that waits for its result the two thread hops."""
        with self._pending_lock:
            if self._pending:
                return False
            self._pending = 1
        try:
            job()
        finally:
            self._done()
        return True

    def _done(self) -> None:
        with self._pending_lock:
            self._pending -= 1

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except BaseException:  # a job reports its own failure; the thread goes on
                log.exception("a journal job failed")
            finally:
                self._done()

    def close(self) -> None:
        """The jobs put before this run to their end (a commit is one transaction)."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None


class Dispatcher:
    """The input queue, the core's steps and their ordered group commits."""

    def __init__(self, rules: TableRules) -> None:
        self.rules = rules
        self._store: Store | None = None
        # The state the last committed step left (None until the journal is open): what
        # status, tests and the devices read.
        self.state: TableState | None = None
        self.observers: list[StepObserver] = []
        # Steps taken by the core, committed or not: an observer's step is steps_taken when
        # it sees it, and done once steps_done reaches that (the core steps ahead of commits).
        self.steps_taken = 0
        self.steps_done = 0  # steps committed and their after-commit work done
        self.accepting = True
        self.dropped_while_stopping = 0
        self._queue: asyncio.Queue[Submission] = asyncio.Queue()
        # The state after the last step taken, committed or not: the next step's start.
        self._head: TableState | None = None
        self._in_flight = 0  # batches taken for a commit whose after-commit work is not done
        self._unlanded = 0  # batches taken for a commit that have not landed on the loop yet
        self._room = asyncio.Event()  # a batch landed
        self._stepped = asyncio.Event()
        # Every database write happens here, one at a time, in order.
        self._journal = JournalThread()
        self._journal_failed = False  # a commit failed: the journal thread writes no more
        self._failure: asyncio.Future[None] | None = None  # the commit that failed, raised
        # Batches handed to the journal thread and not taken by it yet, in order: the next
        # commit takes them together (`_write_pending`).
        self._pending: deque[_Batch] = deque()
        self._pending_lock = threading.Lock()
        self.batches_joined = 0  # batches written in a commit with the ones before them
        # The batch being gathered (stepped, not yet handed to the journal thread).
        self._open: list[Stepped] = []
        self._open_refused: list[tuple[Submission, Rejected]] = []
        # Committed steps whose after-commit work is still to run, each batch's end marked.
        self._after_work: deque[tuple[Stepped, list[JournalRow]] | _Batch] = deque()
        self._work_ready = asyncio.Event()  # after-commit work was added
        self._after: AfterCommit | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def open(self, store: Store, state: TableState, after: AfterCommit) -> None:
        """The journal and the state it holds: where the steps go on from; after: what runs
        once a batch is on disk."""
        self._store, self.state, self._head = store, state, state
        self._after = after
        self._loop = asyncio.get_running_loop()
        self._failure = self._loop.create_future()

    # --- inputs ---------------------------------------------------------------------------

    def post(self, event: Event, report: DeviceReport | None = None) -> None:
        """Queue an input from the table's own hardware or a device's report (dropped once
        the daemon stops: nothing sensed after the stop signal becomes a wager, and an
        unacknowledged report stays with its device for the next start)."""
        if not self.accepting:
            self.dropped_while_stopping += 1
            return
        submission = Submission(event, report=report)
        if not isinstance(event, LockoutPressed) or self._head is None:
            self._queue.put_nowait(submission)
            return
        # "No more bets" is stepped now, after everything queued before it, rather than
        # behind the consumer's turn: it waits for no commit and no after-commit work (and
        # does not go through the queue, which would only wake the consumer for nothing).
        while not self._queue.empty():
            self._step_some(MAX_STEPS_PER_COMMIT)
            if len(self._open) >= MAX_STEPS_PER_COMMIT:
                self._hand_off()
        self._step_some(1, submission)
        self._write_now_or_hand_off()

    @property
    def writing(self) -> bool:
        """A write is queued or under way, or a commit has not landed on the loop yet."""
        return self._unlanded > 0 or not self._journal.idle()

    async def submit(self, event: Event, kv: dict[str, str] | None = None) -> Submission:
        """Queue a person's command and wait until it is journaled; raises Rejected."""
        if not self.accepting:
            raise Rejected("the daemon is stopping")
        reply: asyncio.Future[ReplyRows] = asyncio.get_running_loop().create_future()
        sub = Submission(event, reply, kv=kv)
        self._queue.put_nowait(sub)
        await reply
        return sub

    async def in_journal_thread(self, work: Callable[[], T]) -> T:
        """Run a database write in the journal thread: every write, one at a time, in order."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()

        def job() -> None:
            if self._journal_failed:
                loop.call_soon_threadsafe(_reject, done, JournalFailed(AFTER_FAILURE))
                return
            try:
                result = work()
            except BaseException as exc:  # noqa: BLE001 (the caller's to handle, on the loop)
                loop.call_soon_threadsafe(_reject, done, exc)
            else:
                loop.call_soon_threadsafe(_resolve, done, result)

        self._journal.put(job)
        return await done

    async def wait_until(self, predicate: Callable[[TableState], bool], timeout_s: float) -> None:
        """Wait until the committed state satisfies predicate (simulators, tests, the demo)."""
        async with asyncio.timeout(timeout_s):
            while self.state is None or not predicate(self.state):
                self._stepped.clear()
                await self._stepped.wait()

    def close(self) -> None:
        """A commit under way finishes (it is one transaction) before the database closes."""
        self._journal.close()

    # --- the three tasks ----------------------------------------------------------------

    async def consume(self) -> None:
        """Step each batch of inputs as it comes, a slice per loop turn, and hand its commit
        to the journal thread without waiting for it; while COMMITS_IN_FLIGHT batches are
        being written, the inputs wait in the queue (a slow disk holds them back there, not
        in memory)."""
        assert self._store is not None and self._head is not None, "open() first"
        while True:
            while self._in_flight >= COMMITS_IN_FLIGHT:
                self._room.clear()
                await self._room.wait()
            self._step_some(1, await self._queue.get())
            slices = Slices()  # a burst is stepped a slice per loop turn, committed together
            while not self._queue.empty() and len(self._open) < MAX_STEPS_PER_COMMIT:
                # A lock-out edge may run here: it steps the rest and hands this batch on.
                await slices.check()
                self._step_some(1)
            self._hand_off()

    def _step_some(self, limit: int, first: Submission | None = None) -> None:
        """Step up to limit inputs (first, taken already, then the queue's) into the batch
        being gathered. Synchronous: no other input can come between."""
        assert self._head is not None
        taken = [] if first is None else [first]
        room = min(limit, MAX_STEPS_PER_COMMIT - len(self._open))
        while len(taken) < room and not self._queue.empty():
            taken.append(self._queue.get_nowait())
        if taken:
            self._head, stepped, refused = self._step_batch(self._head, taken)
            self._open.extend(stepped)
            self._open_refused.extend(refused)

    def _take_batch(self) -> _Batch | None:
        """The batch gathered, taken for its commit (None: nothing was gathered)."""
        assert self._head is not None
        if not self._open and not self._open_refused:
            return None
        for item in self._open:  # a test's power cut: taken, not yet journaled
            fault_point("before-commit", item.sub.event.TYPE)
        taken = _Batch(self._open, self._open_refused, self._head)
        self._open, self._open_refused = [], []
        self._in_flight += 1
        self._unlanded += 1
        return taken

    def _hand_off(self) -> None:
        """The batch gathered goes to the journal thread (commits stay in stepping order)."""
        if (batch := self._take_batch()) is not None:
            self._put_pending(batch)

    def _put_pending(self, batch: _Batch) -> None:
        assert self._store is not None
        with self._pending_lock:
            self._pending.append(batch)
        self._journal.put(functools.partial(self._write_pending, self._store))

    def _write_pending(self, store: Store) -> None:
        """In the journal thread: the batches waiting, in one commit (up to
        MAX_STEPS_PER_COMMIT steps, and always the first). Batches handed on while their
        JSON is made join it (a lock-out among them waits for no other commit). Each batch
        put a job: a job that finds none left (an earlier one took them) does nothing."""
        batches: list[_Batch] = []
        commits: list[StepCommit] = []
        try:
            while not (self._journal_failed or (batches and batches[-1].lockout)) and (
                more := self._take_pending(len(commits))
            ):
                batches += more
                commits += [item.commit() for batch in more for item in batch.stepped]
        except BaseException as exc:  # noqa: BLE001 (raised on the loop: it ends the daemon)
            self._fail(exc, here=False)
        if batches:
            self.batches_joined += len(batches) - 1
            self._write(store, batches, commits, here=False)

    def _take_pending(self, steps: int) -> list[_Batch]:
        """Batches waiting, in order, while a commit of steps stays within the bound, up to
        and with the first that holds a lock-out (what came after it waits for the next
        commit: the lock-out's fsync is not put off by their JSON)."""
        taken: list[_Batch] = []
        with self._pending_lock:
            pending = self._pending
            while pending and (
                (steps == 0 and not taken)
                or steps + len(pending[0].stepped) <= MAX_STEPS_PER_COMMIT
            ):
                steps += len(pending[0].stepped)
                taken.append(pending.popleft())
                if taken[-1].lockout:
                    break
        return taken

    def _write_now_or_hand_off(self) -> None:
        """A lock-out's batch is written here, on the loop, when nothing is being written or
        queued to be: its commit then overlaps nothing, and its rows reach the relay the
        moment SQLite's commit returns, without a hop to the journal thread and one back
        (about 0.1 ms each on a 2-core machine: docs/mqtt.md, Performance). The loop waits
        for that one fsync; no lock-out is pending meanwhile (this is it), and an edge
        sensed meanwhile keeps its own timestamp. Otherwise the batch queues behind the
        commits in flight, in order."""
        assert self._store is not None
        if (batch := self._take_batch()) is None:
            return
        batch.lockout = True
        job = functools.partial(self._write, self._store, [batch], None, here=True)
        # Every batch before it has landed (a landing the journal thread posted may still
        # wait its turn on the loop), and nothing is being written. Otherwise it is written
        # with the batches waiting before it, in the next commit.
        if self._unlanded > 1 or not self._journal.run_here_if_idle(job):
            self._put_pending(batch)

    def _write(
        self,
        store: Store,
        batches: list[_Batch],
        commits: list[StepCommit] | None,
        *,
        here: bool,
    ) -> None:
        """The batches' commits (made here when None) written in one transaction, in the
        journal thread or (here) on the loop; the moment SQLite's commit returns, the
        batches go to the loop (`_landed`), before the journal's mark is written. After a
        failed commit nothing more is written: the batches stepped behind it assumed it."""
        loop = self._loop
        assert loop is not None, "open() first"
        if self._journal_failed:
            return  # its failure was raised on the loop already: the daemon is stopping

        def on_durable(rows: list[list[JournalRow]]) -> None:
            if here:
                self._landed(batches, rows)
            else:
                loop.call_soon_threadsafe(self._landed, batches, rows)

        try:
            if commits is None:
                commits = [item.commit() for batch in batches for item in batch.stepped]
            store.commit_steps(
                commits,
                on_durable=on_durable,
                # On the loop, the mark's fdatasync goes to the journal thread: it runs there
                # before any later commit, which the journal thread makes or waits for.
                mark_later=self._journal.put if here else None,
            )
        except BaseException as exc:  # noqa: BLE001 (raised on the loop: it ends the daemon)
            self._fail(exc, here=here)

    def _fail(self, exc: BaseException, *, here: bool) -> None:
        """A commit failed (here: on the loop): nothing more is written, the daemon ends."""
        assert self._loop is not None, "open() first"
        self._journal_failed = True
        if here:
            self._failed(exc)
        else:
            self._loop.call_soon_threadsafe(self._failed, exc)

    def _failed(self, exc: BaseException) -> None:
        log.error("a journal commit failed: the daemon stops", error=repr(exc))
        if self._failure is not None and not self._failure.done():
            self._failure.set_exception(exc)

    def _landed(self, batches: list[_Batch], committed: list[list[JournalRow]]) -> None:
        """On the loop, in commit order: batches on disk (committed: each step's rows). The
        relay has their rows at once; each step's after-commit work follows, a slice per
        loop turn (`finish_commits`)."""
        assert self._after is not None, "open() first"
        self._unlanded -= len(batches)
        self.state = batches[-1].state
        rows = [row for step_rows in committed for row in step_rows]
        if rows:
            try:
                self._after.durable(rows)
            except Exception:  # the rows are journaled: the relay sends them in its turn
                log.exception("handing committed rows to the relay failed")
        steps = iter(committed)
        for batch in batches:
            self._after_work.extend((item, next(steps)) for item in batch.stepped)
            self._after_work.append(batch)
        self._work_ready.set()

    async def finish_commits(self) -> None:
        """Committed steps' after-commit work, in commit order, a slice per loop turn
        (util/slices.py); at a batch's end its refused commands are answered and waiters hear. A
        task beside consume in the daemon's group: a stop cancels both at once (what was not
        run yet is not run: its device reports go unacknowledged and come again)."""
        after = self._after
        assert after is not None, "open() first"
        work = self._after_work
        while True:
            while not work:
                self._work_ready.clear()
                await self._work_ready.wait()
            slices = Slices()
            while work:
                next_ = work.popleft()
                if isinstance(next_, _Batch):
                    # Its room goes to the next batch only now: a slow after-commit holds
                    # the inputs back in the queue, not here.
                    self._in_flight -= 1
                    self._room.set()
                    self.steps_done += sum(1 for item in next_.stepped if item.refusal is None)
                    for sub, refusal in next_.refused:
                        sub.answer(error=refusal)
                    self._stepped.set()
                    continue
                item, step_rows = next_
                # A test's power cut: journaled, not yet acknowledged nor acted on.
                fault_point("after-commit", item.sub.event.TYPE)
                after.committed(item, step_rows)
                await slices.check()  # a lock-out edge may run between two slices

    async def watch_journal(self) -> None:
        """Until a commit fails: its error is raised here, and ends the daemon. A task beside
        consume in the daemon's group: a stop cancels both at once."""
        assert self._failure is not None, "open() first"
        await self._failure

    def _step_batch(
        self, state: TableState, batch: list[Submission]
    ) -> tuple[TableState, list[Stepped], list[tuple[Submission, Rejected]]]:
        """The core's steps for a batch: the state after it, each step with its commit, and
        the commands the core refused."""
        stepped: list[Stepped] = []
        refused: list[tuple[Submission, Rejected]] = []
        for sub in batch:
            report = sub.report
            kv = dict(sub.kv or {})
            if report is not None and report.cursor_value is not None:
                kv[report.cursor_key] = report.cursor_value
            try:
                new_state, effects = step(self.rules, state, sub.event)
            except Rejected as exc:
                if report is None:
                    refused.append((sub, exc))
                    continue
                # A device's report is never lost or taken twice: its cursor moves anyway.
                log.warning("device report refused", device=report.device, error=str(exc))
                stepped.append(Stepped(sub, state, [], kv, refusal=exc))
                continue
            self.steps_taken += 1
            for observer in self.observers:
                observer(sub.event, new_state, effects)
            state = new_state
            # Every input is journaled with what it produced (and the device's cursor), so
            # the state can be replayed and the report is taken once.
            stepped.append(Stepped(sub, new_state, effects, kv or None))
        return state, stepped, refused

"""Stopping is always possible: SIGTERM/SIGINT end the daemon in bounded time.

The signals are caught with signal.signal, not asyncio's add_signal_handler: asyncio learns
of a signal through a byte in its self-pipe, and that pipe is also written by every
call_soon_threadsafe -- a chattering chip sensor's GPIO thread fills it, the signal's byte is
dropped ("Exception ignored when trying to write to the signal wakeup fd") and the daemon
never hears SIGTERM. Python's own handler runs in the main thread whatever the pipe holds.

The first signal closes acceptance at once (no chip edge reaches the core any more, so no
wager is recognised after it) and cancels the daemon. A cancellation can be lost -- Python
3.11's TaskGroup drops its parent's cancellation when a child fails at the same moment, and a
library may swallow one -- so every `recancel_s` the daemon's remaining tasks are cancelled
again, and a second signal does the same at once. If the daemon has still not stopped after
`deadline_s` (a thread that never returns, a task that refuses to end), every thread's stack
is written to stderr and the process exits. That is as safe as a power cut, which the journal
is built for: each step is one SQLite transaction, and the table comes back locked out.
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import structlog

from tablectl.util.logs import stderr_is_journal

log = structlog.get_logger(__name__)
EXIT_STOP_DEADLINE = 3  # distinct from a refusal to start (1) and a bad config (2)


class Stopper:
    def __init__(
        self,
        main: asyncio.Task[None],
        *,
        close_acceptance: Callable[[], None],
        deadline_s: float = 10.0,
        recancel_s: float = 1.0,
    ) -> None:
        self._main = main
        self._close_acceptance = close_acceptance
        self._deadline_s = deadline_s
        self._recancel_s = recancel_s
        self._loop = main.get_loop()
        self._deadline: threading.Timer | None = None
        self._previous: dict[signal.Signals, Any] = {}
        self.signals = 0
        self._mark = "<2>" if stderr_is_journal() else ""  # journald: critical

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._from_signal)

    def uninstall(self) -> None:
        """The daemon has stopped. The deadline stays armed: it also bounds what follows
        (asyncio's own clean-up, joining threads at exit)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _from_signal(self, signum: int, _frame: object) -> None:
        """In the main thread, between two bytecodes of whatever it was doing."""
        if self._deadline is None:
            # First, and from here: nothing may keep the process alive past the deadline,
            # not even a wedged event loop.
            self._deadline = threading.Timer(self._deadline_s, self._force_exit)
            self._deadline.daemon = True
            self._deadline.start()
        self._loop.call_soon_threadsafe(self._on_signal, signal.Signals(signum))

    def _on_signal(self, sig: signal.Signals) -> None:
        self.signals += 1
        if self.signals > 1:
            log.warning("stop signal again: cancelling every task", signal=sig.name)
            self._cancel_the_rest()
            return
        log.info("stopping", signal=sig.name, deadline_s=self._deadline_s)
        try:
            self._close_acceptance()
        finally:
            self._main.cancel()
            self._loop.call_later(self._recancel_s, self._recancel)

    def _recancel(self) -> None:
        if self._main.done():
            return
        self._cancel_the_rest()
        self._loop.call_later(self._recancel_s, self._recancel)

    def _cancel_the_rest(self) -> None:
        # Not the main task: it is running its clean-up (closing the socket, the database).
        for task in asyncio.all_tasks(self._loop):
            if task is not self._main and not task.done():
                task.cancel()

    def _force_exit(self) -> None:
        """Runs in the deadline thread: the loop may be the thing that is stuck."""
        try:
            sys.stderr.write(
                f"{self._mark}tablectl did not stop within {self._deadline_s:g}s of the stop "
                "signal; exiting now.\n"
            )
            try:  # best effort: the loop's own structures are not ours to read from here
                names = sorted(t.get_name() for t in list(asyncio.all_tasks(self._loop)))
                sys.stderr.write(f"{self._mark}tasks still running: {', '.join(names)}\n")
            except RuntimeError:
                pass
            sys.stderr.write(f"{self._mark}where every thread was:\n")
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
        finally:
            os._exit(EXIT_STOP_DEADLINE)

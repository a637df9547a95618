"""Where the table process's loop spends its CPU: per event-loop callback, per round.

The table process of bench/round_cpu.py (bench/table_process.py: the real daemon on a
simulated shuffler over a pty, simulated GPIO) runs on an event loop that times every
callback it runs (task steps by their coroutine, readers, timers) with time.thread_time_ns,
through the loop's public scheduling methods (call_soon, call_at, add_reader). Printed: the
main thread's CPU per round, the share the callbacks account for, and the top callbacks.
The timing wrapper itself costs a little per callback: compare runs of this tool with each
other, and whole-process figures with bench/round_cpu.py.

Run: .venv/bin/python bench/loop_cpu.py [--rounds 40] [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import collections
import tempfile
import time
from collections.abc import Callable
from contextvars import Context
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

import table_process
from tablectl.simulators.broker import PrivateBroker

from tablectl.util import logs

Ts = TypeVarTuple("Ts")
R = TypeVar("R")
CPU: collections.Counter[str] = collections.Counter()
CALLS: collections.Counter[str] = collections.Counter()
ON = [False]


def _name(callback: Callable[..., Any]) -> str:
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return "task " + str(getattr(coro, "__qualname__", coro))
    return str(getattr(callback, "__qualname__", type(callback).__name__))


def _timed(callback: Callable[[*Ts], R]) -> Callable[[*Ts], R]:
    name = _name(callback)

    def run(*args: *Ts) -> R:
        if not ON[0]:
            return callback(*args)
        t0 = time.thread_time_ns()
        try:
            return callback(*args)
        finally:
            CPU[name] += time.thread_time_ns() - t0
            CALLS[name] += 1

    return run


class TimingLoop(asyncio.SelectorEventLoop):
    def call_soon(
        self,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: Context | None = None,
    ) -> asyncio.Handle:
        return super().call_soon(_timed(callback), *args, context=context)

    def call_at(
        self,
        when: float,
        callback: Callable[[*Ts], object],
        *args: *Ts,
        context: Context | None = None,
    ) -> asyncio.TimerHandle:
        return super().call_at(when, _timed(callback), *args, context=context)

    def add_reader(self, fd: Any, callback: Callable[[*Ts], Any], *args: *Ts) -> None:
        super().add_reader(fd, _timed(callback), *args)


async def run(rounds: int) -> tuple[int, int]:
    marks: dict[str, int] = {}
    real_print = builtins.print

    def hook(*args: Any, **kwargs: Any) -> None:
        text = " ".join(map(str, args))
        if text == "ready":
            ON[0] = True
        if text.startswith("{"):
            marks["end"] = time.thread_time_ns()
            ON[0] = False
        real_print(*args, **kwargs)

    start_cpu: list[int] = []

    class Clock:
        """table_process's `time`: its first process_time() marks the second round's start
        (the first one warms up), where the counting starts too."""

        monotonic = staticmethod(time.monotonic)
        thread_time = staticmethod(time.thread_time)

        @staticmethod
        def process_time() -> float:
            if not start_cpu:
                CPU.clear()
                CALLS.clear()
                start_cpu.append(time.thread_time_ns())
            return time.process_time()

    # The table process's own print and clock, replaced for this run (a bench's patch).
    table_process.print = hook  # type: ignore[attr-defined]
    table_process.time = Clock  # type: ignore[attr-defined,assignment]
    with PrivateBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        await table_process.main(broker.port, "cpu-01", Path(tmp), 0.1, rounds)
    return start_cpu[0], marks["end"]


def main(rounds: int, top: int) -> None:
    logs.configure("ERROR")
    with asyncio.Runner(loop_factory=TimingLoop) as runner:
        t0, t1 = runner.run(run(rounds))
    total = (t1 - t0) / rounds
    print(
        f"main thread CPU per round {total / 1e6:.2f} ms; "
        f"callbacks {sum(CPU.values()) / rounds / 1e6:.2f} ms"
    )
    for name, ns in CPU.most_common(top):
        print(f"{ns / rounds / 1000:8.0f} us/round {CALLS[name] / rounds:6.1f} calls/round  {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    main(args.rounds, args.top)

"""Delivery after trouble: a broker outage caught up, and a slow backend whose queue drops.

Two measurements, each against a baseline taken in the same run:
- outage: the daemon plays on (chip events at --play-per-s) while the broker is down for
  --outage-s; from the broker's start, how long until the relay has reconnected and until
  the reference backend holds every row. The baseline is the backend catching up the same
  backlog from a relay that connects the moment the broker is back (no backoff at all):
  what the reconnect costs on top is the difference. Each reconnect attempt is printed (the
  backoff schedule), so a shorter outage stands for a longer one: past the first seconds
  the attempts are BROKER_RETRY_MAX_S apart, whatever the outage's length.
- slow backend: --rows rows played at --play-per-s to a backend that takes --per-event-s a
  row and subscribes to the table's whole tree (its ack echoes and status share its queue),
  on a broker that queues --max-queued messages per client behind --max-inflight sent and
  not yet acknowledged (Mosquitto's max_queued_messages and max_inflight_messages, 100 and
  its default 20); the rows delivered and the time from the first row until it has
  them all (and after play stopped). The baseline is the same backend and rows on a broker
  whose queue holds them all (nothing dropped): the backend's own pace.

Run: .venv/bin/python bench/mqtt_healing.py [--repeat 1] [--outage-s 30] [--rows 1000]
     [--per-event-s 0.05] [--max-queued 100] [--max-inflight 20] [--play-per-s 40]
     [--only outage|slow]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from figures import spread
from mqtt_delivery import chip_events, daemon_on
from tablectl.simulators.backend import ReferenceBackend
from tablectl.simulators.broker import PrivateBroker

from tablectl.core.table import Phase
from tablectl.mqtt.client import MqttClient
from tablectl.service.daemon import Daemon
from tablectl.util import logs


@contextlib.asynccontextmanager
async def backend_on(
    broker: PrivateBroker, daemon: Daemon, **settings: object
) -> AsyncIterator[ReferenceBackend]:
    table = daemon.config.table
    backend = ReferenceBackend(
        broker.host,
        broker.port,
        site=table.site_id,
        table=table.table_id,
        backend_id=daemon.config.mqtt.backends[0],
        **settings,  # type: ignore[arg-type]
    )
    task = asyncio.create_task(backend.run())
    try:
        yield backend
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def play(daemon: Daemon, rows: int, per_s: float) -> None:
    """Chip events at per_s, as a busy table makes rows."""
    events = chip_events(rows)
    loop = asyncio.get_running_loop()
    start = loop.time()
    posted = 0
    while posted < rows:
        due = min(rows, int((loop.time() - start) * per_s) + 1)
        for event in events[posted:due]:
            daemon.post(event)
        posted = due
        await asyncio.sleep(0.02)


async def until(condition: Callable[[], bool], timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 (flags polled by a bench)
            await asyncio.sleep(0.01)


def recording(
    connect: Callable[[], Awaitable[MqttClient]], attempts: list[float]
) -> Callable[[], Awaitable[MqttClient]]:
    async def attempt() -> MqttClient:
        attempts.append(time.monotonic())
        return await connect()

    return attempt


async def outage(
    data_dir: Path, outage_s: float, per_s: float, *, at_once: bool
) -> dict[str, float]:
    """The broker down for outage_s while the table plays; at_once: the relay's connect held
    until the broker is back, then made at once (the baseline: no backoff)."""
    with PrivateBroker() as broker:
        async with daemon_on(broker, data_dir) as (daemon, _inputs):
            await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
            relay = daemon.relay
            store = daemon.store
            assert store is not None
            async with backend_on(broker, daemon) as backend:
                await backend.wait_for(lambda: backend.last_contiguous_seq >= store.last_seq, 30)
                attempts: list[float] = []
                gate = asyncio.Event()
                connect = relay.reconnector.connect
                if at_once:

                    async def after_the_gate() -> MqttClient:
                        await gate.wait()
                        client: MqttClient = await connect()
                        return client

                    relay.reconnector.connect = recording(after_the_gate, attempts)
                else:
                    relay.reconnector.connect = recording(connect, attempts)
                broker.stop()
                down = time.monotonic()
                await play(daemon, int(outage_s * per_s), per_s)
                await until(lambda: time.monotonic() - down >= outage_s, outage_s + 60)
                last = store.last_seq
                broker.start()
                back = time.monotonic()
                gate.set()
                await until(lambda: relay.connected, 120)
                connected = time.monotonic() - back
                await backend.wait_for(lambda: backend.last_contiguous_seq >= last, 300)
                caught_up = time.monotonic() - back
    schedule = [round(a - down, 2) for a in attempts]
    if not at_once:
        print(f"  reconnect attempts, s after the broker went down: {schedule}", flush=True)
    return {"reconnect_s": connected, "caught_up_s": caught_up, "rows": last}


async def slow_backend(
    data_dir: Path, rows: int, per_event_s: float, max_queued: int, max_inflight: int, per_s: float
) -> dict[str, float]:
    """rows played to a slow backend on the whole tree; the time until it holds them all."""
    with PrivateBroker(max_queued=max_queued, max_inflight=max_inflight) as broker:
        async with daemon_on(broker, data_dir) as (daemon, _inputs):
            await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
            store = daemon.store
            assert store is not None
            async with backend_on(broker, daemon, per_event_s=per_event_s, wildcard=True) as b:
                await b.wait_for(lambda: b.last_contiguous_seq >= store.last_seq, 60)
                start = time.monotonic()
                await play(daemon, rows, per_s)
                stopped = time.monotonic()
                last = store.last_seq
                await b.wait_for(lambda: b.last_contiguous_seq >= last, 1200)
                done = time.monotonic()
                relay = daemon.relay.counters
                print(
                    f"  queue {max_queued}: {last} rows, all in {done - start:.1f} s "
                    f"({done - stopped:.1f} s after play stopped); heals {relay.heals}, "
                    f"rewinds {getattr(relay, 'replay_rewinds', '-')}, redelivered "
                    f"{relay.redelivered}",
                    flush=True,
                )
                return {"all_s": done - start, "after_play_s": done - stopped, "rows": rows}


async def main(args: argparse.Namespace) -> None:
    figures: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        figures.setdefault(name, []).append(value)

    for run in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            if args.only in (None, "outage"):
                print(f"run {run + 1}: outage of {args.outage_s:g} s", flush=True)
                ours = await outage(root / "o1", args.outage_s, args.play_per_s, at_once=False)
                base = await outage(root / "o2", args.outage_s, args.play_per_s, at_once=True)
                add("outage: reconnect after the broker is back (s)", ours["reconnect_s"])
                add("outage: caught up after the broker is back (s)", ours["caught_up_s"])
                add("outage baseline: caught up, connecting at once (s)", base["caught_up_s"])
                add("ratio caught up / baseline", ours["caught_up_s"] / base["caught_up_s"])
            if args.only == "outage":
                continue
            print(f"run {run + 1}: slow backend ({args.per_event_s * 1000:g} ms a row)", flush=True)
            slow = await slow_backend(
                root / "s1",
                args.rows,
                args.per_event_s,
                args.max_queued,
                args.max_inflight,
                args.play_per_s,
            )
            pace = await slow_backend(
                root / "s2", args.rows, args.per_event_s, 1_000_000, 1000, args.play_per_s
            )
            add("slow backend: rows played per second", args.play_per_s)
            add(f"slow backend, queue {args.max_queued}: all rows (s)", slow["all_s"])
            add(f"slow backend, queue {args.max_queued}: rows/s", args.rows / slow["all_s"])
            add("slow backend, nothing dropped (baseline): all rows (s)", pace["all_s"])
            add("ratio time / baseline (1: the backend's own pace)", slow["all_s"] / pace["all_s"])
    print(f"\n{args.repeat} run(s)")
    for name, values in figures.items():
        print(f"{name:<56} {spread(values, '7.2f')}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--outage-s", type=float, default=30.0)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--per-event-s", type=float, default=0.05)
    parser.add_argument("--max-queued", type=int, default=100)
    parser.add_argument("--max-inflight", type=int, default=20)  # Mosquitto's default
    parser.add_argument("--play-per-s", type=float, default=40.0)
    parser.add_argument("--only", choices=("outage", "slow"), default=None)
    logs.configure("ERROR")
    asyncio.run(main(parser.parse_args()))

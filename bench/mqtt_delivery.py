"""Delivery to a backend: latency, durable throughput and backlog drain, each against a raw
aiomqtt baseline measured in the same run on the same broker.

One private Mosquitto (the shipped settings: TCP_NODELAY, queues) and one independent
subscriber process (bench/mqtt_subscriber.py) serve every measurement of a repetition:
- latency: a lock-out pressed -> `round.locked` received, through the real daemon (the
  production libgpiod backend reading the kernel's edge record from its line request's fd on
  the loop, written by a thread standing for the kernel: bench/kernel_gpio.py; `--gpio mock`:
  the mock backend called on the loop, as before; then debounce, core, group commit with
  fsync, relay), and beside it in the same
  moments (interleaved, in random order, each after the same 2-10 ms pause) its two
  baselines: a raw aiomqtt publish -> receive (QoS 1, TCP_NODELAY on both ends) and a raw
  one-row SQLite commit (WAL, synchronous=FULL) on the same disk, the fsync every device event
  must wait for. The limit the lock-out is compared with is a raw publish plus that commit;
  the same ratio against a commit at its fastest (back to back, the disk kept busy) is
  printed too. Goal (issue 29): lock-out -> backend p50 <= 1.25 x (raw publish + commit).
- paced: chip events posted at --paced-per-s (4,000) for --paced-s seconds, 5 ms at a time:
  the rate delivered, and each event's lag from its post to the subscriber (p50, p99).
- throughput: 20,000 QoS 1 raw aiomqtt publishes -> received (the best of windows 8, 32 and
  128), against 20,000 chip events posted to the daemon -> journaled durably and received.
- backlog: the broker is down while 20,000 events are journaled; from the relay's reconnect
  until the subscriber has them all, in order, against the raw publish rate.
Figures are per repetition; ratios are reported min/median/max over the repetitions.

Run: .venv/bin/python bench/mqtt_delivery.py [--repeat 3] [--samples 300] [--events 20000]
     [--paced-per-s 4000] [--paced-s 5] [--gpio kernel|mock]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt
from figures import percentile, spread
from kernel_gpio import KernelButton
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.core.events import ChipSensed, Settle
from tablectl.core.table import Phase
from tablectl.mqtt.client import SOCKET_OPTIONS, MqttClient
from tablectl.mqtt.contract import topic_root
from tablectl.service.daemon import Daemon
from tablectl.util import logs

REPO = Path(__file__).resolve().parents[1]
SUBSCRIBER = Path(__file__).with_name("mqtt_subscriber.py")


@dataclass
class Received:
    at_ns: int
    topic: str
    seq: int
    type: str
    t0: int


@dataclass
class Subscriber:
    """The subscriber process and what it has reported so far."""

    proc: asyncio.subprocess.Process
    lines: list[Received] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    highest: int = 0  # the highest seq seen

    async def read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            at, topic, seq, type_, t0 = line.decode().split()
            self.lines.append(Received(int(at), topic, int(seq), type_, int(t0)))
            self.highest = max(self.highest, int(seq))
            self.changed.set()

    async def wait(self, predicate: Callable[[], bool], timeout_s: float = 120) -> None:
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


@contextlib.asynccontextmanager
async def subscriber(broker: PrivateBroker, *topics: str):  # type: ignore[no-untyped-def]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SUBSCRIBER),
        "--port",
        str(broker.port),
        *(arg for topic in topics for arg in ("--topic", topic)),
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).strip() == b"ready"
    sub = Subscriber(proc)
    reader = asyncio.create_task(sub.read())
    try:
        yield sub
    finally:
        proc.terminate()
        await proc.wait()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


# --- baselines ----------------------------------------------------------------------------


async def raw_rate(broker: PrivateBroker, count: int, window: int) -> float:
    """aiomqtt QoS 1 publishes with `window` in flight -> received: messages per second."""
    payload = json.dumps({"t0": 0, "seq": 1, "pad": "x" * 200})  # about an event's size
    async with (
        subscriber(broker, "bench/raw/rate") as sub,
        aiomqtt.Client(
            broker.host, broker.port, socket_options=SOCKET_OPTIONS, max_inflight_messages=window
        ) as client,
    ):
        client.pending_calls_threshold = window  # no warning logged per publish
        slots = asyncio.Semaphore(window)

        async def one() -> None:
            try:
                await client.publish("bench/raw/rate", payload, qos=1)
            finally:
                slots.release()

        start = time.perf_counter()
        async with asyncio.TaskGroup() as tasks:
            for _ in range(count):
                await slots.acquire()
                tasks.create_task(one())
        await sub.wait(lambda: len(sub.lines) >= count)
        return count / (time.perf_counter() - start)


class RawCommit:
    """A one-row commit in WAL with synchronous=FULL on this disk: what durability costs."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE t(x)")
        self._n = 0

    def once_us(self) -> float:
        self._n += 1
        t = time.perf_counter()
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("INSERT INTO t VALUES (?)", (self._n,))
        self._db.execute("COMMIT")
        return (time.perf_counter() - t) * 1e6

    def close(self) -> None:
        self._db.close()


def sqlite_commit_us(path: Path, samples: int) -> list[float]:
    """One-row commits back to back (the disk kept busy): the fastest a commit gets."""
    raw = RawCommit(path)
    try:
        return [raw.once_us() for _ in range(samples)]
    finally:
        raw.close()


# --- the daemon ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def daemon_on(  # type: ignore[no-untyped-def]
    broker: PrivateBroker, data_dir: Path, button: KernelButton | None = None
):
    sim = ShufflerSimulator(shuffle_ms=1, rng=random.Random(0))
    cfg = simulated_config(
        load_config(REPO / "config" / "three-card-poker.toml"),
        port=sim.open_pty(),
        broker=broker,
        data_dir=data_dir,
    )
    inputs = SimulatedTableInputs(cfg.table.seats)
    daemon = Daemon(cfg, gpio_backend=inputs.backend() if button is None else button.backend())
    task = asyncio.create_task(daemon.serve())  # as `tablectl run` (its GC freeze too)
    await daemon.ready.wait()
    try:
        yield daemon, inputs
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sim.close()


@dataclass
class Latency:
    """One repetition's latency samples, in microseconds, taken side by side."""

    raw: list[float] = field(default_factory=list)  # aiomqtt publish -> the subscriber
    commit: list[float] = field(default_factory=list)  # a one-row commit, after the pause
    lockout: list[float] = field(default_factory=list)  # the edge -> `round.locked` received


async def latency(
    broker: PrivateBroker, data_dir: Path, samples: int, gpio: str = "kernel"
) -> Latency:
    """The lock-out edge (simulated GPIO line) -> `round.locked` at the subscriber, beside its
    baselines taken in the same moments: each sample is a raw publish -> receive, a raw
    one-row commit and a lock-out, in a random order, each after a pause of 2 to 10 ms (so
    none is pipelined behind another, and each finds the CPU and the disk as idle as the
    others do)."""
    out = Latency()
    raw_commit = RawCommit(data_dir.with_name(data_dir.name + "-raw.sqlite3"))
    table_gpio = load_config(REPO / "config" / "three-card-poker.toml").gpio
    button = KernelButton(table_gpio, time.time_ns) if gpio == "kernel" else None
    async with daemon_on(broker, data_dir, button) as (daemon, inputs):
        root = topic_root(daemon.config.table.site_id, daemon.config.table.table_id)
        async with (
            subscriber(broker, f"{root}/evt", "bench/raw/latency") as sub,
            aiomqtt.Client(broker.host, broker.port, socket_options=SOCKET_OPTIONS) as client,
        ):
            order = random.Random(3)
            for i in range(samples):
                await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
                kinds = ["raw", "commit", "lockout"]
                order.shuffle(kinds)
                for kind in kinds:
                    await asyncio.sleep(random.uniform(0.002, 0.01))
                    if kind == "commit":
                        out.commit.append(raw_commit.once_us())
                    elif kind == "raw":
                        seen = len(sub.lines)
                        t0 = time.time_ns()
                        body = json.dumps({"t0": t0, "seq": i + 1})
                        await client.publish("bench/raw/latency", body, qos=1)
                        await sub.wait(lambda seen=seen: len(sub.lines) > seen)
                        out.raw.append((sub.lines[seen].at_ns - t0) / 1000)
                    else:
                        out.lockout.append(await _lockout_once(daemon, inputs, button, sub))
                await asyncio.sleep(daemon.config.gpio.lockout_debounce_ms / 1000)
                await daemon.submit(Settle(hands={}))
    raw_commit.close()
    if button is not None:
        button.close()
    return out


async def _lockout_once(
    daemon: Daemon, inputs: SimulatedTableInputs, button: KernelButton | None, sub: Subscriber
) -> float:
    seen = len(sub.lines)
    if button is None:
        t0 = time.time_ns()
        inputs.press_lockout()  # the edge, as the mock GPIO backend reports it
    else:
        button.press()  # the kernel's thread writes the edge; the loop reads it from the fd
    try:
        await sub.wait(
            lambda: any(r.type == "round.locked" for r in sub.lines[seen:]), timeout_s=20
        )
    except TimeoutError:
        assert daemon.state is not None
        raise SystemExit(
            f"no round.locked: phase {daemon.state.phase}, counters "
            f"{daemon.state.counters}, relay {daemon.relay.stats()}"
        ) from None
    locked = next(r for r in sub.lines[seen:] if r.type == "round.locked")
    if button is not None:
        t0 = button.pressed_at[-1]
        await asyncio.to_thread(button.released.wait)  # released before the next sample
    return (locked.at_ns - t0) / 1000


def chip_events(count: int) -> list[ChipSensed]:
    """Chips placed and lifted on seats 1..6 while betting: one journal row each."""
    now = time.monotonic_ns()
    return [
        ChipSensed(seat=1 + i // 2 % 6, present=i % 2 == 0, since_ns=now + i) for i in range(count)
    ]


async def throughput(broker: PrivateBroker, data_dir: Path, count: int) -> tuple[float, float]:
    """Events posted -> durable and received: events per second, and steps per commit."""
    async with daemon_on(broker, data_dir) as (daemon, _inputs):
        root = topic_root(daemon.config.table.site_id, daemon.config.table.table_id)
        await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
        store = daemon.store
        assert store is not None
        async with subscriber(broker, f"{root}/evt") as sub:
            first = store.last_seq + 1
            commits, steps = store.commits, store.steps_committed
            events = chip_events(count)
            start = time.perf_counter()
            for event in events:
                daemon.post(event)
            await sub.wait(lambda: sub.highest >= first + count - 1)
            rate = count / (time.perf_counter() - start)
            ratio = (store.steps_committed - steps) / max(1, store.commits - commits)
            return rate, ratio


async def paced(
    broker: PrivateBroker, data_dir: Path, per_s: int, seconds: float
) -> tuple[float, list[float]]:
    """Chip events posted at per_s, paced in 5 ms slices, for `seconds`: the rate delivered
    (journaled durably, then received by the subscriber process), and each event's delivery
    lag from its post to its arrival, in milliseconds."""
    async with daemon_on(broker, data_dir) as (daemon, _inputs):
        root = topic_root(daemon.config.table.site_id, daemon.config.table.table_id)
        await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
        store = daemon.store
        assert store is not None
        async with subscriber(broker, f"{root}/evt") as sub:
            count = int(per_s * seconds)
            events = chip_events(count)
            first = store.last_seq + 1
            posted_ns: list[int] = []
            loop = asyncio.get_running_loop()
            start = loop.time()
            while len(posted_ns) < count:
                due = min(count, int((loop.time() - start) * per_s) + 1)
                now = time.time_ns()
                for event in events[len(posted_ns) : due]:
                    daemon.post(event)
                    posted_ns.append(now)
                await asyncio.sleep(0.005)
            await sub.wait(lambda: sub.highest >= first + count - 1)
            arrived = {r.seq: r.at_ns for r in sub.lines if r.seq >= first}
            last = max(arrived.values())
            lags = [(arrived[first + i] - posted_ns[i]) / 1e6 for i in range(count)]
            return count / ((last - posted_ns[0]) / 1e9), lags


def gated(make: Callable[[], MqttClient], gate: asyncio.Event) -> Callable[[], MqttClient]:
    """The relay's clients, each holding its connect until the bench opens the gate."""

    def client() -> MqttClient:
        made = make()
        connect = made.connect

        async def after_the_gate() -> None:
            await gate.wait()
            await connect()

        made.connect = after_the_gate  # type: ignore[method-assign]
        return made

    return client


async def backlog(broker: PrivateBroker, data_dir: Path, count: int) -> tuple[float, int, bool]:
    """The broker comes back to `count` journaled events: rows drained per second, how many,
    and whether they arrived in order. The clock starts when the relay may reconnect (the
    subscriber is listening by then), so the relay's backoff is not counted."""
    async with daemon_on(broker, data_dir) as (daemon, _inputs):
        root = topic_root(daemon.config.table.site_id, daemon.config.table.table_id)
        await daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
        store = daemon.store
        assert store is not None
        while not daemon.relay.connected:  # noqa: ASYNC110 (a flag, polled by a bench)
            await asyncio.sleep(0.01)
        gate = asyncio.Event()
        daemon.relay.client = gated(daemon.relay.client, gate)
        broker.stop()
        first = store.last_seq + 1
        for event in chip_events(count):
            daemon.post(event)
        await daemon.wait_until(lambda _: store.last_seq >= first + count - 1, 120)
        last = store.last_seq
        broker.start()
        async with subscriber(broker, f"{root}/evt") as sub:
            start = time.perf_counter()
            gate.set()
            await sub.wait(lambda: sub.highest >= last)
            elapsed = time.perf_counter() - start
            seqs = [r.seq for r in sub.lines]
            # Everything no backend has acknowledged goes again: from seq 1 here.
            in_order = seqs == list(range(seqs[0], last + 1)) and seqs[0] <= first
            return len(seqs) / elapsed, len(seqs), in_order


# --- the run ------------------------------------------------------------------------------


async def main(
    repeat: int, samples: int, events: int, paced_per_s: int, paced_s: float, gpio: str
) -> None:
    rows: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    for run in range(repeat):
        with PrivateBroker() as broker, tempfile.TemporaryDirectory() as tmp:
            side = await latency(broker, Path(tmp) / "lat", samples, gpio)
            base, device, fsync = side.raw, side.lockout, side.commit
            hot = sqlite_commit_us(Path(tmp) / "fsync.sqlite3", samples)
            # aiomqtt's publish costs grow with the calls pending: the best of three windows.
            raw = max([await raw_rate(broker, events, window=w) for w in (8, 32, 128)])
            rate, lags = await paced(broker, Path(tmp) / "paced", paced_per_s, paced_s)
            cpu0 = time.process_time()
            durable, per_commit = await throughput(broker, Path(tmp) / "tput", events)
            cpu1 = time.process_time()
            drained, drained_rows, in_order = await backlog(broker, Path(tmp) / "backlog", events)
            cpu2 = time.process_time()
        for p in (50, 99):
            add(f"raw publish->receive p{p} (us)", percentile(base, p))
            add(f"lock-out->backend p{p} (us)", percentile(device, p))
            add(f"sqlite commit, paused as the samples, p{p} (us)", percentile(fsync, p))
            add(f"sqlite commit, back to back, p{p} (us)", percentile(hot, p))
            add(f"ratio lock-out/raw p{p}", percentile(device, p) / percentile(base, p))
            # Nothing is published before its fsync: the limit is a publish plus a commit (as
            # the lock-out finds it, after the same pause; and at its fastest, back to back).
            limit = percentile(base, p) + percentile(fsync, p)
            add(f"ratio lock-out/(raw+commit) p{p}", percentile(device, p) / limit)
            fastest = percentile(base, p) + percentile(hot, p)
            add(f"ratio lock-out/(raw+back-to-back commit) p{p}", percentile(device, p) / fastest)
            add(f"paced {paced_per_s} ev/s: delivery lag p{p} (ms)", percentile(lags, p))
        add(f"paced {paced_per_s} ev/s: delivered (ev/s)", rate)
        add("raw QoS1 publish rate (msg/s)", raw)
        add("durable events journaled+received (ev/s)", durable)
        add("steps per commit", per_commit)
        add("backlog drain (ev/s)", drained)
        add("ratio durable/raw rate", durable / raw)
        add("ratio drain/raw rate", drained / raw)
        # The daemon's process (the bench's reading of the subscriber's lines included).
        add("daemon CPU per durable event (us)", (cpu1 - cpu0) / events * 1e6)
        add("daemon CPU per drained event (us)", (cpu2 - cpu1) / drained_rows * 1e6)
        print(
            f"run {run + 1}: lock-out p50 {percentile(device, 50):.0f} us p99 "
            f"{percentile(device, 99):.0f} us (raw {percentile(base, 50):.0f}/"
            f"{percentile(base, 99):.0f}); durable {durable:.0f} ev/s ({per_commit:.0f} steps per "
            f"commit); drain {drained:.0f} ev/s ({drained_rows} rows, in order: {in_order}); "
            f"raw rate {raw:.0f} msg/s",
            flush=True,
        )
        if not in_order:
            raise SystemExit("the backlog arrived out of order")
    print(
        f"\n{repeat} runs, {samples} latency samples and {events} events each, gpio: {gpio}, "
        f"load average {_load()}"
    )
    for name, values in rows.items():
        print(f"{name:<44} {spread(values, '7.2f')}")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--paced-per-s", type=int, default=4_000)
    parser.add_argument("--paced-s", type=float, default=5.0)
    parser.add_argument(
        "--gpio",
        choices=("kernel", "mock"),
        default="kernel",
        help="kernel: the libgpiod backend reads the edge from its fd (default); mock: the mock "
        "backend called on the loop",
    )
    args = parser.parse_args()
    logs.configure("ERROR")
    asyncio.run(
        main(args.repeat, args.samples, args.events, args.paced_per_s, args.paced_s, args.gpio)
    )

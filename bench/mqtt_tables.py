"""N table daemons on one broker: what a backend sees, and what each daemon costs.

For each N, one private Mosquitto, one independent subscriber process (bench/mqtt_subscriber.py,
acknowledging as backend `pgs`) and N daemon processes (bench/table_process.py: simulated
shuffler on a pty, mock GPIO, one round a second). After a warm-up, the measurement window is
cut into `--windows` parts; in each, the backend-side latency of every event (receive time -
its journal `ts`, which has millisecond resolution) is taken against a raw aiomqtt
publish -> receive through the same broker and subscriber at the same moment (QoS 1, one
sample every 20 ms). Ratios are reported min/median/max over the parts; RSS and CPU per daemon
process over the whole window.

On a 2-core machine the daemons and their simulators compete for the same cores: the run says
how many tables started and whether every one kept its round a second.

Run: .venv/bin/python bench/mqtt_tables.py [--tables 1,10,50,100,200] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiomqtt
from figures import percentile
from mqtt_delivery import Subscriber
from tablectl.simulators.broker import PrivateBroker

from tablectl.mqtt.client import SOCKET_OPTIONS
from tablectl.util import logs

HERE = Path(__file__).resolve().parent
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def start_tables(
    n: int, port: int, data: Path, batch: int = 10
) -> list[asyncio.subprocess.Process]:
    procs: list[asyncio.subprocess.Process] = []
    for first in range(0, n, batch):
        started = []
        for i in range(first, min(n, first + batch)):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(HERE / "table_process.py"),
                "--port",
                str(port),
                "--table",
                f"t{i:03d}",
                "--data-dir",
                str(data / f"t{i:03d}"),
                stdout=asyncio.subprocess.PIPE,
            )
            started.append(proc)
        for proc in started:
            assert proc.stdout is not None
            async with asyncio.timeout(120):
                line = await proc.stdout.readline()
            if line.strip() != b"ready":
                raise RuntimeError(f"a table did not start: {line!r}")
        procs += started
    return procs


async def raw_sampler(broker: PrivateBroker, stop: asyncio.Event) -> None:
    async with aiomqtt.Client(broker.host, broker.port, socket_options=SOCKET_OPTIONS) as client:
        seq = 0
        while not stop.is_set():
            seq += 1
            body = json.dumps({"t0": time.time_ns(), "seq": seq})
            await client.publish("bench/raw/latency", body, qos=1)
            await asyncio.sleep(0.02)


async def one_n(n: int, seconds: float, warmup: float, windows: int) -> dict[str, object]:
    with PrivateBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "mqtt_subscriber.py"),
            "--port",
            str(broker.port),
            "--topic",
            "tablectl/v1/+/+/evt",
            "--topic",
            "bench/raw/latency",
            "--ack",
            "pgs",
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert (await proc.stdout.readline()).strip() == b"ready"
        sub = Subscriber(proc)
        reader = asyncio.create_task(sub.read())
        t_start = time.monotonic()
        tables = await start_tables(n, broker.port, Path(tmp))
        startup_s = time.monotonic() - t_start
        stop = asyncio.Event()
        sampler = asyncio.create_task(raw_sampler(broker, stop))
        await asyncio.sleep(warmup)
        ticks0 = {p.pid: cpu_ticks(p.pid) for p in tables}
        begin_ns = time.time_ns()
        await asyncio.sleep(seconds)
        end_ns = time.time_ns()
        cpu = [(cpu_ticks(p.pid) - ticks0[p.pid]) / TICKS / seconds * 100 for p in tables]
        rss = [rss_mib(p.pid) for p in tables]
        stop.set()
        await sampler
        for p in tables:
            p.terminate()
        hung = 0
        for p in tables:
            try:
                async with asyncio.timeout(15):
                    await p.wait()
            except TimeoutError:
                hung += 1  # reported: a daemon that does not stop on SIGTERM is a bug
                p.kill()
                await p.wait()
        proc.terminate()
        await proc.wait()
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader

    span = (end_ns - begin_ns) / windows
    parts = []
    for w in range(windows):
        lo, hi = begin_ns + w * span, begin_ns + (w + 1) * span
        lines = [r for r in sub.lines if lo <= r.at_ns < hi]
        evt = [(r.at_ns - r.t0) / 1e6 for r in lines if r.topic.endswith("/evt")]
        raw = [(r.at_ns - r.t0) / 1e6 for r in lines if r.topic == "bench/raw/latency"]
        if evt and raw:
            parts.append((evt, raw))
    rounds = sum(1 for r in sub.lines if begin_ns <= r.at_ns < end_ns and r.type == "round.settled")

    def ratio(p: float) -> list[float]:
        return [percentile(e, p) / max(percentile(r, p), 1e-3) for e, r in parts]

    all_evt = [x for e, _ in parts for x in e]
    all_raw = [x for _, r in parts for x in r]
    if not parts:
        window = [r for r in sub.lines if begin_ns <= r.at_ns < end_ns]
        return {
            "tables": n,
            "startup_s": round(startup_s, 1),
            "failed": "no window had both an event and a raw sample: the machine is saturated",
            "events_received": sum(1 for r in window if r.topic.endswith("/evt")),
            "raw_samples_received": sum(1 for r in window if r.topic == "bench/raw/latency"),
            "rounds_settled": rounds,
            "rss_mib_median_max": [round(statistics.median(rss), 1), round(max(rss), 1)],
            "cpu_pct_median_max": [round(statistics.median(cpu), 1), round(max(cpu), 1)],
            "did_not_stop_on_sigterm": hung,
        }
    return {
        "tables": n,
        "startup_s": round(startup_s, 1),
        "rounds_per_table_per_s": round(rounds / n / seconds, 2),
        "events_per_s": round(len(all_evt) / seconds),
        "backend_p50_ms": round(percentile(all_evt, 50), 2),
        "backend_p99_ms": round(percentile(all_evt, 99), 2),
        "raw_p50_ms": round(percentile(all_raw, 50), 2),
        "raw_p99_ms": round(percentile(all_raw, 99), 2),
        "ratio_p50": [round(f(ratio(50)), 2) for f in (min, statistics.median, max)],
        "ratio_p99": [round(f(ratio(99)), 2) for f in (min, statistics.median, max)],
        "rss_mib_median_max": [round(statistics.median(rss), 1), round(max(rss), 1)],
        "cpu_pct_median_max": [round(statistics.median(cpu), 1), round(max(cpu), 1)],
        "did_not_stop_on_sigterm": hung,
    }


async def main(counts: list[int], seconds: float, warmup: float, windows: int) -> None:
    for n in counts:
        try:
            result = await one_n(n, seconds, warmup, windows)
        except (RuntimeError, TimeoutError, OSError) as exc:
            print(json.dumps({"tables": n, "failed": str(exc)}), flush=True)
            break
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", default="1,10,50,100,200")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--windows", type=int, default=3)
    args = parser.parse_args()
    logs.configure("ERROR")
    counts = [int(x) for x in args.tables.split(",")]
    asyncio.run(main(counts, args.seconds, args.warmup, args.windows))

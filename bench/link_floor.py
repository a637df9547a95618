"""A floor of light tables against link controllers and PostgreSQL, beside raw baselines.

Each run starts its own PostgreSQL (fsync on, as production) and Mosquitto, and measures, in
the same run:

- baselines: a raw PostgreSQL single-row UPDATE committed per statement (commits a second,
  one connection), a raw MQTT publish -> receive (one subscriber), and a raw fan-out of one
  message to N subscribers in this process (the floor's own clients, side by side);
- throughput: `--rows` contributions journaled at once by 50 light tables, from the first
  send until every table has its acknowledgement (so every one committed): applied a second,
  and the ratio to the raw single-row commit rate (what batching buys);
- hit -> JACKPOT PENDING: for N = 50, 200, 500 tables, a table claims; the time until each
  of the N tables receives a state broadcast listing that claim as pending; p50/p99 over all
  tables and `--hits` hits, beside the raw fan-out to N (issue 31's ratio) and beside the
  claim's raw path (raw publish -> receive + one raw commit + the raw fan-out to N: the hops
  a claim cannot skip, since a claim is committed before any table hears of it); also the
  time until the first table hears it (the controller's own way, with one hop), and the
  floor's fan-out: a state of the same size published straight to N light tables, heard
  and parsed as in the hits (the raw fan-out's one-number payload to aiomqtt clients leaves
  out what the receivers do; the ratio to the floor's fan-out is what the controller adds);
- the controller's CPU (share of one core over the phase) and RSS.

Controllers are `tablectl link run` processes (`--controllers`, default 1). `--ledger cluster`
puts the ledger on a Patroni cluster (simulators/patroni.py: three PostgreSQL nodes,
synchronous_mode_strict, fsync on) instead of one PostgreSQL; the raw commit baseline is then
a synchronous commit too. Min / median / max over `--runs` runs (at least 3).

Run: .venv/bin/python bench/link_floor.py [--runs 3] [--tables 50,200,500] [--hits 15]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiomqtt
import psycopg
from figures import percentile
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.floor import Floor, LightTable
from tablectl.simulators.patroni import PatroniCluster
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.link import ledger
from tablectl.link.config import load_link_config
from tablectl.link.contract import LinkState, state_topic
from tablectl.mqtt.client import SOCKET_OPTIONS
from tablectl.util import logs

TICKS = os.sysconf("SC_CLK_TCK")
THROUGHPUT_TABLES = 50


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Usage:
    """A controller process's CPU over a phase, and its RSS at the end."""

    pid: int
    started_cpu: float = 0.0
    started_at: float = 0.0
    cpu_share: float = 0.0
    rss: float = 0.0

    def __enter__(self) -> Usage:
        self.started_cpu, self.started_at = cpu_s(self.pid), time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        elapsed = time.monotonic() - self.started_at
        self.cpu_share = (cpu_s(self.pid) - self.started_cpu) / elapsed
        self.rss = rss_mib(self.pid)


def link_toml(conninfo: str, broker: PrivateBroker, links: list[tuple[str, int]]) -> str:
    """One config: a link per (link id, tables), each link's tables at a site of its own."""
    text = (
        f'[controller]\nbatch_max_rows = 5000\n[database]\nconninfo = "{conninfo}"\n'
        f'[mqtt]\nhost = "{broker.host}"\nport = {broker.port}\n[sign]\nenabled = false\n'
    )
    for link_id, tables in links:
        width = max(3, len(str(tables)))
        text += (
            f'[[link]]\nlink_id = "{link_id}"\ngame = "three-card-poker"\npaytable = "A"\n'
            'wager = "5.00"\nhit_policy = "ordered"\nbroadcast_interval_ms = 500\n'
            f'tables = ["{link_id}/t{{{1:0{width}d}..{tables:0{width}d}}}"]\n'
            '[[link.level]]\nrate_of_progression_percent = "14"\n'
            'initial_amount = "1000.00"\nreset_amount = "1000.00"\n'
        )
    return text


def spawn(tablectl: Path, config: Path, i: int, notify: Path) -> subprocess.Popen[bytes]:
    own = config.with_name(f"c{i}-{config.name}")
    text = config.read_text()
    own.write_text(text.replace("[controller]\n", f'[controller]\ncontroller_id = "bench-{i}"\n'))
    with own.with_suffix(".log").open("ab") as log:  # what a controller said, for a failed run
        return subprocess.Popen(
            [str(tablectl), "link", "run", "--config", str(own)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NOTIFY_SOCKET": str(notify)},
        )


@contextlib.asynccontextmanager
async def controllers(config: Path, count: int) -> AsyncIterator[list[subprocess.Popen[bytes]]]:
    """`tablectl link run` processes, each once it has said READY=1 (as to systemd)."""
    tablectl = Path(sys.executable).with_name("tablectl")
    procs = []
    try:
        for i in range(count):
            notify_path = config.with_name(f"c{i}.notify")
            notify_path.unlink(missing_ok=True)
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
                notify.bind(str(notify_path))
                notify.setblocking(False)
                procs.append(spawn(tablectl, config, i, notify_path))
                try:
                    async with asyncio.timeout(120):
                        ready = b""
                        while not ready.startswith(b"READY=1"):
                            ready = await asyncio.get_running_loop().sock_recv(notify, 4096)
                except TimeoutError:
                    log = config.with_name(f"c{i}-{config.name}").with_suffix(".log")
                    raise RuntimeError(f"controller {i} never ready: {log}") from None
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def prepare(conninfo: str, config: Path) -> None:
    conn = await ledger.connect(conninfo, application_name="bench")
    try:
        await ledger.migrate(conn, by="bench")
        for definition in load_link_config(config).definitions():
            await ledger.apply_definition(conn, definition, by="bench")
            await ledger.set_operating(conn, definition.link_id, True, by="bench")
    finally:
        await conn.close()


# --- baselines ----------------------------------------------------------------------------------


async def raw_commits(conninfo: str, seconds: float = 2.0) -> tuple[float, list[float]]:
    """One connection committing a one-row UPDATE per statement, as fast as it can: commits a
    second, and each commit's time (ms)."""
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS bench_row (id int PRIMARY KEY, v bigint)")
        await conn.execute("INSERT INTO bench_row VALUES (1, 0) ON CONFLICT DO NOTHING")
        each: list[float] = []
        started = time.monotonic()
        deadline = started + seconds
        while (before := time.monotonic()) < deadline:
            await conn.execute("UPDATE bench_row SET v = v + 1 WHERE id = 1")
            each.append((time.monotonic() - before) * 1000)
        return len(each) / (time.monotonic() - started), each
    finally:
        await conn.close()


async def raw_fan_out(broker: PrivateBroker, subscribers: int, samples: int) -> list[float]:
    """Publish -> receive by each of N raw clients in this process (ms, every receiver)."""
    topic = f"bench/fanout/{subscribers}"
    received: list[float] = []
    sent_at: dict[int, float] = {}
    arrived = asyncio.Event()
    counts: dict[int, int] = {}

    async def listen(client: aiomqtt.Client) -> None:
        async for message in client.messages:
            n = int(bytes(message.payload))
            received.append((time.monotonic() - sent_at[n]) * 1000)
            counts[n] = counts.get(n, 0) + 1
            if counts[n] == subscribers:
                arrived.set()

    async with contextlib.AsyncExitStack() as stack:
        clients = []
        for i in range(subscribers):
            client = aiomqtt.Client(
                broker.host, broker.port, identifier=f"raw-{subscribers}-{i}",
                socket_options=SOCKET_OPTIONS,
            )  # fmt: skip
            await stack.enter_async_context(client)
            await client.subscribe(topic, qos=1)
            clients.append(client)
        publisher = await stack.enter_async_context(
            aiomqtt.Client(broker.host, broker.port, socket_options=SOCKET_OPTIONS)
        )
        async with asyncio.TaskGroup() as tasks:
            listeners = [tasks.create_task(listen(c)) for c in clients]
            for n in range(samples):
                arrived.clear()
                sent_at[n] = time.monotonic()
                await publisher.publish(topic, str(n).encode(), qos=1)
                async with asyncio.timeout(30):
                    await arrived.wait()
                await asyncio.sleep(0.05)
            for listener in listeners:
                listener.cancel()
    return received


async def floor_fan_out(
    broker: PrivateBroker, tables: int, samples: int, state: LinkState
) -> tuple[list[float], list[float]]:
    """The fan-out as the floor's light tables hear a state broadcast, with no controller and
    no ledger: a state of the same size as the hits' (a copy of one they heard, each sample
    naming a claim of its own as pending) published straight to N `LightTable`s, the same
    clients parsing it the same way (pydantic) and calling the same `on_state` as in `hits`.
    What the tables' own side costs, so the ratio to it is what the controller adds. Returns
    every receiver's time (ms) and each sample's first receiver's."""
    link_id = f"fanout{tables}"
    sent_at: dict[str, float] = {}
    left: dict[str, set[str]] = {}
    received: list[float] = []
    first: list[float] = []
    arrived = asyncio.Event()

    def on_state(table: LightTable, heard: LinkState, at: float) -> None:
        for pending in heard.pending:
            waiting = left.get(pending.claim_id)
            if waiting is not None and table.ref in waiting:
                if len(waiting) == tables:
                    first.append((at - sent_at[pending.claim_id]) * 1000)
                waiting.discard(table.ref)
                received.append((at - sent_at[pending.claim_id]) * 1000)
                if not waiting:
                    arrived.set()

    floor = Floor(broker.host, broker.port, link_id, tables, site=link_id, on_state=on_state)
    async with asyncio.TaskGroup() as tasks:
        running = tasks.create_task(floor.run())  # senders idle, as in hits
        async with asyncio.timeout(300):
            for table in floor.tables:
                await table.connected.wait()
        await asyncio.sleep(0.5)  # the last subscriptions granted
        async with aiomqtt.Client(
            broker.host, broker.port, socket_options=SOCKET_OPTIONS
        ) as publisher:
            for n in range(samples):
                claim_id = f"fan-{n}"
                body = (
                    state.model_copy(
                        update={
                            "link_id": link_id,
                            "pending": [
                                p.model_copy(update={"claim_id": claim_id}) for p in state.pending
                            ],
                        }
                    )
                    .model_dump_json()
                    .encode()
                )
                arrived.clear()
                left[claim_id] = {t.ref for t in floor.tables}
                sent_at[claim_id] = time.monotonic()
                await publisher.publish(state_topic(link_id), body, qos=1)
                async with asyncio.timeout(30):
                    await arrived.wait()
                await asyncio.sleep(0.2)
        running.cancel()
    return received, first


# --- the floor ----------------------------------------------------------------------------------


async def throughput(broker: PrivateBroker, rows: int, pid: int) -> tuple[float, Usage]:
    """`rows` contributions journaled at once by 50 tables: applied (acknowledged) a second."""
    floor = Floor(broker.host, broker.port, "throughput", THROUGHPUT_TABLES, site="throughput")
    async with asyncio.TaskGroup() as tasks:
        running = tasks.create_task(floor.run())
        await floor.wait_ready(120)
        rng = random.Random(1)
        with Usage(pid) as usage:
            started = time.monotonic()
            journaled, round_id = 0, 0
            while journaled < rows:
                round_id += 1
                for table in floor.tables:
                    journaled += len(table.contribute(round_id, sorted(rng.sample(range(1, 8), 5))))
            await floor.wait_acked(600)
            elapsed = time.monotonic() - started
        running.cancel()
    return journaled / elapsed, usage


async def settled(conninfo: str, link_id: str, tables: int) -> None:
    """Until the ledger has every table of the link online (its status events applied)."""
    conn = await ledger.connect(conninfo, application_name="bench-settle")
    try:
        async with asyncio.timeout(120):
            while True:
                cur = await conn.execute(
                    "SELECT count(*) FROM link_table WHERE link_id = %s AND online", (link_id,)
                )
                if (await cur.fetchone() or (0,))[0] == tables:
                    return
                await asyncio.sleep(0.1)
    finally:
        await conn.close()


@dataclass
class Hits:
    latencies: list[float]  # ms, claim -> each table hears it pending
    first: list[float]  # ms, claim -> the first table hears it pending (the controller's way)
    usage: Usage
    state: LinkState | None  # a state broadcast naming a claim pending, as the tables heard it


async def hits(broker: PrivateBroker, conninfo: str, tables: int, count: int, pid: int) -> Hits:
    """Claims one after another: claim -> every table hears JACKPOT PENDING naming it."""
    waiting: dict[str, tuple[float, set[str]]] = {}  # claim id -> (claimed at, tables left)
    done = asyncio.Event()
    latencies: list[float] = []
    first: list[float] = []
    heard: list[LinkState] = []

    def on_state(table: LightTable, state: LinkState, at: float) -> None:
        for pending in state.pending:
            entry = waiting.get(pending.claim_id)
            if entry is not None and table.ref in entry[1]:
                if len(entry[1]) == tables:
                    first.append((at - entry[0]) * 1000)
                    heard[:] = [state]
                entry[1].discard(table.ref)
                latencies.append((at - entry[0]) * 1000)
                if not entry[1]:
                    done.set()

    link_id = f"hits{tables}"
    floor = Floor(broker.host, broker.port, link_id, tables, site=link_id, on_state=on_state)
    rng = random.Random(tables)
    async with asyncio.TaskGroup() as tasks:
        running = tasks.create_task(floor.run())
        await floor.wait_ready(300)
        await settled(conninfo, link_id, tables)
        with Usage(pid) as usage:
            for n in range(count):
                winner = rng.choice(floor.tables)
                done.clear()
                claimed = time.monotonic()
                claim_id = winner.claim(n + 1, rng.randint(1, 7))
                waiting[claim_id] = (claimed, {t.ref for t in floor.tables})
                async with asyncio.timeout(60):
                    await done.wait()
                winner.validate(claim_id)
                await floor.wait_acked(60)
                await asyncio.sleep(0.2)
        running.cancel()
    return Hits(latencies, first, usage, heard[0] if heard else None)


@contextlib.contextmanager
def ledger_server(kind: str) -> Iterator[PrivatePostgres | PatroniCluster]:
    if kind == "cluster":
        with PatroniCluster(namespaces=False, fsync=True) as cluster:
            yield cluster
    else:
        with PrivatePostgres(fsync=True) as pg:
            yield pg


async def one_run(args: argparse.Namespace, n_run: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with ledger_server(args.ledger) as pg, PrivateBroker() as broker:
        work = Path(tempfile.mkdtemp(prefix="tablectl-bench-link-"))
        out["raw_commit_per_s"], commits = await raw_commits(pg.create_database("baseline"))
        out["raw_commit_p50_ms"] = percentile(commits, 50)
        single = await raw_fan_out(broker, 1, 200)
        out["raw_mqtt_p50_ms"], out["raw_mqtt_p99_ms"] = (
            percentile(single, 50),
            percentile(single, 99),
        )

        conninfo = pg.create_database("link")
        links = [("throughput", THROUGHPUT_TABLES)] + [(f"hits{n}", n) for n in args.tables]
        config = work / "link.toml"
        config.write_text(link_toml(conninfo, broker, links))
        await prepare(conninfo, config)
        async with controllers(config, args.controllers) as procs:
            pid = procs[0].pid
            rate, usage = await throughput(broker, args.rows, pid)
            out["applied_per_s"] = rate
            out["applied_ratio_to_raw_commit"] = rate / out["raw_commit_per_s"]
            out["throughput_controller_cpu_pct"] = usage.cpu_share * 100
            out["throughput_controller_rss_mib"] = usage.rss
            for n in args.tables:
                found = await hits(broker, conninfo, n, args.hits, pid)
                latencies, usage = found.latencies, found.usage
                fan = await raw_fan_out(broker, n, 10)
                out[f"hit{n}_p50_ms"] = percentile(latencies, 50)
                out[f"hit{n}_p99_ms"] = percentile(latencies, 99)
                # The controller's own way: claim -> the first table hears it pending.
                out[f"hit{n}_first_p50_ms"] = percentile(found.first, 50)
                out[f"raw_fanout{n}_p50_ms"] = percentile(fan, 50)
                out[f"raw_fanout{n}_p99_ms"] = percentile(fan, 99)
                # Issue 31's goal: at most 1.3x the raw fan-out of the same run.
                out[f"hit{n}_p50_ratio_to_raw"] = (
                    out[f"hit{n}_p50_ms"] / out[f"raw_fanout{n}_p50_ms"]
                )
                out[f"hit{n}_p99_ratio_to_raw"] = (
                    out[f"hit{n}_p99_ms"] / out[f"raw_fanout{n}_p99_ms"]
                )
                # A claim's least possible way, each hop raw: the claim's publish -> receive,
                # one commit of the ledger (replicated on a cluster), the fan-out to N.
                out[f"raw_path{n}_p50_ms"] = (
                    out["raw_mqtt_p50_ms"] + out["raw_commit_p50_ms"] + out[f"raw_fanout{n}_p50_ms"]
                )
                out[f"hit{n}_p50_ratio_to_raw_path"] = (
                    out[f"hit{n}_p50_ms"] / out[f"raw_path{n}_p50_ms"]
                )
                if found.state is not None:
                    # The same fan-out as the floor hears it: the state's size, the light
                    # tables' client and parse (what raw_fan_out's aiomqtt clients and
                    # one-number payload leave out).
                    floor_fan, floor_first = await floor_fan_out(broker, n, 10, found.state)
                    out[f"floor_fanout{n}_p50_ms"] = percentile(floor_fan, 50)
                    out[f"floor_fanout{n}_p99_ms"] = percentile(floor_fan, 99)
                    out[f"floor_fanout{n}_first_p50_ms"] = percentile(floor_first, 50)
                    out[f"hit{n}_p50_ratio_to_floor_fanout"] = (
                        out[f"hit{n}_p50_ms"] / out[f"floor_fanout{n}_p50_ms"]
                    )
                    out[f"hit{n}_p99_ratio_to_floor_fanout"] = (
                        out[f"hit{n}_p99_ms"] / out[f"floor_fanout{n}_p99_ms"]
                    )
                out[f"hit{n}_controller_cpu_pct"] = usage.cpu_share * 100
                out[f"hit{n}_controller_rss_mib"] = usage.rss
        print(f"run {n_run + 1}: " + ", ".join(f"{k}={v:.2f}" for k, v in out.items()), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tables", default="50,200,500")
    parser.add_argument("--hits", type=int, default=15)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--controllers", type=int, default=1)
    parser.add_argument("--ledger", choices=("single", "cluster"), default="single")
    args = parser.parse_args()
    args.tables = [int(n) for n in args.tables.split(",")]
    logs.configure("WARNING", json=False)
    results = [asyncio.run(one_run(args, i)) for i in range(max(1, args.runs))]
    print(
        f"\nmin / median / max over {len(results)} runs ({args.controllers} controller(s), "
        f"ledger: {args.ledger}):"
    )
    for key in results[0]:
        values = [r[key] for r in results]
        print(
            f"  {key:34} {min(values):10.2f} {statistics.median(values):10.2f} {max(values):10.2f}"
        )


if __name__ == "__main__":
    main()

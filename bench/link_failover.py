"""Failovers of the replicated link ledger under a floor's load, beside a single PostgreSQL.

One run starts its own Patroni cluster (simulators/patroni.py: three etcd members, three
PostgreSQL nodes, fsync on, on the shipped configs), a single PostgreSQL (fsync on), a
Mosquitto, and `tablectl link run` controllers, and measures in the same run:

- failover, for each fault kind (`--kinds`; default those that move the primary:
  kill-postmaster, kill-patroni, isolate-primary where network namespaces are allowed),
  `--repeats` times, while 20 light tables play: the time from losing the primary to the
  first contribution committed on the new one (p50, max); the rows the tables saw
  acknowledged, and those of them not in the surviving ledger (lost: must be 0);
- the price of synchronous replication: `--rows` contributions journaled at once by 50 light
  tables, applied (acknowledged) a second on the cluster and on the single PostgreSQL, each
  `--throughput-runs` times, alternating; the cluster's rate as a ratio to the single one's.

Run: .venv/bin/python bench/link_failover.py [--repeats 10] [--kinds ...] [--rows 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from figures import percentile, spread
from link_floor import controllers, link_toml, prepare, throughput
from tablectl.simulators import patroni
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.floor import Floor
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.link import ledger
from tablectl.util import logs

FLOOR_TABLES = 20
HANG_GUARD_S = 180.0
# What the controllers are told (config/link.toml's [database]): short, as on a floor that
# wants its progressives back soon.
DATABASE = (
    "[database]\nconnect_timeout_s = 2\ncommit_timeout_ms = 4000\n"
    "require_synchronous_standby = true\n"
)


@dataclass
class Kind:
    name: str
    failover_s: list[float] = field(default_factory=list)
    acknowledged: int = 0
    lost: int = 0


def config_text(conninfo: str, broker: PrivateBroker, links: list[tuple[str, int]]) -> str:
    return link_toml(conninfo, broker, links).replace("[database]\n", DATABASE)


async def play(floor: Floor, stop: asyncio.Event) -> None:
    """A round every 0.3 s at each table on the link (0 to 3 seats wagering)."""
    rng, round_id = random.Random(7), 0
    while not stop.is_set():
        round_id += 1
        for table in floor.tables:
            table.contribute(round_id, sorted(rng.sample(range(1, 6), rng.randint(0, 3))))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.3):
                await stop.wait()


async def first_commit_after(
    cluster: patroni.PatroniCluster, dbname: str, moment: datetime
) -> float:
    """Seconds from `moment` to the first contribution committed after it, asked of the node
    the cluster names leader (a primary whose Patroni died still says it takes writes)."""
    async with asyncio.timeout(HANG_GUARD_S):
        while True:
            leader = await asyncio.to_thread(cluster.leader)
            with contextlib.suppress(psycopg.Error, OSError):
                if leader is None:
                    raise OSError("no leader yet")
                conninfo = cluster.node_conninfo(leader, dbname)
                conn = await ledger.connect(conninfo, application_name="bench", connect_timeout_s=2)
                try:
                    cur = await conn.execute(
                        "SELECT min(at) FROM link_event WHERE kind = 'contribution' AND at > %s",
                        (moment,),
                    )
                    row = await cur.fetchone()
                finally:
                    await conn.close()
                if row is not None and row[0] is not None:
                    return float((row[0] - moment).total_seconds())
            await asyncio.sleep(0.1)


async def lost_rows(cluster: patroni.PatroniCluster, dbname: str, floor: Floor) -> tuple[int, int]:
    """(rows the tables saw acknowledged, those not in the ledger once), read on the leader
    of a healthy cluster: an old primary plugged back may still take read-write sessions
    with none of what its successor committed."""
    await asyncio.to_thread(cluster.heal)
    await asyncio.to_thread(cluster.wait, cluster.healthy, "the cluster healthy", 300)
    leader = await asyncio.to_thread(cluster.leader)
    assert leader is not None
    # What each table has seen acknowledged, taken before the ledger is read: the floor plays
    # on, and a row acknowledged after the read is not missing from it.
    acked = {table.ref: table.acked for table in floor.tables}
    conn = await ledger.connect(cluster.node_conninfo(leader, dbname), application_name="bench")
    try:
        cur = await conn.execute(
            "SELECT table_ref, seq FROM link_event WHERE seq IS NOT NULL AND kind = 'contribution'"
        )
        applied: dict[tuple[str, int], int] = {}
        for key in await cur.fetchall():
            applied[key] = applied.get(key, 0) + 1
    finally:
        await conn.close()
    acknowledged = lost = 0
    for table in floor.tables:
        for row in table.outbox[: acked[table.ref]]:
            acknowledged += 1
            if row.type == "link.contribution" and applied.get((table.ref, row.seq)) != 1:
                lost += 1
                print(f"    LOST: {table.ref} seq {row.seq} (acked through {acked[table.ref]})")
    return acknowledged, lost


@contextlib.asynccontextmanager
async def floor_playing(broker: PrivateBroker) -> AsyncIterator[Floor]:
    floor = Floor(broker.host, broker.port, "bank", FLOOR_TABLES, site="bank")
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as tasks:
        running = tasks.create_task(floor.run())
        await floor.wait_ready(HANG_GUARD_S)
        player = tasks.create_task(play(floor, stop))
        try:
            yield floor
        finally:
            stop.set()
            await player
            await floor.wait_acked(HANG_GUARD_S)
            running.cancel()


async def failovers(
    cluster: patroni.PatroniCluster, broker: PrivateBroker, dbname: str, kinds: list[Kind], n: int
) -> None:
    async with floor_playing(broker) as floor:
        for kind in kinds:
            fault = patroni.FAULTS[kind.name]
            for i in range(n):
                await asyncio.to_thread(cluster.heal)
                await asyncio.to_thread(cluster.wait, cluster.healthy, "the cluster healthy", 300)
                await asyncio.sleep(2)  # the floor plays on the healthy cluster a while
                primary = cluster.leader()
                assert primary is not None
                lost_at = datetime.now(UTC)
                promoted = asyncio.create_task(asyncio.to_thread(cluster.new_leader_seen, primary))
                broken = await asyncio.to_thread(fault.brake, cluster, primary)
                try:
                    # The first contribution committed on the new primary: after the cluster
                    # names it (a commit in flight as the old one went may still land there,
                    # and a primary whose Patroni died goes on committing until then).
                    new_at = await promoted
                    after = await first_commit_after(cluster, dbname, new_at)
                    kind.failover_s.append((new_at - lost_at).total_seconds() + after)
                finally:
                    await asyncio.to_thread(fault.mend, cluster, broken)
                print(f"  {kind.name} {i + 1}: {kind.failover_s[-1]:.2f} s", flush=True)
            await floor.wait_acked(HANG_GUARD_S)
            before = (sum(k.acknowledged for k in kinds), sum(k.lost for k in kinds))
            acknowledged, lost = await lost_rows(cluster, dbname, floor)
            kind.acknowledged, kind.lost = acknowledged - before[0], lost - before[1]
            print(
                f"  {kind.name}: {kind.acknowledged} rows acknowledged, {kind.lost} lost",
                flush=True,
            )


async def main_async(args: argparse.Namespace) -> None:
    namespaces = patroni.namespaces_unavailable() is None
    names = args.kinds.split(",") if args.kinds else None
    if names is None:
        names = ["kill-postmaster", "kill-patroni"] + (["isolate-primary"] if namespaces else [])
    kinds = [Kind(name) for name in names]
    work = Path(tempfile.mkdtemp(prefix="tablectl-bench-failover-"))
    rates: dict[str, list[float]] = {"cluster": [], "single": []}
    with (
        patroni.PatroniCluster(namespaces=namespaces, fsync=True) as cluster,
        PrivatePostgres(fsync=True) as single,
        PrivateBroker() as broker,
    ):
        servers = {"cluster": cluster.create_database, "single": single.create_database}
        for run in range(args.throughput_runs):
            for where, create in servers.items():
                # A ledger of its own each time: the light tables start at seq 1 again.
                conninfo = await asyncio.to_thread(create, f"throughput_{run}")
                config = work / f"{where}-{run}.toml"
                config.write_text(config_text(conninfo, broker, [("throughput", 50)]))
                await prepare(conninfo, config)
                async with controllers(config, 1) as procs:
                    rate, _ = await throughput(broker, args.rows, procs[0].pid)
                rates[where].append(rate)
                print(f"throughput {run + 1} {where}: {rate:.0f} applied/s", flush=True)
        conninfo = await asyncio.to_thread(cluster.create_database, "failover")
        dbname = "failover"
        config = work / "failover.toml"
        config.write_text(config_text(conninfo, broker, [("bank", FLOOR_TABLES)]))
        await prepare(conninfo, config)
        async with controllers(config, 2):
            await failovers(cluster, broker, dbname, kinds, args.repeats)
    print(f"\nthe replicated ledger, {args.repeats} failovers of each kind:")
    for kind in kinds:
        print(
            f"  {kind.name:16} lost primary -> first contribution on the new one: "
            f"p50 {percentile(kind.failover_s, 50):5.2f} s, max {max(kind.failover_s):5.2f} s; "
            f"rows acknowledged {kind.acknowledged}, lost {kind.lost}"
        )
    if not args.throughput_runs:
        return
    ratios = [c / s for c, s in zip(rates["cluster"], rates["single"], strict=True)]
    print(f"\ncontributions applied a second, {args.rows} from 50 tables, min / median / max:")
    print(f"  cluster (synchronous standby)  {spread(rates['cluster'], '8.0f')}")
    print(f"  single PostgreSQL              {spread(rates['single'], '8.0f')}")
    print(f"  cluster / single               {spread(ratios, '8.2f')}")
    print(f"  median ratio {statistics.median(ratios):.2f}: the price of synchronous replication")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--kinds", default="", help=f"of {', '.join(patroni.FAULTS)}")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--throughput-runs", type=int, default=3)
    args = parser.parse_args()
    logs.configure("WARNING", json=False)
    started = time.monotonic()
    asyncio.run(main_async(args))
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()

"""The floor survives the loss of any one server: the link ledger on a Patroni cluster (three
PostgreSQL nodes, synchronous_mode_strict) with three etcd members, failed as a floor fails.

One cluster per module (tests/conftest.py's `patroni_cluster`), one fault per test, each
under load from a real table daemon and a floor of light tables (`simulators/floor.py`)
against two `tablectl link run` processes: SIGKILL the primary's postmaster, SIGKILL Patroni
on the primary, stop the etcd leader, cut the primary's cable (its own network namespace,
its veth down) while the controllers write, restart a replica mid-stream. After each, the
checks of docs/linked-progressives.md, "Failover", made from outside the controllers:

- every row any table saw acknowledged is in the surviving ledger, exactly once; every claim
  has one answer there, and it is the answer the table was given;
- `tablectl link verify` passes (also while the floor plays), and the meter is the initial
  amount + the tables' own contributions - awards (+ resets), to the unit;
- no two nodes took writes on one timeline (each node's own word, polled throughout), and
  every node ends with the same ledger;
- a table was LINK DOWN no longer than the failover took plus its `link_timeout_ms`, and
  journaled no contribution while down.

Skipped, with the reason, where Debian's patroni and etcd-server are missing (`make test`
installs them); the cable test also needs root and `ip netns`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import random
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tablectl.simulators import patroni
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.floor import Floor, LightTable
from tablectl.simulators.patroni import PatroniCluster, PatroniNode

from tablectl.core.table import Phase
from tablectl.link import ledger

from .conftest import SimulatedTable
from .link_support import HANG_GUARD_S, ControllerProcess, LinkSetup, prepare, write_config
from .test_link_table import linked_table

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]
REAL_TABLE = "pa-demo-casino/tcp-07"
FLOOR_TABLES = 10
LINK_TIMEOUT_MS = 3000
# What a table's LINK DOWN may last beyond the failover and its timeout: its watch is asked
# every 0.2 s, a controller broadcasts every 0.2 s, and a loaded CI box delays either.
DOWN_SLACK_S = 5.0
LOSING_HANDS = {2: "2d7c9s", 5: "5h9c3d"}  # win nothing on the progressive


@dataclass
class Sample:
    node: str
    primary: bool
    timeline: int | None


@dataclass
class NodeWatch:
    """Each node's own word, asked every 0.25 s on a connection of the watch's own: whether it
    is a primary, and on which timeline. Independent of Patroni and of the controllers."""

    cluster: PatroniCluster
    primaries: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _ask(self, node: PatroniNode, conns: dict[str, psycopg.Connection[Any]]) -> None:
        conn = conns.get(node.name)
        try:
            if conn is None or conn.closed:
                conn = psycopg.connect(
                    self.cluster.node_conninfo(node),
                    autocommit=True,
                    connect_timeout=2,
                    tcp_user_timeout=2000,
                    options="-c statement_timeout=2000",
                )
                conns[node.name] = conn
            row = conn.execute(
                "SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery() THEN NULL"
                " ELSE pg_walfile_name(pg_current_wal_lsn()) END"
            ).fetchone()
        except psycopg.Error:
            if conn is not None:
                conn.close()
            conns.pop(node.name, None)
            return
        if row is not None and not row[0]:
            self.primaries[int(row[1][:8], 16)].add(node.name)
        self.samples += 1

    def _run(self) -> None:
        conns: dict[str, psycopg.Connection[Any]] = {}
        while not self._stop.wait(0.25):
            for node in self.cluster.nodes:
                self._ask(node, conns)
        for conn in conns.values():
            conn.close()

    def __enter__(self) -> NodeWatch:
        self._thread = threading.Thread(target=self._run, name="node-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)


@dataclass
class FloorPlay:
    """The light tables playing: a round every 0.3 s at each table on the link, a claim now
    and then, validated a second later; how long each was off the link, sampled."""

    floor: Floor
    rng: random.Random = field(default_factory=lambda: random.Random(31))
    down_since: dict[str, float] = field(default_factory=dict)
    longest_down_s: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    rounds: int = 0
    claims: list[tuple[LightTable, str]] = field(default_factory=list)

    async def run(self, stop: asyncio.Event) -> None:
        validations: list[tuple[float, LightTable, str]] = []
        next_claim = time.monotonic() + 2
        while not stop.is_set():
            now = time.monotonic()
            self.rounds += 1
            for table in self.floor.tables:
                self._sample(table, now)
                seats = sorted(self.rng.sample(range(1, 6), self.rng.randint(0, 3)))
                table.contribute(self.rounds, seats)
            if now >= next_claim:
                up = [t for t in self.floor.tables if t.link_up(now)]
                if up:
                    winner = self.rng.choice(up)
                    claim_id = winner.claim(self.rounds, 1)
                    self.claims.append((winner, claim_id))
                    validations.append((now + 1, winner, claim_id))
                next_claim = now + 3
            for due in [v for v in validations if v[0] <= now]:
                validations.remove(due)
                due[1].validate(due[2])
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.3):
                    await stop.wait()
        for _, table, claim_id in validations:
            table.validate(claim_id)

    def _sample(self, table: LightTable, now: float) -> None:
        if table.link_up(now):
            since = self.down_since.pop(table.ref, None)
            if since is not None:
                self.longest_down_s[table.ref] = max(self.longest_down_s[table.ref], now - since)
        else:
            self.down_since.setdefault(table.ref, now)


async def play_table(table: SimulatedTable, stop: asyncio.Event) -> None:
    """The real table: rounds with chips on seats 2 and 5, losing hands, until stopped."""
    while not stop.is_set():
        await table.wait_phase(Phase.BETTING, HANG_GUARD_S)
        await table.place_wagers(2, 5)
        await table.lock()
        for seat in LOSING_HANDS:  # a chip refused while LINK DOWN is taken back too
            table.inputs.remove_chip(seat)
        hands = {str(seat): LOSING_HANDS[seat] for seat in table.state.wagers}
        reply = await table.dealer(cmd="settle", hands=hands)
        assert reply["ok"], reply


async def query(conninfo: str, sql: Any, *params: object) -> list[tuple[Any, ...]]:
    conn = await ledger.connect(conninfo, application_name="test-failover", connect_timeout_s=2)
    try:
        cur = await conn.execute(sql, params)
        return list(await cur.fetchall())
    finally:
        await conn.close()


async def first_commit_after(cluster: PatroniCluster, dbname: str, moment: datetime) -> float:
    """Seconds from `moment` to the first contribution the ledger committed after it, asked of
    the node the cluster names leader (a primary whose Patroni died still says it takes
    writes, and holds none of the new primary's)."""
    async with asyncio.timeout(HANG_GUARD_S * 2):
        while True:
            leader = await asyncio.to_thread(cluster.leader)
            with contextlib.suppress(psycopg.Error, OSError):
                if leader is None:
                    raise OSError("no leader yet")
                rows = await query(
                    cluster.node_conninfo(leader, dbname),
                    "SELECT min(at) FROM link_event WHERE kind = 'contribution' AND at > %s",
                    moment,
                )
                if rows and rows[0][0] is not None:
                    return float((rows[0][0] - moment).total_seconds())
            await asyncio.sleep(0.2)


def verify_cli(setup: LinkSetup) -> subprocess.CompletedProcess[str]:
    tablectl = Path(sys.executable).with_name("tablectl")
    return subprocess.run(
        [str(tablectl), "link", "verify", "--config", str(setup.path)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S * 2,
        check=False,
    )


@contextlib.asynccontextmanager
async def running(coroutine: Any, name: str) -> AsyncIterator[asyncio.Task[Any]]:
    task = asyncio.create_task(coroutine, name=name)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


FAULTS = list(patroni.FAULTS.values())


@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_the_floor_survives_the_loss_of_a_server(
    patroni_cluster: PatroniCluster,
    broker: PrivateBroker,
    tmp_path: Path,
    fault: patroni.Fault,
) -> None:
    # A broker of the test's own: the table of the test before left retained acks and states
    # of another ledger under the same names.
    cluster = patroni_cluster
    if fault.needs_namespaces and cluster.switch is None:
        reason = "cutting a node's cable needs its own network namespace (root, `ip netns`)"
        print(f"{fault.name} skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    await asyncio.to_thread(cluster.heal)
    await asyncio.to_thread(cluster.wait, cluster.healthy, "the cluster healthy")
    name = f"failover_{fault.name.replace('-', '_')}"
    conninfo = await asyncio.to_thread(cluster.create_database, name)
    floor = Floor(broker.host, broker.port, "bank", FLOOR_TABLES)
    setup = write_config(
        tmp_path,
        conninfo,
        broker,
        tables=f'{floor.tables_config()}", "{REAL_TABLE}',
        link_timeout_s=LINK_TIMEOUT_MS / 1000,
        broadcast_ms=200,
        database=(
            "connect_timeout_s = 2\ncommit_timeout_ms = 4000\nrequire_synchronous_standby = true\n"
        ),
    )
    await prepare(setup)
    controllers = [ControllerProcess(setup.path, f"c{i}") for i in (1, 2)]
    stop = asyncio.Event()
    play = FloorPlay(floor)
    try:
        for controller in controllers:
            await controller.start()
        async with (
            running(floor.run(), "floor") as floor_task,
            linked_table(broker, tmp_path / "data", timeout_ms=LINK_TIMEOUT_MS) as table,
        ):
            await floor.wait_ready(HANG_GUARD_S)
            await table.daemon.wait_until(lambda s: s.link_down is None, HANG_GUARD_S)
            with NodeWatch(cluster) as watch:
                async with (
                    running(play.run(stop), "floor-play") as floor_play,
                    running(play_table(table, stop), "table-play") as table_play,
                ):
                    await asyncio.gather(
                        *(t.wait_for(functools.partial(_acked_some, t)) for t in floor.tables)
                    )
                    primary = cluster.leader()
                    assert primary is not None
                    lost_at = datetime.now(UTC)
                    promoted = (
                        asyncio.create_task(asyncio.to_thread(cluster.new_leader_seen, primary))
                        if fault.fails_over
                        else None
                    )
                    broken = await asyncio.to_thread(fault.brake, cluster, primary)
                    try:
                        # The failover: until the first contribution committed on the new
                        # primary, once the cluster names one (commits may still land on the
                        # old one before: in flight, or while its dead Patroni's key lasts).
                        since = lost_at if promoted is None else await promoted
                        failover_s = (since - lost_at).total_seconds() + (
                            await first_commit_after(cluster, name, since)
                        )
                    finally:
                        await asyncio.to_thread(fault.mend, cluster, broken)
                    await asyncio.to_thread(cluster.wait, cluster.healthy, "the cluster healthy")
                    # `link verify` while the floor plays: one snapshot, so it passes.
                    live = await asyncio.to_thread(verify_cli, setup)
                    assert live.returncode == 0, live.stdout + live.stderr
                    stop.set()
                    await asyncio.wait_for(floor_play, HANG_GUARD_S)
                    await asyncio.wait_for(table_play, HANG_GUARD_S)
                await floor.wait_acked(HANG_GUARD_S * 2)
                store = table.daemon.store
                assert store is not None
                await _until_applied(conninfo, REAL_TABLE, store.last_seq)
                await _until_nodes_agree(cluster, name)
            assert not floor_task.done()
            journal = [(r.seq, r.type, r.data, r.ts) for r in store.rows_between(1, store.last_seq)]
        await _check(conninfo, floor, play, journal, failover_s)
        assert watch.samples > 0
        twice = {tl: nodes for tl, nodes in watch.primaries.items() if len(nodes) > 1}
        assert not twice, f"two nodes took writes on one timeline: {twice}"
        final = await asyncio.to_thread(verify_cli, setup)
        assert final.returncode == 0, final.stdout + final.stderr
    except BaseException as exc:
        logs = "\n".join(f"--- {c.controller_id} ---\n{c.output()[-3000:]}" for c in controllers)
        raise AssertionError(f"{fault.name}: {exc!r}\n{logs}\n{cluster.tails(1500)}") from exc
    finally:
        for controller in controllers:
            controller.stop()


def _acked_some(table: LightTable) -> bool:
    return table.acked >= 3


async def _until_applied(conninfo: str, table_ref: str, seq: int) -> None:
    async with asyncio.timeout(HANG_GUARD_S * 2):
        while True:
            rows = await query(
                conninfo, "SELECT acked_through_seq FROM link_table WHERE table_ref = %s", table_ref
            )
            if rows and rows[0][0] >= seq:
                return
            await asyncio.sleep(0.2)


async def _until_nodes_agree(cluster: PatroniCluster, dbname: str) -> None:
    """Every node, the primary and both replicas, holds the same ledger (each link's last
    version and hash)."""

    async def heads() -> list[list[tuple[Any, ...]]]:
        found = []
        for node in cluster.nodes:
            found.append(
                await query(
                    cluster.node_conninfo(node, dbname),
                    "SELECT link_id, max(version), (array_agg(sha256 ORDER BY version DESC))[1]"
                    " FROM link_event GROUP BY link_id ORDER BY link_id",
                )
            )
        return found

    async with asyncio.timeout(HANG_GUARD_S):
        while True:
            with contextlib.suppress(psycopg.Error, OSError):
                found = await heads()
                if all(f == found[0] for f in found) and found[0]:
                    return
            await asyncio.sleep(0.3)


async def _check(
    conninfo: str,
    floor: Floor,
    play: FloorPlay,
    journal: list[tuple[int, str, dict[str, Any], str]],
    failover_s: float,
) -> None:
    events = await query(
        conninfo,
        "SELECT table_ref, seq, kind, claim_id, award_cents FROM link_event WHERE seq IS NOT NULL",
    )
    per_row: dict[tuple[str, int], int] = defaultdict(int)
    for table_ref, seq, *_ in events:
        per_row[(table_ref, seq)] += 1
    cursors = dict(await query(conninfo, "SELECT table_ref, acked_through_seq FROM link_table"))
    contributed = 0
    # Every row a light table saw acknowledged is in the ledger, once; nothing above the
    # cursor was acknowledged.
    for t in floor.tables:
        assert cursors[t.ref] >= t.acked == t.last_seq, t.ref
        for row in t.outbox:
            if row.type in ("link.contribution", "link.claim", "jackpot.validated"):
                assert per_row[(t.ref, row.seq)] == 1, (t.ref, row.seq, row.type)
            if row.type == "link.contribution":
                contributed += _units(row.data_json)
    # The real table: each of its link rows once, and no contribution while LINK DOWN.
    down = False
    down_at: datetime | None = None
    for seq, type_, data, ts in journal:
        if type_ == "link.down":
            down, down_at = True, datetime.fromisoformat(ts)
        elif type_ == "link.up":
            if down_at is not None:
                lasted = (datetime.fromisoformat(ts) - down_at).total_seconds()
                assert lasted <= failover_s + LINK_TIMEOUT_MS / 1000 + DOWN_SLACK_S, lasted
            down, down_at = False, None
        elif type_ == "link.contribution":
            assert not down, f"a contribution journaled while LINK DOWN: seq {seq}"
            assert per_row[(REAL_TABLE, seq)] == 1, seq
            contributed += data["contribution_ten_thousandths_cent"]
    assert not down, "the real table never came back on the link"
    # The light tables' LINK DOWN, sampled as they played.
    for ref, lasted in play.longest_down_s.items():
        assert lasted <= failover_s + LINK_TIMEOUT_MS / 1000 + DOWN_SLACK_S, (ref, lasted)
    # Every claim answered once, and the table holds the ledger's answer.
    answers = {
        (table_ref, claim_id): (kind, cents)
        for table_ref, _, kind, claim_id, cents in events
        if kind in ("award", "claim.refused")
    }
    for table, claim_id in play.claims:
        kind, cents = answers[(table.ref, claim_id)]
        heard = table.answers[claim_id]
        expected = ("awarded", "validated") if kind == "award" else ("refused",)
        assert heard.status in expected, (claim_id, heard.status, kind)
        if heard.award is not None:
            assert heard.award.amount_cents == cents
    # The meter, to the unit: initial + the tables' own contributions - awards + resets.
    ((meter, others),) = await query(
        conninfo,
        "SELECT lv.display_units, (SELECT coalesce(sum(display_units), 0) FROM link_event"
        " WHERE kind <> 'contribution' AND level_id = lv.level_id)"
        " FROM link_level lv",
    )
    assert contributed > 0
    assert meter == others + contributed, (meter, others, contributed)


def _units(data_json: str) -> int:
    return int(json.loads(data_json)["contribution_ten_thousandths_cent"])

"""The link controller against a real PostgreSQL and a real Mosquitto, failing as a floor would.

Tables are light simulated tables (simulators/floor.py) speaking the table contract over
their own MQTT connections; controllers are `tablectl link run` processes where a process
must die (SIGKILL), and in-process otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.floor import Floor, LightTable
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.core.effects import RoundOpened
from tablectl.link import ledger
from tablectl.link.audit import verify
from tablectl.link.contract import LinkContribution
from tablectl.link.controller import Controller

from .link_support import HANG_GUARD_S, ControllerProcess, LinkSetup, new_database, prepare
from .link_support import write_config as link_config

pytestmark = pytest.mark.timeout(180)
INITIAL_UNITS = 100_000 * 10_000  # $1,000.00 in ten-thousandths of a cent


@contextlib.asynccontextmanager
async def running(floor: Floor, *controllers: Controller, send: bool = True) -> AsyncIterator[None]:
    """The floor (and in-process controllers) running until the block ends."""
    async with asyncio.TaskGroup() as tasks:
        jobs = [tasks.create_task(c.run(), name=f"controller-{c.id}") for c in controllers]
        jobs.append(tasks.create_task(floor.run(send=send), name="floor"))
        try:
            for controller in controllers:
                async with asyncio.timeout(HANG_GUARD_S):
                    await controller.ready.wait()
            await floor.wait_ready(HANG_GUARD_S)
            yield
        finally:
            for job in jobs:
                job.cancel()


def contributions_of(tables: list[LightTable]) -> list[tuple[str, int, LinkContribution]]:
    """Every contribution the tables journaled: (table, seq, record)."""
    found = []
    for table in tables:
        for row in table.outbox:
            if row.type == LinkContribution.TYPE:
                record = LinkContribution.model_validate_json(row.data_json)
                found.append((table.ref, row.seq, record))
    return found


async def assert_exact(setup: LinkSetup, tables: list[LightTable]) -> None:
    """The ledger holds every row of every table once, and the meter to the unit."""
    conn = await ledger.connect(setup.conninfo, application_name="test-check")
    try:
        cur = await conn.execute(
            "SELECT table_ref, seq, count(*) FROM link_event WHERE seq IS NOT NULL"
            " GROUP BY 1, 2 HAVING count(*) > 1"
        )
        assert await cur.fetchall() == []
        cursors = await ledger.table_cursors(conn)
        assert {t.ref: cursors[t.ref][1] for t in tables} == {t.ref: t.last_seq for t in tables}
        expected = contributions_of(tables)
        cur = await conn.execute(
            "SELECT table_ref, seq, contribution_units FROM link_event"
            " WHERE kind = 'contribution' ORDER BY version"
        )
        applied = {(t, s): units for t, s, units in await cur.fetchall()}
        assert applied == {(t, s): r.contribution_ten_thousandths_cent for t, s, r in expected}, (
            "every contribution applied exactly once"
        )
        cur = await conn.execute(
            "SELECT coalesce(sum(award_cents), 0) FROM link_event WHERE kind = 'award'"
        )
        row = await cur.fetchone()
        assert row is not None
        snapshot = (await ledger.snapshots(conn))[0]
        if row[0] == 0:
            meter = INITIAL_UNITS + sum(r.wager_cents * 1400 for _, _, r in expected)
            assert snapshot.levels[0].amount_units == meter
        result = await verify(conn)
        assert result.ok, result.failures
    finally:
        await conn.close()


def resend_script(rng: random.Random, last_seq: int) -> list[int]:
    """One table's sends: every row 1 to 3 times, as its relay would send them: in order,
    going back from time to time to send again from an earlier row (a reconnect, a replay),
    and now and then two rows swapped (one lost, then sent again)."""
    sent: Counter[int] = Counter()
    script: list[int] = []

    def send(seq: int) -> None:
        if sent[seq] < 3:
            sent[seq] += 1
            script.append(seq)

    seq = 1
    while seq <= last_seq:
        if seq < last_seq and rng.random() < 0.08:
            send(seq + 1)  # a row overtaken: its successor first
        send(seq)
        if rng.random() < 0.15:
            for again in range(max(1, seq - rng.randint(0, 6)), seq + 1):
                send(again)
        seq += 1
    assert all(1 <= sent[s] <= 3 for s in range(1, last_seq + 1))
    return script


async def test_rows_replayed_in_random_interleavings_apply_once_with_two_controllers(
    postgres: PrivatePostgres, broker: PrivateBroker, tmp_path: Path
) -> None:
    setup = link_config(tmp_path, new_database(postgres), broker, tables="floor-sim/t{001..024}")
    await prepare(setup)
    controllers = [ControllerProcess(setup.path, name) for name in ("ctl-a", "ctl-b")]
    for controller in controllers:
        await controller.start()
    floor = Floor(broker.host, broker.port, "bank", 24)
    rng = random.Random(20261203)
    try:
        async with running(floor, send=False):
            for table in floor.tables:
                for round_id in range(1, 13):
                    table.journal(RoundOpened(round_id=round_id))  # a row that only moves the ack
                    table.contribute(round_id, sorted(rng.sample(range(1, 8), rng.randint(0, 7))))
            scripts = {t.ref: resend_script(rng, t.last_seq) for t in floor.tables}
            copies = Counter((ref, seq) for ref, script in scripts.items() for seq in script)
            assert set(copies.values()) == {1, 2, 3}
            sent: set[tuple[str, int]] = set()
            by_ref = {t.ref: t for t in floor.tables}
            pending = {ref: list(script) for ref, script in scripts.items()}
            while pending:
                ref = rng.choice(sorted(pending))
                seq = pending[ref].pop(0)
                assert by_ref[ref].publish_row(seq, replay=(ref, seq) in sent) is not None
                sent.add((ref, seq))
                if not pending[ref]:
                    del pending[ref]
                if rng.random() < 0.02:
                    await asyncio.sleep(0)  # let the controllers' acks in now and then
            await floor.wait_acked(HANG_GUARD_S)
        await assert_exact(setup, floor.tables)
        # Each table came online once and stayed connected: one status event each, from
        # whichever controller wrote it first (a status is written on a change only).
        conn = await ledger.connect(setup.conninfo, application_name="test")
        try:
            cur = await conn.execute(
                "SELECT kind, count(*) FROM link_event WHERE kind LIKE 'table.%' GROUP BY kind"
            )
            assert dict(await cur.fetchall()) == {"table.online": 24}
        finally:
            await conn.close()
    finally:
        codes = [c.stop() for c in controllers]
    assert codes == [0, 0], [c.output() for c in controllers]


async def test_a_controller_killed_mid_transaction_commits_nothing_and_another_applies_it(
    postgres: PrivatePostgres, broker: PrivateBroker, tmp_path: Path
) -> None:
    setup = link_config(tmp_path, new_database(postgres), broker, tables="floor-sim/t{001..006}")
    await prepare(setup)
    first = ControllerProcess(setup.path, "ctl-a")
    await first.start()
    floor = Floor(broker.host, broker.port, "bank", 6)
    rng = random.Random(7)
    conn = await ledger.connect(setup.conninfo, application_name="test-blocker")
    watcher = await ledger.connect(setup.conninfo, application_name="test-watcher")
    second = ControllerProcess(setup.path, "ctl-b")
    try:
        async with running(floor):
            floor.play_round(rng, 1, 7)
            await floor.wait_acked(HANG_GUARD_S)
            acked_before = {t.ref: t.acked for t in floor.tables}
            # An uncommitted event at the link's next version: the controller's insert of that
            # version waits on it, in the middle of its transaction (link and cursors locked,
            # statements run, nothing committed).
            await conn.execute("BEGIN")
            cur = await conn.execute("SELECT version FROM link WHERE link_id = 'bank'")
            version = (await cur.fetchone() or (0,))[0]
            await conn.execute(
                "INSERT INTO link_event (link_id, version, kind, controller, prev_sha256, sha256)"
                " VALUES ('bank', %s, 'table.online', 'test', ''::bytea, ''::bytea)",
                (version + 1,),
            )
            assert floor.play_round(rng, 2, 7) > 0
            async with asyncio.timeout(HANG_GUARD_S):
                while True:
                    cur = await watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name ="
                        " 'tablectl-link-ctl-a-writer' AND wait_event_type = 'Lock'"
                        " AND xact_start IS NOT NULL"
                    )
                    if (await cur.fetchone() or (0,))[0] == 1:
                        break
                    await asyncio.sleep(0.02)
            first.kill()
            await conn.execute("ROLLBACK")
            assert {t.ref: t.acked for t in floor.tables} == acked_before, "nothing acked"
            cur = await watcher.execute("SELECT version FROM link WHERE link_id = 'bank'")
            assert (await cur.fetchone() or (0,))[0] == version, "nothing committed"
            await second.start()
            await floor.wait_acked(HANG_GUARD_S)
        await assert_exact(setup, floor.tables)
        cur = await watcher.execute(
            "SELECT DISTINCT controller FROM link_event WHERE kind = 'contribution'"
            " AND round_id = 2"
        )
        assert await cur.fetchall() == [("ctl-b",)]
    finally:
        await conn.close()
        await watcher.close()
        first.stop()
        assert second.stop() == 0, second.output()


async def test_postgres_restarted_mid_stream_loses_and_doubles_nothing(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    with PrivatePostgres(fsync=False) as pg:
        setup = link_config(tmp_path, new_database(pg), broker, tables="floor-sim/t{001..008}")
        await prepare(setup)
        controller = Controller(setup.config, controller_id="ctl-a")
        floor = Floor(broker.host, broker.port, "bank", 8)
        rng = random.Random(11)
        async with running(floor, controller):
            restarted = asyncio.create_task(asyncio.sleep(0))
            for round_id in range(1, 61):
                floor.play_round(rng, round_id, 7)
                if round_id == 20:
                    restarted = asyncio.create_task(asyncio.to_thread(pg.restart, "immediate"))
                await asyncio.sleep(0.02)
            await restarted
            await floor.wait_acked(HANG_GUARD_S)
            assert controller.counters.resyncs >= 2, "the controller noticed the restart"
        await assert_exact(setup, floor.tables)


@pytest.mark.parametrize("policy", ["ordered", "full-amount-each"])
async def test_tables_claiming_within_10_ms_one_lock_order_recorded(
    policy: str, postgres: PrivatePostgres, broker: PrivateBroker, tmp_path: Path
) -> None:
    setup = link_config(
        tmp_path, new_database(postgres), broker, tables="floor-sim/t{001..008}", hit_policy=policy
    )
    await prepare(setup)
    controller = Controller(setup.config, controller_id="ctl-a")
    floor = Floor(broker.host, broker.port, "bank", 8)
    rng = random.Random(3)
    claimants = floor.tables[:5]
    async with running(floor, controller):
        for round_id in range(1, 6):
            floor.play_round(rng, round_id, 7)
        await floor.wait_acked(HANG_GUARD_S)
        conn = await ledger.connect(setup.conninfo, application_name="test-check")
        meter = (await ledger.snapshots(conn))[0].levels[0].amount_cents
        assert meter > 100_000
        claims = {t.ref: t.claim(9, seat) for seat, t in enumerate(claimants, start=1)}
        stamps = sorted(datetime.fromisoformat(t.outbox[-1].ts) for t in claimants)
        assert stamps[-1] - stamps[0] <= timedelta(milliseconds=10), "claimed within 10 ms"

        def all_pending(table: LightTable) -> bool:
            return table.state is not None and len(table.state.pending) == len(claimants)

        def answered(table: LightTable) -> bool:
            return claims[table.ref] in table.answers

        for table in floor.tables:
            await table.wait_for(functools.partial(all_pending, table), HANG_GUARD_S)
        for table in claimants:
            await table.wait_for(functools.partial(answered, table), HANG_GUARD_S)
        result = await verify(conn)
        await conn.close()
    assert result.ok, result.failures
    seen = floor.tables[-1].state
    assert seen is not None
    # Every table shows each pending award with its table and seat.
    assert sorted((p.table, p.seat) for p in seen.pending) == [
        (t.table, seat) for seat, t in enumerate(claimants, start=1)
    ]
    awards = sorted(
        (a.award for t in claimants if (a := t.answers[claims[t.ref]]).award is not None),
        key=lambda a: a.award_version,
    )
    assert len(awards) == len(claimants)
    assert [a.order_in_window for a in awards] == list(range(1, len(claimants) + 1))
    first, *later = awards
    assert (first.amount_cents, first.meter_before_cents, first.reset) == (meter, meter, True)
    assert first.window_locked_cents == meter and first.paid_from_meter_cents == meter
    for award in later:
        assert award.window_first_version == first.award_version
        assert award.window_locked_cents == meter
        if policy == "ordered":
            # Each is paid from the meter the one before left: the reset amount.
            assert (award.amount_cents, award.meter_before_cents) == (100_000, 100_000)
            assert award.paid_from_meter_cents == 100_000 and award.reset
        else:
            # NM 15.1.24.19(A): each receives the full meter the first hit locked.
            assert (award.amount_cents, award.funded_outside_meter_cents) == (meter, meter)
            assert award.paid_from_meter_cents == 0 and not award.reset
    assert seen.levels[0].amount_cents == 100_000


async def test_simulate_floor_plays_claims_and_every_row_is_acknowledged(
    postgres: PrivatePostgres, broker: PrivateBroker, tmp_path: Path
) -> None:
    setup = link_config(tmp_path, new_database(postgres), broker, tables="floor-sim/t{001..004}")
    await prepare(setup)
    controller = ControllerProcess(setup.path, "ctl-a")
    await controller.start()
    try:
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("tablectl")), "simulate", "floor",
            "--tables", "4", "--link", "bank", "--broker", f"{broker.host}:{broker.port}",
            "--rounds-per-minute", "600", "--claim-every-s", "1", "--seconds", "3",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        async with asyncio.timeout(HANG_GUARD_S):
            out, _ = await proc.communicate()
        text = out.decode()
        assert proc.returncode == 0, text
        assert "4 tables floor-sim/t{001..004} on link bank" in text
        last = text.strip().splitlines()[-1]
        rows, acked = (
            int(n) for n in re.findall(r"(\d+) rows journaled, (\d+) acknowledged", last)[0]
        )
        assert rows > 0 and rows == acked, last
        conn = await ledger.connect(setup.conninfo, application_name="test-check")
        try:
            cur = await conn.execute("SELECT count(*) FROM link_event WHERE kind = 'award'")
            assert (await cur.fetchone() or (0,))[0] >= 2, "a claim a second was awarded"
            assert (await verify(conn)).ok
        finally:
            await conn.close()
    finally:
        assert controller.stop() == 0, controller.output()

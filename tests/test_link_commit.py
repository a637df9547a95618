"""What a commit's outcome is worth, on a real PostgreSQL whose commits wait for a standby.

A private PostgreSQL with `synchronous_standby_names` naming a standby that is not there holds
every COMMIT as a primary cut off from its standby does (Patroni's synchronous_mode_strict):
committed locally, waiting for a confirmation that does not come. Shown: a COMMIT whose wait is
cut short is an unknown outcome, never a success (`ledger.OutcomeUnknown`); while no COMMIT
returns the controllers broadcast `down` and the tables go LINK DOWN, acknowledging nothing,
and come back by themselves when commits return; `apply_rows` re-reads a table's link under
its lock; `link verify` and `link report` read one snapshot while a writer commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.floor import Floor, LightTable
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.core.effects import RoundOpened
from tablectl.link import ledger
from tablectl.link.audit import report_rows, verify
from tablectl.link.config import DatabaseSection
from tablectl.link.controller import Controller

from .link_support import HANG_GUARD_S, LinkSetup, new_database, prepare, write_config
from .test_link_ledger import contribution

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def primary() -> Iterator[PrivatePostgres]:
    """A PostgreSQL of this module's own: its standby setting changes under the tests."""
    with PrivatePostgres(fsync=False) as pg:
        yield pg


def config(directory: Path, conninfo: str, tables: str) -> LinkSetup:
    """A link config for tests that use no broker (it is only named)."""
    broker = PrivateBroker()
    try:
        return write_config(directory, conninfo, broker, tables=tables)
    finally:
        broker.close()


def standby_gone(pg: PrivatePostgres, gone: bool) -> None:
    """Every COMMIT waits for a standby named `ghost` (which never comes), or for none.

    pg_reload_conf() only signals the postmaster: a session's next statement may run before
    the postmaster has reloaded and signalled it. A new session (forked from the postmaster)
    shows the value once it has done both; each open session then takes it at its next
    statement."""
    value = "ghost" if gone else ""
    pg.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{value}'")
    pg.psql("SELECT pg_reload_conf()")
    deadline = time.monotonic() + HANG_GUARD_S
    while pg.psql("SHOW synchronous_standby_names") != value:
        assert time.monotonic() < deadline, "the postmaster did not reload its settings"
        time.sleep(0.01)


@contextlib.asynccontextmanager
async def standby_lost(pg: PrivatePostgres) -> AsyncIterator[None]:
    await asyncio.to_thread(standby_gone, pg, True)
    try:
        yield
    finally:
        await asyncio.to_thread(standby_gone, pg, False)


async def until_waiting(conninfo: str, application_name: str, wait_event: str) -> int:
    """The backend of that application once it waits on wait_event: its pid."""
    conn = await ledger.connect(conninfo, application_name="test-watch")
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            while True:
                cur = await conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
                    " AND wait_event = %s",
                    (application_name, wait_event),
                )
                row = await cur.fetchone()
                if row is not None:
                    return int(row[0])
                await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def test_a_commit_whose_wait_for_the_standby_is_cut_short_is_an_unknown_outcome(
    primary: PrivatePostgres, tmp_path: Path
) -> None:
    setup = config(tmp_path, new_database(primary), "s/t{01..02}")
    await prepare(setup)
    writer = await ledger.connect(setup.conninfo, application_name="test-writer")
    other = await ledger.connect(setup.conninfo, application_name="test-other")
    try:
        async with standby_lost(primary):
            batch = asyncio.create_task(
                ledger.apply_rows(writer, [contribution("s/t01", 1)], by="t")
            )
            pid = await until_waiting(setup.conninfo, "test-writer", "SyncRep")
            # What a statement timeout or a client's cancel does to a COMMIT that waits: the
            # server returns it as done, with a warning. Here it is not taken for done.
            await other.execute("SELECT pg_cancel_backend(%s)", (pid,))
            with pytest.raises(ledger.OutcomeUnknown):
                await batch
            # The row is committed on this server alone, visible to any reader here ...
            cur = await other.execute(
                "SELECT acked_through_seq FROM link_table WHERE table_ref = 's/t01'"
            )
            assert await cur.fetchone() == (1,)
            # ... which is why what is read is acknowledged only after a COMMIT of the
            # reader's own returns: here none does.
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1):
                    await ledger.confirm_replicated(other, by="test")
        # No standby is asked for any more: a COMMIT returns again.
        await ledger.confirm_replicated(other, by="test")
    finally:
        await writer.close()
        await other.close()


async def test_a_commit_released_by_a_reset_of_the_standby_settings_is_an_unknown_outcome(
    primary: PrivatePostgres, tmp_path: Path
) -> None:
    """The old primary whose Patroni died and comes back: its settings are rewritten before it
    is demoted, and a COMMIT that waited for the standby returns, on this server alone."""
    setup = config(tmp_path, new_database(primary), "s/t{01..02}")
    await prepare(setup)
    writer = await ledger.connect(setup.conninfo, application_name="test-writer")
    try:
        async with standby_lost(primary):
            batch = asyncio.create_task(
                ledger.apply_rows(writer, [contribution("s/t01", 1)], by="t", require_standby=True)
            )
            await until_waiting(setup.conninfo, "test-writer", "SyncRep")
            await asyncio.to_thread(standby_gone, primary, False)  # the reset releases it
            with pytest.raises(ledger.OutcomeUnknown, match="without asking a synchronous"):
                await batch
        # A ledger that is one PostgreSQL by design asks for no standby: nothing to require.
        result = await ledger.apply_rows(writer, [contribution("s/t02", 1)], by="t")
        assert result.cursors == {"s/t02": 1}
    finally:
        await writer.close()


async def test_no_commit_returns_the_link_goes_down_nothing_is_acked_then_it_comes_back(
    primary: PrivatePostgres, broker: PrivateBroker, tmp_path: Path
) -> None:
    floor = Floor(broker.host, broker.port, "bank", 3)
    setup = write_config(
        tmp_path,
        new_database(primary),
        broker,
        tables=floor.tables_config(),
        link_timeout_s=1.5,
        broadcast_ms=100,
        database="commit_timeout_ms = 1000\n",
    )
    await prepare(setup)
    controller = Controller(setup.config, controller_id="c1")
    states: list[tuple[str, str | None]] = []
    controller.state_listeners.append(lambda s, live: states.append((s.state, s.reason)))
    async with asyncio.TaskGroup() as tasks:
        jobs = [tasks.create_task(controller.run()), tasks.create_task(floor.run())]
        try:
            await floor.wait_ready(HANG_GUARD_S)
            assert [len(t.contribute(1, [1, 2])) for t in floor.tables] == [2, 2, 2]
            await floor.wait_acked(HANG_GUARD_S)
            async with standby_lost(primary):
                for table in floor.tables:
                    table.journal(RoundOpened(round_id=2))  # a row the ledger cannot commit
                for table in floor.tables:
                    await table.wait_for(functools.partial(_down, table), HANG_GUARD_S)
                # LINK DOWN, and the row journaled as the ledger stopped is not acknowledged:
                # no COMMIT returned, so no ack went out (nor an `up`).
                assert all(t.acked == t.last_seq - 1 for t in floor.tables)
                assert ("down", "controller c1 cannot write to the ledger (no primary takes "
                        "writes)") in states  # fmt: skip
                assert all(t.contribute(3, [1]) == [] for t in floor.tables)  # refused: down
            # Commits return again: the link is up by itself, every row applied once.
            for table in floor.tables:
                await table.wait_for(functools.partial(_up, table), HANG_GUARD_S)
            await floor.wait_acked(HANG_GUARD_S)
        finally:
            for job in jobs:
                job.cancel()
    conn = await ledger.connect(setup.conninfo, application_name="test")
    try:
        result = await verify(conn)
        assert result.ok, result.failures
        cur = await conn.execute("SELECT count(*) FROM link_event WHERE kind = 'contribution'")
        assert await cur.fetchone() == (6,)
    finally:
        await conn.close()


def _down(table: LightTable) -> bool:
    return not table.link_up()


def _up(table: LightTable) -> bool:
    return table.link_up()


async def test_a_table_taken_off_its_link_meanwhile_is_not_counted_on_it(
    primary: PrivatePostgres, tmp_path: Path
) -> None:
    setup = config(tmp_path, new_database(primary), "s/t{01..02}")
    await prepare(setup)
    operator = await ledger.connect(setup.conninfo, application_name="test-operator")
    writer = await ledger.connect(setup.conninfo, application_name="test-writer")
    try:
        # An operator's change holds the link's lock (as `tablectl link apply` does) ...
        await operator.execute("BEGIN")
        await operator.execute("SELECT 1 FROM link WHERE link_id = 'bank' FOR UPDATE")
        batch = asyncio.create_task(
            ledger.apply_rows(writer, [contribution("s/t01", 1), contribution("s/t02", 1)], by="t")
        )
        # ... while a batch has read which link its tables are on and waits for that lock;
        await until_waiting(setup.conninfo, "test-writer", "transactionid")
        # the change takes s/t01 off the link and commits.
        await operator.execute("UPDATE link_table SET link_id = NULL WHERE table_ref = 's/t01'")
        await operator.execute("COMMIT")
        result = await batch
        assert result.moved == {"s/t01"}
        assert result.cursors == {"s/t02": 1}
        cur = await writer.execute("SELECT table_ref FROM link_event WHERE kind = 'contribution'")
        assert await cur.fetchall() == [("s/t02",)]
    finally:
        await operator.close()
        await writer.close()


async def test_verify_and_report_read_one_snapshot_while_a_writer_commits(
    primary: PrivatePostgres, tmp_path: Path
) -> None:
    setup = config(tmp_path, new_database(primary), "s/t{01..04}")
    await prepare(setup)
    stop = asyncio.Event()

    async def write() -> int:
        conn = await ledger.connect(setup.conninfo, application_name="test-writer")
        seq = 0
        try:
            while not stop.is_set():
                seq += 1
                rows = [contribution(f"s/t0{n}", seq) for n in range(1, 5)]
                await ledger.apply_rows(conn, rows, by="t")
        finally:
            await conn.close()
        return seq

    reader = await ledger.connect(setup.conninfo, application_name="test-reader")
    try:
        writer = asyncio.create_task(write())
        for _ in range(20):  # each while the writer commits batch after batch
            result = await verify(reader)
            assert result.ok, result.failures
            rows = await report_rows(
                reader, datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC)
            )
            assert all(r["contributions"] > 0 for r in rows)
        stop.set()
        assert await writer > 1
    finally:
        stop.set()
        await reader.close()


def test_a_conninfo_naming_several_servers_must_ask_for_the_primary() -> None:
    with pytest.raises(ValueError, match="target_session_attrs=read-write"):
        DatabaseSection(conninfo="host=a,b,c dbname=ledger")
    DatabaseSection(conninfo="host=a,b,c dbname=ledger target_session_attrs=read-write")
    DatabaseSection(conninfo="host=a dbname=ledger")


def test_a_server_that_lost_a_write_is_tried_last() -> None:
    conninfo = "host=a,b,c port=5432 dbname=ledger target_session_attrs=read-write"
    moved = ledger.other_servers_first(conninfo, ("a", "5432"))
    assert "host=b,c,a" in moved and "port=5432,5432,5432" in moved
    assert ledger.other_servers_first(conninfo, None) == conninfo
    loopback = "host=h,h port=1,2 target_session_attrs=read-write"
    assert "port=2,1" in ledger.other_servers_first(loopback, ("h", "1"))

"""A linked table: the real daemon on simulated devices with `[progressive] link` set, a real
link controller (`tablectl link run`), a private PostgreSQL and a private Mosquitto.

What the table side of issue 17 promises: contributions reach the ledger exactly once, a hit
is paid the controller's amount, LINK DOWN when the controller stops (no progressive wager
while down, the base game goes on), a claim made during the outage stays pending until it
is answered, and the outbox drains exactly once after.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, LiteralString

import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.cli.control import print_status
from tablectl.config import ProgressiveSection
from tablectl.core.events import ValidateHit
from tablectl.core.table import Phase, Rejected, TableState
from tablectl.link import ledger
from tablectl.link.audit import verify
from tablectl.link.book import TableRow
from tablectl.link.contract import LinkContribution, LinkContributionReversed
from tablectl.rules.meters import LinkedMeter
from tablectl.service.replay import replay

from .conftest import SimulatedTable, simulated_table
from .link_support import ControllerProcess, LinkSetup, new_database, prepare, write_config

pytestmark = pytest.mark.timeout(240)
TABLE_REF = "pa-demo-casino/tcp-07"
WAGER = 500  # the link's wager: $5 (649a.12(e)(5))
UNITS_PER_WAGER = WAGER * 1400  # 14 % of $5: 70 cents, in ten-thousandths of a cent
RESET_CENTS = 100_000


@contextlib.asynccontextmanager
async def linked_table(
    broker: PrivateBroker, data_dir: Path, timeout_ms: int = 5000
) -> AsyncIterator[SimulatedTable]:
    from tablectl.config import load_config

    from .conftest import EXAMPLE_CONFIG

    base = load_config(EXAMPLE_CONFIG)
    game: Any = base.game
    linked_game = game.model_copy(
        update={"progressive": game.progressive.model_copy(update={"wager": WAGER})}
    )
    async with simulated_table(
        broker,
        data_dir,
        mqtt={"backends": ["pgs", "link"]},
        game=linked_game,
        progressive=ProgressiveSection(link="bank", link_timeout_ms=timeout_ms),
    ) as table:
        yield table


def journal(table: SimulatedTable, type_: str) -> list[tuple[int, dict[str, Any]]]:
    store = table.daemon.store
    assert store is not None
    return [(r.seq, r.data) for r in store.rows_between(1, store.last_seq) if r.type == type_]


async def ledger_rows(
    setup: LinkSetup, sql: LiteralString, *params: object
) -> list[tuple[Any, ...]]:
    conn = await ledger.connect(setup.conninfo, application_name="test-table")
    try:
        cur = await conn.execute(sql, params)
        return list(await cur.fetchall())
    finally:
        await conn.close()


async def play_round(table: SimulatedTable, seats: tuple[int, ...], hands: dict[str, str]) -> None:
    await table.wait_phase(Phase.BETTING, 30)
    if seats:
        await table.place_wagers(*seats)
    await table.lock()
    reply = await table.dealer(cmd="settle", hands=hands)
    assert reply["ok"], reply


def link_up(state: TableState) -> bool:
    return state.link_down is None


async def test_a_linked_table_contributes_claims_and_locks_out_on_link_loss(
    broker: PrivateBroker,
    postgres: PrivatePostgres,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup = write_config(tmp_path, new_database(postgres), broker, tables=TABLE_REF)
    await prepare(setup)
    first = ControllerProcess(setup.path, "c1")
    await first.start()
    second = ControllerProcess(setup.path, "c2")
    try:
        async with linked_table(broker, tmp_path / "data") as table:
            # The link's parameters are the table's (5321.18(b)(4)); the link is up.
            await table.daemon.wait_until(link_up, 30)
            meter = table.state.meter
            assert isinstance(meter, LinkedMeter) and meter.parameters_version == 1
            assert [(lv.level_id, lv.contribution_rate_bp) for lv in meter.levels] == [
                ("progressive", 1400)
            ]

            # Round 1: two wagers contribute at the count; seat 5's mini royal claims the
            # link's meter, seat 2's straight flush is paid at odds by the table.
            await play_round(table, (2, 5), {"5": "AsKsQs", "2": "2h3h4h"})
            (claim,) = journal(table, "link.claim")
            assert claim[1]["seat"] == 5 and claim[1]["cards"] == "AsKsQs"
            assert claim[1]["share_percent"] == 100
            await table.daemon.wait_until(
                lambda s: all(h.answered for h in s.hits_pending if h.link_claim), 30
            )
            hit = next(h for h in table.state.hits_pending if h.link_claim)
            # The controller's amount: $1,000 + 2 x 70 cents, the meter at its turn.
            assert hit.amount_cents == RESET_CENTS + 2 * UNITS_PER_WAGER // 10_000
            (award,) = await ledger_rows(
                setup, "SELECT award_cents FROM link_event WHERE kind = 'award'"
            )
            assert award[0] == hit.amount_cents
            await table.validate_hits()

            # Round 2 is counted while the controller is gone: its rows wait in the outbox.
            await table.wait_phase(Phase.BETTING, 30)
            first.stop()
            counted_during_outage = 0
            while not counted_during_outage:
                await table.wait_phase(Phase.BETTING, 30)
                before = len(journal(table, "link.contribution"))
                await table.place_wagers(1, 3)
                await table.lock()
                counted_during_outage = len(journal(table, "link.contribution")) - before
                if not counted_during_outage:  # LINK DOWN came first: nothing counted
                    for seat in (1, 3):
                        table.inputs.remove_chip(seat)
                    assert (await table.dealer(cmd="settle", hands={}))["ok"]
            # A claim made during the outage stays pending, with its evidence, unanswered.
            reply = await table.dealer(cmd="settle", hands={"1": "AsKsQs", "3": "2c7d9h"})
            assert reply["ok"], reply
            outage_claim = next(h for h in table.state.hits_pending if h.link_claim)
            assert not outage_claim.answered
            with pytest.raises(Rejected, match="JACKPOT PENDING"):
                await table.daemon.submit(ValidateHit(hit_id=outage_claim.hit_id, by="floor-1"))

            # LINK DOWN within the timeout: progressive wagers refused, the lamps stay off.
            await table.daemon.wait_until(lambda s: s.link_down is not None, 30)
            status = table.daemon.status()
            assert status.link is not None and status.link.state == "LINK DOWN"
            assert "LINK DOWN" in status.status_line()
            # What the table knows while off its link: the broker answers, the controllers
            # have been silent since (the last word it heard was theirs: up), and the amount
            # shown is the last broadcast's, with its time.
            assert status.link.broker_connected
            assert status.link.last_heard_ms_ago is not None
            assert status.link.last_heard_ms_ago > 5000  # the table's link_timeout_ms
            assert status.link.controllers_say == "up"
            assert status.link.amounts_as_of is not None
            print_status(status)
            shown = capsys.readouterr().out
            assert "LINK DOWN" in shown and "JACKPOT PENDING: awaiting the link's answer" in shown
            assert "broker connected, last heard" in shown
            assert "the controllers last said: up" in shown
            health = table.daemon.relay.health()
            assert health.progressive_link is not None
            assert health.progressive_link.link == "down"
            (down,) = journal(table, "link.down")
            assert down[1]["rule"] == "5321.18(c)"
            # The table holds for the pending claim (649a.11(c)(5)) until it is answered.
            assert table.state.phase is Phase.CLOSED and table.state.hits_pending

            # The controller returns (another instance): the outbox drains, the claim is
            # answered from the meter its contributions reached.
            await second.start()
            await table.daemon.wait_until(link_up, 30)
            await table.daemon.wait_until(
                lambda s: all(h.answered for h in s.hits_pending if h.link_claim), 60
            )
            outage_hit = next(h for h in table.state.hits_pending if h.link_claim)
            assert outage_hit.amount_cents == RESET_CENTS + counted_during_outage * (
                UNITS_PER_WAGER // 10_000
            )
            await table.validate_hits()

            # The base game goes on while the link is down: a round opens, a chip is refused.
            second.stop()
            await table.daemon.wait_until(lambda s: s.link_down is not None, 30)
            await table.wait_phase(Phase.BETTING, 30)
            await table.place_wagers(4)
            assert 4 not in table.state.wagers and not table.inputs.light_is_on(4)
            (refused,) = [d for _, d in journal(table, "wager.rejected") if d["seat"] == 4]
            assert refused["reason"] == "link-down" and refused["rule"] == "5321.18(c)"
            table.inputs.remove_chip(4)
            await table.lock()
            assert (await table.dealer(cmd="settle", hands={}))["ok"]
            await table.wait_phase(Phase.BETTING, 30)

            # Every contribution the table journaled is in the ledger exactly once.
            await second.start()
            await table.daemon.wait_until(link_up, 30)
            store = table.daemon.store
            assert store is not None
            last_link_row = max(seq for seq, _ in journal(table, "link.claim"))
            async with asyncio.timeout(60):  # the relay hears the link's acks
                while table.daemon.relay.acks.acked["link"] < last_link_row:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            journaled = {seq: d for seq, d in journal(table, "link.contribution")}
            applied = await ledger_rows(
                setup,
                "SELECT seq, contribution_units FROM link_event WHERE kind = 'contribution'"
                " AND table_ref = %s ORDER BY seq",
                TABLE_REF,
            )
            assert [s for s, _ in applied] == sorted(journaled), "each (table, seq) once"
            assert all(
                units == journaled[s]["contribution_ten_thousandths_cent"] for s, units in applied
            )
            conn = await ledger.connect(setup.conninfo, application_name="test-verify")
            try:
                result = await verify(conn)
                assert result.ok, result.failures
            finally:
                await conn.close()
            # The table's journal replays as it was written.
            assert replay(store).identical
    finally:
        first.stop()
        second.stop()


async def test_a_round_voided_after_its_count_takes_its_contributions_off_the_link(
    broker: PrivateBroker, postgres: PrivatePostgres, tmp_path: Path
) -> None:
    """Round 1 counts two wagers, then the shoe jams (649a.13(f)): the table journals a
    reversal per contribution, the controller applies each once, and the link's meter is
    back to what it was; the rows sent again (twice) change nothing; verify is clean."""
    setup = write_config(tmp_path, new_database(postgres), broker, tables=TABLE_REF)
    await prepare(setup)
    controller = ControllerProcess(setup.path, "c1")
    await controller.start()
    try:
        # A long link timeout: this test is not about LINK DOWN (a loaded machine's slow
        # broadcast must not withdraw the round's wagers before they are counted).
        async with linked_table(broker, tmp_path / "data", timeout_ms=30_000) as table:
            await table.daemon.wait_until(link_up, 30)
            (before,) = await ledger_rows(setup, "SELECT display_units FROM link_level")
            # Round 1 is counted (its contributions journaled), then voided.
            await table.wait_phase(Phase.BETTING, 30)
            await table.place_wagers(2, 5)
            await table.lock()
            assert table.state.counted and len(journal(table, "link.contribution")) == 2
            reply = await table.dealer(cmd="void", reason="shoe-jam")
            assert reply["ok"], reply
            reversals = journal(table, "link.contribution_reversed")
            assert [(d["round_id"], d["seat"], d["rule"]) for _, d in reversals] == [
                (1, 2, "649a.13(f)"),
                (1, 5, "649a.13(f)"),
            ]
            amounts = [d["contribution_ten_thousandths_cent"] for _, d in reversals]
            assert amounts == [UNITS_PER_WAGER, UNITS_PER_WAGER]
            ((_, voided),) = journal(table, "round.voided")
            assert voided["contribution_reversed_ten_thousandths_cent"] == 2 * UNITS_PER_WAGER

            last = max(seq for seq, _ in reversals)
            async with asyncio.timeout(60):  # the relay hears the link's acks
                while table.daemon.relay.acks.acked["link"] < last:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            assert await ledger_rows(setup, "SELECT display_units FROM link_level") == [before]

            # The table's link rows sent again, twice, as a replay would: nothing changes.
            rows = [
                TableRow(TABLE_REF, seq, type_, model.model_validate(data))
                for type_, model in (
                    ("link.contribution", LinkContribution),
                    ("link.contribution_reversed", LinkContributionReversed),
                )
                for seq, data in journal(table, type_)
            ]
            rows.sort(key=lambda r: r.seq)
            conn = await ledger.connect(setup.conninfo, application_name="test-replay")
            try:
                for _ in range(2):
                    again = await ledger.apply_rows(conn, rows, by="replay")
                    assert again.applied == 0 and again.events == 0
                result = await verify(conn)
                assert result.ok, result.failures
            finally:
                await conn.close()
            kinds = await ledger_rows(
                setup,
                "SELECT kind, seq, ref_version IS NOT NULL FROM link_event"
                " WHERE table_ref = %s AND seq IS NOT NULL ORDER BY seq",
                TABLE_REF,
            )
            assert [k for k, _, _ in kinds] == [
                "contribution",
                "contribution",
                "contribution.reversed",
                "contribution.reversed",
            ]
            assert [s for _, s, _ in kinds] == sorted(
                s for s, _ in journal(table, "link.contribution") + reversals
            )
            assert all(named for k, _, named in kinds if k == "contribution.reversed")
            # Once the table is quiet again (the next round taking bets), its journal replays
            # as it was written.
            await table.wait_phase(Phase.BETTING, 30)
            await table.until_shuffler_has_nothing_left()
            store = table.daemon.store
            assert store is not None and replay(store).identical
    finally:
        controller.stop()

"""The ledger in a real PostgreSQL: migrations, append-only hash chain, parameters, exactly
once under concurrent writers, verify and report -- and the CLI verbs that run them."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.postgres import PrivatePostgres

from tablectl.cli import main
from tablectl.link import ledger
from tablectl.link.audit import verify
from tablectl.link.book import TableRow
from tablectl.link.contract import LinkClaim, LinkContribution, LinkContributionReversed
from tablectl.link.controller import StartupError, check_against_ledger

from .link_support import LinkSetup, new_database, prepare
from .link_support import write_config as link_config

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def setup(postgres: PrivatePostgres, tmp_path: Path) -> LinkSetup:
    # The broker is only named in the config; these tests do not use it.
    broker = PrivateBroker()
    try:
        return link_config(tmp_path, new_database(postgres), broker, tables="s/t{01..12}")
    finally:
        broker.close()


async def connection(setup: LinkSetup) -> ledger.Connection:
    return await ledger.connect(setup.conninfo, application_name="test")


def contribution(
    table: str, seq: int, seat: int = 1, rate: int = 1400, round_id: int | None = None
) -> TableRow:
    record = LinkContribution(
        link_id="bank",
        level_id="progressive",
        parameters_version=1,
        round_id=seq if round_id is None else round_id,
        seat=seat,
        wager_cents=500,
        rate_bp=rate,
        contribution_ten_thousandths_cent=500 * rate,
    )
    return TableRow(table, seq, record.TYPE, record)


async def test_migrations_apply_once_and_a_changed_one_is_refused(setup: LinkSetup) -> None:
    conn = await connection(setup)
    try:
        assert await ledger.schema_version(conn) == 0
        with pytest.raises(ledger.LedgerError, match="tablectl link migrate"):
            await ledger.check_schema(conn)
        assert await ledger.migrate(conn, by="test") == [
            "0001_ledger.sql",
            "0002_reversals.sql",
            "0003_controller_heartbeat.sql",
        ]
        assert await ledger.migrate(conn, by="test") == []
        # Two at once (two operators): one applies, the other finds it done.
        other = await connection(setup)
        try:
            both = await asyncio.gather(ledger.migrate(conn, by="a"), ledger.migrate(other, by="b"))
            assert list(both) == [[], []]
        finally:
            await other.close()
        await conn.execute("UPDATE link_schema_version SET sha256 = 'edited' WHERE version = 1")
        with pytest.raises(ledger.LedgerError, match=r"0001_ledger\.sql differs"):
            await ledger.migrate(conn, by="test")
    finally:
        await conn.close()


async def test_the_event_table_is_append_only_and_verify_finds_any_tampering(
    setup: LinkSetup,
) -> None:
    await prepare(setup)
    conn = await connection(setup)
    try:
        await ledger.apply_rows(conn, [contribution("s/t01", s) for s in range(1, 6)], by="t")
        assert (await verify(conn)).ok
        for statement in (
            "UPDATE link_event SET display_units = 0 WHERE version = 5",
            "DELETE FROM link_event WHERE version = 5",
            "TRUNCATE link_event CASCADE",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                await conn.execute(statement)
        # Someone with the superuser's rights switches the trigger off and edits history.
        await conn.execute("ALTER TABLE link_event DISABLE TRIGGER link_event_append_only")
        await conn.execute(
            "UPDATE link_event SET display_units = display_units + 10000,"
            " contribution_units = contribution_units + 10000 WHERE version = 5"
        )
        result = await verify(conn)
        assert not result.ok
        assert any(
            "event 5 (contribution): its SHA-256 does not match" in f for f in result.failures
        )
        assert any("contribution is not wager x rate" in f for f in result.failures)
        assert any("meter" in f and "!=" in f for f in result.failures), result.failures
    finally:
        await conn.close()


def reversal(table: str, seq: int, round_id: int, seat: int = 1, rate: int = 1400) -> TableRow:
    record = LinkContributionReversed(
        link_id="bank",
        level_id="progressive",
        parameters_version=1,
        round_id=round_id,
        seat=seat,
        wager_cents=500,
        rate_bp=rate,
        contribution_ten_thousandths_cent=500 * rate,
        reason="shoe-jam",
        rule="649a.13(f)",
    )
    return TableRow(table, seq, record.TYPE, record)


async def meter_units(conn: ledger.Connection) -> int:
    (snapshot,) = await ledger.snapshots(conn)
    return snapshot.levels[0].amount_units


async def test_a_voided_rounds_reversals_take_its_contributions_off_the_meter_once(
    setup: LinkSetup,
) -> None:
    """Round 1 (seats 1, 2) counts on table 1, round 1 (seat 3) on table 2; table 1 voids its
    round: the meter is what it was without it, each row in once even when sent again, a
    reversal naming no applied contribution or one reversed already is refused, and verify
    (meter = initial + contributions - reversals - awards) is clean."""
    await prepare(setup)
    conn = await connection(setup)
    try:
        before = await meter_units(conn)
        t1 = [contribution("s/t01", s, seat=s, round_id=1) for s in (1, 2)]
        t2 = [contribution("s/t02", 1, seat=3)]
        voids = [reversal("s/t01", 3, 1, seat=1), reversal("s/t01", 4, 1, seat=2)]
        # One batch with the contributions and their reversals, sent twice; then again alone.
        await ledger.apply_rows(conn, [*t1, *t2, *voids], by="a")
        await ledger.apply_rows(conn, [*t1, *t2, *voids], by="b")
        await ledger.apply_rows(conn, voids, by="c")
        assert await meter_units(conn) == before + 500 * 1400
        cur = await conn.execute(
            "SELECT kind, count(*), sum(contribution_units), sum(display_units) FROM link_event"
            " WHERE table_ref IS NOT NULL GROUP BY kind ORDER BY kind"
        )
        assert await cur.fetchall() == [
            ("contribution", 3, 3 * 500 * 1400, 3 * 500 * 1400),
            ("contribution.reversed", 2, -2 * 500 * 1400, -2 * 500 * 1400),
        ]
        # Each reversal names the contribution it takes back.
        cur = await conn.execute(
            "SELECT r.seat, c.seat, c.kind FROM link_event r JOIN link_event c"
            " ON c.link_id = r.link_id AND c.version = r.ref_version"
            " WHERE r.kind = 'contribution.reversed' ORDER BY r.seq"
        )
        assert await cur.fetchall() == [(1, 1, "contribution"), (2, 2, "contribution")]
        # Reversed again under another seq, or never contributed: refused, and acknowledged.
        again = [reversal("s/t01", 5, 1, seat=1), reversal("s/t02", 2, 9, seat=3)]
        result = await ledger.apply_rows(conn, again, by="a")
        assert result.cursors == {"s/t01": 5, "s/t02": 2}
        cur = await conn.execute(
            "SELECT detail FROM link_event WHERE kind = 'reversal.refused' ORDER BY seq DESC"
        )
        reasons = [json.loads(d)["reason"] for (d,) in await cur.fetchall()]
        assert "reversed already" in reasons[0] and "no contribution of round 9" in reasons[1]
        assert await meter_units(conn) == before + 500 * 1400
        result_ = await verify(conn)
        assert result_.ok, result_.failures
        (level,) = result_.links["bank"].values()
        assert level.progressive_in_units == 500 * 1400
    finally:
        await conn.close()


async def test_a_reversal_after_a_hit_and_reset_comes_off_the_meter_as_it_is(
    setup: LinkSetup,
) -> None:
    """The level was hit and reset between the count and the void: the contribution still
    comes off the meter (as the table's own meter takes a void back from what it holds)."""
    await prepare(setup)
    conn = await connection(setup)
    try:
        claim = LinkClaim(
            link_id="bank", level_id="progressive", parameters_version=1, claim_id="h",
            round_id=7, seat=3, hand="mini-royal-flush", cards="AsKsQs", share_percent=100,
            rule="649a.12(e)",
        )  # fmt: skip
        await ledger.apply_rows(
            conn,
            [contribution("s/t01", 1), TableRow("s/t02", 1, claim.TYPE, claim)],
            by="a",
        )
        after_reset = await meter_units(conn)
        await ledger.apply_rows(conn, [reversal("s/t01", 2, 1)], by="a")
        assert await meter_units(conn) == after_reset - 500 * 1400
        assert (await verify(conn)).ok
    finally:
        await conn.close()


async def test_parameters_cannot_change_while_the_link_is_in_operation(setup: LinkSetup) -> None:
    await prepare(setup)
    (definition,) = setup.config.definitions()
    richer = definition.model_copy(
        update={"levels": [definition.levels[0].model_copy(update={"rate_bp": 1500})]}
    )
    conn = await connection(setup)
    try:
        with pytest.raises(ledger.LinkInOperation, match=r"5321\.18\(b\)\(4\)"):
            await ledger.apply_definition(conn, richer, by="t")
        await check_against_ledger(setup.config)  # the ledger's own: a controller may start
        bad = setup.config.link[0].model_copy(update={"hit_policy": "full-amount-each"})
        with pytest.raises(StartupError, match="differ from the ledger's") as caught:
            await check_against_ledger(setup.config.model_copy(update={"link": [bad]}))
        assert caught.value.bad_config
        assert await ledger.set_operating(conn, "bank", False, by="t")
        applied = await ledger.apply_definition(conn, richer, by="t")
        assert (applied.outcome, applied.parameters_version) == ("changed", 2)
        # A contribution computed with the old parameters is refused and still acknowledged.
        result = await ledger.apply_rows(conn, [contribution("s/t01", 1)], by="t")
        assert result.cursors["s/t01"] == 1
        cur = await conn.execute("SELECT kind, detail FROM link_event ORDER BY version DESC")
        kind, detail = (await cur.fetchall())[0]
        assert kind == "contribution.refused" and "parameters version 1" in detail
        lost = definition.model_copy(update={"levels": []}, deep=True)
        with pytest.raises(ledger.LedgerError, match="cannot be removed"):
            await ledger.apply_definition(
                conn,
                lost.model_copy(
                    update={"levels": [definition.levels[0].model_copy(update={"level_id": "x"})]}
                ),
                by="t",
            )
        assert (await verify(conn)).ok
    finally:
        await conn.close()


async def test_concurrent_writers_apply_each_row_once_in_any_interleaving(
    setup: LinkSetup,
) -> None:
    """Two writers at once, every row of 12 tables handed to them 1-3 times, in random
    batches and orders: the meter is exact to the unit and each (table, seq) is in once."""
    await prepare(setup)
    rng = random.Random(42)
    rows = {
        f"s/t{t:02d}": [
            contribution(f"s/t{t:02d}", s, seat=rng.randint(1, 7)) for s in range(1, 41)
        ]
        for t in range(1, 13)
    }
    writers = [await connection(setup), await connection(setup)]

    async def writer(conn: ledger.Connection, seed: int) -> None:
        own = random.Random(seed)
        done = {t: 0 for t in rows}
        while any(done[t] < len(rows[t]) for t in rows):
            batch: list[TableRow] = []
            for table in own.sample(sorted(rows), own.randint(1, 6)):
                start = max(0, done[table] - own.randint(0, 5))  # some again
                end = min(len(rows[table]), done[table] + own.randint(1, 8))
                batch += rows[table][start:end]
                done[table] = max(done[table], end)
            result = await ledger.apply_rows(conn, batch, by=f"w{seed}")
            for table, seq in result.cursors.items():
                done[table] = max(done[table], seq)

    try:
        await asyncio.gather(writer(writers[0], 1), writer(writers[1], 2))
        conn = writers[0]
        cur = await conn.execute(
            "SELECT count(*), count(DISTINCT (table_ref, seq)), sum(contribution_units),"
            " count(DISTINCT controller) FROM link_event WHERE kind = 'contribution'"
        )
        count, distinct, units, writers_seen = await cur.fetchone() or (0, 0, 0, 0)
        assert count == distinct == 12 * 40
        assert units == 12 * 40 * 500 * 1400
        assert writers_seen == 2, "both writers applied some rows"
        (snapshot,) = await ledger.snapshots(conn)
        assert snapshot.levels[0].amount_units == 100_000 * 10_000 + 12 * 40 * 500 * 1400
        assert snapshot.row.version == 3 + 12 * 40  # created, initialised, opened, rows
        assert (await verify(conn)).ok
    finally:
        for conn in writers:
            await conn.close()


async def test_a_gap_stops_that_table_and_is_reported(setup: LinkSetup) -> None:
    await prepare(setup)
    conn = await connection(setup)
    try:
        rows = [contribution("s/t01", 1), contribution("s/t01", 3), contribution("s/t02", 1)]
        result = await ledger.apply_rows(conn, rows, by="t")
        assert result.cursors == {"s/t01": 1, "s/t02": 1} and result.gaps == {"s/t01": 2}
    finally:
        await conn.close()


def test_the_cli_migrates_applies_opens_verifies_and_reports(
    setup: LinkSetup, capsys: pytest.CaptureFixture[str]
) -> None:
    config = ["--config", str(setup.path)]
    assert main(["link", "verify", *config]) == 1
    assert "tablectl link migrate" in capsys.readouterr().err
    assert main(["link", "migrate", *config]) == 0
    assert "applied 0001_ledger.sql" in capsys.readouterr().out
    assert main(["link", "migrate", *config, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["applied"] == []
    assert main(["link", "open", "bank", *config]) == 1
    assert "no link bank in the ledger" in capsys.readouterr().err
    assert main(["link", "apply", *config]) == 0
    assert "link bank: created (parameters version 1)" in capsys.readouterr().out
    assert main(["link", "open", "bank", *config]) == 0
    assert "link bank: in operation" in capsys.readouterr().out

    async def play() -> None:
        conn = await connection(setup)
        try:
            rows = [contribution(f"s/t0{t}", s) for t in (1, 2) for s in range(1, 4)]
            claim = LinkClaim(
                link_id="bank", level_id="progressive", parameters_version=1, claim_id="h",
                round_id=4, seat=3, hand="mini-royal-flush", cards="AsKsQs", share_percent=100,
                rule="649a.12(e)",
            )  # fmt: skip
            rows.append(TableRow("s/t02", 4, claim.TYPE, claim))
            await ledger.apply_rows(conn, rows, by="t")
        finally:
            await conn.close()

    asyncio.run(play())
    capsys.readouterr()
    assert main(["link", "apply", *config]) == 0
    assert "unchanged" in capsys.readouterr().out
    assert main(["link", "verify", *config]) == 0
    assert "ok: 11 events on 1 link(s)" in capsys.readouterr().out
    today = datetime.now(UTC).date()
    period = ["--from", str(today), "--to", str(today + timedelta(days=1))]
    assert main(["link", "report", *config, *period]) == 0
    report = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["table"], r["contributions"], r["hits"], r["wins_cents"]) for r in report] == [
        ("s/t01", "3", "0", "0"),
        ("s/t02", "3", "1", str(100_000 + 6 * 70)),
    ]
    assert report[0]["progressive_in_units"] == str(3 * 500 * 1400)
    assert main(["link", "report", *config, *period, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][1]["hits"] == 1
    yesterday = ["--from", str(today - timedelta(days=1)), "--to", str(today)]
    assert main(["link", "report", *config, *yesterday]) == 0
    assert capsys.readouterr().out.count("\n") == 1, "only the header"
    assert main(["link", "close", "bank", *config, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is True


def test_the_committed_link_contract_matches_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    document = Path(__file__).resolve().parents[1] / "docs" / "asyncapi-link.json"
    assert main(["link", "schema", "--check", str(document)]) == 0, capsys.readouterr().err


def claim(table: str, seq: int, claim_id: str, seat: int = 1) -> TableRow:
    record = LinkClaim(
        link_id="bank",
        level_id="progressive",
        parameters_version=1,
        claim_id=claim_id,
        round_id=seq,
        seat=seat,
        hand="mini-royal-flush",
        cards="AsKsQs",
        share_percent=100,
        rule="649a.12(e)",
    )
    return TableRow(table, seq, record.TYPE, record)


async def test_a_claim_in_a_later_batch_finds_the_open_window_and_its_own_answer(
    setup: LinkSetup,
) -> None:
    """What a batch's claims name is read with its locks (one round trip): the window an
    earlier batch's award opened, and a claim id already answered."""
    await prepare(setup)
    conn = await connection(setup)
    try:
        await ledger.apply_rows(conn, [contribution("s/t01", 1)], by="t")
        first = await ledger.apply_rows(conn, [claim("s/t01", 2, "c1")], by="t")
        second = await ledger.apply_rows(
            conn, [claim("s/t02", 1, "c2"), claim("s/t01", 3, "c1")], by="t"
        )
        (answer_one,) = first.answers[("bank", "s/t01")]
        assert answer_one.status == "awarded" and answer_one.award is not None
        assert answer_one.award.order_in_window == 1
        (answer_two,) = second.answers[("bank", "s/t02")]
        assert answer_two.status == "awarded" and answer_two.award is not None
        # The window the first batch opened (1 s by default): the second hit is its second.
        assert answer_two.award.order_in_window == 2
        assert answer_two.award.window_first_version == answer_one.award.window_first_version
        again = {a.claim_id: a for a in second.answers[("bank", "s/t01")]}
        assert again["c1"].status == "awarded"  # the first answer stands ...
        cur = await conn.execute(
            "SELECT detail FROM link_event WHERE kind = 'claim.refused' AND table_ref = 's/t01'"
        )
        (refused,) = await cur.fetchall()
        assert "already answered" in json.loads(refused[0])["reason"]  # ... the copy is refused
        # The state published after the batch is read inside it: both pending, in order.
        (snapshot,) = second.snapshots
        assert [p.claim_id for p in snapshot.pending] == ["c1", "c2"]
        assert (await verify(conn)).ok
    finally:
        await conn.close()

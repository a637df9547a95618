"""The decks through the CLI and the daemon on simulated devices (docs/decks.md).

649a.3(b)(3): "Both decks are continuously alternated in and out of play, with each deck
being used for every other round of play." 649a.10(d): "the dealer shall count the stub at
least once every 5 rounds of play"; 649a.10(e): 52 cards, the stub to the discard rack.
649a.3(c)(2): decks dealt from a shoe are changed at least every eight hours: the age is
journaled, so a restart does not make a deck young.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tablectl.drivers.reference.messages import ProtocolError, decode_deck_info, encode_deck_info
from tablectl.simulators.broker import PrivateBroker

from tablectl import cli
from tablectl.config import DeckSection
from tablectl.core.table import Phase
from tablectl.service.replay import replay
from tablectl.status import FaultView, Status, Stops

from .conftest import SimulatedTable, simulated_table


async def tablectl(
    table: SimulatedTable, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str]:
    """`tablectl ARGV --socket S` as the dealer runs it: its exit code and what it printed."""
    sock = str(table.config.storage.socket_path)
    capsys.readouterr()
    code = await asyncio.to_thread(cli.main, [*argv, "--socket", sock])
    out, err = capsys.readouterr()
    return code, out + err


async def status(table: SimulatedTable, capsys: pytest.CaptureFixture[str]) -> Status:
    code, out = await tablectl(table, capsys, "status", "--json")
    assert code == 0, out
    data, _ = json.JSONDecoder().raw_decode(out[out.index("{") :])  # the log lines follow
    return Status.model_validate(data)


def faults(status: Status) -> dict[str, FaultView]:
    return {f.what: f for f in status.faults}


async def test_decks_are_introduced_alternate_and_the_stub_is_counted_through_the_cli(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deck = DeckSection(stub_count_every_rounds=1)  # a table whose shuffler does not count
    async with simulated_table(broker, tmp_path / "data", deck=deck) as table:
        await table.until_shuffler_has_nothing_left()
        assert table.state.phase is Phase.CLOSED  # no deck known: no round opens
        missing = faults(await status(table, capsys))["deck-missing"]
        assert missing.stops is Stops.ROUNDS and missing.rule == "649a.3"
        assert "--id ID --back COLOUR" in str(missing.command)

        code, out = await tablectl(
            table, capsys, "dealer", "new-deck", "--id", "D1", "--back", "red", "--by", "d7"
        )
        assert code == 0 and "deck.introduced" in out, out
        code, out = await tablectl(
            table, capsys, "dealer", "new-deck", "--id", "D2", "--back", "red"
        )
        assert code == 1 and "649a.3(b)(1)" in out, out  # the backs differ in colour
        code, out = await tablectl(
            table, capsys, "dealer", "new-deck", "--id", "D2", "--back", "blue"
        )
        assert code == 0, out
        await table.wait_phase(Phase.BETTING)
        shown = await status(table, capsys)
        decks = shown.decks
        assert decks is not None
        assert [(d.deck_id, d.in_play) for d in decks.decks] == [
            ("D1", True),
            ("D2", False),
        ]
        assert decks.max_age_ms == 8 * 3_600_000 and decks.decks[0].to_limit_ms > 0

        # Round 1 (on D1) ends; the stub count is due before round 2 opens.
        code, out = await tablectl(table, capsys, "dealer", "void", "wrong-card-count")
        assert code == 0, out
        await table.until_shuffler_has_nothing_left()
        assert table.state.phase is Phase.CLOSED and table.state.round_id == 1
        due = faults(await status(table, capsys))["stub-count-due"]
        assert due.rule == "649a.10(d)" and "stub-count N" in str(due.command)
        code, out = await tablectl(table, capsys, "status")
        assert "stub count: DUE now" in out and "STUB COUNT DUE" in out, out

        code, out = await tablectl(table, capsys, "dealer", "stub-count", "52", "--by", "d7")
        assert code == 0 and "outcome=correct rule=649a.10(e)" in out, out
        await table.wait_phase(Phase.BETTING)
        assert table.state.round_id == 2 and table.state.deck.round_deck == "D2"
        # 649a.3(b)(3): round 2 is not dealt from the deck that played round 1.
        code, out = await tablectl(table, capsys, "dealer", "deck-in-play", "D1")
        assert code == 1 and "649a.3(b)(3)" in out and "from deck D2" in out, out
        code, out = await tablectl(table, capsys, "dealer", "deck-in-play", "D2")
        assert code == 0, out
        introduced = {d.deck_id: d.introduced_ms for d in table.state.deck.decks}

        # The deck's age is journaled: a restart keeps it.
        await table.stop()
        await table.start()
        await table.daemon.wait_until(lambda s: s.deck.now_ms is not None, 10)
        assert {d.deck_id: d.introduced_ms for d in table.state.deck.decks} == introduced
        store = table.daemon.store
        assert store is not None
        replayed = await table.daemon.in_journal_thread(lambda: replay(store))
        assert replayed.identical, replayed.difference


async def test_a_shuffler_that_reports_its_decks_introduces_them(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    """The shuffler's DECK request (docs/protocols/shuffler.md): each deck it shuffles, by id
    and back colour, is introduced without the dealer; one that does not report (it NAKs
    DECK as an unknown type, as older shufflers do) leaves the introduction to the dealer."""
    async with simulated_table(broker, tmp_path / "data", deck=DeckSection()) as table:
        await table.until_shuffler_has_nothing_left()
        assert table.state.deck.decks == () and table.state.phase is Phase.CLOSED
        await table.stop()
        table.sim.decks = [("S1", "red"), ("S2", "blue")]  # it alternates them (649a.3(b)(3))
        await table.start()
        await table.wait_phase(Phase.BETTING)
        life = table.state.deck
        assert [(d.deck_id, d.back) for d in life.decks] == [("S1", "red"), ("S2", "blue")]
        assert life.round_deck == "S1"
        store = table.daemon.store
        assert store is not None
        sources = [
            row.data["source"]
            for row in store.rows_after(0, limit=1000)
            if row.type == "deck.introduced"
        ]
        assert sources == ["shuffler", "shuffler"]


def test_deck_info_round_trips_and_a_reply_that_does_not_decode_is_refused() -> None:
    assert decode_deck_info(encode_deck_info(("D17", "red"))) == ("D17", "red")
    assert decode_deck_info(encode_deck_info(None)) is None
    for bad in (b"", b"\x03D17", b"\x03D17\x00", b"\x03D17\x03red!", b"\x02\xff\xfe\x03red"):
        with pytest.raises(ProtocolError):
            decode_deck_info(bad)


async def test_an_idle_table_asks_for_the_idle_procedure_through_the_cli(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """649a.5(f): after deck.idle_minutes without a round the round waiting for bets closes,
    status names the procedure and its command, and the next round opens only after the
    dealer confirms it (the deck from the table shuffled and counted first)."""
    async with simulated_table(broker, tmp_path / "data", deck=DeckSection()) as table:
        await table.until_shuffler_has_nothing_left()
        for deck_id, back in (("D1", "red"), ("D2", "blue")):
            code, out = await tablectl(
                table, capsys, "dealer", "new-deck", "--id", deck_id, "--back", back
            )
            assert code == 0, out
        await table.wait_phase(Phase.BETTING)
        await table.until_shuffler_has_nothing_left()
        assert table.daemon.clocks.deck_clock_tick() > 0  # nothing due yet
        assert table.state.deck.idle_due_ms is None
        later_on = table.daemon.wall_clock_ms() + 31 * 60_000
        table.daemon.clocks.wall_clock_ms = lambda: later_on
        table.daemon.clocks.deck_clock_tick()
        await table.daemon.wait_until(lambda s: s.deck.idle_due_ms is not None, 10)
        assert table.state.phase is Phase.CLOSED and table.state.round_id == 1
        shown = await status(table, capsys)
        idle = faults(shown)["idle-procedure"]
        assert idle.rule == "649a.5(f)" and idle.stops is Stops.ROUNDS
        assert idle.command == "tablectl dealer idle-procedure --by ID"
        code, out = await tablectl(table, capsys, "status")
        assert "IDLE PROCEDURE due since" in out, out

        code, out = await tablectl(table, capsys, "dealer", "idle-procedure", "--by", "d7")
        assert code == 0 and "deck.idle_procedure_done" in out, out
        await table.wait_phase(Phase.BETTING)
        assert table.state.round_id == 2
        code, out = await tablectl(table, capsys, "dealer", "idle-procedure", "--by", "d7")
        assert code == 1 and "no idle procedure is due" in out, out

"""The whole table: daemon, shuffler on a pty, the simulated table's GPIO, Mosquitto, SQLite."""

from __future__ import annotations

import asyncio
import json

import aiomqtt

from tablectl import cli
from tablectl.core.events import Settle
from tablectl.core.table import Phase
from tablectl.mqtt.relay import topic_root
from tablectl.status import Status

from .conftest import SimulatedTable


def events_of(table: SimulatedTable, type_: str) -> list[dict[str, object]]:
    return [e["data"] for e in table.backend.events.values() if e["type"] == type_]


async def test_full_round_with_two_progressive_wagers(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    meter_before = table.meter
    await table.place_wagers(2, 5)
    assert table.state.wagers == {2: 100, 5: 100}
    assert table.inputs.light_is_on(2) and table.inputs.light_is_on(5)
    assert not table.inputs.light_is_on(1)

    await table.lock()
    # 14.5% of $1, twice: 29 cents, exactly (649a.12(e)(3)).
    assert table.meter.units - meter_before.units == 2 * 100 * 1450
    reply = await table.dealer(cmd="settle", hands={"5": "AsKsQs", "2": "2h3h4h"})
    assert reply["ok"], reply
    meter_at_hit = meter_before.cents + 29

    await table.wait_backend_caught_up()
    (counted,) = [d for d in events_of(table, "wagers.counted") if d["round_id"] == 1]
    assert counted["accepted_wagers"] == 2 and counted["seats"] == [2, 5]
    hits = {d["seat"]: d for d in events_of(table, "jackpot.hit")}
    assert hits[5]["amount_cents"] == meter_at_hit and hits[5]["basis"] == "100%-of-meter"
    assert hits[2]["amount_cents"] == 70 * 100  # straight flush, paytable A: 70 for 1
    assert [(d["seat"], d["amount_cents"]) for d in events_of(table, "envy.bonus")] == [
        (2, 10_000)  # seat 2 envies seat 5's ace-king-queen of spades
    ]
    # The table holds for the floorperson (649a.11(c)(5)); then the seats go dark.
    assert table.state.phase is Phase.CLOSED and len(table.state.hits_pending) == 2
    await table.validate_hits()
    await table.wait_phase(Phase.BETTING)
    assert not table.inputs.light_is_on(2) and not table.inputs.light_is_on(5)
    assert table.meter.cents == 100_000
    await table.backend.wait_for(
        lambda: table.backend.meters["progressive"]["amount_cents"] == 100_000
    )
    assert table.backend.status == {"status": "online", "boot_id": table.daemon.boot_id}


async def test_chip_after_lockout_is_not_recognised(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1)
    await table.lock()
    meter = table.meter
    await table.place_wagers(4)  # rests long enough, but after "no more bets"
    assert table.state.wagers == {1: 100}
    assert table.meter == meter
    assert not table.inputs.light_is_on(4)
    assert table.state.counters.wagers_rejected == 1
    await table.wait_backend_caught_up()
    assert events_of(table, "wager.rejected") == [
        {"round_id": 1, "seat": 4, "reason": "after-lockout", "rule": "649a.2(c)(2)"}
    ]


async def test_chip_placed_before_the_lockout_counts_though_it_rests_after(
    table: SimulatedTable,
) -> None:
    """649a.2(c)(2): the edge decides. A chip placed a moment before the button counts."""
    await table.wait_phase(Phase.BETTING)
    table.inputs.place_chip(3)
    table.inputs.press_lockout()  # within the chip's debounce window
    await table.wait_phase(Phase.LOCKED)
    assert table.state.undecided == (3,) and not table.state.counted
    await table.daemon.wait_until(lambda s: s.counted, 5)
    assert table.state.wagers == {3: 100} and table.inputs.light_is_on(3)
    await table.wait_backend_caught_up()
    (counted,) = events_of(table, "wagers.counted")
    assert counted["seats"] == [3] and counted["decided_after_lockout"] == [3]


async def test_miscount_blocks_the_table_until_a_new_deck(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1)
    await table.lock()
    await table.daemon.wait_until(lambda s: s.deck_ready, 5)  # deck B shuffled during play
    table.sim.remove_card()
    assert (await table.dealer(cmd="settle", hands={"1": "2c7d9h"}))["ok"]
    # Round 2 opened on deck B; deck A is shuffled now and counts 51.
    await table.daemon.wait_until(lambda s: s.blocked is not None, 5)
    assert table.state.blocked == "deck-miscount:51"
    await table.place_wagers(2)
    await table.lock()
    assert (await table.dealer(cmd="settle", hands={"2": "2c7d9h"}))["ok"]
    await table.until_shuffler_has_nothing_left()
    assert table.state.phase is Phase.CLOSED  # 649a.5(b): no round without a counted deck
    status = await table.status()
    assert status.blocked == "deck-miscount:51"
    assert status.hits_pending == []

    table.sim.load_full_deck()
    assert (await table.dealer(cmd="new-deck"))["ok"]
    await table.wait_phase(Phase.BETTING)
    await table.wait_backend_caught_up()
    (irregularity,) = events_of(table, "irregularity.deck_miscount")
    assert irregularity["rule"] == "649a.5(b)" and irregularity["card_count"] == 51


async def test_shuffler_jam_needs_a_reshuffle(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    table.sim.knobs.jam_next_shuffle = True
    await table.lock()  # deck B's shuffle was asked for at round open; wait for its fault
    await table.daemon.wait_until(lambda s: s.shuffler_fault == "jam", 5)
    assert (await table.dealer(cmd="settle", hands={}))["ok"]
    await table.until_shuffler_has_nothing_left()
    assert table.state.phase is Phase.CLOSED  # 649a.13(e): no round until reshuffled
    assert (await table.dealer(cmd="reshuffle"))["ok"]
    await table.wait_phase(Phase.BETTING)


async def test_broker_restart_loses_no_event(table: SimulatedTable) -> None:
    backend = table.backend
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1, 2)
    await table.lock()
    await table.wait_backend_caught_up()
    before = table.daemon.store.last_seq  # type: ignore[union-attr]

    table.broker.stop()
    assert (await table.dealer(cmd="settle", hands={"1": "AsKsQs", "2": "5d5c5h"}))["ok"]
    await table.validate_hits()
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(3)
    await table.lock()
    assert (await table.dealer(cmd="void", reason="shoe-jam"))["ok"]
    after = table.daemon.store.last_seq  # type: ignore[union-attr]
    assert after > before + 5  # journaled while the broker was down
    table.broker.start()

    await table.wait_backend_caught_up(timeout_s=30)
    seqs = sorted(backend.events)
    assert seqs == list(range(1, seqs[-1] + 1)) and seqs[-1] >= after  # no gap, no loss
    journal = table.daemon.store.rows_after(0, limit=seqs[-1])  # type: ignore[union-attr]
    assert [backend.events[r.seq]["event_id"] for r in journal] == [r.event_id for r in journal]
    hit = next(d for d in events_of(table, "jackpot.hit") if d["seat"] == 1)
    assert hit["basis"] == "100%-of-meter"


async def test_daemon_restart_keeps_the_meter_exactly(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1, 3, 6)
    await table.lock()
    meter = table.meter
    assert meter.carry == 3 * 100 * 1450 % 10_000  # the half cents are carried, not lost
    last_seq = table.daemon.store.last_seq  # type: ignore[union-attr]
    boot = table.daemon.boot_id

    await table.stop()
    await table.start()
    assert table.daemon.boot_id != boot
    assert table.meter == meter
    assert table.state.phase is Phase.LOCKED and table.state.wagers == {1: 100, 3: 100, 6: 100}
    assert all(table.inputs.light_is_on(seat) for seat in (1, 3, 6))  # lamps restored
    assert table.daemon.store.last_seq >= last_seq  # type: ignore[union-attr]
    assert table.daemon.store.verify_chain() is None  # type: ignore[union-attr]
    assert (await table.dealer(cmd="settle", hands={"1": "2c7d9h", "3": "2d7c9s", "6": "3c8d9c"}))[
        "ok"
    ]
    await table.wait_backend_caught_up()
    seqs = sorted(table.backend.events)
    assert seqs == list(range(1, seqs[-1] + 1))


async def test_restart_while_betting_comes_back_locked_out(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(2)
    await table.stop()
    await table.start()
    await table.wait_phase(Phase.LOCKED)  # lock-out is the safe state
    assert table.state.wagers == {2: 100}
    await table.wait_backend_caught_up()
    causes = [d["cause"] for d in events_of(table, "round.locked")]
    assert causes == ["power-up"]


async def test_status_cli_reads_the_running_daemon(table: SimulatedTable, capsys: object) -> None:
    await table.wait_phase(Phase.BETTING)
    sock = str(table.config.storage.socket_path)
    code = await asyncio.to_thread(cli.main, ["status", "--socket", sock, "--json"])
    assert code == 0
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    status = Status.model_validate_json(out)
    assert status.phase is Phase.BETTING and status.accepting_wagers is True
    assert status.shuffler is not None and status.shuffler.link == "up"
    assert status.meter is not None and status.meter.cents == 100_000

    code = await asyncio.to_thread(cli.main, ["status", "--socket", sock])
    assert code == 0
    text = capsys.readouterr().out  # type: ignore[attr-defined]
    assert (
        "table tcp-07 (pa-demo-casino), three-card-poker  round 1  phase betting  "
        "accepting wagers: yes"
    ) in text
    assert "meter progressive: $1,000.00" in text
    assert "shuffler: link up" in text

    code = await asyncio.to_thread(cli.main, ["dealer", "new-deck", "--socket", sock])
    assert code == 1  # refused: no deck is waiting to be replaced
    assert "no deck is waiting" in capsys.readouterr().err  # type: ignore[attr-defined]


async def test_game_pace_is_published_retained_and_shown_by_status(
    table: SimulatedTable, capsys: object
) -> None:
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(3)
    await table.lock()
    reply = await table.dealer(cmd="settle", hands={"3": "2h5d9c"})
    assert reply["ok"], reply
    await table.wait_phase(Phase.BETTING)
    assert table.daemon.pace is not None
    table.daemon.pace.refresh()
    root = topic_root(table.config.table.site_id, table.config.table.table_id)
    host, port = table.config.mqtt.host, table.config.mqtt.port
    async with aiomqtt.Client(host, port) as client:
        await client.subscribe(f"{root}/pace", qos=1)
        async with asyncio.timeout(10):
            async for message in client.messages:
                pace = json.loads(message.payload)  # retained: the latest, or the next one
                if pace["rolling"]["rounds"] == 1:
                    break
    assert pace["rolling"]["hands"] == 1 and pace["shifts"], pace
    code = await asyncio.to_thread(
        cli.main, ["status", "--socket", str(table.config.storage.socket_path)]
    )
    assert code == 0
    text = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "pace (last 60 min): " in text and " rounds/h, " in text and "; shift from " in text


async def test_malformed_mqtt_commands_are_counted_and_survived(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    root = topic_root(table.config.table.site_id, table.config.table.table_id)
    host, port = table.config.mqtt.host, table.config.mqtt.port
    async with aiomqtt.Client(host, port) as client:
        await client.subscribe(f"{root}/res/#", qos=1)
        await client.publish(f"{root}/cmd/replay", b"{not json", qos=1)
        await client.publish(f"{root}/cmd/replay", json.dumps({"from_seq": "x"}), qos=1)
        await client.publish(f"{root}/ack/pgs", json.dumps({"acked_through_seq": True}), qos=1)
        await client.publish(f"{root}/cmd/launch", json.dumps({"correlation_id": "c1"}), qos=1)
        async with asyncio.timeout(5):
            async for message in client.messages:
                reply = json.loads(message.payload)
                assert reply == {
                    "correlation_id": "c1",
                    "status": "error",
                    "data": None,
                    "error": "unknown command 'launch'; known: replay, resync",
                }
                break
    assert table.daemon.relay.counters.malformed_inbound == 4
    await table.place_wagers(1)  # still running
    assert table.state.wagers == {1: 100}


async def test_broker_down_at_start_delays_but_loses_nothing(table: SimulatedTable) -> None:
    await table.stop()
    table.broker.stop()
    await table.start()  # the daemon starts and plays with no broker at all
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(4)
    await table.lock()
    assert (await table.dealer(cmd="settle", hands={"4": "QhQdQs"}))["ok"]
    assert not table.daemon.relay.connected
    table.broker.start()
    await table.wait_backend_caught_up(timeout_s=30)
    seqs = sorted(table.backend.events)
    assert seqs == list(range(1, seqs[-1] + 1))
    assert [d["amount_cents"] for d in events_of(table, "jackpot.hit")] == [60 * 100]


async def test_chip_resting_before_betting_opens_counts_when_it_opens(
    table: SimulatedTable,
) -> None:
    """A chip on the circle before the round opens is a wager placed before "no more bets"."""
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1)
    await table.lock()
    await table.place_wagers(5)  # too late for round 1 (refused), but it stays for round 2
    assert table.state.wagers == {1: 100}
    assert (await table.dealer(cmd="settle", hands={"1": "2c7d9h"}))["ok"]
    await table.daemon.wait_until(lambda s: s.round_id == 2 and s.wagers == {5: 100}, 10)
    assert table.inputs.light_is_on(5)


async def test_a_command_whose_caller_gave_up_is_still_taken_and_the_daemon_runs_on(
    table: SimulatedTable,
) -> None:
    # A control-socket client that disconnects, or a caller that times out, cancels its wait
    # while the step is being committed: the step stands, and no one is answered.
    await table.wait_phase(Phase.BETTING)
    await table.place_wagers(1)
    await table.lock()
    settle = Settle.model_validate({"hands": {1: "2c7d9h"}})
    asker = asyncio.create_task(table.daemon.submit(settle))
    await asyncio.sleep(0)  # queued; the core steps on it and commits in the journal thread
    asker.cancel()
    await table.daemon.wait_until(lambda s: s.round_id == 2, 10)
    assert asker.cancelled()
    await table.wait_phase(Phase.BETTING)
    assert table._task is not None and not table._task.done()
    await table.place_wagers(2)
    await table.lock()
    assert (await table.dealer(cmd="settle", hands={"2": "QhQdQs"}))["ok"]

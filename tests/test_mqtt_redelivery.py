"""Rows the broker dropped reach the backends again without a reconnect, paced and bounded.

The rules (tablectl/mqtt/redelivery.py) on a virtual clock; then the relay against a private
Mosquitto whose queue per subscriber is small, with a backend slower than the table.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiomqtt
import pytest
from tablectl.simulators.broker import PrivateBroker

from tablectl.core.events import ChipSensed
from tablectl.core.table import Phase
from tablectl.mqtt.redelivery import (
    ANONYMOUS,
    FRUITLESS_HEALS,
    INITIAL_WINDOW,
    REPLAY_INTERVAL_S,
    Asked,
    Dormant,
    Redelivery,
    Rewound,
    Started,
)
from tablectl.mqtt.relay import topic_root

from .conftest import SimulatedTable, simulated_table

# --- the rules, on a virtual clock ------------------------------------------------------------


def drain(r: Redelivery, limit: int = 1000, now: float = 0.0) -> list[tuple[int, int]]:
    """Everything the rules let go now, as the relay would send it: [(after, through)]."""
    out = []
    while (batch := r.next_batch(limit)) is not None:
        after, count = batch
        r.sent(after, after + count, now)
        out.append((after, after + count))
    return out


def ack(r: Redelivery, acked: dict[str, int], backend: str, seq: int, now: float) -> None:
    """A backend's ack, as the relay takes it."""
    acked[backend] = seq
    r.ack_moved(backend, now)


def test_a_stalled_ack_heals_from_the_ack_paced_by_the_backends_acks() -> None:
    acked = {"pgs": 100}
    r = Redelivery(acked, stall_s=5, window=50)
    r.session(cursor=100, now=0)
    r.handed_through(400)  # rows 101..400 went to the broker, seen out at the check at 1 s
    assert r.tick(1) == [] and r.tick(5.9) == [] and drain(r) == []  # not stalled yet
    assert r.tick(6) == [Started("pgs", after=100, until=400, heal=True)]
    assert drain(r, now=6) == [(100, 100 + INITIAL_WINDOW)]  # a small window past its ack
    ack(r, acked, "pgs", 110, 6.5)  # it took them ...
    assert drain(r, now=6.5) == [(110, 130)]  # ... so the next ones go, twice as many
    ack(r, acked, "pgs", 390, 7)  # the later rows it held make its ack jump
    assert drain(r, now=7) == [(390, 400)]  # and what it holds is not sent again
    assert "pgs" in r.replays  # sent, not yet acknowledged: a lost tail would be seen
    ack(r, acked, "pgs", 400, 7.5)
    assert drain(r) == [] and r.replays == {}
    assert r.tick(100) == []  # caught up: nothing stalls


def test_a_window_the_backend_does_not_acknowledge_is_sent_again_smaller() -> None:
    # The broker's queue for the backend holds fewer rows than the window: the rest are
    # dropped, its ack stops short, and the replay goes back to it within a few of its ack
    # intervals (not the stall time), with half the window.
    acked = {"pgs": 0}
    r = Redelivery(acked, stall_s=60, window=100)
    r.session(cursor=0, now=0)
    r.handed_through(1000)
    assert r.request("pgs", from_seq=1, now=0) is Asked.STARTED
    now = 0.0
    for _ in range(3):  # windows of 10, 20, 40 taken whole, an ack every half second
        (batch,) = drain(r, now=now)
        now += 0.5
        ack(r, acked, "pgs", batch[1], now)
    assert r.window("pgs") == 80
    assert drain(r, now=now) == [(70, 150)]
    now += 0.5
    ack(r, acked, "pgs", 100, now)  # 30 of them fit its queue; 50 were dropped
    assert drain(r, now=now) == [(150, 100 + r.window("pgs"))]  # it slides on with the ack ...
    assert r.tick(now + 1.0) == []  # ... and is not given up on at once
    lost = r.tick(now + 2.0)  # twice its ack interval (0.5 s) and more: lost
    assert lost == [Rewound("pgs", after=100, window=r.window("pgs"))]
    assert r.window("pgs") == 50  # half of what it had grown to
    assert drain(r, now=now + 2) == [(100, 100 + r.window("pgs"))]
    # Past the loss it grows by a row per window acknowledged, no longer doubling.
    before = r.window("pgs")
    ack(r, acked, "pgs", 100 + before, now + 2.5)
    assert r.window("pgs") == before + 1


def test_a_backend_that_asks_inside_a_running_replay_lost_rows_of_it() -> None:
    acked = {"pgs": 0}
    r = Redelivery(acked, stall_s=60, window=100)
    r.session(cursor=0, now=0)
    r.handed_through(500)
    assert r.request("pgs", from_seq=1, now=0) is Asked.STARTED
    assert drain(r, now=0) == [(0, 10)]
    ack(r, acked, "pgs", 4, 0.5)
    assert drain(r, now=0.5) == [(10, 4 + r.window("pgs"))]
    # It lacks 5 onwards (dropped): the replay goes back to its ack, once a rate interval.
    assert r.request("pgs", from_seq=5, now=REPLAY_INTERVAL_S) is Asked.RUNNING
    assert drain(r, now=REPLAY_INTERVAL_S) == [(4, 4 + r.window("pgs"))]


def test_a_backend_that_acknowledges_is_never_healed() -> None:
    acked = {"pgs": 0}
    r = Redelivery(acked, stall_s=5)
    r.session(cursor=0, now=0)
    for second in range(1, 600):
        r.handed_through(second * 10)
        acked["pgs"] = second * 10 - 5  # slower than the table, but moving
        assert r.tick(second) == []
    assert r.view()["pgs"].heals == 0


def test_nothing_published_past_an_ack_is_not_a_stall() -> None:
    acked = {"pgs": 40, "audit": 40}
    r = Redelivery(acked, stall_s=5)
    r.session(cursor=40, now=0)
    assert all(r.tick(t) == [] for t in range(1, 3600, 7))  # an idle table for an hour


def test_a_backend_that_stays_silent_through_every_heal_is_sent_nothing_more() -> None:
    acked = {"pgs": 0, "audit": 0}
    r = Redelivery(acked, stall_s=5, window=50)
    r.session(cursor=0, now=0)
    heals: list[Started] = []
    dormant: list[Dormant] = []
    resent = 0
    resent_when_dormant = 0
    # Hours of a busy table: pgs keeps up, audit is offline.
    for second in range(1, 6 * 3600):
        r.handed_through(second * 30)
        acked["pgs"] = second * 30
        for change in r.tick(second):
            if isinstance(change, Dormant):
                dormant.append(change)
                resent_when_dormant = resent
            elif isinstance(change, Started):
                heals.append(change)
        resent += sum(through - after for after, through in drain(r, now=second))
    assert [h.requester for h in heals] == ["audit"] * FRUITLESS_HEALS
    assert dormant == [Dormant("audit")] and r.dormant("audit")
    # A window per heal and smaller ones as each goes unacknowledged, then nothing for hours.
    assert 0 < resent == resent_when_dormant <= 2 * INITIAL_WINDOW * FRUITLESS_HEALS
    # A new connection starts from the lowest ack of the backends still listening.
    assert r.floor(handed_mark=99_999) == acked["pgs"]
    # It comes back and acknowledges: it is watched again, and healed if it stalls again.
    acked["audit"] = 10
    assert r.tick(30_000) == [] and not r.dormant("audit")
    assert r.tick(30_006) == [Started("audit", after=10, until=r.handed, heal=True)]


def test_every_backend_dormant_starts_a_connection_after_the_last_row_handed() -> None:
    acked = {"audit": 0}
    r = Redelivery(acked, stall_s=1, window=10)
    r.session(cursor=0, now=0)
    r.handed_through(500)
    for second in range(1, 60):
        r.tick(second)
        drain(r)
    assert r.dormant("audit") and r.floor(handed_mark=500) == 500


def test_replay_requests_are_rate_limited_per_backend() -> None:
    acked = {"pgs": 0, "link": 0}
    r = Redelivery(acked, stall_s=600, window=50)
    r.session(cursor=0, now=0)
    r.handed_through(1000)
    assert r.request("pgs", from_seq=101, now=0) is Asked.STARTED
    # The same rows again, or later ones, while that replay runs: it goes on, not restarted.
    assert r.request("pgs", from_seq=101, now=0.1) is Asked.RUNNING
    assert r.request("pgs", from_seq=500, now=0.2) is Asked.RUNNING
    # Earlier rows: a new replay, but not before the interval; the lowest request is kept.
    assert r.request("pgs", from_seq=51, now=0.3) is Asked.HELD
    assert r.request("pgs", from_seq=21, now=0.4) is Asked.HELD
    assert r.request("pgs", from_seq=61, now=0.5) is Asked.HELD
    # Another backend has its own limit.
    assert r.request("link", from_seq=1, now=0.5) is Asked.STARTED
    assert r.tick(0.9) == []
    assert r.tick(REPLAY_INTERVAL_S) == [Started("pgs", after=20, until=1000, heal=False)]
    # A backend asking a thousand times a second starts one replay a second.
    started = 0
    for i in range(10_000):
        now = 2 + i / 1000
        started += r.request("pgs", from_seq=1 + i % 7, now=now) is Asked.STARTED
        started += len(r.tick(now))
        r.replays.pop("pgs", None)  # as if each replay ended at once: the worst case
    assert started <= 10 / REPLAY_INTERVAL_S + 1


def test_a_request_that_names_no_backend_is_sent_at_full_speed_under_its_own_limit() -> None:
    r = Redelivery({"pgs": 0}, stall_s=600, window=50)
    r.session(cursor=0, now=0)
    r.handed_through(300)
    assert r.request(ANONYMOUS, from_seq=1, now=0) is Asked.STARTED
    assert drain(r, limit=256) == [(0, 256), (256, 300)]  # no ack paces it
    assert r.request(ANONYMOUS, from_seq=1, now=0.5) is Asked.HELD


def test_rows_resent_once_serve_every_backend_that_lacked_them() -> None:
    acked = {"pgs": 10, "audit": 10}
    r = Redelivery(acked, stall_s=5, window=100)
    r.session(cursor=10, now=0)
    r.handed_through(60)
    assert r.tick(1) == []
    assert len(r.tick(6)) == 2  # both stalled at the same ack
    assert drain(r) == [(10, 10 + INITIAL_WINDOW)]  # one copy for both


# --- the relay, against a broker that drops ------------------------------------------------


@pytest.fixture
async def small_queue_broker() -> AsyncIterator[PrivateBroker]:
    """100 messages in flight and 100 queued per subscriber: past that, Mosquitto drops."""
    with PrivateBroker(max_queued=100) as broker:
        yield broker


async def burst(table: SimulatedTable, events: int) -> int:
    """Chips placed and lifted, all at once: one journal row each. The last seq."""
    store = table.daemon.store
    assert store is not None
    now = time.monotonic_ns()
    steps = store.steps_committed
    for i in range(events):
        seat = 1 + i // 2 % table.config.table.seats
        table.daemon.post(ChipSensed(seat=seat, present=i % 2 == 0, since_ns=now + i))
    await table.daemon.wait_until(lambda _: store.steps_committed - steps >= events, 30)
    return store.last_seq


async def played(table: SimulatedTable, events: int, per_s: float) -> int:
    """Chips placed and lifted at per_s, as a busy table makes rows. The last seq."""
    store = table.daemon.store
    assert store is not None
    steps = store.steps_committed
    for i in range(events):
        seat = 1 + i // 2 % table.config.table.seats
        table.daemon.post(ChipSensed(seat=seat, present=i % 2 == 0, since_ns=time.monotonic_ns()))
        await asyncio.sleep(1 / per_s)
    await table.daemon.wait_until(lambda _: store.steps_committed - steps >= events, 30)
    return store.last_seq


async def until(condition: Callable[[], bool], timeout_s: float = 10) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 (the relay's rules have no event to wait on)
            await asyncio.sleep(0.02)


def copies_first(table: SimulatedTable) -> set[int]:
    """Rows whose first copy at the backend was a re-send: the broker dropped the original."""
    first: dict[int, bool] = {}
    for seq, replay in table.backend.deliveries:
        first.setdefault(seq, replay)
    return {seq for seq, replay in first.items() if replay}


# The relay alone (the backend never asks but at its connect), or the backend asking on each
# gap (the relay's stall time too long to play a part).
@pytest.mark.parametrize(
    ("backend_asks", "ack_stall_s"), [(False, 0.5), (True, 60)], ids=["relay-alone", "backend-asks"]
)
async def test_rows_the_broker_drops_reach_a_slow_backend_without_a_reconnect(
    small_queue_broker: PrivateBroker, tmp_path: Path, backend_asks: bool, ack_stall_s: float
) -> None:
    # The backend takes a millisecond per event and reads no faster: the table journals
    # thousands of rows in a second, and the broker drops what does not fit its queue.
    async with simulated_table(
        small_queue_broker,
        tmp_path / "data",
        mqtt={"ack_stall_s": ack_stall_s},
        backend={"per_event_s": 0.001, "ask_on_gap": backend_asks},
    ) as table:
        await table.wait_phase(Phase.BETTING)
        await table.wait_backend_caught_up()
        started = time.monotonic()
        last = await burst(table, 2000)
        await table.backend.wait_for(lambda: table.backend.last_contiguous_seq >= last, 120)
        took = time.monotonic() - started
        relay = table.daemon.relay
        print(f"\n{backend_asks=}: {last} rows through in {took:.2f} s; {relay.counters}")
        # Every row, the burst's and any the devices added meanwhile, each once.
        await table.wait_backend_caught_up()
        assert table.daemon.store is not None
        assert set(table.backend.events) == set(range(1, table.daemon.store.last_seq + 1))
        assert copies_first(table), "the broker dropped nothing: the test proves nothing"
        assert relay.counters.redelivered > 0
        if backend_asks:  # on a gap, named: paced by its acks
            assert relay.counters.heals == 0 and table.backend.replays_asked > 1
        else:
            assert relay.counters.heals > 0 and table.backend.replays_asked == 1  # at connect
        # Healed on one connection: neither side reconnected.
        assert relay.counters.connects == 1 and table.backend.connects == 1
        # Paced by the backend's acks, not the whole tail again and again.
        assert relay.counters.redelivered < 3 * last


async def test_a_slow_backend_on_the_whole_tree_is_healed_at_its_own_pace(tmp_path: Path) -> None:
    # 20 ms a row, and subscribed to everything under the table's root: its own ack echoes
    # and the table's status share its queue at the broker, which holds about 90 of its
    # messages (20 in flight, 40 queued, 32 in its inbox): less than a window of 100 rows.
    # The relay alone heals it (it asks only at its connect): a heal starts a replay its
    # acks pace, and a window the broker drops is sent again from its ack, smaller, within
    # its ack interval: the stall timer is not what moves delivery on.
    with PrivateBroker(max_queued=40, max_inflight=20) as broker:
        await _slow_backend_on_the_whole_tree(broker, tmp_path)


async def _slow_backend_on_the_whole_tree(broker: PrivateBroker, tmp_path: Path) -> None:
    async with simulated_table(
        broker,
        tmp_path / "data",
        mqtt={"ack_stall_s": 3},
        backend={"per_event_s": 0.02, "ask_on_gap": False, "wildcard": True},
    ) as table:
        await table.wait_phase(Phase.BETTING)
        await table.wait_backend_caught_up()
        started = time.monotonic()
        last = await burst(table, 600)
        await table.backend.wait_for(lambda: table.backend.last_contiguous_seq >= last, 120)
        took = time.monotonic() - started
        relay = table.daemon.relay
        print(f"\n{last} rows through in {took:.2f} s; {relay.counters}")
        await table.wait_backend_caught_up()
        assert table.daemon.store is not None
        assert set(table.backend.events) == set(range(1, table.daemon.store.last_seq + 1))
        assert copies_first(table), "the broker dropped nothing: the test proves nothing"
        assert any(sub.startswith("ack/") for sub, _ in table.backend.received)  # its echoes
        # One heal (or two: the burst's tail can be dropped after the replay began), then
        # the backend's acks pace it: not a heal per stall time.
        assert 1 <= relay.counters.heals <= 2
        assert relay.counters.connects == 1 and table.backend.connects == 1
        assert table.backend.replays_asked == 1  # at its connect: the relay did the rest


async def test_an_offline_backend_is_healed_a_few_times_then_sent_nothing(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    # "audit" is registered but never connects (its ack stays put); "pgs" keeps up.
    async with simulated_table(
        broker, tmp_path / "data", mqtt={"backends": ["pgs", "audit"], "ack_stall_s": 0.5}
    ) as table:
        relay = table.daemon.relay
        await table.wait_phase(Phase.BETTING)
        await table.wait_backend_caught_up()
        before = relay.counters.redelivered  # pgs's own replay at its connect, if any
        await burst(table, 300)
        await table.wait_backend_caught_up()
        await until(lambda: relay.redelivery.dormant("audit"), 30)
        view = relay.redelivery.view()
        assert view["audit"].heals == FRUITLESS_HEALS and view["audit"].state == "dormant"
        assert view["pgs"].state == "ok"
        redelivered = relay.counters.redelivered
        assert 0 < redelivered - before <= FRUITLESS_HEALS * 100  # a window per heal, no more
        # The table plays on: new rows reach pgs, and audit is sent nothing again, however
        # many stall times the relay looks.
        last = await burst(table, 300)
        await table.wait_backend_caught_up()
        checks = relay.redelivery.checks  # four a stall time (0.5 s): four stall times more
        await until(lambda: relay.redelivery.checks >= checks + 16, 30)
        assert relay.redelivery.view()["audit"].heals == FRUITLESS_HEALS
        assert relay.counters.redelivered == redelivered
        assert relay.acks.acked["pgs"] == last and relay.acks.acked["audit"] == 0
        # Its rows stay in the journal; the retention alarm is the operator's signal.
        status = await table.status()
        assert status.mqtt.redelivery["audit"].state == "dormant"


async def test_replay_requests_are_rate_limited_per_backend_on_a_running_table(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    async with simulated_table(broker, tmp_path / "data") as table:
        await table.wait_phase(Phase.BETTING)
        await burst(table, 200)
        await table.wait_backend_caught_up()
        relay = table.daemon.relay
        counters = relay.counters
        started, redelivered = counters.replays_started, counters.redelivered
        requests = counters.replay_requests
        root = topic_root(table.config.table.site_id, table.config.table.table_id)
        loop = asyncio.get_running_loop()
        async with aiomqtt.Client(broker.host, broker.port) as pgs:
            await pgs.subscribe(f"{root}/res/replay", qos=1)
            first = loop.time()
            for i in range(50):  # every row, fifty times over, as fast as it can ask
                command = {"from_seq": 1, "correlation_id": f"c{i}", "backend_id": "pgs"}
                await pgs.publish(f"{root}/cmd/replay", json.dumps(command), qos=1)
            replies = []
            async with asyncio.timeout(10):
                async for message in pgs.messages:
                    replies.append(json.loads(message.payload))
                    if len(replies) == 50:
                        break
            asking_s = loop.time() - first
        view = relay.redelivery.view
        await until(lambda: view()["pgs"].replaying is None and view()["pgs"].held is None)
        await table.wait_backend_caught_up()
        assert all(r["status"] == "ok" for r in replies)  # each answered; none refused
        assert counters.replay_requests == requests + 50
        # At most one replay begins per interval (a request inside it is held and folded
        # into the next), however many come: never fifty.
        begun = counters.replays_started - started
        assert 1 <= begun <= 2 + asking_s / REPLAY_INTERVAL_S
        assert table.daemon.store is not None
        rows = table.daemon.store.last_seq
        assert counters.redelivered - redelivered == begun * rows  # each re-sends every row
        # A backend the table does not know is refused.
        async with aiomqtt.Client(broker.host, broker.port) as stranger:
            await stranger.subscribe(f"{root}/res/replay", qos=1)
            command = {"from_seq": 1, "correlation_id": "s1", "backend_id": "stranger"}
            await stranger.publish(f"{root}/cmd/replay", json.dumps(command), qos=1)
            async with asyncio.timeout(10):
                async for message in stranger.messages:
                    reply = json.loads(message.payload)
                    break
        assert reply["status"] == "error" and "'stranger' is not registered" in reply["error"]

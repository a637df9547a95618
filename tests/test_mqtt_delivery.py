"""Delivery to backends: group commit, per-backend acks, honest replay flags, hostile input."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tablectl.simulators.broker import PrivateBroker

from tablectl import cli
from tablectl.config import MqttSection, TableConfig
from tablectl.core import effects as rec
from tablectl.core.events import ChipSensed, DeliveryFault, DeliveryRestored
from tablectl.core.table import Phase, TableState, step
from tablectl.mqtt.commands import parse_inbound
from tablectl.mqtt.contract import MAX_INBOUND_BYTES, TableSnapshot
from tablectl.mqtt.publishing import HealthSchedule
from tablectl.mqtt.relay import Relay, topic_root
from tablectl.store.journal import HandedMark, StepCommit, StepInput, Store

from .conftest import SimulatedTable, simulated_table

ROOT = topic_root("site", "t1")

# --- the journal's write path ----------------------------------------------------------------


def test_steps_committed_together_keep_their_own_input_rows_and_kv(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    reader = store.reader()
    rows = store.commit_steps(
        [
            StepCommit('{"n":1}', [("a", {"x": 1})], StepInput("in1", {}), {"cursor": "1"}),
            StepCommit('{"n":2}', [], StepInput("in2", {})),
            StepCommit('{"n":3}', [("b", {}), ("c", {})], StepInput("in3", {}), {"cursor": "3"}),
        ]
    )
    assert [[r.seq for r in step] for step in rows] == [[1], [], [2, 3]]
    assert store.commits == 1 and store.steps_committed == 3  # one transaction, one fsync
    inputs = list(store.inputs())
    assert [(i.type, i.first_seq, i.last_seq) for i in inputs] == [
        ("in1", 1, 1),
        ("in2", None, None),
        ("in3", 2, 3),
    ]
    assert len({i.state_hash for i in inputs}) == 3  # each step's own state
    assert store.get("table_state") == '{"n":3}' and store.get("cursor") == "3"
    assert [r.seq for r in reader.outbox_after(0, limit=10)] == [1, 2, 3]
    assert store.verify_chain() is None


def test_a_failed_group_leaves_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    store.commit("{}", [("a", {})])
    with pytest.raises(TypeError):
        store.commit_steps(
            [StepCommit('{"n":1}', [("b", {})]), StepCommit('{"n":2}', [("c", {"x": object()})])]
        )
    assert store.last_seq == 1 and store.get("table_state") == "{}"
    assert [r.seq for r in store.reader().outbox_after(0, 10)] == [1]


def test_readers_see_only_what_the_writer_has_made_durable(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.sqlite3", boot_id="b1")
    store.commit("{}", [("a", {}), ("b", {}), ("c", {})])
    durable = 2  # as if row 3's commit were still on its way to the disk
    reader = type(store.reader())(tmp_path / "t.sqlite3", bound=lambda: durable)
    assert [r.seq for r in reader.outbox_after(0, 10)] == [1, 2]
    with pytest.raises(Exception, match="readonly"):
        reader._db.execute("DELETE FROM journal")


def test_the_handed_mark_survives_a_restart_and_never_moves_back(tmp_path: Path) -> None:
    mark = HandedMark(tmp_path / "m")
    mark.advance(12)
    mark.advance(7)
    mark.close()
    again = HandedMark(tmp_path / "m")
    assert again.seq == 12


async def test_inputs_that_arrive_together_share_a_commit(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    store = table.daemon.store
    assert store is not None
    commits, steps = store.commits, store.steps_committed
    now = time.monotonic_ns()
    for i in range(40):  # 20 chips placed and lifted, all queued before the consumer runs
        table.daemon.post(ChipSensed(seat=1 + i // 2 % 6, present=i % 2 == 0, since_ns=now + i))
    await table.daemon.wait_until(lambda _: store.steps_committed - steps >= 40, 10)
    assert store.steps_committed - steps >= 40
    assert store.commits - commits <= 2  # the 40 steps, and at most one already on its way
    await table.wait_backend_caught_up()
    seqs = sorted(table.backend.events)
    assert seqs == list(range(1, seqs[-1] + 1))


# --- several backends, honest replay flags, the retention alarm ----------------------------


async def test_rows_sent_again_after_a_crash_say_replay(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    # "audit" never acknowledges: every row stays outstanding and goes out again on restart.
    async with simulated_table(
        broker, tmp_path / "data", mqtt={"backends": ["pgs", "audit"]}
    ) as table:
        await table.wait_phase(Phase.BETTING)
        await table.place_wagers(1, 2)
        await table.lock()
        await table.wait_backend_caught_up()
        store = table.daemon.store
        assert store is not None
        before_crash = store.last_seq
        # Each row's first copy is new; any other (the backend's own replay request at its
        # connect) is marked.
        first: dict[int, bool] = {}
        for seq, replay in table.backend.deliveries:
            assert first.setdefault(seq, replay) is False or replay is True, (seq, replay)
        assert set(first.values()) == {False}
        restart = len(table.backend.deliveries)

        await table.stop()  # no goodbye; the handed mark is already on file
        await table.start()
        await table.wait_backend_caught_up()
        await table.backend.wait_for(
            lambda: (
                sum(1 for seq, _ in table.backend.deliveries[restart:] if seq <= before_crash)
                >= before_crash
            )
        )
        after = table.backend.deliveries[restart:]
        # Every row handed to a broker before the restart says so when it goes out again.
        assert all(replay for seq, replay in after if seq <= before_crash)
        assert {seq for seq, _ in after if seq <= before_crash} == set(range(1, before_crash + 1))
        # New rows go out new first.
        new_first: dict[int, bool] = {}
        for seq, replay in after:
            if seq > before_crash:
                new_first.setdefault(seq, replay)
        assert set(new_first.values()) <= {False}
        assert table.backend.birth is not None
        assert table.backend.birth["acked"]["audit"] == 0
        assert table.backend.birth["acked"]["pgs"] >= 0


async def test_a_silent_backend_raises_the_retention_alarm(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with simulated_table(
        broker, tmp_path / "data", mqtt={"backends": ["pgs", "audit"], "backlog_alarm_rows": 3}
    ) as table:
        await table.wait_phase(Phase.BETTING)
        await table.place_wagers(1, 2, 3)
        await table.backend.wait_for(
            lambda: bool(table.backend.health and table.backend.health["alarms"])
        )
        assert table.backend.health is not None
        (alarm,) = table.backend.health["alarms"]
        assert alarm["backend_id"] == "audit" and alarm["behind_rows"] >= 3
        status = await table.status()
        assert [a.backend_id for a in status.mqtt.backlog_alarms] == ["audit"]
        # The journal keeps every row for the backend that has not acknowledged it.
        assert table.daemon.relay.acks.through == 0
        sock = str(table.config.storage.socket_path)
        assert await asyncio.to_thread(cli.main, ["status", "--socket", sock]) == 0
        assert "ALARM backend audit is" in capsys.readouterr().out


def test_health_goes_out_on_a_change_and_otherwise_once_per_interval() -> None:
    schedule = HealthSchedule(interval_s=60)
    assert schedule.due(("up", ()), now=0)  # the first
    assert not schedule.due(("up", ()), now=1)  # counters moved, nothing else did
    assert schedule.due(("down", ()), now=2)  # the link went down
    assert not schedule.due(("down", ()), now=61)
    assert schedule.due(("down", ()), now=62)  # the interval: counters ride along
    assert schedule.due(("down", ("audit",)), now=63)  # an alarm


# --- a delivery fault, as the core journals it -----------------------------------------------


def test_a_delivery_fault_is_journaled_once_per_change_and_old_states_read_as_before(
    example_config: TableConfig,
) -> None:
    rules = example_config.rules()
    state = TableState.initial(rules)
    before = state.model_dump_json()
    assert "delivery_fault" not in before  # a state written before the field reads the same
    records = []
    refused = "the broker refused a publish: Not authorized (reason code 0x87)"
    late = "the broker did not acknowledge a publish within 15 s"
    for event in (
        DeliveryFault(reason=refused),
        DeliveryFault(reason=refused),  # again after a reconnect: nothing new
        DeliveryFault(reason=late),  # another fault: news
        DeliveryRestored(),
        DeliveryRestored(),
    ):
        state, effects = step(rules, state, event)
        records += [e for e in effects if isinstance(e, rec.Record)]
    assert records == [
        rec.DeliveryFaultRecord(reason=refused),
        rec.DeliveryFaultRecord(reason=late),
        rec.DeliveryFaultCleared(reason=late),
    ]
    assert state.delivery_fault is None and "delivery_fault" not in state.model_dump_json()


# --- no inbound message can hurt the daemon --------------------------------------------------


def _json_values() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False),
        st.text(max_size=20),
    )
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=20,
    )


def _with(key: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    optional = {"correlation_id": _json_values(), "from_seq": _json_values(), "x": _json_values()}
    optional.pop(key, None)
    return st.fixed_dictionaries({key: values}, optional=optional).map(
        lambda d: json.dumps(d).encode()
    )


PAYLOADS = st.one_of(
    st.binary(max_size=200),  # not UTF-8, not JSON
    st.text(max_size=100).map(str.encode),
    _json_values().map(lambda v: json.dumps(v).encode()),  # wrong types
    st.integers(0, 300_000).map(lambda d: b"[" * d + b"]" * d),  # nested to any depth
    st.integers(0, 100_000).map(lambda d: b'{"a":' * d + b"1" + b"}" * d),
    st.integers(0, 3 * MAX_INBOUND_BYTES).map(
        lambda n: b'{"correlation_id":"c","pad":"' + b"x" * n + b'"}'  # huge
    ),
    _with("acked_through_seq", _json_values()),
    _with("acked_through_seq", st.integers(-(2**70), 2**70)),
    _with("from_seq", st.integers(-5, 2**70)),
)
TOPICS = st.one_of(
    st.sampled_from(
        [
            f"{ROOT}/ack/pgs",
            f"{ROOT}/ack/audit",
            f"{ROOT}/ack/stranger",
            f"{ROOT}/ack/",
            f"{ROOT}/cmd/replay",
            f"{ROOT}/cmd/resync",
            f"{ROOT}/cmd/launch",
        ]
    ),
    st.text(max_size=30).map(lambda t: f"{ROOT}/{t}"),
)


@pytest.fixture
def relay(tmp_path: Path) -> Relay:
    store = Store(tmp_path / "t.sqlite3", boot_id="b")
    store.commit("{}", [(f"e{i}", {}) for i in range(10)])

    def never(work: Callable[[], Any]) -> Any:
        raise AssertionError("nothing is written while parsing")

    return Relay(
        MqttSection(backends=["pgs", "audit"]),
        site="site",
        table="t1",
        boot_id="b",
        store=store,
        reader=store.reader(),
        in_journal_thread=never,
        snapshot=lambda: TableSnapshot.model_construct(),
        shuffler=lambda: {"link": "up", "state": "idle"},
    )


# One relay for every example on purpose: acks must stay monotonic across all of them.
@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(messages=st.lists(st.tuples(TOPICS, PAYLOADS), min_size=1, max_size=8))
def test_any_inbound_message_is_counted_and_survived(
    relay: Relay, messages: list[tuple[str, bytes]]
) -> None:
    loop = asyncio.new_event_loop()
    try:
        for topic, payload in messages:
            before = dict(relay.acks.acked)
            c = relay.counters
            outcomes = (c.malformed_inbound, c.acks, c.acks_refused, c.commands)
            inbound = c.inbound
            loop.run_until_complete(relay.receive(None, topic, payload))
            after = (c.malformed_inbound, c.acks, c.acks_refused, c.commands)
            assert c.inbound == inbound + 1
            assert sum(after) == sum(outcomes) + 1  # exactly one outcome per message
            for backend, seq in relay.acks.acked.items():
                assert before[backend] <= seq <= 10  # forward only, never past the journal
            parsed = parse_inbound(ROOT, topic, payload)
            if parsed.reply is not None:
                assert parsed.reply.correlation_id is not None
    finally:
        loop.close()


def test_a_malformed_command_with_a_correlation_id_is_answered() -> None:
    bad = parse_inbound(ROOT, f"{ROOT}/cmd/replay", b'{"correlation_id":"c9","from_seq":0}')
    assert bad.reply is not None and bad.reply.status == "error"
    assert bad.reply.correlation_id == "c9" and "from_seq" in (bad.reply.error or "")
    huge = b'{"correlation_id":"c10","pad":"' + b"x" * MAX_INBOUND_BYTES + b'"}'
    refused = parse_inbound(ROOT, f"{ROOT}/cmd/resync", huge)
    assert refused.reply is not None and refused.reply.correlation_id == "c10"
    assert parse_inbound(ROOT, f"{ROOT}/ack/pgs", b"[" * 10_000).error is not None


async def _replies_until(client: aiomqtt.Client, last: str) -> dict[str, dict[str, Any]]:
    replies: dict[str, dict[str, Any]] = {}
    async with asyncio.timeout(10):
        async for message in client.messages:
            reply = json.loads(message.payload)
            replies[reply["correlation_id"]] = reply
            if reply["correlation_id"] == last:
                return replies
    raise AssertionError("unreachable")


async def test_hostile_messages_do_not_hurt_a_running_daemon(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    await table.wait_backend_caught_up()
    relay = table.daemon.relay
    root = topic_root(table.config.table.site_id, table.config.table.table_id)
    nested = b"[" * 200_000 + b"]" * 200_000
    async with aiomqtt.Client(table.broker.host, table.broker.port) as evil:
        await evil.subscribe(f"{root}/res/#", qos=1)
        await evil.publish(f"{root}/ack/ghost", nested, qos=1, retain=True)  # retained poison
        await evil.publish(f"{root}/cmd/replay", nested, qos=1)
        await evil.publish(f"{root}/ack/pgs", nested, qos=1)
        await evil.publish(f"{root}/cmd/replay", b'{"correlation_id":"c-bad","from_seq":"x"}')
        await evil.publish(f"{root}/cmd/resync", b"\xff\xfe\x00 not utf-8", qos=1)
        # (An ack from a registered backend past the journal's end is a rollback's evidence,
        # no longer a hostile message to count: tests/test_journal_rollback.py.)
        await evil.publish(f"{root}/ack/stranger", json.dumps({"acked_through_seq": 1}), qos=1)
        huge = json.dumps({"correlation_id": "c-huge", "pad": "x" * 60_000})
        await evil.publish(f"{root}/cmd/resync", huge, qos=1)
        await evil.publish(f"{root}/cmd/launch", json.dumps({"correlation_id": "c-unknown"}))
        await evil.publish(f"{root}/cmd/resync", json.dumps({"correlation_id": "c-last"}), qos=1)
        replies = await _replies_until(evil, "c-last")
    assert replies["c-bad"]["status"] == "error" and "from_seq" in replies["c-bad"]["error"]
    assert replies["c-huge"]["status"] == "error" and "bytes" in replies["c-huge"]["error"]
    assert replies["c-unknown"]["error"] == "unknown command 'launch'; known: replay, resync"
    assert replies["c-last"]["status"] == "ok"
    assert relay.counters.malformed_inbound == 7
    assert relay.counters.acks_refused == 1  # an unregistered backend
    store = table.daemon.store
    assert store is not None
    assert relay.acks.acked["pgs"] <= store.last_seq

    # The retained poison greets every start; the daemon counts it and plays on.
    await table.stop()
    await table.start()
    async with aiomqtt.Client(table.broker.host, table.broker.port) as friend:
        await friend.subscribe(f"{root}/res/#", qos=1)
        await friend.subscribe(f"{root}/status", qos=1)
        await table.daemon.wait_until(lambda s: s.phase is Phase.LOCKED, 10)
        # A command is heard only once the relay has subscribed: it says online after that.
        async with asyncio.timeout(10):
            async for message in friend.messages:
                status = json.loads(message.payload)
                if status == {"status": "online", "boot_id": table.daemon.boot_id}:
                    break
        await friend.publish(f"{root}/cmd/resync", json.dumps({"correlation_id": "c-again"}))
        await _replies_until(friend, "c-again")
    assert table.daemon.relay.counters.malformed_inbound == 1
    assert (await table.dealer(cmd="settle", hands={}))["ok"]
    await table.wait_phase(Phase.BETTING)


async def test_a_broker_that_stops_acknowledging_is_a_delivery_fault_until_it_answers(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    # keepalive_s 5: a publish not acknowledged within 2.5 s is a delivery fault.
    async with simulated_table(broker, tmp_path / "data", mqtt={"keepalive_s": 5}) as table:
        await table.wait_phase(Phase.BETTING)
        await table.wait_backend_caught_up()
        broker.pause()  # it holds every connection and answers nothing
        try:
            await table.place_wagers(1)
            await table.daemon.wait_until(lambda s: s.delivery_fault is not None, 15)
            reason = "the broker did not acknowledge a publish within 2.5 s"
            assert table.state.delivery_fault == reason
            faults = (await table.status()).faults
            assert [f.cause.split(":")[0] for f in faults if f.what == "delivery-fault"] == [reason]
            assert table.daemon.relay.counters.publishes_unacknowledged == 1
        finally:
            broker.resume()
        # It answers again: the rows that waited arrive, and the fault clears, journaled once
        # each (the backend receives both records too).
        await table.daemon.wait_until(lambda s: s.delivery_fault is None, 20)
        await table.wait_backend_caught_up(20)
        types = [e["type"] for e in table.backend.events.values()]
        assert types.count("delivery.fault") == 1 and types.count("delivery.fault_cleared") == 1
        assert any(e["type"] == "wager.accepted" for e in table.backend.events.values())

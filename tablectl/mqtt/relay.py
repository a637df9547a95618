"""MQTT relay: publishes the journal, in seq order, to the progressive-system backend.

The journal is the outbox. Rows are published at QoS 1 from the last row a backend
acknowledged end to end (`ack` topic), so a broker outage delays events but loses none;
a backend that missed some asks for a `replay`. Consumers deduplicate on (table, seq).
See docs/mqtt.md for the topics and payloads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

import aiomqtt
import structlog

from tablectl.config import MqttSection
from tablectl.store.journal import JournalRow, Store
from tablectl.util.backoff import Backoff

log = structlog.get_logger(__name__)
T = TypeVar("T")


@dataclass
class RelayCounters:
    connects: int = 0
    published: int = 0
    replayed: int = 0
    acks: int = 0
    malformed_inbound: int = 0


def topic_root(site: str, table: str) -> str:
    return f"tablectl/v1/{site}/{table}"


async def mqtt_call(operation: Awaitable[T]) -> T:
    """Await an aiomqtt operation without losing a cancellation.

    aiomqtt waits with asyncio.wait_for, which on Python 3.11 can swallow a cancellation that
    lands as the operation completes (fixed in 3.12): the task runs on although it was told
    to stop, and a shutdown waits on it for ever. A cancellation requested during the call
    that did not come out of it is raised here.
    """
    task = asyncio.current_task()
    before = task.cancelling() if task is not None else 0
    result = await operation
    if task is not None and task.cancelling() > before:
        raise asyncio.CancelledError
    return result


class Relay:
    def __init__(
        self,
        config: MqttSection,
        *,
        site: str,
        table: str,
        boot_id: str,
        store: Store,
        birth: Callable[[], dict[str, Any]],
        health: Callable[[], dict[str, Any]],
        record_ack: Callable[[int], Awaitable[bool]],
    ) -> None:
        self._config = config
        self._site, self._table = site, table
        self._boot_id = boot_id
        self._store = store
        self._birth = birth
        self._health = health
        self._record_ack = record_ack  # persisted where the journal is written
        self._root = topic_root(site, table)
        self._wake = asyncio.Event()
        self._cursor = 0  # last seq handed to the broker on this connection
        self._rewind_to: int | None = None  # a replay request, applied between batches
        self._high_water = store.acked_through_seq  # rows at or below were sent before
        self.connected = False
        self.counters = RelayCounters()

    def wake(self) -> None:
        """New journal rows were committed."""
        self._wake.set()

    def stats(self) -> dict[str, Any]:
        return {
            "connected": self.connected,
            "broker": f"{self._config.host}:{self._config.port}",
            "published_through_seq": self._cursor,
            "acked_through_seq": self._store.acked_through_seq,
            **asdict(self.counters),
        }

    def _status(self, status: str) -> bytes:
        return json.dumps({"status": status, "boot_id": self._boot_id}).encode()

    def _client(self) -> aiomqtt.Client:
        c = self._config
        return aiomqtt.Client(
            c.host,
            c.port,
            identifier=f"tablectl-{self._site}-{self._table}",
            username=c.username,
            password=c.password,
            keepalive=c.keepalive_s,
            tls_params=aiomqtt.TLSParameters(ca_certs=str(c.ca_file) if c.ca_file else None)
            if c.tls
            else None,
            will=aiomqtt.Will(f"{self._root}/status", self._status("offline"), qos=1, retain=True),
        )

    async def run(self) -> None:
        backoff = Backoff(initial_s=0.5, max_s=self._config.reconnect_max_s)
        task = asyncio.current_task()
        while True:
            try:
                before = task.cancelling() if task else 0
                async with self._client() as client:
                    if task and task.cancelling() > before:
                        raise asyncio.CancelledError  # swallowed while connecting (mqtt_call)
                    backoff.reset()
                    self.connected = True
                    self.counters.connects += 1
                    log.info("mqtt connected", broker=f"{self._config.host}:{self._config.port}")
                    try:
                        await self._session(client)
                    except asyncio.CancelledError:
                        await self._say_offline(client)
                        raise
            except aiomqtt.MqttError as exc:
                level = log.warning if backoff.first_failure else log.debug
                level("mqtt unavailable; journaling continues", error=str(exc))
            finally:
                self.connected = False
            await asyncio.sleep(backoff.next_delay())

    async def _say_offline(self, client: aiomqtt.Client) -> None:
        """On an orderly stop; the broker's last-will covers every other way of going."""
        try:
            async with asyncio.timeout(1):
                await mqtt_call(
                    client.publish(
                        f"{self._root}/status", self._status("offline"), qos=1, retain=True
                    )
                )
        except (TimeoutError, aiomqtt.MqttError) as exc:
            log.warning("could not say offline; the last-will will", error=str(exc))

    async def _session(self, client: aiomqtt.Client) -> None:
        await mqtt_call(client.subscribe(f"{self._root}/ack", qos=1))
        await mqtt_call(client.subscribe(f"{self._root}/cmd/+", qos=1))
        await self._publish_birth(client)
        await mqtt_call(
            client.publish(f"{self._root}/status", self._status("online"), qos=1, retain=True)
        )
        # Everything a backend has not acknowledged goes out again, with the same ids.
        self._cursor = self._store.acked_through_seq
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._inbound(client), name="mqtt-inbound")
                tasks.create_task(self._outbound(client), name="mqtt-outbound")
                tasks.create_task(self._health_loop(client), name="mqtt-health")
        except* aiomqtt.MqttError as group:
            raise group.exceptions[0] from None

    async def _publish_birth(self, client: aiomqtt.Client) -> None:
        birth = self._birth()
        birth.update(last_seq=self._store.last_seq, acked_through_seq=self._store.acked_through_seq)
        await mqtt_call(
            client.publish(f"{self._root}/birth", json.dumps(birth), qos=1, retain=True)
        )
        for meter in birth.get("meters", []):
            await self._publish_meter(client, meter)

    async def _publish_meter(self, client: aiomqtt.Client, meter: dict[str, Any]) -> None:
        await mqtt_call(
            client.publish(
                f"{self._root}/meter/{meter['meter_id']}", json.dumps(meter), qos=1, retain=True
            )
        )

    async def _outbound(self, client: aiomqtt.Client) -> None:
        window = self._config.publish_window
        while True:
            self._wake.clear()
            if self._rewind_to is not None:
                self._cursor, self._rewind_to = min(self._cursor, self._rewind_to), None
            rows = self._store.rows_after(self._cursor, limit=window)
            if not rows:
                await self._wake.wait()
                continue
            # paho sends these in call order; each awaits its PUBACK.
            await asyncio.gather(*(self._publish_row(client, row) for row in rows))
            self._cursor = rows[-1].seq
            self._high_water = max(self._high_water, self._cursor)
            # The latest reading of each meter these rows changed, retained for signs.
            latest = {}
            for row in rows:
                meter = row.data.get("meter")
                if isinstance(meter, dict):
                    latest[meter["meter_id"]] = (row, meter)
            for meter_id, (row, meter) in latest.items():
                await self._publish_meter(
                    client,
                    {
                        "meter_id": meter_id,
                        "amount_cents": meter["meter_cents"],
                        "seq": row.seq,
                        "ts": row.ts,
                    },
                )

    async def _publish_row(self, client: aiomqtt.Client, row: JournalRow) -> None:
        replay = row.seq <= self._high_water
        payload = json.dumps(row.envelope(self._site, self._table, replay=replay))
        await mqtt_call(client.publish(f"{self._root}/evt", payload, qos=1))
        self.counters.published += 1
        self.counters.replayed += replay

    async def _health_loop(self, client: aiomqtt.Client) -> None:
        last: dict[str, Any] | None = None
        while True:
            health = self._health()
            if health != last:
                await mqtt_call(
                    client.publish(f"{self._root}/health", json.dumps(health), qos=1, retain=True)
                )
                last = health
            await asyncio.sleep(2)

    async def _inbound(self, client: aiomqtt.Client) -> None:
        async for message in client.messages:
            topic = str(message.topic)
            try:
                body = json.loads(message.payload)
                if not isinstance(body, dict):
                    raise ValueError("payload is not a JSON object")
                if topic == f"{self._root}/ack":
                    await self._on_ack(body)
                else:
                    await self._on_command(client, topic.rsplit("/", 1)[-1], body)
            except (ValueError, TypeError, KeyError) as exc:
                self.counters.malformed_inbound += 1
                log.warning("malformed mqtt message ignored", topic=topic, error=str(exc))

    async def _on_ack(self, body: dict[str, Any]) -> None:
        seq = body["acked_through_seq"]
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise ValueError("acked_through_seq must be an integer")
        if await self._record_ack(seq):
            self.counters.acks += 1

    async def _on_command(self, client: aiomqtt.Client, name: str, body: dict[str, Any]) -> None:
        correlation_id = body.get("correlation_id")
        reply: dict[str, Any] = {
            "correlation_id": correlation_id,
            "status": "ok",
            "data": None,
            "error": None,
        }
        if name == "replay":
            from_seq = body["from_seq"]
            if not isinstance(from_seq, int) or from_seq < 1:
                raise ValueError("replay needs from_seq, an integer >= 1")
            self._rewind_to = from_seq - 1
            self.wake()
            reply["data"] = {"from_seq": from_seq, "last_seq": self._store.last_seq}
        elif name == "resync":
            await self._publish_birth(client)
            reply["data"] = {"last_seq": self._store.last_seq}
        else:
            self.counters.malformed_inbound += 1
            reply.update(status="error", error=f"unknown command {name!r}; known: replay, resync")
        await mqtt_call(client.publish(f"{self._root}/res/{name}", json.dumps(reply), qos=1))

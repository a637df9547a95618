"""A reference progressive-system backend: what a consumer of tablectl's MQTT stream does.

It deduplicates events on (table, seq), acknowledges end to end under its own id
(`ack/{backend_id}`, retained), and asks for a replay of everything after the last event it
holds contiguously on every (re)connect and whenever it finds a gap (a later row came first):
so it ends with seq 1..N exactly. It acknowledges once per burst (when no message is waiting,
or every 100 events of a long one), not once per event. A gap is asked for again only after a
pause that doubles while none of the missing rows comes (from `replay_pause_s`, up to 30 s),
as the link controllers do: the table paces the replay by this backend's acks and
rate-limits requests, but asking less often is cheaper for everyone.

`per_event_s` makes it a slow backend (that long to store each event): it then reads no more
from the broker than it can take, so the broker's queue for it fills and drops, as Mosquitto
does for any slow subscriber past `max_queued_messages`. `wildcard` subscribes to the table's
whole tree (`#`), as a backend that records everything does: its own ack echoes and replay
requests then share its queue at the broker with the events.

A `delivery.row_withheld` placeholder (a row larger than the broker accepts) holds its seq
like any event, so the ack moves past it; the row itself, when it comes whole later with the
same seq, replaces it (docs/mqtt.md, Delivery).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable
from typing import Any

from tablectl.mqtt.client import MqttClient, MqttError
from tablectl.mqtt.contract import ROW_WITHHELD, topic_root
from tablectl.util.backoff import Backoff
from tablectl.util.reconnect import Reconnector

ACK_EVERY = 100  # events of a long burst between acks
MAX_REPLAY_PAUSE_S = 30.0
SLOW_INBOX = 32  # messages a slow backend holds before it stops reading


class ReferenceBackend:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        site: str,
        table: str,
        backend_id: str = "pgs",
        on_event: Callable[[dict[str, Any]], None] | None = None,
        username: str | None = None,
        password: str | None = None,
        tls: ssl.SSLContext | None = None,
        per_event_s: float = 0.0,
        ask_on_gap: bool = True,
        replay_pause_s: float = 1.0,
        wildcard: bool = False,
    ) -> None:
        self._host, self._port = host, port
        self.backend_id = backend_id
        self._username, self._password, self._tls = username, password, tls
        self._per_event_s = per_event_s
        self._ask_on_gap = ask_on_gap
        self._replay_pause_s = replay_pause_s
        self._wildcard = wildcard
        self._pause_s = replay_pause_s
        self._next_ask_at = 0.0
        self._acked = 0
        self._contiguous = 0
        self.highest_seen = 0
        self.connects = 0
        self.replays_asked = 0
        self.root = topic_root(site, table)
        self._on_event = on_event
        self.events: dict[int, dict[str, Any]] = {}
        self.duplicates = 0
        self.meters: dict[str, dict[str, Any]] = {}
        self.status: dict[str, Any] | None = None
        self.birth: dict[str, Any] | None = None
        self.health: dict[str, Any] | None = None
        self.replies: list[dict[str, Any]] = []
        self.changed = asyncio.Event()
        self.deliveries: list[tuple[int, bool]] = []  # every evt copy: (seq, replay)
        self.received: list[tuple[str, Any]] = []  # every message: (topic below root, body)

    @property
    def last_contiguous_seq(self) -> int:
        while self._contiguous + 1 in self.events:
            self._contiguous += 1
        return self._contiguous

    async def run(self) -> None:
        await Reconnector(
            name=f"backend {self.backend_id}",
            connect=self._connect,
            serve=self._serve,
            close=self._close,
            backoff=Backoff(initial_s=0.3, max_s=0.3),
            retry_on=(MqttError,),
        ).run()

    async def _connect(self) -> MqttClient:
        client = MqttClient(
            self._host,
            self._port,
            client_id=f"backend-{self.backend_id}",
            username=self._username,
            password=self._password,
            tls=self._tls,
            max_inbox=SLOW_INBOX if self._per_event_s else None,
        )
        await client.connect()
        self.connects += 1
        return client

    async def _close(self, client: MqttClient) -> None:
        client.close()

    async def _serve(self, client: MqttClient) -> None:
        subs = (
            ("#",) if self._wildcard else ("evt", "meter/+", "status", "birth", "health", "res/+")
        )
        for sub in subs:
            await client.subscribe(f"{self.root}/{sub}")
        await self._ask_replay(client, "backend-reconnect")
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(client.wait_closed())  # raises when the broker goes away
                tasks.create_task(self._consume(client))
                if self._ask_on_gap:
                    tasks.create_task(self._ask_while_missing(client))
        except* MqttError as group:
            raise group.exceptions[0] from None

    async def _ask_replay(self, client: MqttClient, correlation_id: str) -> None:
        """Everything after what it holds contiguously, paced by its own acks (it names
        itself)."""
        replay = {
            "from_seq": self.last_contiguous_seq + 1,
            "correlation_id": correlation_id,
            "backend_id": self.backend_id,
        }
        await client.publish(f"{self.root}/cmd/replay", json.dumps(replay).encode())
        self.replays_asked += 1
        self._next_ask_at = time.monotonic() + self._pause_s
        self._pause_s = min(MAX_REPLAY_PAUSE_S, self._pause_s * 2)

    @property
    def missing(self) -> bool:
        """Rows exist past what it holds contiguously: a later one came, or the table said so
        (`last_seq` in a reply or the birth: rows dropped at the end of a burst leave no gap
        behind them to see)."""
        return self.highest_seen > self.last_contiguous_seq

    async def _ask_while_missing(self, client: MqttClient) -> None:
        """Asked again once the pause is over, even if nothing more arrives."""
        while True:
            due_in = self._next_ask_at - time.monotonic()
            await asyncio.sleep(max(0.05, min(self._replay_pause_s, due_in)))
            if self.missing and time.monotonic() >= self._next_ask_at:
                await self._ask_replay(client, "backend-gap")

    async def _consume(self, client: MqttClient) -> None:
        async for message in client.messages():
            if self._per_event_s and message.topic.endswith("/evt"):
                await asyncio.sleep(self._per_event_s)  # storing it, slowly
            before = self.last_contiguous_seq
            await self._receive(client, message.topic, message.payload)
            if self.last_contiguous_seq > before:  # rows are coming: a replay may be too
                self._pause_s = self._replay_pause_s
                self._next_ask_at = time.monotonic() + self._pause_s
            if self._ask_on_gap and self.missing and time.monotonic() >= self._next_ask_at:
                await self._ask_replay(client, "backend-gap")
            # At the end of a burst, or every ACK_EVERY events of a long one.
            if client.messages_waiting == 0 or self.last_contiguous_seq >= self._acked + ACK_EVERY:
                await self._ack(client)

    async def _receive(self, client: MqttClient, topic: str, payload: bytes) -> None:
        if not payload:
            return
        body = json.loads(payload)
        sub = topic.removeprefix(self.root + "/")
        self.received.append((sub, body))
        if sub == "evt":
            seq = body["seq"]
            self.highest_seen = max(self.highest_seen, seq)
            self.deliveries.append((seq, body["replay"]))
            if seq in self.events and not _replaces(self.events[seq], body):
                self.duplicates += 1
            else:
                self.events[seq] = body
                if self._on_event:
                    self._on_event(body)
        elif sub == "health":
            self.health = body
        elif sub.startswith("meter/"):
            self.meters[body["meter_id"]] = body
        elif sub == "status":
            self.status = body
        elif sub == "birth":
            self.birth = body
            self._exists_through(body.get("last_seq"))
        elif sub.startswith("res/"):
            self.replies.append(body)
            self._exists_through((body.get("data") or {}).get("last_seq"))
        self.changed.set()

    def _exists_through(self, last_seq: object) -> None:
        if isinstance(last_seq, int):
            self.highest_seen = max(self.highest_seen, last_seq)

    async def _ack(self, client: MqttClient) -> None:
        seq = self.last_contiguous_seq
        if seq > self._acked:
            ack = json.dumps({"acked_through_seq": seq}).encode()
            await client.publish(f"{self.root}/ack/{self.backend_id}", ack, retain=True)
            self._acked = seq

    def caught_up(self, last_seq: int) -> bool:
        """Every event through last_seq is here, and each retained meter is the latest."""
        if self.last_contiguous_seq < last_seq:
            return False
        latest: dict[str, int] = {}
        for seq, event in self.events.items():
            meter = event["data"].get("meter")
            if isinstance(meter, dict):
                latest[meter["meter_id"]] = max(latest.get(meter["meter_id"], 0), seq)
        return all(
            meter_id in self.meters and self.meters[meter_id]["seq"] >= seq
            for meter_id, seq in latest.items()
        )

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


def _replaces(held: dict[str, Any], body: dict[str, Any]) -> bool:
    """The row whole, in place of the placeholder held for its seq."""
    return bool(held["type"] == ROW_WITHHELD and body["type"] != ROW_WITHHELD)

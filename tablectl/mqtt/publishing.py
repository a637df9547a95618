"""What the table says of itself on the broker, besides its journal: the retained birth
message and meters (on every connect and `cmd/resync`), `status` (online, or offline on an
orderly stop; the last-will says it otherwise), `health` (the shuffler, the backlog alarms,
the progressive link, the counters) and the game `pace`. See docs/mqtt.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import structlog

from tablectl.config import MqttSection
from tablectl.mqtt.client import MqttClient, MqttError, PacketTooLarge
from tablectl.mqtt.contract import (
    BacklogAlarm,
    Birth,
    Health,
    ProgressiveLinkState,
    ShufflerState,
    Status,
    TableSnapshot,
    topic_root,
)
from tablectl.mqtt.delivery import Delivery
from tablectl.status import DeviceStatus
from tablectl.store.journal import JournalReader, Store

log = structlog.get_logger(__name__)


async def publish(client: MqttClient, topic: str, payload: bytes, *, retain: bool = False) -> None:
    """Publish and await the PUBACK (within the client's deadline). A message larger
    than the broker accepts is left out (it is made again on the next change)."""
    try:
        await client.publish(topic, payload, retain=retain)
    except PacketTooLarge as exc:
        log.error("message larger than the broker accepts: not sent", error=str(exc))


@dataclass(frozen=True)
class TooLarge:
    """A retained message the broker cannot take (larger than its Maximum Packet Size)."""

    message: str  # birth, health, pace, meter
    size: int
    limit: int


class HealthSchedule:
    """When `health` goes out: on a change of state, else once per counters interval (counters
    change all the time; publishing on their every change would flood the retained topic)."""

    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._state: object = None
        self._sent_at: float | None = None

    def due(self, state: object, now: float) -> bool:
        if self._sent_at is None or state != self._state or now - self._sent_at >= self._interval_s:
            self._state, self._sent_at = state, now
            return True
        return False


class Publishing:
    """Birth, status, health and pace for one table, across its connections."""

    def __init__(
        self,
        config: MqttSection,
        *,
        site: str,
        table: str,
        boot_id: str,
        store: Store,
        reader: JournalReader,
        delivery: Delivery,
        snapshot: Callable[[], TableSnapshot],
        shuffler: Callable[[], dict[str, Any]],
        progressive_link: Callable[[], ProgressiveLinkState | None],
    ) -> None:
        self._config = config
        self._root = topic_root(site, table)
        self._boot_id = boot_id
        self._store = store
        self._reader = reader
        self._delivery = delivery
        self._snapshot = snapshot
        self._shuffler = shuffler
        self._progressive_link = progressive_link  # a linked table's LINK DOWN, in health
        # The latest game pace (retained on `pace`): published on each connect and change.
        self._pace: bytes | None = None
        self._pace_changed = asyncio.Event()
        self._alarmed: set[str] = set()
        # Retained messages the broker's limit left out, by message, until one goes out (a
        # fault in status), and those logged on this connection (once each).
        self.too_large: dict[str, TooLarge] = {}
        self._logged: set[str] = set()

    async def _retain(self, client: MqttClient, message: str, topic: str, payload: bytes) -> None:
        """A retained message, awaiting its PUBACK. One larger than the broker accepts is not
        sent: counted, logged once per connection and a fault in status (naming its size
        and the broker's limit) until one of its kind goes out; the rest flows."""
        try:
            await client.publish(topic, payload, retain=True)
        except PacketTooLarge as exc:
            self._delivery.counters.retained_too_large += 1
            self.too_large[message] = TooLarge(message, exc.size, exc.limit)
            if message not in self._logged:
                self._logged.add(message)
                log.error(
                    "retained message larger than the broker accepts: not sent",
                    message=message,
                    packet_bytes=exc.size,
                    broker_max_bytes=exc.limit,
                )
        else:
            self.too_large.pop(message, None)

    def status(self, status: Literal["online", "offline"]) -> bytes:
        return Status(status=status, boot_id=self._boot_id).model_dump_json().encode()

    async def say_online(self, client: MqttClient) -> None:
        """The birth message and the meters, then `online` (retained). The relay has seen
        that the broker takes `status` (and every row's placeholder): those always fit."""
        self._logged.clear()
        await self.publish_birth(client)
        await client.publish(f"{self._root}/status", self.status("online"), retain=True)

    async def say_offline(self, client: MqttClient) -> None:
        """On an orderly stop; the broker's last-will covers every other way of going."""
        try:
            async with asyncio.timeout(1):
                await client.publish(f"{self._root}/status", self.status("offline"), retain=True)
                await client.disconnect()
        except (TimeoutError, MqttError) as exc:
            log.warning("could not say offline; the last-will will", error=str(exc))

    def birth(self) -> Birth:
        snapshot = self._snapshot()
        return Birth(
            **dict(snapshot),
            last_seq=self._reader.last_seq,
            acked=dict(self._delivery.acks.acked),
        )

    async def publish_birth(self, client: MqttClient) -> None:
        birth = self.birth()
        await self._retain(client, "birth", f"{self._root}/birth", birth.model_dump_json().encode())
        for meter in birth.meters:
            await self._retain(
                client,
                "meter",
                f"{self._root}/meter/{meter.meter_id}",
                meter.model_dump_json().encode(),
            )

    # --- health ---------------------------------------------------------------------

    def backlog_alarms(self) -> list[BacklogAlarm]:
        """Backends past the retention bound (rows or age of the oldest unacknowledged), and
        every backend behind while the broker refuses or does not acknowledge our rows."""
        last = self._reader.last_seq
        now = datetime.now(UTC)
        fault = self._delivery.fault
        out = []
        for backend, acked in self._delivery.acks.acked.items():
            behind = last - acked
            if behind <= 0:
                continue
            oldest = self._reader.ts_of(acked + 1)
            age = now - datetime.fromisoformat(oldest) if oldest else timedelta(0)
            if (
                fault is not None
                or behind >= self._config.backlog_alarm_rows
                or age >= timedelta(hours=self._config.backlog_alarm_hours)
            ):
                out.append(
                    BacklogAlarm(backend_id=backend, behind_rows=behind, oldest_unacked_ts=oldest)
                )
        names = {a.backend_id for a in out}
        for alarm in out:
            if alarm.backend_id not in self._alarmed:
                log.error(
                    "backlog alarm: the broker does not deliver this table's rows"
                    if fault is not None
                    else "backlog past the retention bound: the operator decides (see "
                    "docs/mqtt.md)",
                    backend=alarm.backend_id,
                    behind_rows=alarm.behind_rows,
                    oldest_unacked_ts=alarm.oldest_unacked_ts,
                    delivery_fault=fault,
                )
        for cleared in self._alarmed - names:
            log.warning("backlog back within the retention bound", backend=cleared)
        self._alarmed = names
        return out

    def health(self, *, alarms: list[BacklogAlarm] | None = None) -> Health:
        sh = DeviceStatus.of(self._shuffler())
        counters = {
            "shuffler": {
                "event_cursor": sh.event_cursor,
                "reconnects": sh.reconnects,
                **sh.counters,
            },
            "mqtt": asdict(self._delivery.counters),
            "journal": {
                "last_seq": self._reader.last_seq,
                "commits": self._store.commits,
                "steps_committed": self._store.steps_committed,
            },
            "behind_rows": {
                b: self._reader.last_seq - q for b, q in self._delivery.acks.acked.items()
            },
        }
        return Health(
            boot_id=self._boot_id,
            ts=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            shuffler=ShufflerState(link=sh.link, state=sh.state),
            alarms=self.backlog_alarms() if alarms is None else alarms,
            counters=counters,
            progressive_link=self._progressive_link(),
        )

    async def health_loop(self, client: MqttClient) -> None:
        """Published when the shuffler or an alarm changes; counters ride every interval."""
        loop = asyncio.get_running_loop()
        schedule = HealthSchedule(self._config.health_counters_interval_s)
        while True:
            alarms = self.backlog_alarms()
            health = self.health(alarms=alarms)
            changes = (
                health.shuffler,
                tuple(a.backend_id for a in alarms),
                health.progressive_link,
            )
            if schedule.due(changes, loop.time()):
                await self._retain(
                    client, "health", f"{self._root}/health", health.model_dump_json().encode()
                )
            await asyncio.sleep(1)

    # --- pace -----------------------------------------------------------------------

    def publish_pace(self, payload: bytes) -> None:
        """The table's game pace (service/pace.py, at most once a minute): retained on `pace`,
        now if connected, else on the next connect."""
        self._pace = payload
        self._pace_changed.set()

    async def pace_loop(self, client: MqttClient) -> None:
        while True:
            self._pace_changed.clear()
            if self._pace is not None:
                await self._retain(client, "pace", f"{self._root}/pace", self._pace)
            await self._pace_changed.wait()

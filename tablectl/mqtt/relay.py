"""MQTT relay: publishes the journal, in seq order, to the progressive-system backends.

The relay wires three parts over one connection: delivery (delivery.py: the journal as the
outbox, the backends' end-to-end acks, rows sent again where a backend lacks them, with
redelivery.py and withheld.py), inbound commands (commands.py: acks and `cmd/*`, parsed by
the contract's models only) and what the table says of itself (publishing.py: birth, status,
health, pace). The connection is the one reconnect component's (util/reconnect.py) over the
relay's own MQTT 5 client (client.py): a broker refusing our credentials, certificate or a
publish (its ACL) is a refusal, retried at the longest backoff and logged once. A publish
refused, or not acknowledged in time, is a delivery fault: the daemon journals it (once per
change) and status shows it. See docs/mqtt.md.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import structlog

from tablectl.config import MqttSection
from tablectl.mqtt.client import (
    BrokerUnsuitable,
    ClosedBeforeAccepted,
    ConnectRefused,
    MqttClient,
    MqttError,
    PublishRefused,
    PublishUnacknowledged,
    Will,
    broker_reconnector,
    client_for,
    publish_size,
)
from tablectl.mqtt.client import tls_context as client_tls_context
from tablectl.mqtt.commands import Commands
from tablectl.mqtt.contract import (
    WILL_DELAY_S,
    ProgressiveLinkState,
    TableSnapshot,
    topic_root,
)
from tablectl.mqtt.delivery import Delivery, delivery_fault, too_small
from tablectl.mqtt.publishing import Publishing
from tablectl.mqtt.session import InJournalThread, RelayCounters, Session
from tablectl.mqtt.withheld import largest_placeholder
from tablectl.status import BacklogAlarm as StatusBacklogAlarm
from tablectl.status import BrokerLink, BrokerStats
from tablectl.store.journal import JournalReader, Store
from tablectl.util.reconnect import Permanent, ReconnectState

log = structlog.get_logger(__name__)

__all__ = ["Relay", "make_client", "tls_context", "topic_root"]


class BrokerRefused(MqttError, Permanent):
    """The broker said no to this table (credentials, certificate, ACL): waiting will not
    change its mind, so the relay retries at the longest backoff and logs it once."""


def identity_warnings(config: MqttSection, table_id: str) -> list[str]:
    """What `config check` warns of: a username other than the table id is another table's
    identity on the broker (or none), and the broker's ACL refuses every publish under this
    table's topics (docs/mqtt.md, Security)."""
    if config.username is not None and config.username != table_id:
        return [
            f"mqtt.username {config.username!r} is not table.table_id {table_id!r}: the "
            "shipped broker ACL lets a table publish only under its own id, so every event "
            "would be refused (with use_identity_as_username, the certificate's common name "
            "is the username: issue it with CN = the table id)"
        ]
    return []


def tls_context(config: MqttSection) -> ssl.SSLContext:
    """Verify the broker (mqtt.ca_file, else the system CAs, and its host name) and show it
    this table's certificate."""
    return client_tls_context(config.ca_file, config.cert_file, config.key_file)


def make_client(config: MqttSection, *, site: str, table: str, will: bytes) -> MqttClient:
    """The table's client (`client_for`), with the retained offline status as last-will,
    sent once the connection has been gone WILL_DELAY_S."""
    return client_for(
        config,
        client_id=config.client_id or f"tablectl-{site}-{table}",
        will=Will(f"{topic_root(site, table)}/status", will, retain=True, delay_s=WILL_DELAY_S),
    )


def describe_connect_error(exc: MqttError, config: MqttSection) -> str:
    """Say which of our settings the broker's refusal points at."""
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            f"the broker's certificate does not verify against mqtt.ca_file "
            f"({config.ca_file or 'the system CAs'}): {text}"
        )
    if _refused_our_certificate(exc, config):
        return (
            f"the broker refused this table's client certificate (mqtt.cert_file "
            f"{config.cert_file or 'not set'}): {text}"
        )
    if isinstance(exc, ConnectRefused) and exc.reason_code in (0x86, 0x87, 0x8C):
        certificate = (
            f" (a broker that takes the certificate's common name as the username, as the "
            f"shipped config does, judges mqtt.cert_file {config.cert_file})"
            if config.cert_file
            else ""
        )
        return (
            f"the broker refused the credentials of mqtt.username "
            f"{config.username or '(none)'}{certificate}: {text}"
        )
    return text


def _refused_our_certificate(exc: MqttError, config: MqttSection) -> bool:
    # With TLS 1.3 the broker refuses a client certificate after the handshake: its alert
    # may arrive, or the socket may just close first (before the CONNACK). Without a
    # certificate of ours, a close before the CONNACK is the broker's (full, restarting).
    upper = str(exc).upper()
    alerts = ("ALERT_UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_REQ")
    closed_on_us = isinstance(exc, ClosedBeforeAccepted) and exc.tls
    return any(a in upper for a in alerts) or (closed_on_us and config.cert_file is not None)


def _is_refusal(exc: MqttError, config: MqttSection) -> bool:
    """A refusal waiting will not cure (unlike a broker that is down or restarting)."""
    if isinstance(exc, Permanent):  # a broker unsuitable (QoS 0 only) too
        return True
    if isinstance(exc, ConnectRefused):
        return exc.permanent
    return "CERTIFICATE_VERIFY_FAILED" in str(exc) or _refused_our_certificate(exc, config)


class Relay:
    """The table's one MQTT connection, kept up by the reconnect component, and the three
    parts that use it: delivery, inbound commands and publishing."""

    def __init__(
        self,
        config: MqttSection,
        *,
        site: str,
        table: str,
        boot_id: str,
        store: Store,
        reader: JournalReader,
        in_journal_thread: InJournalThread,
        snapshot: Callable[[], TableSnapshot],
        shuffler: Callable[[], dict[str, Any]],
        delivery_fault: str | None = None,
        on_delivery: Callable[[str | None], None] = lambda fault: None,
        progressive_link: Callable[[], ProgressiveLinkState | None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
        on_ack_past_end: Callable[[str, int, int], None] = lambda backend, seq, last: None,
    ) -> None:
        """delivery_fault: the one the journal says stands; on_delivery: told a new delivery
        fault (its text) or that delivery works again (None), once per change;
        on_ack_past_end: told a registered backend's acknowledgement past the journal's end
        (backend, its seq, the journal's last seq): a rollback's evidence."""
        self._config = config
        self._site, self._table = site, table
        self._boot_id = boot_id
        self._root = topic_root(site, table)
        self.counters = RelayCounters()
        self.delivery = Delivery(
            config,
            site=site,
            table=table,
            store=store,
            reader=reader,
            in_journal_thread=in_journal_thread,
            counters=self.counters,
            clock=clock,
            fault=delivery_fault,
            on_delivery=on_delivery,
        )
        self.publishing = Publishing(
            config,
            site=site,
            table=table,
            boot_id=boot_id,
            store=store,
            reader=reader,
            delivery=self.delivery,
            snapshot=snapshot,
            shuffler=shuffler,
            progressive_link=progressive_link,
        )
        self.commands = Commands(
            self._root,
            reader=reader,
            counters=self.counters,
            delivery=self.delivery,
            publishing=self.publishing,
            on_ack_past_end=on_ack_past_end,
        )
        # What the daemon, status and tests reach, each part's own.
        self.acks, self.redelivery = self.delivery.acks, self.delivery.redelivery
        self.offer = self.delivery.offer
        self.receive = self.commands.receive
        self.health = self.publishing.health
        self.publish_pace = self.publishing.publish_pace
        for warning in identity_warnings(config, table):
            log.warning(warning)
        self.reconnector = broker_reconnector(
            f"mqtt broker {config.host}:{config.port}",
            self._open,
            self._serve,
            self._close,
            refused_wait_s=config.reconnect_max_s,
        )

    def close(self) -> None:
        self.delivery.close()

    @property
    def connected(self) -> bool:
        return self.reconnector.state is ReconnectState.CONNECTED

    def link(self) -> BrokerLink:
        return BrokerLink(
            connected=self.connected, broker=f"{self._config.host}:{self._config.port}"
        )

    def stats(self) -> BrokerStats:
        return BrokerStats(
            connected=self.connected,
            broker=f"{self._config.host}:{self._config.port}",
            published_through_seq=self.delivery.cursor,
            handed_through_seq=self.delivery.handed.seq,
            acked_through_seq=self.acks.through,
            acked=dict(self.acks.acked),
            backlog_alarms=[
                StatusBacklogAlarm.model_validate(a.model_dump())
                for a in self.publishing.backlog_alarms()
            ],
            delivery_fault=self.delivery.fault,
            redelivery=self.redelivery.view(),
            last_error=self.reconnector.last_error,
            counters=asdict(self.counters),
        )

    # --- the connection ---------------------------------------------------------------

    def client(self) -> MqttClient:
        """A client for this table's broker, as configured (TLS, credentials, last-will)."""
        return make_client(
            self._config,
            site=self._site,
            table=self._table,
            will=self.publishing.status("offline"),
        )

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.delivery.save_acks(), name="mqtt-ack-save")
            tasks.create_task(self.reconnector.run(), name="mqtt-connect")

    async def _open(self) -> MqttClient:
        """A connected client; a failure says which of our settings it points at."""
        client = self.client()
        try:
            await client.connect()
        except MqttError as exc:
            why = describe_connect_error(exc, self._config)
            if isinstance(exc, BrokerUnsuitable):
                self.counters.brokers_unsuitable += 1
                self.delivery.delivery_is(why)
            raise (
                BrokerRefused(why) if _is_refusal(exc, self._config) else MqttError(why)
            ) from exc
        unsuitable = self._too_small(client.limits.max_packet_bytes)
        if unsuitable is not None:
            # As for a broker that takes QoS 0 only: goodbye (no will), a refusal retried
            # at the longest backoff, and a delivery fault naming the limit and what needs it.
            await client.disconnect()
            self.counters.brokers_unsuitable += 1
            self.delivery.delivery_is(str(unsuitable))
            raise unsuitable
        return client

    def _too_small(self, limit: int | None) -> BrokerUnsuitable | None:
        """Why a broker's Maximum Packet Size is below what this table must send whatever
        happens: `status` (online, offline) and the placeholder of a row too large
        (withheld.py). Birth, health and pace are not: left out, each is a fault of its own
        (publishing.py)."""
        if limit is None:
            return None
        placeholder = largest_placeholder(
            f"{self._root}/evt",
            site=self._site,
            table=self._table,
            boot_id=self._boot_id,
            limit=limit,
        )
        status = publish_size(f"{self._root}/status", self.publishing.status("offline"))
        needs = [("a withheld row's placeholder", placeholder), ("the status message", status)]
        what, size = max(needs, key=lambda need: need[1])
        return too_small(limit, what, size) if size > limit else None

    async def _close(self, client: MqttClient) -> None:
        """Without a DISCONNECT unless we said offline: the broker's last-will says it."""
        client.close()

    async def _serve(self, client: MqttClient) -> None:
        self.counters.connects += 1
        try:
            await self._session(client)
        except (PublishRefused, PublishUnacknowledged, BrokerUnsuitable) as exc:
            if isinstance(exc, BrokerUnsuitable):
                self.counters.brokers_unsuitable += 1
                self.delivery.delivery_is(str(exc))
                raise
            if isinstance(exc, PublishRefused):
                self.counters.publishes_refused += 1
            else:
                self.counters.publishes_unacknowledged += 1
            self.delivery.delivery_is(delivery_fault(exc))
            raise
        except asyncio.CancelledError:
            await self.publishing.say_offline(client)
            raise

    async def _session(self, client: MqttClient) -> None:
        await self.commands.subscribe(client)
        await self.publishing.say_online(client)
        session = self.delivery.start(client)
        try:
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self.commands.inbound(session), name="mqtt-inbound")
                tasks.create_task(self.delivery.outbound(session), name="mqtt-outbound")
                tasks.create_task(self.publishing.health_loop(client), name="mqtt-health")
                tasks.create_task(self.publishing.pace_loop(client), name="mqtt-pace")
                tasks.create_task(self.delivery.redeliver(), name="mqtt-redeliver")
                tasks.create_task(self._watch(session), name="mqtt-watch")
        except* MqttError as group:
            raise group.exceptions[0] from None

    async def _watch(self, session: Session) -> None:
        """The session ends when the connection does, or when the broker refuses a row or
        does not acknowledge one in time."""
        closed = asyncio.create_task(session.client.wait_closed())
        failed = asyncio.create_task(session.ended.wait())
        try:
            await asyncio.wait((closed, failed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            failed.cancel()
        self.delivery.ending()  # no row is offered to a session that is ending
        if session.failed is not None:
            if closed.done() and not closed.cancelled():
                closed.exception()  # read: the refusal is the news
            raise session.failed
        await closed  # raises why the connection was lost
        raise MqttError("the connection ended")

"""Inbound: what the table reads on the broker -- backends' end-to-end acks on
`ack/{backend_id}` and the commands on `cmd/{name}` (`replay`, `resync`) -- each parsed by
the contract's models only (contract.py). Anything else is counted, logged with its topic
and answered with an error where it carries a correlation id. See docs/mqtt.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog
from pydantic import ValidationError

from tablectl.mqtt.client import MqttClient
from tablectl.mqtt.contract import (
    COMMAND_MODELS,
    COMMANDS,
    MAX_INBOUND_BYTES,
    Ack,
    Correlated,
    ReplayCommand,
    Reply,
    ReplyData,
)
from tablectl.mqtt.delivery import Delivery, short_error
from tablectl.mqtt.publishing import Publishing, publish
from tablectl.mqtt.session import RelayCounters, Session
from tablectl.store.journal import JournalReader

log = structlog.get_logger(__name__)

# A refused command too large for this is not read for a correlation id: nobody is answered.
MAX_CORRELATED_BYTES = 1 << 20


@dataclass(frozen=True)
class Inbound:
    """What one inbound message asks of the relay (the parsing is pure: see `parse_inbound`)."""

    ack: tuple[str, int] | None = None
    command: str | None = None
    from_seq: int | None = None
    requester: str | None = None  # the backend a replay request names
    reply: Reply | None = None  # an error reply, where a correlation id could be read
    error: str | None = None  # why the message was refused


def parse_inbound(root: str, topic: str, payload: bytes) -> Inbound:
    """Classify one inbound message; never raises, whatever the payload."""
    sub = topic.removeprefix(root + "/")
    kind, _, name = sub.partition("/")
    if len(payload) > MAX_INBOUND_BYTES:
        error = f"payload of {len(payload)} bytes (at most {MAX_INBOUND_BYTES})"
        return Inbound(error=error, reply=_error_reply(kind, payload, error))
    if kind == "ack" and name and "/" not in name:
        try:
            ack = Ack.model_validate_json(payload)
        except ValidationError as exc:
            return Inbound(error=short_error(exc))
        return Inbound(ack=(name, ack.acked_through_seq))
    if kind == "cmd" and name in COMMANDS:
        try:
            command = COMMAND_MODELS[name].model_validate_json(payload)
        except ValidationError as exc:
            error = short_error(exc)
            return Inbound(error=error, reply=_error_reply(kind, payload, error))
        if isinstance(command, ReplayCommand):
            return Inbound(
                command=name,
                from_seq=command.from_seq,
                requester=command.backend_id,
                reply=_ok(command.correlation_id),
            )
        return Inbound(command=name, reply=_ok(command.correlation_id))
    error = f"unknown command {name!r}; known: {', '.join(COMMANDS)}"
    if kind != "cmd":
        error = f"not a topic the table reads: {sub!r}"
    return Inbound(error=error, reply=_error_reply(kind, payload, error))


def _ok(correlation_id: str) -> Reply:
    return Reply(correlation_id=correlation_id, status="ok", data=None, error=None)


def _error_reply(kind: str, payload: bytes, error: str) -> Reply | None:
    if kind != "cmd" or len(payload) > MAX_CORRELATED_BYTES:
        return None
    try:
        correlated = Correlated.model_validate_json(payload)
    except ValidationError:
        return None  # nobody to answer
    return Reply(correlation_id=correlated.correlation_id, status="error", data=None, error=error)


class Commands:
    """Takes what arrives on the table's `ack/+` and `cmd/+` and answers on `res/{name}`."""

    def __init__(
        self,
        root: str,
        *,
        reader: JournalReader,
        counters: RelayCounters,
        delivery: Delivery,
        publishing: Publishing,
        on_ack_past_end: Callable[[str, int, int], None],
    ) -> None:
        """on_ack_past_end: told a registered backend's acknowledgement past the journal's
        end (backend, its seq, the journal's last seq): a rollback's evidence."""
        self._root = root
        self._reader = reader
        self.counters = counters
        self._delivery = delivery
        self._publishing = publishing
        self._on_ack_past_end = on_ack_past_end

    async def subscribe(self, client: MqttClient) -> None:
        await client.subscribe(f"{self._root}/ack/+")
        await client.subscribe(f"{self._root}/cmd/+")

    async def inbound(self, session: Session) -> None:
        async for message in session.client.messages():
            await self.receive(session.client, message.topic, message.payload)

    async def receive(self, client: MqttClient | None, topic: str, payload: bytes) -> None:
        """One inbound message: never raises for what it carries."""
        self.counters.inbound += 1
        msg = parse_inbound(self._root, topic, payload)
        if msg.error is not None:
            self.counters.malformed_inbound += 1
            log.warning("malformed mqtt message refused", topic=topic, error=msg.error)
        elif msg.ack is not None:
            backend, seq = msg.ack
            last_seq = self._reader.last_seq
            refused = self._delivery.take_ack(backend, seq, last_seq)
            if refused:
                self.counters.acks_refused += 1
                log.warning("mqtt ack refused", topic=topic, error=refused)
                if backend in self._delivery.acks.acked and seq > last_seq:
                    # A registered backend holds rows this journal does not: it was rolled
                    # back (docs/design.md). The daemon stops publishing and says so.
                    self._on_ack_past_end(backend, seq, last_seq)
            else:
                self.counters.acks += 1
        else:
            self.counters.commands += 1
        reply = msg.reply
        if msg.command == "replay":
            assert msg.from_seq is not None
            refused = self._delivery.replay_asked(msg.requester, msg.from_seq)
            if refused is not None and reply is not None:
                reply = reply.model_copy(update={"status": "error", "error": refused})
        elif msg.command == "resync" and client is not None:
            await self._publishing.publish_birth(client)
        if reply is not None and client is not None:
            if reply.status == "ok":
                data = ReplyData(last_seq=self._reader.last_seq, from_seq=msg.from_seq)
                reply = reply.model_copy(update={"data": data})
            name = topic.rsplit("/", 1)[-1]
            await publish(client, f"{self._root}/res/{name}", reply.model_dump_json().encode())

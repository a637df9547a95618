"""A small asyncio MQTT 5 client: asyncio's own TCP and TLS, and the sans-I/O `mqtt5` codec.

`mqtt5` (PyPI, by aiomqtt's maintainer, the codec aiomqtt 3 is built on) turns packets into
bytes and back, in Rust; this module keeps the session: CONNECT and its CONNACK, QoS 1 in
both directions, SUBSCRIBE, keep-alive, DISCONNECT and the last-will. Why not aiomqtt 2, nor
paho-mqtt underneath (docs/mqtt.md, "The MQTT client"): aiomqtt's public API awaits one PUBACK
per call, writes a publish a loop turn or two later and drops MQTT 5 PUBACK reason codes (a
publish the broker's ACL refused looks delivered); paho's packet code, in Python, was half of
the daemon's CPU per published row (a message object, a lock and a properties object per
publish and per PUBACK).

What it gives the relay:
- `publish_nowait`: a QoS 1 publish encoded now, and a future for its PUBACK; the future fails
  with `PublishRefused` when the broker answers with a reason code of 0x80 or more (Mosquitto:
  0x87 "Not authorized" for a topic the ACL denies), and with `ConnectionLost` when the
  connection ends first. `flush` writes what was handed over at once (else it goes on the
  loop's next turn). No more are in flight than the broker's Receive Maximum (MQTT 5.0,
  3.3.4): the rest wait here, in order.
- `connect` raises `ConnectRefused` (the CONNACK's reason code), `ClosedBeforeAccepted` when
  the broker hangs up first (after a TLS 1.3 handshake, that is how a refused client
  certificate looks), or `MqttError` with the cause (TCP, TLS); `wait_closed` raises
  `ConnectionLost`.
- `max_inbox`: a consumer slower than its messages stops reading the socket while that many
  wait, so the broker holds (and past its queue, drops) what it has not taken, as it does for
  any slow subscriber; reading goes on once half of them are consumed.
- One connection per client object: a reconnect is a new client (util/reconnect.py), so no
  message of a dead session is ever sent into a new one.

Everything runs on the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import mqtt5

from tablectl.util.reconnect import Permanent

__all__ = [
    "SOCKET_OPTIONS",
    "ClosedBeforeAccepted",
    "ConnectRefused",
    "ConnectionLost",
    "Message",
    "MqttClient",
    "MqttError",
    "PublishRefused",
    "Refused",
    "SubscribeRefused",
    "Will",
    "tls_context",
]

# Nagle's algorithm holds a small publish back until the previous one is acknowledged by TCP;
# with delayed ACKs that is tens of milliseconds on an event's way to the backend. asyncio sets
# it on every TCP transport; this is the form aiomqtt's socket_options takes, for the benches'
# and tests' independent clients.
SOCKET_OPTIONS = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)

# CONNACK reason codes that a later attempt may not meet again: the broker is busy or
# restarting, not saying no to us (MQTT 5.0, 3.2.2.2).
TRANSIENT_CONNACK = frozenset({0x88, 0x89, 0x97, 0x9F})
KEEPALIVE_CHECK_S = 1.0
QOS1 = mqtt5.QoS.AT_LEAST_ONCE
MAX_PACKET_ID = 0xFFFF


def tls_context(
    ca_file: Path | None, cert_file: Path | None = None, key_file: Path | None = None
) -> ssl.SSLContext:
    """Verify the broker (ca_file, else the system CAs, and its host name) and show it our
    certificate, when there is one."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    if cert_file:
        context.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
    return context


class MqttError(Exception):
    """The connection cannot be made or used (network, TLS, a broker that went away)."""


class ConnectionLost(MqttError):
    """The connection ended while in use."""


class ClosedBeforeAccepted(MqttError):
    """The broker closed the connection before its CONNACK (over TLS 1.3, a broker refusing
    our client certificate does this after the handshake; its alert may or may not arrive)."""

    def __init__(self, why: str, *, tls: bool) -> None:
        super().__init__(f"the broker closed the connection before accepting it: {why}")
        self.tls = tls


class Refused(MqttError):
    """The broker answered with a reason code of 0x80 or more (MQTT 5.0, 2.4)."""

    def __init__(self, what: str, reason_code: int, reason: str) -> None:
        super().__init__(f"{what}: {reason} (reason code 0x{reason_code:02x})")
        self.reason_code = reason_code
        self.reason = reason


class ConnectRefused(Refused):
    """A CONNACK that refuses the connection (credentials, client id, not authorised)."""

    @property
    def permanent(self) -> bool:
        return self.reason_code not in TRANSIENT_CONNACK


class PublishRefused(Refused, Permanent):
    """A PUBACK that refuses the message (the ACL, a quota): it was not published."""


class SubscribeRefused(Refused, Permanent):
    """A SUBACK that refuses the subscription."""


@dataclass(frozen=True, slots=True)
class Will:
    """The broker publishes this (QoS 1) when the connection ends without a DISCONNECT."""

    topic: str
    payload: bytes
    retain: bool = True


@dataclass(frozen=True, slots=True)
class Message:
    topic: str
    payload: bytes
    retain: bool


def _reason_text(code: int) -> str:
    """A reason code as the specification names it ("Not authorized" for 0x87)."""
    for kind in (mqtt5.PubAckReasonCode, mqtt5.ConnAckReasonCode, mqtt5.SubAckReasonCode):
        with contextlib.suppress(ValueError):
            return kind(code).name.replace("_", " ").capitalize()
    return "Unknown reason"


def _subscription(topic: str) -> mqtt5.TopicFilter:
    """QoS 1; a message flagged retained only when it is the stored one a subscribe brings,
    not a live publish that also replaced it (Retain As Published off, MQTT 5.0, 3.8.3.1)."""
    return mqtt5.TopicFilter(topic, max_qos=QOS1, retain_as_published=False)


def _packet_length(buffer: bytearray, start: int) -> int | None:
    """The length of the packet at start (fixed header included), or None while its header
    is incomplete. The remaining length is a variable byte integer (MQTT 5.0, 1.5.5)."""
    multiplier, remaining = 1, 0
    for i in range(start + 1, min(start + 5, len(buffer))):
        byte = buffer[i]
        remaining += (byte & 0x7F) * multiplier
        if not byte & 0x80:
            return i - start + 1 + remaining
        multiplier *= 128
    if len(buffer) - start >= 5:
        raise ValueError("malformed remaining length")
    return None


class _Wire(asyncio.Protocol):
    """asyncio's end of the connection: bytes in and the connection's end, for the client."""

    def __init__(self, client: MqttClient) -> None:
        self._client = client

    def data_received(self, data: bytes) -> None:
        self._client._received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._client._transport_lost(exc)


@dataclass(slots=True)
class _Held:
    """A publish handed over while the broker's Receive Maximum was reached: sent in order."""

    topic: str
    payload: bytes
    retain: bool
    acked: asyncio.Future[None]


class MqttClient:
    """One MQTT 5 connection, driven by the running loop. QoS 1 only, in both directions."""

    def __init__(
        self,
        host: str,
        port: int = 1883,
        *,
        client_id: str = "",
        username: str | None = None,
        password: str | None = None,
        keepalive_s: int = 60,
        tls: ssl.SSLContext | None = None,
        will: Will | None = None,
        connect_timeout_s: float = 10.0,
        max_inbox: int | None = None,
    ) -> None:
        self.host, self.port = host, port
        self._client_id = client_id
        self._username, self._password = username, password
        self._keepalive_s = keepalive_s
        self._tls = tls
        self._will = will
        self._connect_timeout_s = connect_timeout_s
        self._max_inbox = max_inbox
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._inbuf = bytearray()
        self._out: list[bytes] = []  # encoded, not yet written (flush, or the next turn)
        self._flush_due = False
        self._connected: asyncio.Future[None] = self._loop.create_future()
        self._up = False  # between the CONNACK that accepted us and the end
        self._closed = asyncio.Event()
        self._lost: MqttError | None = None  # why the connection ended, if not by us
        self._closing = False
        self._next_id = 0
        self._pubacks: dict[int, tuple[asyncio.Future[None], str]] = {}
        self._held: deque[_Held] = deque()
        self._quota = 0  # publishes the broker takes now (its Receive Maximum, less in flight)
        self._subacks: dict[int, tuple[asyncio.Future[list[int]], str]] = {}
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._reading = True  # False while max_inbox messages wait
        self._misc: asyncio.TimerHandle | None = None
        self._last_out = 0.0  # loop time of the last packet written (keep-alive)
        self._ping_sent: float | None = None

    # --- connecting --------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect (TCP, TLS) and wait for the broker's CONNACK."""
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                try:
                    self._transport, _ = await self._loop.create_connection(
                        lambda: _Wire(self),
                        self.host,
                        self.port,
                        ssl=self._tls,
                        server_hostname=self.host if self._tls is not None else None,
                    )
                except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                    raise MqttError(str(exc) or type(exc).__name__) from exc
                self._write(self._connect_packet().write())
                self.flush()
                await self._connected
        except TimeoutError:
            self.close()
            raise MqttError(f"no CONNACK from {self.host}:{self.port} in time") from None
        except BaseException:
            self.close()
            raise
        self._misc = self._loop.call_later(KEEPALIVE_CHECK_S, self._on_misc)

    def _connect_packet(self) -> mqtt5.ConnectPacket:
        will = self._will
        return mqtt5.ConnectPacket(
            self._client_id,
            username=self._username,
            password=None if self._password is None else self._password.encode(),
            clean_start=True,
            keep_alive=self._keepalive_s,
            will=None
            if will is None
            else mqtt5.Will(will.topic, payload=will.payload, qos=QOS1, retain=will.retain),
        )

    async def __aenter__(self) -> MqttClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.disconnect()

    @property
    def is_connected(self) -> bool:
        return self._up

    async def wait_closed(self) -> None:
        """Until the connection ends; raises ConnectionLost unless we ended it."""
        await self._closed.wait()
        if self._lost is not None:
            raise self._lost

    async def disconnect(self, timeout_s: float = 1.0) -> None:
        """A DISCONNECT (so the broker keeps the will to itself), then the socket closed."""
        if self.is_connected and self._transport is not None:
            self._closing = True
            self._write(mqtt5.DisconnectPacket().write())
            self.flush()
            self._transport.close()  # after what is buffered is written
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._closed.wait()
        self.close()

    # --- publishing and subscribing ----------------------------------------------------

    def publish_nowait(
        self, topic: str, payload: bytes, *, retain: bool = False
    ) -> asyncio.Future[None]:
        """A QoS 1 publish, in call order (written on `flush`, or on the loop's next turn);
        the future is done when the broker's PUBACK arrives."""
        if not self.is_connected:
            raise self._lost or ConnectionLost(f"not connected: cannot publish to {topic}")
        acked: asyncio.Future[None] = self._loop.create_future()
        if self._quota > 0 and not self._held:
            self._send_publish(topic, payload, retain, acked)
        else:
            self._held.append(_Held(topic, payload, retain, acked))
        if not self._reading:
            self._read_again()  # its PUBACK comes behind what the broker queued for us
        return acked

    def _send_publish(
        self, topic: str, payload: bytes, retain: bool, acked: asyncio.Future[None]
    ) -> None:
        packet_id = self._packet_id()
        packet = mqtt5.PublishPacket(topic, payload, qos=QOS1, retain=retain, packet_id=packet_id)
        self._write(packet.write())  # a bad topic raises here, before anything is in flight
        self._quota -= 1
        self._pubacks[packet_id] = (acked, topic)

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        """Publish at QoS 1, written at once; returns when the broker has acknowledged it."""
        acked = self.publish_nowait(topic, payload, retain=retain)
        self.flush()
        await acked

    async def subscribe(self, topic: str) -> None:
        """Subscribe at QoS 1; raises SubscribeRefused when the broker says no."""
        if not self.is_connected:
            raise self._lost or ConnectionLost(f"not connected: cannot subscribe to {topic}")
        packet_id = self._packet_id()
        granted: asyncio.Future[list[int]] = self._loop.create_future()
        self._write(mqtt5.SubscribePacket(packet_id, [_subscription(topic)]).write())
        self._subacks[packet_id] = (granted, topic)
        if not self._reading:
            self._read_again()
        self.flush()
        for code in await granted:
            if code >= 0x80:
                raise SubscribeRefused(f"subscription to {topic} refused", code, _reason_text(code))

    async def messages(self) -> AsyncIterator[Message]:
        """Inbound messages, in arrival order (their PUBACK is sent)."""
        while True:
            message = await self._inbox.get()
            if not self._reading and self._inbox.qsize() <= (self._max_inbox or 0) // 2:
                self._read_again()
            yield message

    @property
    def messages_waiting(self) -> int:
        return self._inbox.qsize()

    def flush(self) -> None:
        """Write what was handed over to the socket now, not on the loop's next turn
        (asyncio keeps what the kernel does not take and writes it when it can)."""
        if not self._out:
            return
        data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
        self._out.clear()
        if self._transport is None or self._transport.is_closing():
            return
        self._transport.write(data)
        self._last_out = self._loop.time()

    def _write(self, packet: bytes) -> None:
        self._out.append(packet)
        if not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush_at_turn_end)

    def _flush_at_turn_end(self) -> None:
        self._flush_due = False
        self.flush()

    def _packet_id(self) -> int:
        """The next packet identifier not in use (MQTT 5.0, 2.2.1)."""
        for _ in range(MAX_PACKET_ID):
            self._next_id = self._next_id % MAX_PACKET_ID + 1
            if self._next_id not in self._pubacks and self._next_id not in self._subacks:
                return self._next_id
        raise MqttError("every packet identifier is in use")

    # --- inbound -----------------------------------------------------------------------

    def _received(self, data: bytes) -> None:
        self._inbuf += data
        self._parse()

    def _parse(self) -> None:
        """Take the whole packets received. A consumer max_inbox messages behind leaves the
        rest unread here, unacknowledged, and reading stops: the broker then holds (and past
        its queue, drops) what it has not had a PUBACK for, as for any slow subscriber."""
        if self._closed.is_set():
            return
        buffer = self._inbuf
        start = 0
        try:
            while not self._inbox_full() and (length := _packet_length(buffer, start)):
                if len(buffer) - start < length or self._closed.is_set():
                    break
                packet, _ = mqtt5.read(memoryview(buffer)[start : start + length])
                start += length
                self._handle(packet)
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            self._end(ConnectionLost(f"a malformed packet from the broker: {exc}"))
            return
        finally:
            if start:
                del buffer[:start]
        if self._out:
            self.flush()  # PUBACKs for what arrived, publishes their PUBACKs let go
        if self._reading and self._inbox_full() and self._transport is not None:
            self._reading = False
            self._transport.pause_reading()

    def _inbox_full(self) -> bool:
        """The consumer is max_inbox messages behind and no answer is awaited (a PUBACK, a
        SUBACK or a PINGRESP awaited is read, whatever queues before it)."""
        return (
            self._max_inbox is not None
            and self._inbox.qsize() >= self._max_inbox
            and not self._pubacks
            and not self._subacks
            and self._ping_sent is None
        )

    def _handle(self, packet: mqtt5.Packet) -> None:
        if isinstance(packet, mqtt5.PubAckPacket):
            self._puback(packet.packet_id, int(packet.reason_code))
        elif isinstance(packet, mqtt5.PublishPacket):
            self._inbound(packet)
        elif isinstance(packet, mqtt5.ConnAckPacket):
            self._connack(packet)
        elif isinstance(packet, mqtt5.SubAckPacket):
            pending = self._subacks.pop(packet.packet_id, None)
            if pending is not None and not pending[0].done():
                pending[0].set_result([int(code) for code in packet.reason_codes])
        elif isinstance(packet, mqtt5.PingRespPacket):
            self._ping_sent = None
        elif isinstance(packet, mqtt5.DisconnectPacket):
            code = int(packet.reason_code)
            why = packet.reason_str or _disconnect_text(code)
            self._end(ConnectionLost(f"the broker disconnected us: {why} (0x{code:02x})"))
        else:
            raise ValueError(f"a {type(packet).__name__} is not for a QoS 1 client")

    def _connack(self, packet: mqtt5.ConnAckPacket) -> None:
        if self._connected.done():
            raise ValueError("a second CONNACK")
        code = int(packet.reason_code)
        if code >= 0x80:
            self._connected.set_exception(
                ConnectRefused("the broker refused the connection", code, _reason_text(code))
            )
            return
        self._up = True
        self._quota = packet.receive_max
        if packet.server_keep_alive is not None:  # the broker's word wins (MQTT 5.0, 3.2.2.3.14)
            self._keepalive_s = packet.server_keep_alive
        self._connected.set_result(None)

    def _puback(self, packet_id: int, code: int) -> None:
        pending = self._pubacks.pop(packet_id, None)
        if pending is None:
            return  # not ours (a broker's error): nothing waits on it
        self._quota += 1
        while self._held and self._quota > 0:
            held = self._held.popleft()
            self._send_publish(held.topic, held.payload, held.retain, held.acked)
        acked, topic = pending
        if acked.done():
            return
        if code >= 0x80:
            acked.set_exception(
                PublishRefused(f"publish to {topic} refused", code, _reason_text(code))
            )
        else:
            acked.set_result(None)  # 0x10 "No matching subscribers" is a success too

    def _inbound(self, packet: mqtt5.PublishPacket) -> None:
        if packet.qos is mqtt5.QoS.EXACTLY_ONCE:
            raise ValueError("a QoS 2 publish on a QoS 1 subscription")
        if packet.qos is QOS1 and packet.packet_id is not None:
            self._write(mqtt5.PubAckPacket(packet.packet_id).write())
        self._inbox.put_nowait(Message(packet.topic, bytes(packet.payload), packet.retain))

    def _read_again(self) -> None:
        self._reading = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
            self._loop.call_soon(self._parse)  # what was left unread first

    def _on_misc(self) -> None:
        """Keep-alive (MQTT 5.0, 3.1.2.10): a PINGREQ when nothing else went out for the
        keep-alive; a broker that does not answer one within the keep-alive is gone."""
        self._misc = None
        if self._transport is None:
            return
        now = self._loop.time()
        if self._keepalive_s == 0:  # no keep-alive (the broker may say so)
            return
        if self._ping_sent is not None and now - self._ping_sent >= self._keepalive_s:
            self._end(ConnectionLost("the broker did not answer a PINGREQ within the keep-alive"))
            return
        if self._ping_sent is None and now - self._last_out >= self._keepalive_s / 2:
            self._write(mqtt5.PingReqPacket().write())
            self.flush()
            self._ping_sent = now
            if not self._reading:
                self._read_again()  # its PINGRESP comes behind what the broker queued for us
        self._misc = self._loop.call_later(KEEPALIVE_CHECK_S, self._on_misc)

    # --- ending ------------------------------------------------------------------------

    def _transport_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._closing and exc is None:
            self._end(None)
            return
        why = str(exc) if exc is not None else "the connection to the broker closed"
        if not self._connected.done():
            self._end(ClosedBeforeAccepted(why or type(exc).__name__, tls=self._tls is not None))
        else:
            self._end(ConnectionLost(why or type(exc).__name__))

    def _end(self, lost: MqttError | None) -> None:
        """Once: say why to whoever waits (connect, wait_closed, each PUBACK and SUBACK)."""
        if self._closed.is_set():
            return
        self._up = False
        self._lost = lost
        failure = lost or ConnectionLost("disconnected")
        if not self._connected.done():
            self._connected.set_exception(failure)
        waiting: list[asyncio.Future[None] | asyncio.Future[list[int]]] = [
            *(acked for acked, _ in self._pubacks.values()),
            *(held.acked for held in self._held),
            *(granted for granted, _ in self._subacks.values()),
        ]
        for future in waiting:
            if not future.done():
                future.set_exception(failure)
                future.exception()  # a publish nobody awaits any more is not an error to log
        self._pubacks.clear()
        self._held.clear()
        self._subacks.clear()
        self._out.clear()
        self._closed.set()
        if self._misc is not None:
            self._misc.cancel()
            self._misc = None
        if self._transport is not None:
            self._transport.abort()
            self._transport = None

    def close(self) -> None:
        """Drop the connection without a word (the will goes out): a failed connect, a
        connect cancelled midway, or the end after a DISCONNECT."""
        if self._transport is not None:
            self._transport.abort()  # connection_lost follows, on a later turn
            self._transport = None
        if not self._closed.is_set():
            self._end(None if self._closing else ConnectionLost("aborted"))
        if self._connected.done() and not self._connected.cancelled():
            self._connected.exception()  # read: a connect that gave up has no one to tell


def _disconnect_text(code: int) -> str:
    with contextlib.suppress(ValueError):
        return mqtt5.DisconnectReasonCode(code).name.replace("_", " ").capitalize()
    return "Unknown reason"

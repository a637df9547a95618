"""A small asyncio MQTT 5 client: asyncio's own TCP and TLS, and the sans-I/O `mqtt5` codec.

`mqtt5` (PyPI, by aiomqtt's maintainer, the codec aiomqtt 3 is built on) turns packets into
bytes and back, in Rust; this module keeps the session: CONNECT and its CONNACK, QoS 1 in
both directions, SUBSCRIBE, keep-alive, DISCONNECT and the last-will (delayed, so a brief
reconnect does not flap it). Why not aiomqtt 2, nor
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
- A silent broker is found: a PINGREQ goes out when nothing came in (or went out) for half
  the keep-alive, and one unanswered within the keep-alive ends the connection; a PUBACK or
  SUBACK not come within `puback_timeout_s` ends it with `PublishUnacknowledged`, so every
  user learns of a dead session, whether or not it awaits its futures.
- The broker's limits (its CONNACK, MQTT 5.0, 3.2.2.3) are kept: no packet larger than its
  Maximum Packet Size is sent (`publish_nowait` raises `PacketTooLarge`, nothing is sent and
  the session goes on), a broker that takes QoS 0 only is refused at connect
  (`BrokerUnsuitable`), and with Retain Available 0 a retained publish goes out unretained
  (counted in `retains_dropped`; a broker that refuses the retained last-will is asked again
  with it unretained). Our own Maximum Packet Size (`max_packet_bytes`) goes in the CONNECT,
  and no packet announced larger is buffered.
- One connection per client object: a reconnect is a new client (util/reconnect.py), so no
  message of a dead session is ever sent into a new one. `client_for` builds every client
  of the daemon and the link controller, from its configuration section.

Everything runs on the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import mqtt5

from tablectl.util.backoff import Backoff
from tablectl.util.reconnect import Permanent, Reconnector

__all__ = [
    "SOCKET_OPTIONS",
    "BrokerLimits",
    "BrokerSettings",
    "BrokerUnsuitable",
    "ClosedBeforeAccepted",
    "ConnectRefused",
    "ConnectionLost",
    "Message",
    "MqttClient",
    "MqttError",
    "PacketTooLarge",
    "PublishRefused",
    "PublishUnacknowledged",
    "Refused",
    "SubscribeRefused",
    "Will",
    "broker_backoff",
    "broker_reconnector",
    "client_for",
    "publish_size",
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
RETAIN_NOT_SUPPORTED = 0x9A  # a CONNACK refusing a retained will (MQTT 5.0, 3.2.2.2)
PACKET_TOO_LARGE = 0x95  # a DISCONNECT for a packet past our Maximum Packet Size
# The largest packet this client takes unless told otherwise: a backend's birth and a link
# controller's broadcasts are a few KiB; a MiB bounds what one packet can make us buffer.
MAX_PACKET_BYTES = 1 << 20
# A broker on the site's LAN that is not there is tried again this often at most, so one
# back from an outage is found within a few seconds; a refusal waits longer (docs/mqtt.md).
BROKER_RETRY_MAX_S = 2.0


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


class PublishUnacknowledged(ConnectionLost):
    """No PUBACK (or SUBACK) within the client's deadline: the broker holds the connection
    but is not answering what we send, so the connection is ended."""

    def __init__(self, what: str, timeout_s: float) -> None:
        super().__init__(f"the broker did not acknowledge {what} within {timeout_s:g} s")
        self.timeout_s = timeout_s


class PacketTooLarge(MqttError):
    """A publish larger than the broker's Maximum Packet Size: not sent; the session goes on
    (the broker would have closed the connection for it, MQTT 5.0, 3.2.2.3.6)."""

    def __init__(self, topic: str, size: int, limit: int) -> None:
        super().__init__(
            f"a publish to {topic} of {size} bytes is larger than the broker accepts "
            f"({limit} bytes, its CONNACK's Maximum Packet Size)"
        )
        self.topic, self.size, self.limit = topic, size, limit


class BrokerUnsuitable(MqttError, Permanent):
    """The broker accepted the connection with limits this client cannot work within (QoS 0
    only): a configuration to change, not a failure that waiting cures."""


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
    """The broker publishes this (QoS 1) when the connection ends without a DISCONNECT, once
    `delay_s` has passed without a new connection of the same client id (MQTT 5.0, 3.1.3.2.2:
    the Will Delay Interval; the session is kept that long for it), so a brief reconnect does
    not flap it."""

    topic: str
    payload: bytes
    retain: bool = True
    delay_s: int = 0


@dataclass(frozen=True, slots=True)
class BrokerLimits:
    """What the broker's CONNACK said it takes (MQTT 5.0, 3.2.2.3)."""

    receive_max: int = 65535
    max_packet_bytes: int | None = None  # None: no limit but the protocol's
    max_qos: int = 2
    retain_available: bool = True
    keepalive_s: int = 0  # as settled: ours, or the broker's Server Keep Alive


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


def _read_packet(data: memoryview) -> mqtt5.Packet:
    """One whole packet decoded. Bytes the codec cannot take (a topic that is not UTF-8)
    make it panic (pyo3's PanicException, a BaseException, not a ValueError): a malformed
    packet all the same, not a fatal error of the connection's protocol."""
    try:
        packet, _ = mqtt5.read(data)
    except Exception:
        raise
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit | asyncio.CancelledError):
            raise
        raise ValueError(f"the codec failed on it ({type(exc).__name__}: {exc})") from None
    return packet


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


def publish_size(topic: str, payload: bytes) -> int:
    """The bytes of a QoS 1 PUBLISH without properties, as `mqtt5` writes it: the fixed header,
    the topic, the packet identifier, an empty property length and the payload."""
    remaining = 2 + len(topic.encode()) + 2 + 1 + len(payload)
    length_bytes = 1 if remaining < 128 else 2 if remaining < 16_384 else 3
    return 1 + (length_bytes if remaining < 2_097_152 else 4) + remaining


class _Wire(asyncio.Protocol):
    """asyncio's end of the connection: bytes in and the connection's end, for the client."""

    def __init__(self, client: MqttClient) -> None:
        self._client = client
        self.detached = False  # a refused connection's end is not the next one's

    def data_received(self, data: bytes) -> None:
        if not self.detached:
            self._client._received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.detached:
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
        puback_timeout_s: float = 10.0,
        max_packet_bytes: int = MAX_PACKET_BYTES,
    ) -> None:
        self.host, self.port = host, port
        self._client_id = client_id
        self._username, self._password = username, password
        self._keepalive_s = keepalive_s
        self._tls = tls
        self._will = will
        self._connect_timeout_s = connect_timeout_s
        self._max_inbox = max_inbox
        self._puback_timeout_s = puback_timeout_s
        self._max_packet_bytes = max_packet_bytes
        self.limits = BrokerLimits(keepalive_s=keepalive_s)
        self.retains_dropped = 0  # retained publishes sent unretained (Retain Available 0)
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._wire: _Wire | None = None
        self._inbuf = bytearray()
        self._out: list[bytes] = []  # encoded, not yet written (flush, or the next turn)
        self._flush_due = False
        self._connected: asyncio.Future[None] = self._loop.create_future()
        self._up = False  # between the CONNACK that accepted us and the end
        self._closed = asyncio.Event()
        self._lost: MqttError | None = None  # why the connection ended, if not by us
        self._closing = False
        self._next_id = 0
        # Awaiting their PUBACK, oldest first: (its future, topic, loop time it was sent).
        self._pubacks: dict[int, tuple[asyncio.Future[None], str, float]] = {}
        self._held: deque[_Held] = deque()
        self._quota = 0  # publishes the broker takes now (its Receive Maximum, less in flight)
        self._subacks: dict[int, tuple[asyncio.Future[list[int]], str, float]] = {}
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._reading = True  # False while max_inbox messages wait
        self._misc: asyncio.TimerHandle | None = None
        self._last_out = 0.0  # loop time of the last packet written (keep-alive) ...
        self._last_in = 0.0  # ... and of the last bytes received
        self._ping_sent: float | None = None

    # --- connecting --------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect (TCP, TLS) and wait for the broker's CONNACK. A broker without retained
        messages refuses a retained last-will (0x9A): it is asked once more, unretained."""
        try:
            await self._connect_once()
        except ConnectRefused as exc:
            will = self._will
            if exc.reason_code != RETAIN_NOT_SUPPORTED or will is None or not will.retain:
                raise
            self._will = replace(will, retain=False)
            self._fresh_connection()
            await self._connect_once()

    def _fresh_connection(self) -> None:
        """Back to before a connect that the broker refused (nothing was sent in it)."""
        if self._wire is not None:
            self._wire.detached = True
        self._transport = None
        self._inbuf.clear()
        self._out.clear()
        self._connected = self._loop.create_future()
        self._closed = asyncio.Event()
        self._lost = None

    async def _connect_once(self) -> None:
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                try:
                    self._wire = wire = _Wire(self)
                    self._transport, _ = await self._loop.create_connection(
                        lambda: wire,
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
        self._last_in = self._loop.time()
        self._misc = self._loop.call_later(self._check_every_s, self._on_misc)

    @property
    def _check_every_s(self) -> float:
        """Often enough that a deadline is kept to within a quarter of itself."""
        keepalive = self._keepalive_s or KEEPALIVE_CHECK_S * 4
        return min(KEEPALIVE_CHECK_S, keepalive / 4, self._puback_timeout_s / 4)

    def _connect_packet(self) -> mqtt5.ConnectPacket:
        will = self._will
        return mqtt5.ConnectPacket(
            self._client_id,
            username=self._username,
            password=None if self._password is None else self._password.encode(),
            clean_start=True,
            keep_alive=self._keepalive_s,
            # Kept as long as the will waits: a session that ended sooner would send it.
            session_expiry_interval=0 if will is None else will.delay_s,
            max_packet_size=self._max_packet_bytes,
            will=None
            if will is None
            else mqtt5.Will(
                will.topic,
                payload=will.payload,
                qos=QOS1,
                retain=will.retain,
                will_delay_interval=will.delay_s,
            ),
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
        limit = self.limits.max_packet_bytes
        if limit is not None and (size := publish_size(topic, payload)) > limit:
            raise PacketTooLarge(topic, size, limit)
        if retain and not self.limits.retain_available:
            retain = False  # a retained publish would end the session (MQTT 5.0, 3.3.1.3)
            self.retains_dropped += 1
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
        self._pubacks[packet_id] = (acked, topic, self._loop.time())

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
        self._subacks[packet_id] = (granted, topic, self._loop.time())
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
        self._last_in = self._loop.time()
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
                if length > self._max_packet_bytes:  # not buffered: MQTT 5.0, 3.1.2.11.4
                    self._too_large(length)
                    return
                if len(buffer) - start < length or self._closed.is_set():
                    break
                packet = _read_packet(memoryview(buffer)[start : start + length])
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

    def _too_large(self, length: int) -> None:
        self._write(
            mqtt5.DisconnectPacket(reason_code=mqtt5.DisconnectReasonCode(PACKET_TOO_LARGE)).write()
        )
        self.flush()
        self._end(
            ConnectionLost(
                f"the broker sent a packet of {length} bytes, more than our Maximum Packet "
                f"Size ({self._max_packet_bytes} bytes)"
            )
        )

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
        if packet.server_keep_alive is not None:  # the broker's word wins (MQTT 5.0, 3.2.2.3.14)
            self._keepalive_s = packet.server_keep_alive
        self.limits = BrokerLimits(
            receive_max=packet.receive_max,
            max_packet_bytes=packet.max_packet_size,
            max_qos=int(packet.max_qos),
            retain_available=packet.retain_available,
            keepalive_s=self._keepalive_s,
        )
        if packet.max_qos is mqtt5.QoS.AT_MOST_ONCE:
            # Nothing this client sends may go at QoS 1 (MQTT 5.0, 3.2.2.3.4): say goodbye.
            self._write(mqtt5.DisconnectPacket().write())
            self.flush()
            self._connected.set_exception(
                BrokerUnsuitable(
                    "the broker takes QoS 0 only (its CONNACK's Maximum QoS): every message "
                    "of this contract is QoS 1; allow QoS 1 on the broker (Mosquitto: max_qos)"
                )
            )
            return
        self._up = True
        self._quota = packet.receive_max
        self._connected.set_result(None)

    def _puback(self, packet_id: int, code: int) -> None:
        pending = self._pubacks.pop(packet_id, None)
        if pending is None:
            return  # not ours (a broker's error): nothing waits on it
        self._quota += 1
        while self._held and self._quota > 0:
            held = self._held.popleft()
            self._send_publish(held.topic, held.payload, held.retain, held.acked)
        acked, topic, _ = pending
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
        if packet.topic_alias is not None:  # MQTT 5.0, 3.3.2.3.4: our Topic Alias Maximum is 0
            raise ValueError(f"a topic alias ({packet.topic_alias}), though we allow none")
        if "+" in packet.topic or "#" in packet.topic:  # MQTT 5.0, 3.3.2.1
            raise ValueError(f"a topic name with a wildcard ({packet.topic!r})")
        if packet.qos is QOS1 and packet.packet_id is not None:
            self._write(mqtt5.PubAckPacket(packet.packet_id).write())
        self._inbox.put_nowait(Message(packet.topic, bytes(packet.payload), packet.retain))

    def _read_again(self) -> None:
        self._reading = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()
            self._loop.call_soon(self._parse)  # what was left unread first

    def _on_misc(self) -> None:
        """Keep-alive (MQTT 5.0, 3.1.2.10), judged on what comes in as well as what goes out:
        a PINGREQ when nothing went out, or nothing came in, for half the keep-alive; a broker
        that does not answer one within the keep-alive is gone. A PUBACK or SUBACK not come
        within `puback_timeout_s` ends the connection too."""
        self._misc = None
        if self._transport is None:
            return
        now = self._loop.time()
        late = self._late_answer(now)
        if late is not None:
            self._end(late)
            return
        keepalive = self._keepalive_s  # 0: no keep-alive (the broker may say so)
        if keepalive and self._ping_sent is not None and now - self._ping_sent >= keepalive:
            self._end(ConnectionLost("the broker did not answer a PINGREQ within the keep-alive"))
            return
        quiet = max(now - self._last_out, now - self._last_in)
        if keepalive and self._ping_sent is None and quiet >= keepalive / 2:
            self._write(mqtt5.PingReqPacket().write())
            self.flush()
            self._ping_sent = now
            if not self._reading:
                self._read_again()  # its PINGRESP comes behind what the broker queued for us
        self._misc = self._loop.call_later(self._check_every_s, self._on_misc)

    def _late_answer(self, now: float) -> PublishUnacknowledged | None:
        """The oldest PUBACK or SUBACK awaited, if it is past the deadline (each dict holds
        them in the order they were sent)."""
        for pending, what in (
            (self._pubacks, "a publish to"),
            (self._subacks, "a subscription to"),
        ):
            for _, topic, sent_at in pending.values():
                if now - sent_at >= self._puback_timeout_s:
                    return PublishUnacknowledged(f"{what} {topic}", self._puback_timeout_s)
                break
        return None

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
            *(acked for acked, _, _ in self._pubacks.values()),
            *(held.acked for held in self._held),
            *(granted for granted, _, _ in self._subacks.values()),
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


class BrokerSettings(Protocol):
    """A configuration section that names a broker and how to log in (the table's `[mqtt]`,
    the link controller's `[mqtt]`)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def username(self) -> str | None: ...
    @property
    def password(self) -> str | None: ...
    @property
    def keepalive_s(self) -> int: ...
    @property
    def tls(self) -> bool: ...
    @property
    def ca_file(self) -> Path | None: ...
    @property
    def cert_file(self) -> Path | None: ...
    @property
    def key_file(self) -> Path | None: ...


def broker_backoff(longest_s: float) -> Backoff:
    """The reconnect backoff for a broker: from 0.25 s, doubling, jittered, to BROKER_RETRY_MAX_S
    (or `longest_s`, if shorter)."""
    return Backoff(initial_s=0.25, max_s=min(BROKER_RETRY_MAX_S, longest_s))


def broker_reconnector(
    name: str,
    connect: Callable[[], Awaitable[MqttClient]],
    serve: Callable[[MqttClient], Awaitable[None]],
    close: Callable[[MqttClient], Awaitable[None]],
    *,
    refused_wait_s: float,
) -> Reconnector[MqttClient]:
    """The one reconnect component (util/reconnect.py) for a broker: a broker that is not
    there is tried again within BROKER_RETRY_MAX_S, a refusal every `refused_wait_s`."""
    return Reconnector(
        name=name,
        connect=connect,
        serve=serve,
        close=close,
        backoff=broker_backoff(refused_wait_s),
        refused_wait_s=refused_wait_s,
        retry_on=(MqttError,),
    )


def client_for(
    broker: BrokerSettings,
    *,
    client_id: str,
    will: Will | None = None,
    max_inbox: int | None = None,
    max_packet_bytes: int = MAX_PACKET_BYTES,
) -> MqttClient:
    """A client as configured: TLS verifying the broker (and showing our certificate), the
    credentials, the keep-alive, and a PUBACK deadline of half the keep-alive (a broker
    answers a PUBACK as soon as it reads the publish: one that has not by then is not
    delivering). Every client of the daemon and the link controller is made here."""
    return MqttClient(
        broker.host,
        broker.port,
        client_id=client_id,
        username=broker.username,
        password=broker.password,
        keepalive_s=broker.keepalive_s,
        tls=tls_context(broker.ca_file, broker.cert_file, broker.key_file) if broker.tls else None,
        will=will,
        max_inbox=max_inbox,
        puback_timeout_s=broker.keepalive_s / 2,
        max_packet_bytes=max_packet_bytes,
    )

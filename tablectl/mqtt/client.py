"""A small asyncio MQTT 5 client over paho-mqtt's public socket API.

paho-mqtt does the protocol (packets, QoS 1 flows, keep-alive, TLS through an `ssl.SSLContext`);
this module drives it from the event loop through paho's documented external-loop interface:
`socket()`, `loop_read()`, `loop_write()`, `loop_misc()`, `want_write()` and the
`on_socket_close` / `on_socket_register_write` / `on_socket_unregister_write` callbacks. Why not
aiomqtt (docs/mqtt.md, "The MQTT client"): its public API awaits one PUBACK per call (no
future per PUBACK to pipeline a window of hundreds cheaply), writes a publish only a loop turn
or two later (it registers the socket for writing through `call_soon_threadsafe`), and drops
MQTT 5 PUBACK reason codes, so a publish the broker's ACL refused looks delivered.

What it gives the relay:
- `publish_nowait`: a QoS 1 publish handed to paho now, and a future for its PUBACK; the
  future fails with `PublishRefused` when the broker answers with a reason code of 0x80 or
  more (Mosquitto: 0x87 "Not authorized" for a topic the ACL denies), and with
  `ConnectionLost` when the connection ends first. `flush` writes what paho holds at once.
- `connect` raises `ConnectRefused` (the CONNACK's reason code), or `MqttError` with the
  cause (TCP, TLS) when it cannot get that far; `wait_closed` raises `ConnectionLost`.
- `max_inbox`: a consumer slower than its messages stops reading the socket while that many
  wait, so the broker holds (and past its queue, drops) what it has not taken, as it does for
  any slow subscriber; reading goes on once half of them are consumed.
- One connection per client object: a reconnect is a new client (util/reconnect.py).

Everything but the blocking TCP connect and TLS handshake (paho's `connect`, run in a
thread, before any callback that touches the loop is installed) runs on the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode, MQTTProtocolVersion
from paho.mqtt.reasoncodes import ReasonCode

from tablectl.util.reconnect import Permanent

__all__ = [
    "SOCKET_OPTIONS",
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
# with delayed ACKs that is tens of milliseconds on an event's way to the backend. (In the
# form aiomqtt's socket_options takes, for the benches' and tests' independent clients.)
SOCKET_OPTIONS = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)

# CONNACK reason codes that a later attempt may not meet again: the broker is busy or
# restarting, not saying no to us (MQTT 5.0, 3.2.2.2).
TRANSIENT_CONNACK = frozenset({0x88, 0x89, 0x97, 0x9F})


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


class _LastError(logging.Handler):
    """Keeps paho's last error line: why a TLS session died, say. Through a logger at ERROR,
    so paho's per-packet debug lines are never formatted (its on_log would format each)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.message = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.message = record.getMessage()


def _reason(code: ReasonCode) -> tuple[int, str]:
    return int(code.value), str(code)


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
        self._max_inbox = max_inbox
        self._reading = True  # False while max_inbox messages wait
        self._keepalive_s = keepalive_s
        self._connect_timeout_s = connect_timeout_s
        self._loop = asyncio.get_running_loop()
        p = paho.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=MQTTProtocolVersion.MQTTv5,
            reconnect_on_failure=False,
        )
        p.connect_timeout = connect_timeout_s  # the TCP connect and the TLS handshake
        if username is not None:
            p.username_pw_set(username, password)
        if tls is not None:
            p.tls_set_context(tls)
        if will is not None:
            p.will_set(will.topic, will.payload, qos=1, retain=will.retain)
        # No limit in paho: the caller keeps its own window (paho's limit rescans every
        # message in flight on each PUBACK).
        p.max_inflight_messages_set(0)
        self._errors = _LastError()
        paho_log = logging.Logger("tablectl.mqtt.paho", logging.ERROR)
        paho_log.addHandler(self._errors)
        p.enable_logger(paho_log)
        self._paho = p  # its callbacks are set once connected, on the loop's thread
        self._connected: asyncio.Future[None] = self._loop.create_future()
        self._up = False  # between the CONNACK that accepted us and the end
        self._closed = asyncio.Event()
        self._lost: MqttError | None = None  # why the connection ended, if not by us
        self._closing = False
        self._pubacks: dict[int, tuple[asyncio.Future[None], str]] = {}
        self._subacks: dict[int, tuple[asyncio.Future[list[ReasonCode]], str]] = {}
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._misc: asyncio.TimerHandle | None = None
        self._fd: int | None = None

    # --- connecting --------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect and wait for the broker's CONNACK."""
        done = self._loop.run_in_executor(None, self._blocking_connect)
        try:
            rc = await asyncio.shield(done)
        except asyncio.CancelledError:
            done.add_done_callback(lambda _: self.close())
            raise
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise MqttError(str(exc) or type(exc).__name__) from exc
        sock = self._paho.socket()
        if not isinstance(sock, socket.socket):
            # Closed while the CONNECT was written (a TLS 1.3 broker refusing our
            # certificate after the handshake does that): paho's log says why.
            self.close()
            raise MqttError(
                "the broker closed the connection before accepting it: "
                + (self._errors.message or paho.error_string(rc))
            )
        for option in SOCKET_OPTIONS:
            sock.setsockopt(*option)
        self._fd = sock.fileno()
        p = self._paho
        p.on_connect = self._on_connect
        p.on_disconnect = self._on_disconnect
        p.on_publish = self._on_publish
        p.on_subscribe = self._on_subscribe
        p.on_message = self._on_message
        p.on_socket_close = self._on_socket_close
        p.on_socket_register_write = self._on_register_write
        p.on_socket_unregister_write = self._on_unregister_write
        self._loop.add_reader(self._fd, self._on_readable)
        self.flush()  # whatever of the CONNECT is left, if the thread could not write it all
        self._misc = self._loop.call_later(1.0, self._on_misc)
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                await self._connected
        except TimeoutError:
            self.close()
            raise MqttError(f"no CONNACK from {self.host}:{self.port} in time") from None
        except BaseException:
            self.close()
            raise

    async def __aenter__(self) -> MqttClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.disconnect()

    def _blocking_connect(self) -> MQTTErrorCode:
        """paho's connect: TCP, the TLS handshake, and the CONNECT written (a thread)."""
        return self._paho.connect(self.host, self.port, self._keepalive_s, clean_start=True)

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
        if self.is_connected:
            self._closing = True
            self._paho.disconnect()
            self.flush()  # written now: paho then closes the socket
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._closed.wait()
        self.close()

    # --- publishing and subscribing ----------------------------------------------------

    def publish_nowait(
        self, topic: str, payload: bytes, *, retain: bool = False
    ) -> asyncio.Future[None]:
        """A QoS 1 publish handed to paho now (paho sends in call order, on `flush` or the
        next writable socket); the future is done when the broker's PUBACK arrives."""
        if not self.is_connected:
            raise self._lost or ConnectionLost(f"not connected: cannot publish to {topic}")
        info = self._paho.publish(topic, payload, qos=1, retain=retain)
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            raise MqttError(f"could not publish to {topic}: {paho.error_string(info.rc)}")
        acked: asyncio.Future[None] = self._loop.create_future()
        self._pubacks[info.mid] = (acked, topic)
        if not self._reading:
            self._read_again()  # its PUBACK comes behind what the broker queued for us
        return acked

    async def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        """Publish at QoS 1, written at once; returns when the broker has acknowledged it."""
        acked = self.publish_nowait(topic, payload, retain=retain)
        self.flush()
        await acked

    async def subscribe(self, topic: str) -> None:
        """Subscribe at QoS 1; raises SubscribeRefused when the broker says no."""
        if not self.is_connected:
            raise self._lost or ConnectionLost(f"not connected: cannot subscribe to {topic}")
        rc, mid = self._paho.subscribe(topic, qos=1)
        if rc != MQTTErrorCode.MQTT_ERR_SUCCESS or mid is None:
            raise MqttError(f"could not subscribe to {topic}: {paho.error_string(rc)}")
        granted: asyncio.Future[list[ReasonCode]] = self._loop.create_future()
        self._subacks[mid] = (granted, topic)
        if not self._reading:
            self._read_again()
        self.flush()
        for code in await granted:
            if code.is_failure:
                raise SubscribeRefused(f"subscription to {topic} refused", *_reason(code))

    async def messages(self) -> AsyncIterator[Message]:
        """Inbound messages, in arrival order (paho has sent their PUBACK)."""
        while True:
            message = await self._inbox.get()
            if not self._reading and self._inbox.qsize() <= (self._max_inbox or 0) // 2:
                self._read_again()
            yield message

    def _read_again(self) -> None:
        self._reading = True
        if self._fd is not None:
            self._loop.add_reader(self._fd, self._on_readable)
            self._loop.call_soon(self._on_readable)  # what TLS may hold already decrypted

    @property
    def messages_waiting(self) -> int:
        return self._inbox.qsize()

    def flush(self) -> None:
        """Write what paho holds to the socket now, not a loop turn later. What the kernel
        does not take is written when the socket is writable again (paho asks for that)."""
        if self._fd is None:
            return
        try:
            self._paho.loop_write()
        except Exception as exc:  # noqa: BLE001 (any failure of the socket: the connection is over)
            self._connection_ended(ConnectionLost(f"write failed: {exc}"))

    # --- paho's callbacks (on the loop's thread once connected) -------------------------

    def _on_readable(self) -> None:
        p = self._paho
        try:
            while p.loop_read() == MQTTErrorCode.MQTT_ERR_SUCCESS:
                # An SSL socket may hold decrypted bytes the selector cannot see.
                sock = p.socket()
                if not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                    break
        except Exception as exc:  # noqa: BLE001 (any failure of the socket: the connection is over)
            self._connection_ended(ConnectionLost(f"read failed: {exc}"))
            return
        if p.want_write():  # PUBACKs for what arrived, a PINGREQ
            self.flush()
        if (
            self._max_inbox is not None
            and self._inbox.qsize() >= self._max_inbox
            and not self._pubacks  # an answer awaited is read, whatever queues before it
            and not self._subacks
            and self._fd is not None
        ):
            self._reading = False  # the consumer is behind: the broker keeps the rest
            self._loop.remove_reader(self._fd)

    def _on_misc(self) -> None:
        """Keep-alive: paho sends PINGREQ when due and closes a connection whose PINGRESP
        never came (then on_disconnect tells us)."""
        self._misc = None
        if self._fd is None:
            return
        self._paho.loop_misc()
        if self._paho.want_write():
            self.flush()
        if self._fd is not None:
            self._misc = self._loop.call_later(1.0, self._on_misc)

    def _on_register_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        if self._fd is not None:
            self._loop.add_writer(self._fd, self.flush)

    def _on_unregister_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        if self._fd is not None:
            self._loop.remove_writer(self._fd)

    def _on_socket_close(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        self._forget_socket()

    def _on_connect(
        self,
        client: paho.Client,
        userdata: Any,
        flags: paho.ConnectFlags,
        reason_code: ReasonCode,
        properties: Any,
    ) -> None:
        if self._connected.done():
            return
        if reason_code.is_failure:
            refused = ConnectRefused("the broker refused the connection", *_reason(reason_code))
            self._connected.set_exception(refused)
        else:
            self._up = True
            self._errors.message = ""  # from here on, a line about this connection
            self._connected.set_result(None)

    def _on_disconnect(
        self,
        client: paho.Client,
        userdata: Any,
        flags: paho.DisconnectFlags,
        reason_code: ReasonCode,
        properties: Any,
    ) -> None:
        if self._closing and not reason_code.is_failure:
            self._connection_ended(None)
            return
        why = self._errors.message or "the connection to the broker closed"
        if flags.is_disconnect_packet_from_server:
            why = f"the broker disconnected us: {reason_code}"
        if not self._connected.done():
            why = f"the broker closed the connection before accepting it: {why}"
        self._connection_ended(ConnectionLost(why))

    def _on_publish(
        self,
        client: paho.Client,
        userdata: Any,
        mid: int,
        reason_code: ReasonCode,
        properties: Any,
    ) -> None:
        pending = self._pubacks.pop(mid, None)
        if pending is None:
            return
        acked, topic = pending
        if acked.done():
            return
        if reason_code.is_failure:
            acked.set_exception(
                PublishRefused(f"publish to {topic} refused", *_reason(reason_code))
            )
        else:
            acked.set_result(None)  # 0x10 "No matching subscribers" is a success too

    def _on_subscribe(
        self,
        client: paho.Client,
        userdata: Any,
        mid: int,
        reason_codes: list[ReasonCode],
        properties: Any,
    ) -> None:
        pending = self._subacks.pop(mid, None)
        if pending is not None and not pending[0].done():
            pending[0].set_result(list(reason_codes))

    def _on_message(self, client: paho.Client, userdata: Any, message: paho.MQTTMessage) -> None:
        try:
            topic = message.topic
        except UnicodeDecodeError:  # brokers refuse such topics; the caller counts it
            topic = ""
        self._inbox.put_nowait(Message(topic, bytes(message.payload), bool(message.retain)))

    # --- ending ------------------------------------------------------------------------

    def _connection_ended(self, lost: MqttError | None) -> None:
        """Once: say why to whoever waits (connect, wait_closed, each PUBACK and SUBACK)."""
        if self._closed.is_set():
            return
        self._up = False
        self._lost = lost
        failure = lost or ConnectionLost("disconnected")
        if not self._connected.done():
            self._connected.set_exception(failure)
        for acked, _ in self._pubacks.values():
            if not acked.done():
                acked.set_exception(failure)
                acked.exception()  # a publish nobody awaits any more is not an error to log
        for granted, _ in self._subacks.values():
            if not granted.done():
                granted.set_exception(failure)
                granted.exception()
        self._pubacks.clear()
        self._subacks.clear()
        self._closed.set()
        self._forget_socket()

    def _forget_socket(self) -> None:
        if self._misc is not None:
            self._misc.cancel()
            self._misc = None
        if self._fd is not None:
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
            self._fd = None

    def close(self) -> None:
        """Drop the connection without a word (the will goes out): a failed connect, a
        connect cancelled midway, or the end after a DISCONNECT."""
        self._forget_socket()
        sock = self._paho.socket()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
        if not self._closed.is_set():
            self._connection_ended(None if self._closing else ConnectionLost("aborted"))
        if self._connected.done() and not self._connected.cancelled():
            self._connected.exception()  # read: a connect that gave up has no one to tell

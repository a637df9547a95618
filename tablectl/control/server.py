"""The local control socket: status and diagnostics, the dealer's and floorperson's commands.

The protocol is in control/protocol.py, who may send what in control/access.py. The socket
is a Unix socket (0660, in a 0750 directory); the kernel tells us who connected, and every
command is checked against the caller's roles and journaled with their user name.

A client has `request_timeout_s` to send its request and gets exactly one reply, an error
for anything malformed. At most `max_connections` are open: past that, the connection that
has waited longest without sending a request is dropped, so idle clients can neither exhaust
file descriptors nor keep `status` from answering. Watchers (`tablectl watch`) have their
own smaller cap. Repeated trouble is logged once, then summarised (no log flood).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from pathlib import Path
from typing import Any

import structlog

from tablectl.config import AccessSection
from tablectl.control.access import AccessPolicy, Peer, peer_of
from tablectl.control.protocol import (
    AnyRequest,
    DevicesRequest,
    RequestError,
    ResetLinkRequest,
    ShufflerCountRequest,
    ShufflerSelfTestRequest,
    StatusRequest,
    TestBeginRequest,
    TestEndRequest,
    TestLockoutRequest,
    TestSeatRequest,
    TestShoeRequest,
    WatchRequest,
    parse_request,
    to_input,
)
from tablectl.control.service import TableService
from tablectl.core.table import Rejected
from tablectl.status import ControlStats, Devices
from tablectl.util.instance_lock import OwnedPath
from tablectl.util.logs import Throttled

log = structlog.get_logger(__name__)
MAX_REQUEST_BYTES = 64 * 1024
REPLY_TIMEOUT_S = 5.0  # a client that does not read its reply is dropped
LISTEN_BACKLOG = 64  # clients beyond it wait in the kernel, holding none of our descriptors
ACCEPT_RETRY_S = 0.1  # out of descriptors: let some close, then accept again


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def decode(line: bytes) -> Any:
    """A request line as JSON; ValueError (with the reason) for anything else."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and integers too long to convert
        raise ValueError(str(exc)) from None


class ControlServer:
    def __init__(self, path: Path, table: TableService, access: AccessSection) -> None:
        self._path = path
        self._table = table
        self._policy = AccessPolicy(access)
        self._request_timeout_s = access.request_timeout_s
        self._max_connections = access.max_connections
        self._max_watchers = access.max_watchers
        self._listener: socket.socket | None = None
        self._made: OwnedPath | None = None
        # Connections that have not sent a request yet, oldest first (dicts keep order).
        self._waiting: dict[asyncio.StreamWriter, None] = {}
        self._open = 0
        self._left = asyncio.Event()  # a client has gone: room for another
        self._watchers = 0
        self.counters = {"requests": 0, "errors": 0, "denied": 0, "dropped": 0, "timeouts": 0}
        self._warn_dropped = Throttled(log, "control connections dropped: too many open")
        self._warn_bad = Throttled(log, "malformed control requests")
        self._warn_denied = Throttled(log, "control requests denied")
        self._warn_accept = Throttled(log, "control socket cannot accept")

    async def start(self) -> None:
        """Listen (the socket exists from here on); serve() then takes the clients."""
        self._path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()  # a socket left by a crashed daemon
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            listener.bind(str(self._path))
            os.chmod(self._path, 0o660)
            self._made = OwnedPath.created(self._path)
            listener.listen(LISTEN_BACKLOG)
        except OSError:
            listener.close()
            raise
        listener.setblocking(False)
        self._listener = listener

    async def serve(self) -> None:
        """Accept one client at a time, and only with room for it, so descriptors stay
        bounded by max_connections (asyncio's own server accepts a hundred at once, before
        any can be turned away); clients beyond wait in the kernel's backlog."""
        assert self._listener is not None
        loop = asyncio.get_running_loop()
        async with asyncio.TaskGroup() as clients:
            while True:
                await self._incoming(loop)
                await self._room()
                try:
                    conn, _ = await loop.sock_accept(self._listener)
                except OSError as exc:  # EMFILE, ENFILE, ENOBUFS: other parts hold them
                    self._warn_accept(error=str(exc))
                    await asyncio.sleep(ACCEPT_RETRY_S)
                    continue
                self._open += 1
                clients.create_task(self._connection(conn), name="control-client")

    async def _incoming(self, loop: asyncio.AbstractEventLoop) -> None:
        """A client is waiting to be accepted (the listener is readable)."""
        assert self._listener is not None
        fd = self._listener.fileno()
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await ready
        finally:
            loop.remove_reader(fd)

    async def _room(self) -> None:
        """For a client waiting to be accepted: below the cap, or made so by dropping the
        connection that has waited longest without sending a request; else wait until a
        client leaves."""
        while self._open >= self._max_connections:
            if self._waiting:
                oldest = next(iter(self._waiting))
                del self._waiting[oldest]
                self.counters["dropped"] += 1
                self._warn_dropped(open=self._open, max_connections=self._max_connections)
                oldest.transport.abort()
            self._left.clear()
            await self._left.wait()

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            if self._made is not None:
                self._made.remove()  # only the socket this daemon made, not a later one's

    def stats(self) -> ControlStats:
        return ControlStats(open=self._open, watchers=self._watchers, **self.counters)

    # --- one connection ---------------------------------------------------------------

    async def _connection(self, conn: socket.socket) -> None:
        """One client, from accept to close; never raises (it would end the server)."""
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn, limit=MAX_REQUEST_BYTES)
        except OSError:
            conn.close()
            self._gone()
            return
        self._waiting[writer] = None
        try:
            await self._handle(reader, writer)
        except Exception:  # one client's trouble must not end the server
            log.exception("control connection failed")
        finally:
            self._waiting.pop(writer, None)
            try:
                writer.close()  # what is buffered is still sent
                async with asyncio.timeout(REPLY_TIMEOUT_S):
                    await writer.wait_closed()
            except (TimeoutError, ConnectionError):
                writer.transport.abort()
            finally:
                self._gone()

    def _gone(self) -> None:
        self._open -= 1
        self._left.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await self._read_request(reader, writer)
        if line is None:
            return
        peer = peer_of(writer.get_extra_info("socket"))
        request, reply = await self._answer(line, peer)
        if not (isinstance(request, WatchRequest) and reply["ok"]):
            await self._reply(writer, reply)
            return
        try:  # _execute counted this watcher
            if await self._reply(writer, reply):
                await self._watch(reader, writer)
        finally:
            self._watchers -= 1

    async def _read_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bytes | None:
        """The request line, or None after answering why there is none."""
        error: str
        try:
            async with asyncio.timeout(self._request_timeout_s):
                line = await reader.readline()
        except TimeoutError:
            self.counters["timeouts"] += 1
            error = f"no request within {self._request_timeout_s:g}s"
        except ValueError:  # the line is longer than the limit (LimitOverrunError inside)
            error = f"request longer than {MAX_REQUEST_BYTES} bytes"
        except ConnectionError:
            return None
        else:
            if writer not in self._waiting:
                return None  # dropped to make room for another client
            del self._waiting[writer]
            if not line:
                return None  # hung up without asking
            return line
        self._waiting.pop(writer, None)
        self.counters["errors"] += 1
        self._warn_bad(error=error)
        await self._reply(writer, {"ok": False, "error": error})
        return None

    async def _reply(self, writer: asyncio.StreamWriter, reply: dict[str, Any]) -> bool:
        if writer.transport.is_closing():
            return False
        try:
            writer.write(json.dumps(reply).encode() + b"\n")
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                await writer.drain()
        except (ConnectionError, TimeoutError):
            return False
        return True

    async def _answer(self, line: bytes, peer: Peer) -> tuple[AnyRequest | None, dict[str, Any]]:
        """The reply to one request line; never raises."""
        self.counters["requests"] += 1
        try:
            request = parse_request(decode(line))
        except (ValueError, RequestError) as exc:
            message = str(exc) if isinstance(exc, RequestError) else f"not JSON: {exc}"
            self.counters["errors"] += 1
            self._warn_bad(error=message, user=peer.user)
            return None, {"ok": False, "error": message}
        allowed = type(request).ROLES
        held = self._policy.roles(peer)
        if not allowed & held:
            self.counters["denied"] += 1
            self._warn_denied(cmd=request.cmd, user=peer.user, uid=peer.uid)
            need = " or ".join(sorted(role.value for role in allowed)) or "root"
            return request, {
                "ok": False,
                "error": f"permission denied: {request.cmd} needs the {need} role; "
                f"{peer.user} holds {', '.join(sorted(r.value for r in held)) or 'none'}",
            }
        try:
            return request, {"ok": True, "data": await self._execute(request, peer)}
        except (RequestError, Rejected) as exc:
            return request, {"ok": False, "error": str(exc)}
        except Exception as exc:  # a bug in one command must still get a reply
            log.exception("control request failed", cmd=request.cmd)
            return request, {"ok": False, "error": f"internal error: {type(exc).__name__}"}

    async def _execute(self, request: AnyRequest, peer: Peer) -> Any:
        table = self._table
        match request:
            case StatusRequest():
                return table.status().model_dump(mode="json")
            case DevicesRequest():
                seen = table.devices()
                devices = Devices(devices=seen.devices, broker=seen.broker, control=self.stats())
                return devices.model_dump(mode="json")
            case WatchRequest():
                if self._watchers >= self._max_watchers:
                    raise RequestError(f"busy: {self._max_watchers} watchers already")
                self._watchers += 1
                return {"last_seq": table.last_seq(), "links": table.links()}
            case ShufflerCountRequest() | ShufflerSelfTestRequest():
                log.info("shuffler diagnostic requested", cmd=request.cmd, user=peer.user)
                return (await table.shuffler_test(request)).model_dump(mode="json")
            case (
                TestBeginRequest()
                | TestSeatRequest()
                | TestLockoutRequest()
                | TestShoeRequest()
                | TestEndRequest()
            ):
                by = f"{request.by} ({peer.user})" if request.by else peer.user
                return await table.technician_test(request, by)
            case ResetLinkRequest():
                done = await table.reset_link(request.device, f"{request.by} ({peer.user})")
                return {"journaled": done, "status": table.status().model_dump(mode="json")}
        done = await table.submit(to_input(request, peer.user, now_ms=table.wall_clock_ms()))
        return {"journaled": done, "status": table.status().model_dump(mode="json")}

    # --- watchers -------------------------------------------------------------------------

    async def _watch(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Journal rows and link changes, one JSON line each, until the client leaves."""
        sub = self._table.subscribe()
        hung_up = asyncio.ensure_future(reader.read(1))  # anything, or EOF: the client is done
        try:
            while True:
                getter = asyncio.ensure_future(sub.get())
                await asyncio.wait({getter, hung_up}, return_when=asyncio.FIRST_COMPLETED)
                if not getter.done():
                    getter.cancel()
                    return
                item = getter.result()
                if item is None:
                    await self._reply(
                        writer,
                        {
                            "ok": False,
                            "error": "this watcher fell too far behind; watch again "
                            "(journal tail shows what was missed)",
                        },
                    )
                    return
                if not await self._reply(writer, item):
                    return
        finally:
            hung_up.cancel()
            sub.close()

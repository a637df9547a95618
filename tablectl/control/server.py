"""The local control socket: technicians' status, the dealer's and floorperson's commands.

The protocol is in control/protocol.py. The socket is a Unix socket (0660), so access is by
file mode; every command is journaled with the operating-system user that sent it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import socket
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from tablectl.control.protocol import (
    RequestError,
    StatusRequest,
    TestBeginRequest,
    TestEndRequest,
    TestLockoutRequest,
    TestSeatRequest,
    parse_request,
    to_input,
)
from tablectl.core.round import Rejected
from tablectl.service.walk_test import technician_test

if TYPE_CHECKING:
    from tablectl.service.daemon import Daemon

log = structlog.get_logger(__name__)
MAX_REQUEST_BYTES = 64 * 1024


def peer_user(writer: asyncio.StreamWriter) -> str:
    """The operating-system user on the other end of the socket (SO_PEERCRED)."""
    sock = writer.get_extra_info("socket")
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
    except (OSError, AttributeError):
        return "unknown"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


class ControlServer:
    def __init__(self, path: Path, daemon: Daemon) -> None:
        self._path = path
        self._daemon = daemon
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()  # a socket left by a crashed daemon
        self._server = await asyncio.start_unix_server(
            self._handle, path=str(self._path), limit=MAX_REQUEST_BYTES
        )
        os.chmod(self._path, 0o660)

    async def close(self) -> None:
        if self._server:
            self._server.close()
            with contextlib.suppress(FileNotFoundError):
                self._path.unlink()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            reply = await self._answer(line, peer_user(writer))
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
            log.warning("control connection dropped", error=str(exc))
        finally:
            writer.close()

    async def _answer(self, line: bytes, peer: str) -> dict[str, Any]:
        try:
            request = parse_request(json.loads(line))
            if isinstance(request, StatusRequest):
                return {"ok": True, "data": self._daemon.status()}
            if isinstance(
                request, TestBeginRequest | TestSeatRequest | TestLockoutRequest | TestEndRequest
            ):
                by = f"{request.by} ({peer})" if request.by else peer
                return {"ok": True, "data": await technician_test(self._daemon, request, by)}
            done = await self._daemon.submit(to_input(request, peer))
            return {"ok": True, "data": {"journaled": done, "status": self._daemon.status()}}
        except json.JSONDecodeError as exc:
            return {"ok": False, "error": f"not JSON: {exc}"}
        except RecursionError:
            return {"ok": False, "error": "not JSON: nested too deeply"}
        except (RequestError, Rejected) as exc:
            return {"ok": False, "error": str(exc)}

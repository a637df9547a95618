"""The local control socket: technicians' status and the dealer's commands.

One JSON object per line in, one per line out: {"ok": true, "data": ...} or
{"ok": false, "error": "..."}. The socket is a Unix socket (0660), so access is by file mode.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from tablectl.core.round import (
    Event,
    NewDeckRegistered,
    Rejected,
    ReshuffleRequested,
    Settle,
    VoidRound,
)
from tablectl.rules.cards import parse_cards

if TYPE_CHECKING:
    from tablectl.service.daemon import Daemon

log = structlog.get_logger(__name__)
MAX_REQUEST_BYTES = 64 * 1024


class RequestError(Exception):
    """A request that does not make sense; the message says what to send instead."""


def _settle(req: dict[str, Any]) -> Event:
    hands = req.get("hands", {})
    folded = req.get("folded", [])
    if not isinstance(hands, dict) or not isinstance(folded, list):
        raise RequestError("settle takes hands: {seat: cards} and folded: [seats]")
    try:
        return Settle(
            hands={int(seat): parse_cards(str(cards)) for seat, cards in hands.items()},
            folded=frozenset(int(seat) for seat in folded),
        )
    except ValueError as exc:
        raise RequestError(str(exc)) from None


def parse_command(req: dict[str, Any]) -> Event:
    """Turn a control request into the table event it asks for."""
    cmd = req.get("cmd")
    if cmd == "settle":
        return _settle(req)
    if cmd == "void":
        return VoidRound(str(req.get("reason", "")))
    if cmd == "new-deck":
        return NewDeckRegistered()
    if cmd == "reshuffle":
        return ReshuffleRequested()
    raise RequestError(f"unknown command {cmd!r}; known: status, settle, void, new-deck, reshuffle")


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
            reply = await self._answer(line)
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
            log.warning("control connection dropped", error=str(exc))
        finally:
            writer.close()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise RequestError("send one JSON object per line")
            if req.get("cmd") == "status":
                return {"ok": True, "data": self._daemon.status()}
            seq = await self._daemon.submit(parse_command(req))
            return {"ok": True, "data": {"journal_seq": seq, **self._daemon.status()}}
        except json.JSONDecodeError as exc:
            return {"ok": False, "error": f"not JSON: {exc}"}
        except (RequestError, Rejected) as exc:
            return {"ok": False, "error": str(exc)}

"""TCP, for a simulator in another process: `socket://HOST:PORT`."""

from __future__ import annotations

import asyncio

from tablectl.drivers.transport.base import StreamConnection, TransportUnavailable

SCHEME = "socket://"


class SocketConnector:
    def __init__(self, url: str) -> None:
        if not url.startswith(SCHEME):
            raise ValueError(f"{url!r} is not a socket:// address")
        host, sep, port = url.removeprefix(SCHEME).rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"{url!r}: write socket://HOST:PORT")
        self.url, self.host, self.port = url, host or "127.0.0.1", int(port)

    @property
    def description(self) -> str:
        return self.url

    async def connect(self) -> StreamConnection:
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
        except OSError as exc:
            raise TransportUnavailable(f"{self.url}: {exc}") from exc
        return StreamConnection(reader, writer, self.url)

"""Client side of the control socket: one request, one reply (or, for watch, a stream)."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tablectl.util.files import permission_advice


class ControlClientError(Exception):
    pass


CONNECT_RETRY_S = 0.05


def _connect(path: Path, timeout_s: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    deadline = time.monotonic() + (timeout_s or 5.0)
    try:
        while True:
            try:
                sock.connect(str(path))
                break
            except BlockingIOError:
                # The daemon's backlog is full (it takes clients one at a time and turns the
                # idle ones away): a moment later there is room.
                if time.monotonic() >= deadline:
                    raise ControlClientError(
                        f"the daemon on {path} is too busy to take a connection"
                    ) from None
                time.sleep(CONNECT_RETRY_S)
    except ControlClientError:
        sock.close()
        raise
    except (FileNotFoundError, ConnectionRefusedError) as exc:
        sock.close()
        raise ControlClientError(
            f"no tablectl daemon is listening on {path} ({exc.strerror}): start it "
            "(sudo systemctl start tablectl, or tablectl run --config FILE)"
        ) from None
    except PermissionError:
        sock.close()
        raise ControlClientError(permission_advice(path, write=True)) from None
    except OSError as exc:
        sock.close()
        raise ControlClientError(f"cannot reach the daemon on {path}: {exc}") from None
    return sock


def _reply(line: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(line)
    except ValueError:
        raise ControlClientError("the daemon sent something that is not JSON") from None
    if not isinstance(reply, dict):
        raise ControlClientError("the daemon sent something that is not a reply")
    return reply


def _lines(sock: socket.socket, path: Path, timeout_s: float | None) -> Iterator[bytes]:
    buffer = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise ControlClientError(
                f"the daemon on {path} did not answer in {timeout_s}s"
            ) from None
        except ConnectionError as exc:
            raise ControlClientError(f"the daemon on {path} hung up: {exc.strerror}") from None
        if not chunk:
            if buffer.strip():
                yield buffer
            return
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from complete


def call(path: Path, request: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
    """Send one request to a running daemon; raises ControlClientError if none answers."""
    with contextlib.closing(_connect(path, timeout_s)) as sock:
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            raise ControlClientError(f"the daemon on {path} hung up: {exc}") from None
        for line in _lines(sock, path, timeout_s):
            return _reply(line)
    raise ControlClientError(f"the daemon on {path} closed the connection without a reply")


@contextlib.contextmanager
def stream(path: Path, request: dict[str, Any]) -> Iterator[Iterator[dict[str, Any]]]:
    """A request whose reply is followed by events (watch): yields them as they come."""
    sock = _connect(path, 5.0)
    try:
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
        except OSError as exc:
            raise ControlClientError(f"the daemon on {path} hung up: {exc}") from None
        lines = _lines(sock, path, 5.0)
        first = next(lines, None)  # the reply, in the usual time
        if first is None:
            raise ControlClientError(f"the daemon on {path} closed the connection")
        sock.settimeout(None)  # events come when they happen
        yield (_reply(line) for line in itertools.chain([first], lines))
    finally:
        sock.close()

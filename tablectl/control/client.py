"""Client side of the control socket: one request, one reply."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any


class ControlClientError(Exception):
    pass


def call(path: Path, request: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
    """Send one request to a running daemon; raises ControlClientError if none answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
            sock.sendall(json.dumps(request).encode() + b"\n")
            chunks: list[bytes] = []
            while not chunks or not chunks[-1].endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise ControlClientError(
                f"no tablectl daemon is listening on {path} ({exc.strerror})"
            ) from None
        except TimeoutError:
            raise ControlClientError(
                f"the daemon on {path} did not answer in {timeout_s}s"
            ) from None
    reply = json.loads(b"".join(chunks))
    if not isinstance(reply, dict):
        raise ControlClientError("the daemon sent something that is not a reply")
    return reply

"""`tablectl watch`: the table's events as they happen (journal rows, device and broker links)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tablectl.cli.common import EXIT_OK, EXIT_REFUSED, describe, fail, socket_args, socket_path
from tablectl.control import client


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    watch = sub.add_parser(
        "watch",
        help="live events from the running daemon: journal rows and link changes (Ctrl-C ends)",
    )
    socket_args(watch, sends=("watch",))
    watch.set_defaults(handler=_watch)


def _links(links: dict[str, Any]) -> str:
    return ", ".join(f"{name} {state}" for name, state in links.items()) or "none"


def _watch(args: argparse.Namespace) -> int:
    path = socket_path(args)
    try:
        with client.stream(path, {"cmd": "watch"}) as events:
            for event in events:
                code = _show(args, event, path)
                if code is not None:
                    return code
    except client.ControlClientError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    except KeyboardInterrupt:
        return EXIT_OK
    return fail(args, "the daemon closed the connection (stopped?)", EXIT_REFUSED)


def _show(args: argparse.Namespace, event: dict[str, Any], path: Path) -> int | None:
    """Print one line; an exit code once the stream is over."""
    if event.get("ok") is False:
        return fail(args, f"refused: {event.get('error')}", EXIT_REFUSED)
    if event.get("ok") is True:  # the reply to the request itself
        data = event.get("data") or {}
        if args.json:
            print(json.dumps({"event": "watching", **data}), flush=True)
        else:
            print(
                f"watching {path}: journal at seq {data.get('last_seq')}; "
                f"{_links(data.get('links') or {})} (Ctrl-C to stop)",
                flush=True,
            )
        return None
    if args.json:
        print(json.dumps(event), flush=True)
    elif event.get("event") == "journal":
        print(
            f"{event['seq']:>8} {event['ts']} {event['type']:<22} {describe(event['data'])}",
            flush=True,
        )
    elif event.get("event") == "links":
        print(f"         links: {_links(event.get('links') or {})}", flush=True)
    return None

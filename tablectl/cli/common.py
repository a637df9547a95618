"""What every verb shares: exit codes, how to reach the daemon, printing for people and scripts."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from tablectl.config import load_config
from tablectl.control import client

EXIT_OK, EXIT_REFUSED, EXIT_BAD_INPUT = 0, 1, 2
DEFAULT_CONFIG = Path("/etc/tablectl/table.toml")


def default_config() -> Path:
    """$TABLECTL_CONFIG, else /etc/tablectl/table.toml."""
    return Path(os.environ.get("TABLECTL_CONFIG", DEFAULT_CONFIG))


def config_arg(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--config",
        type=Path,
        default=None,
        help="the table's config (default $TABLECTL_CONFIG or /etc/tablectl/table.toml)",
    )


def socket_args(sp: argparse.ArgumentParser) -> None:
    where = sp.add_mutually_exclusive_group()
    where.add_argument("--config", type=Path, help="the table's config (finds its socket)")
    where.add_argument("--socket", type=Path, help="the daemon's control socket")
    sp.add_argument("--json", action="store_true", help="print the reply as JSON")


def config_path(args: argparse.Namespace) -> Path:
    return Path(args.config) if args.config else default_config()


def socket_path(args: argparse.Namespace) -> Path:
    if getattr(args, "socket", None):
        return Path(args.socket)
    return load_config(config_path(args)).storage.socket_path


def fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Say what went wrong: on stderr for people, as JSON on stdout under --json."""
    if getattr(args, "json", False):
        print(json.dumps({"ok": False, "error": message}))
    else:
        print(f"tablectl: {message}", file=sys.stderr)
    return code


def call(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any] | int:
    """Send a request to the daemon: its data, or the exit code after saying why not."""
    try:
        reply = client.call(socket_path(args), request)
    except client.ControlClientError as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    if not reply.get("ok"):
        return fail(args, f"refused: {reply.get('error')}", EXIT_REFUSED)
    data = reply.get("data")
    return data if isinstance(data, dict) else {"data": data}


def cents(amount: int | None) -> str:
    if amount is None:
        return "-"
    return f"${amount // 100:,}.{amount % 100:02d}"


def yes_no(value: object) -> str:
    return "yes" if value else "no"

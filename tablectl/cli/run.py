"""`tablectl run` (the daemon) and `tablectl config check`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import sys
from pathlib import Path

from tablectl.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    cents,
    config_arg,
    config_path,
    fail,
    path_arg,
)
from tablectl.config import load_config
from tablectl.util import instance_lock
from tablectl.util.instance_lock import InstanceLocked


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser("run", help="run the daemon for one table")
    config_arg(run)
    run.set_defaults(handler=_run, quiet_logs=False)

    cfg = sub.add_parser("config", help="configuration tools")
    cfg_sub = cfg.add_subparsers(dest="config_verb", required=True)
    check = cfg_sub.add_parser("check", help="validate a table config against the rules")
    check.add_argument("file", type=path_arg, nargs="?", help="default: the table's config")
    check.add_argument("--json", action="store_true")
    check.set_defaults(handler=_check)


def _run(args: argparse.Namespace) -> int:
    # The daemon's modules (most of start-up: bench/startup.py) make objects that live as
    # long as the process: the collector's passes over them while importing find nothing
    # to free. It runs again once they are in; the daemon freezes them at READY (one full
    # collection then: service/daemon.py, freeze_start_up).
    collecting = gc.isenabled()
    gc.disable()
    try:
        from tablectl.service.daemon import Daemon, StartupError
        from tablectl.service.preflight import problems, wait_for_simulated_table
    finally:
        if collecting:
            gc.enable()

    path = config_path(args)
    config = load_config(path)
    wait_for_simulated_table(config)
    # Before anything is created: the right user, the hardware there (service/preflight.py).
    found = problems(config, path)
    if found:
        return fail(args, "not starting: " + "; ".join(found), EXIT_REFUSED)
    # Files, directories and the control socket are not for others (0640, 0750, 0660).
    os.umask(0o027)
    with contextlib.ExitStack() as held:
        # One daemon per table, locked before the journal, the sockets or the broker are
        # touched: a second one would share the MQTT client id and take the control socket.
        try:
            held.enter_context(instance_lock.held(config.storage.run_lock, "tablectl run"))
        except InstanceLocked as exc:
            return fail(args, str(exc), EXIT_REFUSED)
        except OSError as exc:  # the data directory cannot be made or is not ours
            data_dir = config.storage.data_dir
            why = f"cannot open the journal's directory {data_dir} to lock it: {exc}"
            return fail(args, why, EXIT_REFUSED)
        try:
            asyncio.run(Daemon(config).serve())
        except StartupError as exc:
            return fail(args, str(exc), EXIT_REFUSED)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from tablectl.mqtt.relay import identity_warnings

    path = Path(args.file) if args.file else config_path(args)
    config = load_config(path)
    game = config.game.table_game()
    # What may be meant, but most likely is not: said, and the config still passes.
    warnings = identity_warnings(config.mqtt, config.table.table_id)
    for warning in warnings:
        print(f"{path}: warning: {warning}", file=sys.stderr)
    summary = {
        "ok": True,
        "warnings": warnings,
        "file": str(path),
        "game": game.name,
        "table": config.table.table_id,
        "seats": config.table.seats,
        "table_wager": game.table_wager.name,
        "wager_cents": game.wager_cents,
        "meter": None if game.meter is None else game.meter.meter_id,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{path}: ok ({game.name}, table {config.table.table_id}, {config.table.seats} "
            f"seats, {game.table_wager.title} {cents(game.wager_cents)})"
        )
    return EXIT_OK

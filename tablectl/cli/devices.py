"""`tablectl devices` (identity, link, counters, last fault of every device, like NUT's upsc)
and the shuffler's diagnostics (`tablectl shuffler count`, `tablectl shuffler self-test`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tablectl.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    call,
    human,
    person,
    printable,
    socket_args,
)
from tablectl.cli.control import print_faults, send_command
from tablectl.service.status import FaultView

IDENTITY = ("model", "serial_number", "firmware")
HEADLINE = {"link", "identity", *IDENTITY, "port", "where", "boot_id", "last_fault", "faults"}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    devices = sub.add_parser(
        "devices", help="every device's identity, link state, counters and last fault"
    )
    socket_args(devices, sends=("devices",))
    devices.set_defaults(handler=_devices)
    devices_sub = devices.add_subparsers(dest="devices_verb")
    accept = devices_sub.add_parser(
        "accept", help="accept the device now connected (another serial number) for play"
    )
    accept.add_argument("device", choices=("shuffler", "shoe"))
    accept.add_argument(
        "serial_number",
        type=printable("a serial number", 64),
        help="its serial number, as devices shows it",
    )
    accept.add_argument("--by", required=True, type=person, help="the technician (an employee id)")
    socket_args(accept, sends=("accept-device",))
    accept.set_defaults(handler=send_command)
    reset = devices_sub.add_parser(
        "reset-link",
        help="a link stopped at refused events: skip the events the device holds (journaled), "
        "take what follows",
    )
    reset.add_argument("device", choices=("shuffler", "shoe"))
    reset.add_argument("--by", required=True, type=person, help="the technician (an employee id)")
    socket_args(reset, sends=("reset-link",))
    reset.set_defaults(handler=send_command)

    shuffler = sub.add_parser("shuffler", help="the shuffler's diagnostics (technician)")
    shuffler_sub = shuffler.add_subparsers(dest="shuffler_verb", required=True)
    count = shuffler_sub.add_parser("count", help="ask the shuffler to count the deck it holds")
    self_test = shuffler_sub.add_parser("self-test", help="run the shuffler's self-test")
    for sp in (count, self_test):
        socket_args(sp, sends=(f"shuffler-{sp.prog.split()[-1]}",))
        sp.set_defaults(handler=_shuffler)


def _is_counter(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def identity(info: dict[str, Any]) -> dict[str, Any]:
    nested = info.get("identity")
    source = nested if isinstance(nested, dict) else info
    return {key: source.get(key) for key in IDENTITY}


def _devices(args: argparse.Namespace) -> int:
    data = call(args, {"cmd": "devices"})
    if isinstance(data, int):
        return data
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return EXIT_OK
    for name, info in sorted(data.get("devices", {}).items()):
        print(
            f"{name:<10} link {human(info.get('link'))}  "
            + "  ".join(f"{key} {human(value)}" for key, value in identity(info).items())
        )
        fault = info.get("last_fault")
        details = [f"at {human(info.get('port') or info.get('where'))}"]
        if "boot_id" in info:  # a changed boot id: the device restarted
            details.append(f"boot {human(info['boot_id'])}")
        details += [
            f"{key} {human(value)}"
            for key, value in sorted(info.items())
            if key not in HEADLINE and not _is_counter(value)
        ]
        details.append(f"last fault {human(fault) if fault else 'none'}")
        print(f"{'':<10} " + "  ".join(details))
        counters = {k: v for k, v in sorted(info.items()) if k not in HEADLINE and _is_counter(v)}
        if counters:
            print(f"{'':<10} " + " ".join(f"{k}={v}" for k, v in counters.items()))
        standing = [FaultView.model_validate(f) for f in info.get("faults") or ()]
        if standing:
            print_faults(standing, indent=f"{'':<11}")
    broker = data.get("broker") or {}
    if broker:
        print(
            f"{'broker':<10} {'connected' if broker.get('connected') else 'disconnected'} "
            f"{human(broker.get('broker'))}  published through seq "
            f"{human(broker.get('published_through_seq'))}, acked "
            f"{human(broker.get('acked_through_seq'))}"
        )
    control = data.get("control") or {}
    if control:
        print(f"{'control':<10} " + " ".join(f"{k}={v}" for k, v in control.items()))
    return EXIT_OK


def _shuffler(args: argparse.Namespace) -> int:
    cmd = f"shuffler-{args.shuffler_verb}"
    data = call(args, {"cmd": cmd})
    if isinstance(data, int):
        return data
    good = bool(data["matches"] if cmd == "shuffler-count" else data["passed"])
    if args.json:
        print(json.dumps({"ok": good, **data}))
    elif cmd == "shuffler-count":
        verdict = "as expected" if good else "MISCOUNT: remove the deck (649a.5(b))"
        print(f"shuffler counted {data['counted']} of {data['expected']} cards: {verdict}")
    else:
        print(f"shuffler self-test {'passed' if good else 'FAILED'}: {data['report']}")
    return EXIT_OK if good else EXIT_REFUSED

"""`tablectl devices` (identity, link, counters, last fault of every device, like NUT's upsc)
and the shuffler's diagnostics (`tablectl shuffler count`, `tablectl shuffler self-test`)."""

from __future__ import annotations

import argparse
import json

from tablectl.cli.common import (
    EXIT_OK,
    EXIT_REFUSED,
    call,
    human,
    person,
    printable,
    read_reply,
    socket_args,
)
from tablectl.cli.control import print_faults, send_command
from tablectl.control.protocol import ShufflerCount, ShufflerSelfTest
from tablectl.status import Devices, DeviceView


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


def _devices(args: argparse.Namespace) -> int:
    data = call(args, {"cmd": "devices"})
    if isinstance(data, int):
        return data
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return EXIT_OK
    seen = read_reply(args, data, Devices)
    if isinstance(seen, int):
        return seen
    for name, view in sorted(seen.devices.items()):
        _print_device(name, view)
    broker = seen.broker
    print(
        f"{'broker':<10} {'connected' if broker.connected else 'disconnected'} "
        f"{broker.broker}  published through seq {broker.published_through_seq}, acked "
        f"{broker.acked_through_seq}"
    )
    if seen.control is not None:
        print(f"{'control':<10} " + " ".join(f"{k}={v}" for k, v in seen.control))
    return EXIT_OK


def _print_device(name: str, view: DeviceView) -> None:
    """Its identity, where it is, its state and last fault, its counters, its faults."""
    serial, gpio = view.serial, view.gpio
    identity = {
        "model": serial and serial.model,
        "serial_number": serial and serial.serial_number,
        "firmware": serial and serial.firmware,
    }
    print(
        f"{name:<10} link {human(view.link)}  "
        + "  ".join(f"{key} {human(value)}" for key, value in identity.items())
    )
    details: dict[str, object] = {}
    counters: dict[str, int] = {}
    last_fault: str | None = None
    if serial is not None:
        details = {"at": serial.port, "boot": serial.boot_id, "connection": serial.connection}
        details |= {"last_error": serial.last_error, "link_since": serial.link_since}
        details |= {"state": serial.state}
        if view.acceptance is not None:
            details |= {"accepted": view.acceptance.accepted, "waiting": view.acceptance.waiting}
        counters = {"event_cursor": serial.event_cursor, "reconnects": serial.reconnects}
        counters |= serial.counters
        last_fault = serial.last_fault
    elif gpio is not None:  # the sensors' backend
        details = {"at": gpio.where, "backend": gpio.backend, "polled": gpio.polled}
        details |= {"kernel_sequence": gpio.kernel_sequence}
        counters = {"resolution_ns": gpio.resolution_ns, "edges": gpio.edges}
        counters |= {"coarsest_resolution_ns": gpio.coarsest_resolution_ns, "faults": gpio.faults}
        last_fault = gpio.last_fault
    details["last fault"] = last_fault or "none"
    print(f"{'':<10} " + "  ".join(f"{key} {human(value)}" for key, value in details.items()))
    if counters:
        print(f"{'':<10} " + " ".join(f"{k}={v}" for k, v in sorted(counters.items())))
    if view.faults:
        print_faults(view.faults, indent=f"{'':<11}")


def _shuffler(args: argparse.Namespace) -> int:
    cmd = f"shuffler-{args.shuffler_verb}"
    data = call(args, {"cmd": cmd})
    if isinstance(data, int):
        return data
    result: ShufflerCount | ShufflerSelfTest | int = (
        read_reply(args, data, ShufflerCount)
        if cmd == "shuffler-count"
        else read_reply(args, data, ShufflerSelfTest)
    )
    if isinstance(result, int):
        return result
    good = result.matches if isinstance(result, ShufflerCount) else result.passed
    if args.json:
        print(json.dumps({"ok": good, **result.model_dump(mode="json")}))
    elif isinstance(result, ShufflerCount):
        verdict = "as expected" if good else "MISCOUNT: remove the deck (649a.5(b))"
        print(f"shuffler counted {result.counted} of {result.expected} cards: {verdict}")
    else:
        print(f"shuffler self-test {'passed' if good else 'FAILED'}: {result.report}")
    return EXIT_OK if good else EXIT_REFUSED

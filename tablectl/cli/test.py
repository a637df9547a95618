"""`tablectl test`: the technician's walk tests of the seat sensors, lamps, lock-out and shoe.

The running daemon lends its inputs to the test (the table must not be taking bets) and
journals the result. Prompts go to stderr under --json, so stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from typing import Any

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    SEATS,
    Number,
    WholeNumber,
    fail,
    path_arg,
    person,
    socket_args,
    socket_path,
    text,
)
from tablectl.control import client
from tablectl.control.protocol import DECK_CARDS, TEST_TIMEOUT_MOST_S
from tablectl.status import Status
from tablectl.util.bounds import Limit

MARGIN_S = 5.0  # the client waits this much longer than the daemon's own timeout
TEST_CARDS = WholeNumber(
    "cards of a test deal", Limit(1, DECK_CARDS, "a deck, 649a.5(b); the test-shoe request's")
)
TIMEOUT = Number(
    "seconds to wait at each step",
    Limit(0, TEST_TIMEOUT_MOST_S, "the walk test requests' timeout_s", low_open=True),
)


@text
def _NAME(given: str) -> str:
    """A driver's or a scenario's name: lower-case letters, digits, - _ ."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,62}", given):
        raise argparse.ArgumentTypeError(f"{given!r}: a name of lower-case letters, digits, - _ .")
    return given


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    test = sub.add_parser("test", help="technician's walk tests (sensors, lamps, lock-out, shoe)")
    test_sub = test.add_subparsers(dest="test_verb", required=True)
    sensors = test_sub.add_parser(
        "sensors", help="ask for a chip on each seat in turn; light its lamp; report each seat"
    )
    sensors.add_argument(
        "--seats",
        type=SEATS,
        help="which seats, e.g. 1,3,5 (default: every seat of the table)",
    )
    lockout = test_sub.add_parser("lockout", help="ask for a press of the lock-out button")
    shoe = test_sub.add_parser(
        "shoe", help="the shoe deals a few cards of a test deck; each card it reads is shown"
    )
    shoe.add_argument(
        "--cards", type=TEST_CARDS, default=5, help="how many cards it deals, 1-52 (default 5)"
    )
    end = test_sub.add_parser("end", help="end a walk test left running (the table reopens)")
    driver = test_sub.add_parser(
        "driver",
        help="a shuffler driver's conformance: the hostile scenarios on it and its simulator",
    )
    driver.add_argument(
        "driver", type=_NAME, help="the installed driver (as a config's driver = NAME)"
    )
    driver.add_argument(
        "--scenario", type=_NAME, action="append", help="run only this scenario (again for more)"
    )
    driver.add_argument("--markdown", type=path_arg, help="also write the report to this file")
    driver.add_argument("--json", action="store_true")
    driver.set_defaults(handler=_driver)
    for sp in (sensors, lockout, shoe):
        sp.add_argument(
            "--timeout",
            type=TIMEOUT,
            default=30,
            help=f"seconds to wait at each step, up to {TEST_TIMEOUT_MOST_S} (default 30)",
        )
    steps = {
        sensors: ("status", "test-begin", "test-seat", "test-end"),
        lockout: ("test-begin", "test-lockout", "test-end"),
        shoe: ("test-begin", "test-shoe", "test-end"),
        end: ("test-end",),
    }
    for sp, sends in steps.items():
        socket_args(sp, sends=sends)
        sp.add_argument(
            "--by", type=person, help="who you are (an employee id), journaled with the result"
        )
        sp.set_defaults(handler=_test)


class _Refused(Exception):
    pass


def _ask(args: argparse.Namespace, request: dict[str, Any], wait_s: float = 0) -> dict[str, Any]:
    if args.by:
        request = {**request, "by": args.by}
    try:
        reply = client.call(socket_path(args), request, timeout_s=wait_s + MARGIN_S)
    except client.ControlClientError as exc:
        raise _Refused(str(exc)) from None
    if not reply.get("ok"):
        raise _Refused(f"refused: {reply.get('error')}")
    data = reply.get("data")
    return data if isinstance(data, dict) else {}


def _say(args: argparse.Namespace, text: str) -> None:
    print(text, file=sys.stderr if args.json else sys.stdout, flush=True)


def _resolution(ns: int) -> str:
    if ns <= 1:
        return "1 ns (kernel timestamps)"
    if ns < 1_000_000:
        return f"{ns / 1000:g} us"
    return f"{ns / 1_000_000:g} ms"


def _driver(args: argparse.Namespace) -> int:
    """The conformance kit (tablectl/conformance/kit.py) on a driver: its report, exit 1 if a
    scenario failed."""
    import asyncio

    from tablectl.drivers.api import UnknownDriver

    from tablectl.conformance import kit

    unknown = sorted(set(args.scenario or ()) - {s.name for s in kit.SCENARIOS})
    if unknown:
        names = ", ".join(s.name for s in kit.SCENARIOS)
        return fail(args, f"no scenario {', '.join(unknown)}; one of {names}", EXIT_BAD_INPUT)
    try:
        results = asyncio.run(kit.run_all(args.driver, only=args.scenario))
        text = kit.report(args.driver, results)
    except (UnknownDriver, LookupError) as exc:
        return fail(args, str(exc), EXIT_BAD_INPUT)
    if args.markdown is not None:
        args.markdown.write_text(text, encoding="utf-8")
    failed = [r.scenario for r in results if r.outcome == "fail"]
    if args.json:
        rows = [
            {
                "scenario": r.scenario,
                "role": r.role,
                "expected": r.expected,
                "outcome": r.outcome,
                "detail": r.detail,
            }
            for r in results
        ]
        print(json.dumps({"ok": not failed, "driver": args.driver, "results": rows}))
    else:
        print(text, end="")
    return EXIT_REFUSED if failed else EXIT_OK


def _test(args: argparse.Namespace) -> int:
    if args.test_verb == "end":
        try:
            _ask(args, {"cmd": "test-end"})
        except _Refused as exc:
            return fail(args, str(exc), EXIT_REFUSED)
        if args.json:
            print(json.dumps({"ok": True, "ended": True}))
        else:
            print("walk test ended; the table may open a round")
        return EXIT_OK
    test = args.test_verb
    try:
        # The seats are checked against the running table's before anything is asked of it.
        status = Status.model_validate(_ask(args, {"cmd": "status"})) if test == "sensors" else None
        seats = [] if status is None else _seats(args, status)
        begun = _ask(args, {"cmd": "test-begin", "test": test})
    except _Refused as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    except ValueError as exc:
        return fail(args, str(exc), EXIT_BAD_INPUT)
    if test == "shoe":
        return _shoe(args)
    gpio = begun["gpio"]
    _say(
        args,
        f"{test} test on {gpio['backend']} ({gpio['where']}); "
        f"{'polled' if gpio['polled'] else 'edge'} resolution {_resolution(gpio['resolution_ns'])}",
    )
    results: list[dict[str, Any]] = []
    try:
        if test == "lockout":
            _say(args, "press the lock-out button")
            results.append(
                _ask(args, {"cmd": "test-lockout", "timeout_s": args.timeout}, args.timeout)
            )
        else:
            for seat in seats:
                _say(args, f"seat {seat}: place a chip, wait for its lamp, then lift it")
                step = _ask(
                    args,
                    {"cmd": "test-seat", "seat": seat, "timeout_s": args.timeout},
                    2 * args.timeout,
                )
                results.append(step)
                _say(args, f"seat {seat}: " + _verdict(step))
    except _Refused as exc:
        with contextlib.suppress(_Refused):
            _ask(args, {"cmd": "test-end"})
        return fail(args, str(exc), EXIT_REFUSED)
    except KeyboardInterrupt:
        _ask(args, {"cmd": "test-end"})
        raise
    _ask(args, {"cmd": "test-end"})
    return _report(args, test, gpio, results)


def _seats(args: argparse.Namespace, status: Status) -> list[int]:
    """--seats, each a seat of the running table (its table.seats); default: every seat."""
    count = len(status.seat_lamps)
    if not args.seats:
        return list(range(1, count + 1))
    seats: list[int] = args.seats  # whole numbers 1 to 7, each once (SEATS)
    outside = [s for s in seats if not 1 <= s <= count]
    if outside:
        raise ValueError(
            f"--seats {','.join(map(str, seats))}: this table has seats 1 to {count} "
            f"(table.seats = {count}); "
            f"no seat {', '.join(map(str, outside))}"
        )
    return seats


def _shoe(args: argparse.Namespace) -> int:
    _say(args, f"load a test deck into the shoe: it deals {args.cards} cards")
    try:
        step = _ask(
            args,
            {"cmd": "test-shoe", "cards": args.cards, "timeout_s": args.timeout},
            args.timeout,
        )
    except _Refused as exc:
        with contextlib.suppress(_Refused):
            _ask(args, {"cmd": "test-end"})
        return fail(args, str(exc), EXIT_REFUSED)
    except KeyboardInterrupt:
        _ask(args, {"cmd": "test-end"})
        raise
    _ask(args, {"cmd": "test-end"})
    if args.json:
        print(json.dumps({"ok": step["passed"], "test": "shoe", **step}))
    else:
        for i, card in enumerate(step["cards"], 1):
            print(f"card {i}: {card}")
        verdict = "passed" if step["passed"] else "FAILED: " + "; ".join(step["problems"])
        print(f"shoe: {len(step['cards'])} of {step['asked']} cards read; {verdict}")
    return EXIT_OK if step["passed"] else EXIT_REFUSED


def _verdict(step: dict[str, Any]) -> str:
    if not step["passed"]:
        return f"FAILED: {step['reason']}"
    lifted = "" if step.get("lifted") else " (the chip was not lifted)"
    also = f"; chips also seen on seats {step['also_seen_on']}" if step.get("also_seen_on") else ""
    return f"passed, lamp lit{lifted}{also}"


def _report(
    args: argparse.Namespace, test: str, gpio: dict[str, Any], results: list[dict[str, Any]]
) -> int:
    ok = all(r["passed"] for r in results)
    resolution = max((r["resolution_ns"] for r in results), default=gpio["resolution_ns"])
    if args.json:
        print(
            json.dumps(
                {
                    "ok": ok,
                    "test": test,
                    "backend": gpio["backend"],
                    "polled": gpio["polled"],
                    "resolution_ns": resolution,
                    "results": results,
                }
            )
        )
    elif test == "lockout":
        step = results[0]
        print(
            "lock-out: "
            + ("passed" if step["passed"] else f"FAILED: {step['reason']}")
            + f"; edge resolution {_resolution(resolution)}"
        )
    else:
        failed = [r["seat"] for r in results if not r["passed"]]
        print(
            f"sensors: {len(results) - len(failed)} passed, {len(failed)} failed"
            + (f" (seats {failed})" if failed else "")
            + f"; edge resolution {_resolution(resolution)}"
        )
    return EXIT_OK if ok else EXIT_REFUSED

"""`tablectl simulate`: a device simulator in its own process, for a daemon to talk to."""

from __future__ import annotations

import argparse
import asyncio
import codecs
import os
import signal
import threading
from typing import TYPE_CHECKING

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    HOST_PORT,
    SEAT_LIMIT,
    Number,
    WholeNumber,
    config_arg,
    config_path,
    fail,
    matching,
    mixing_arg,
    text,
)
from tablectl.config import load_config
from tablectl.control.protocol import DECK_CARDS
from tablectl.mqtt.contract import ID_PATTERN
from tablectl.util import instance_lock
from tablectl.util.bounds import Limit
from tablectl.util.instance_lock import InstanceLocked

if TYPE_CHECKING:
    from tablectl.simulators.device import SimulatedDevice
    from tablectl.simulators.table import SimulatedTable as SimulatedTableLike


# The knobs' bounds: a deck's cards (649a.5(b)), the rules' seats, and maxima a simulator
# states for itself (it stands in for devices and tables, not for every number).
DECK_SIZE = WholeNumber("cards in its deck", Limit(0, DECK_CARDS, "a deck, 649a.5(b)"))
JAM_AT = WholeNumber("the card it jams at", Limit(0, DECK_CARDS - 1, "the cards of a deck, from 0"))
SHUFFLE_MS = WholeNumber(
    "a shuffle's milliseconds", Limit(0, 600_000, "ten minutes, the longest simulated shuffle")
)
FLOOR_TABLES = WholeNumber("tables", Limit(1, 2000, "the most one floor simulator runs"))
ROUNDS_PER_MINUTE = Number(
    "rounds a minute",
    Limit(0, 600, "a load test's ten a second; a real table deals one or two", low_open=True),
)
FLOOR_SEATS = WholeNumber("players per table", SEAT_LIMIT)
CLAIM_EVERY_S = Number("seconds between claims", Limit(0, 86_400, "a day; 0: no claims"))
RUN_SECONDS = Number("seconds to run", Limit(0, 7 * 86_400, "a week; 0: until stopped"))


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = sub.add_parser("simulate", help="run a device simulator for a daemon to talk to")
    sim_sub = simulate.add_subparsers(dest="device", required=True)
    shuffler = sim_sub.add_parser("shuffler", help="the card shuffler, on a pty or TCP")
    shuffler.add_argument(
        "--listen",
        type=HOST_PORT,
        metavar="HOST:PORT",
        help='serve on TCP (daemon: port = "socket://HOST:PORT"); default: a new pseudo-terminal',
    )
    shuffler.add_argument(
        "--cards", type=DECK_SIZE, default=52, help="cards in its deck, 0-52 (51: a miscount)"
    )
    shuffler.set_defaults(handler=lambda args: asyncio.run(_shuffler(args)))
    shoe = sim_sub.add_parser(
        "shoe", help="the automated dealing shoe (CDC-ACM variant), on a pty or TCP"
    )
    shoe.add_argument(
        "--listen",
        type=HOST_PORT,
        metavar="HOST:PORT",
        help='serve on TCP (daemon: shoe.port = "socket://HOST:PORT"); default: a pseudo-terminal',
    )
    shoe.add_argument(
        "--jam-at",
        type=JAM_AT,
        metavar="N",
        help="jam at the N-th card of its first deal (0: first)",
    )
    shoe.set_defaults(handler=lambda args: asyncio.run(_shoe(args)))

    table = sim_sub.add_parser(
        "table",
        help="every device of a table, for a daemon in another process; type commands to play",
    )
    config_arg(table)
    table.add_argument(
        "--shuffle-ms",
        type=SHUFFLE_MS,
        default=1500,
        help="how long a shuffle takes, 0 to 600000 (default 1500)",
    )
    for device, default in (("shuffler", "SHF-0001"), ("shoe", "SHOE-0001")):
        table.add_argument(
            f"--{device}-serial",
            type=serial_number,
            metavar="SERIAL",
            help=f"the simulated {device}'s serial number (default {default}); another than "
            f"the one the daemon accepted is a swapped {device} (`tablectl devices accept`)",
        )
    table.add_argument(
        "--mixing",
        type=mixing_arg,
        default=None,
        metavar="'HOW'",
        help="how the simulated shuffler mixes (docs/shuffle-integrity.md): 'fair' (default), "
        "'riffle M', 'clumpy M', 'shelf N', 'piles K', 'unshuffled', 'repeat', 'cut', "
        "'place CARD POSITION', or your own: 'python FILE.py:NAME' (a function (deck, rng) "
        "-> deck, or a class of them); the shoe deals what it produced",
    )
    table.set_defaults(handler=_table, quiet_logs=True)

    floor = sim_sub.add_parser(
        "floor",
        help="N light tables on a link, for link controllers (docs/linked-progressives.md)",
    )
    floor.add_argument("--tables", type=FLOOR_TABLES, required=True, metavar="N")
    floor.add_argument(
        "--link", type=matching("a link id", ID_PATTERN), required=True, metavar="LINK_ID"
    )
    floor.add_argument("--broker", type=HOST_PORT, default=("127.0.0.1", 1883), metavar="HOST:PORT")
    floor.add_argument(
        "--site",
        type=matching("a site id", SITE_PATTERN),
        default="floor-sim",
        help="tables are SITE/t001 ... (default)",
    )
    floor.add_argument(
        "--backend-id",
        type=matching("a backend id", ID_PATTERN),
        default="link",
        help="the controllers' ack id",
    )
    floor.add_argument(
        "--rounds-per-minute", type=ROUNDS_PER_MINUTE, default=60.0, help="per table, up to 600"
    )
    floor.add_argument("--seats", type=FLOOR_SEATS, default=5, help="players per table, at most")
    floor.add_argument(
        "--claim-every-s",
        type=CLAIM_EVERY_S,
        default=0.0,
        help="a claim somewhere this often (0: none)",
    )
    floor.add_argument(
        "--seconds", type=RUN_SECONDS, default=0.0, help="then stop (0: run until ^C)"
    )
    floor.set_defaults(handler=lambda args: asyncio.run(_floor(args)), quiet_logs=True)


SITE_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"  # table.site_id (config.py)


async def _floor(args: argparse.Namespace) -> int:
    from tablectl.simulators.floor import Floor, FloorPlay, floor_status, play

    host, port = args.broker
    floor = Floor(host, port, args.link, args.tables, site=args.site, backend_id=args.backend_id)
    print(f"{args.tables} tables {floor.tables_config()} on link {args.link}, via {host}:{port}")
    how = FloorPlay(
        rounds_per_minute=args.rounds_per_minute,
        seats=args.seats,
        claim_every_s=args.claim_every_s,
        seconds=args.seconds,
    )
    try:
        async with asyncio.TaskGroup() as tasks:
            running = tasks.create_task(floor.run(), name="floor")
            try:
                await floor.wait_ready(60)
            except TimeoutError:
                print(floor_status(floor), flush=True)
                running.cancel()
                return fail(
                    args,
                    f"the tables did not hear link {args.link} up within 60 s: is a controller "
                    "running (tablectl link run) with these tables on an open link?",
                    EXIT_REFUSED,
                )
            await play(floor, how, lambda line: print(line, flush=True))
            running.cancel()
    except* asyncio.CancelledError:
        pass
    return EXIT_OK


def _table(args: argparse.Namespace) -> int:
    path = config_path(args)
    config = load_config(path)
    if config.gpio.backend != "mock":
        return fail(
            args,
            f'{path}: gpio.backend is "{config.gpio.backend}", so the daemon would not look for '
            'a simulated table: set gpio.backend = "mock"',
            EXIT_BAD_INPUT,
        )
    from tablectl.simulators.table import SimulatedTable

    try:
        table = SimulatedTable(config, shuffle_ms=args.shuffle_ms)
        if args.mixing is not None:
            table.shuffler.mixing = args.mixing
        for device, serial in (("shuffler", args.shuffler_serial), ("shoe", args.shoe_serial)):
            if serial:
                table.set_serial(device, serial)
        # One simulator per table, locked before its sockets and links are made: a second
        # would re-point the first one's shuffler link and remove its socket on exit.
        with instance_lock.held(config.simulator_lock, "tablectl simulate table"):
            return asyncio.run(_play_table(table))
    except InstanceLocked as exc:
        return fail(args, str(exc), EXIT_REFUSED)
    except (OSError, ValueError) as exc:
        return fail(args, f"cannot start the simulated table: {exc}", EXIT_REFUSED)


@text
def serial_number(text: str) -> str:
    if not 1 <= len(text) <= 32 or not text.isprintable() or " " in text:
        raise argparse.ArgumentTypeError(f"{text!r}: 1 to 32 printable characters, no spaces")
    return text


def _read_lines(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[str | None]) -> None:
    """stdin, line by line, in a thread of its own: a terminal, a pipe, a file or /dev/null
    alike (epoll takes none of the last two). It reads the descriptor itself, not
    sys.stdin: a thread blocked in a buffered read would abort the interpreter at exit."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # bad bytes: U+FFFD
    pending = ""
    try:
        while chunk := os.read(0, 4096):
            pending += decoder.decode(chunk)
            *complete, pending = pending.split("\n")
            for line in complete:
                loop.call_soon_threadsafe(lines.put_nowait, line)
    except OSError:
        pass  # closed (`<&-`) or gone: no more commands
    if pending:
        loop.call_soon_threadsafe(lines.put_nowait, pending)
    loop.call_soon_threadsafe(lines.put_nowait, None)


async def _play_table(table: SimulatedTableLike) -> int:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)
    try:
        for line in await table.start():
            print(line, flush=True)
        print("simulated table ready; type help for commands", flush=True)
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        threading.Thread(target=_read_lines, args=(loop, lines), name="stdin", daemon=True).start()
        while (raw := await lines.get()) is not None:
            try:
                reply = table.command(raw)
            except ValueError as exc:
                reply = f"? {exc}"
            if reply:
                print(reply, flush=True)
        await asyncio.Event().wait()  # no more input (started in the background): keep serving
    except asyncio.CancelledError:
        pass
    finally:
        table.close()
    return EXIT_OK


async def _shuffler(args: argparse.Namespace) -> int:
    from tablectl.simulators.shuffler import ShufflerSimulator

    sim = ShufflerSimulator()
    while len(sim.deck) > max(0, args.cards):
        sim.remove_card()
    return await _serve(args, "shuffler", sim)


async def _shoe(args: argparse.Namespace) -> int:
    from tablectl.simulators.shoe import ShoeSimulator

    sim = ShoeSimulator(card_ms=20)
    sim.knobs.jam_at = args.jam_at
    return await _serve(args, "shoe", sim)


async def _serve(args: argparse.Namespace, name: str, sim: SimulatedDevice) -> int:
    if args.listen:
        host, port = args.listen
        try:
            server = await sim.serve_tcp(host, port)
        except OSError as exc:
            return fail(args, f"cannot listen on {host}:{port}: {exc.strerror}", EXIT_REFUSED)
        print(f"{name} simulator on socket://{host}:{port}", flush=True)
        async with server:
            await server.serve_forever()
    else:
        print(f"{name} simulator on {sim.open_pty()}", flush=True)
        await asyncio.Event().wait()
    return EXIT_OK

"""`tablectl simulate`: a device simulator in its own process, for a daemon to talk to."""

from __future__ import annotations

import argparse
import asyncio

from tablectl.cli.common import EXIT_OK


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = sub.add_parser("simulate", help="run a device simulator for a daemon to talk to")
    sim_sub = simulate.add_subparsers(dest="device", required=True)
    shuffler = sim_sub.add_parser("shuffler", help="the card shuffler, on a pty or TCP")
    shuffler.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help='serve on TCP (daemon: port = "socket://HOST:PORT"); default: a new pseudo-terminal',
    )
    shuffler.add_argument(
        "--cards", type=int, default=52, help="cards in its deck (51: a miscount)"
    )
    shuffler.set_defaults(handler=lambda args: asyncio.run(_shuffler(args)))


async def _shuffler(args: argparse.Namespace) -> int:
    from tablectl.simulators.shuffler import ShufflerSimulator

    sim = ShufflerSimulator()
    while len(sim.deck) > max(0, args.cards):
        sim.remove_card()
    if args.listen:
        host, _, port = args.listen.rpartition(":")
        server = await sim.serve_tcp(host or "127.0.0.1", int(port))
        print(f"shuffler simulator on socket://{args.listen}", flush=True)
        async with server:
            await server.serve_forever()
    else:
        print(f"shuffler simulator on {sim.open_pty()}", flush=True)
        await asyncio.Event().wait()
    return EXIT_OK

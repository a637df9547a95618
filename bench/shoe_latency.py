"""The dealing shoe's latencies, as ratios against a raw transport round trip in the same run.

Through pyusb's real path on the virtual USB bus (one worker thread per device), each run
measures:
- raw: one write on the USB connection to an echoing device and its bytes read back (the
  baseline: what the transport itself costs here);
- link: one POLL/STATUS exchange through the shared link (framing, CRC, SEQ matching);
- hands known: from the shoe dealing its last card to the core's state holding every hand
  of the round (the deal's report polled, parsed, turned into inputs and stepped through the
  pure core; the journal commit, about a millisecond of fsync, is not included).
Each figure is a median over a run's samples; runs repeat, and min/median/max over the runs
are printed (2 noisy cores). The poll interval (100 ms, the least the protocol allows) bounds
how soon the host hears of the last card: half of it on average.

Run: .venv/bin/python bench/shoe_latency.py [--runs 5] [--deals 15]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import time
from collections.abc import Callable

from tablectl.drivers.reference.link import DeviceReport, LinkSettings
from tablectl.drivers.reference.messages import Identity, MsgType, encode_poll
from tablectl.drivers.reference.shoe_codec import ShoeEventKind
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.transport.usb import UsbAddress, UsbConnector
from tablectl.simulators.shoe import PRODUCT_ID, VENDOR_ID, ShoeSimulator, VirtualUsbBackend

from tablectl.core.events import (
    ChipSensed,
    DealRequested,
    LockoutPressed,
    PowerUp,
    ShuffleCompleted,
    ShuffleStarted,
    TableRules,
)
from tablectl.core.round import Phase, TableState, step
from tablectl.util import logs

RULES = TableRules.model_validate(
    {
        "seats": 7,
        "decks": 2,
        "shoe": True,
        "game": {
            "name": "three-card-poker",
            "progressive": {
                "wager": "1.00",
                "paytable": "A",
                "rate_of_progression_percent": "14.5",
                "initial_amount": "1000.00",
                "reset_amount": "1000.00",
            },
        },
    }
)


class Echo:
    """A device that sends back whatever it receives (the raw round trip's far end)."""

    identity = Identity("echo", "ECHO-1", "1")

    def __init__(self) -> None:
        self.send: Callable[[bytes], None] | None = None

    def attach(self, send: Callable[[bytes], None] | None) -> None:
        self.send = send

    def receive(self, data: bytes) -> None:
        if self.send:
            self.send(data)


class TimedShoe(ShoeSimulator):
    def event(self, kind: int, arg: int = 0) -> None:
        if kind == ShoeEventKind.CARD:
            self.last_card_at = time.perf_counter()
        super().event(kind, arg)


async def raw_rtt(samples: int) -> float:
    backend = VirtualUsbBackend()
    backend.plug(Echo(), asyncio.get_running_loop(), product_id=0x0001)  # type: ignore[arg-type]
    conn = await UsbConnector(UsbAddress(VENDOR_ID, 0x0001), backend=backend).connect()
    times = []
    try:
        for _ in range(samples):
            t0 = time.perf_counter()
            conn.write(b"\x02" + bytes(16))
            got = b""
            while len(got) < 17:
                got += await conn.read()
            times.append(time.perf_counter() - t0)
    finally:
        await conn.close()
    return statistics.median(times)


async def shoe_run(samples: int, deals: int) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    sim = TimedShoe(card_ms=1, rng=random.Random(1))
    backend = VirtualUsbBackend()
    backend.plug(sim, loop)
    state = TableState.initial(RULES)
    known = asyncio.Event()
    known_at = 0.0
    shoe: ReferenceShoe | None = None

    def core(report: DeviceReport) -> None:
        nonlocal state, known_at
        state, _ = step(RULES, state, report.input)
        assert shoe is not None
        shoe.acknowledge(report)
        if state.deal is not None and state.deal.complete and not known.is_set():
            known_at = time.perf_counter()
            known.set()

    connector = UsbConnector(UsbAddress(VENDOR_ID, PRODUCT_ID), backend=backend)
    shoe = ReferenceShoe(connector, core, LinkSettings(poll_interval_ms=100))
    task = asyncio.create_task(shoe.run())
    try:
        await shoe.wait_link_up()
        link = []
        for _ in range(samples):
            t0 = time.perf_counter()
            await shoe.command(MsgType.POLL, encode_poll(0, 0))
            link.append(time.perf_counter() - t0)
        hands = []
        for _ in range(deals):
            for event in (
                PowerUp(rules=RULES),
                ShuffleStarted(),
                ShuffleCompleted(card_count=52),
                ChipSensed(seat=1, present=True, since_ns=1),
                ChipSensed(seat=4, present=True, since_ns=1),
                LockoutPressed(at_ns=5),
                DealRequested(seats=(2, 3, 5, 6, 7)),
            ):
                state, _ = step(RULES, state, event)
            assert state.phase is Phase.LOCKED and state.deal is not None
            sim.clear()
            known.clear()
            await shoe.deal(state.deal.stacks)
            await asyncio.wait_for(known.wait(), 5)
            hands.append(known_at - sim.last_card_at)
            state = TableState.initial(RULES)  # the next round from scratch
        return statistics.median(link), statistics.median(hands)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def spread(values: list[float]) -> str:
    return (
        f"min {min(values):8.2f}  median {statistics.median(values):8.2f}  max {max(values):8.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--deals", type=int, default=15)
    args = parser.parse_args()
    logs.configure("ERROR", json=False)
    raw_ms, link_x, hands_x, hands_ms = [], [], [], []

    async def one() -> None:
        raw = await raw_rtt(args.samples)
        link, hands = await shoe_run(args.samples, args.deals)
        raw_ms.append(raw * 1000)
        link_x.append(link / raw)
        hands_x.append(hands / raw)
        hands_ms.append(hands * 1000)

    for _ in range(args.runs):
        asyncio.run(one())
    print(f"shoe over USB (pyusb, virtual bus), {args.runs} runs")
    print(f"  raw transport round trip, ms        {spread(raw_ms)}")
    print(f"  link round trip / raw               {spread(link_x)}")
    print(f"  last card -> every hand known / raw {spread(hands_x)}")
    print(f"  last card -> every hand known, ms   {spread(hands_ms)}")


if __name__ == "__main__":
    main()

"""Field traces, replayed: device bytes -> parser -> driver -> core, compared with a .chk.

Each `tests/traces/NAME.trace` holds the bytes on one device link (`<` from the device, `>` to
it, hex, milliseconds since the start) under a short header saying who recorded it and why
(gpsd's test/daemon/*.log is the model). Replaying one plugs a device that answers each request
with the recorded bytes into the production driver, on virtual time, and steps the core on
every report the driver makes (acknowledging it, as the daemon does after its commit). The
inputs and the journal records they produce must equal `NAME.chk`. Every device bug fixed
becomes a trace: set TABLECTL_RECORD_TRACES=1 to record the scenarios below again from the
simulators (then read the diff before committing it).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tablectl.drivers.api import DeviceReport, LinkError
from tablectl.drivers.reference.link import LinkSettings, PolledDevice
from tablectl.drivers.reference.messages import NakReason
from tablectl.drivers.reference.shuffler_codec import EventKind, FaultCode
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.drivers.transport.base import TraceWriter
from tablectl.drivers.transport.memory import DeviceSide, MemoryConnector, MemoryPort
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.shoe import ShoeSimulator
from tablectl.simulators.shuffler import ShufflerSimulator

from tablectl.core.effects import DealCards, Record, RequestShuffle
from tablectl.core.events import (
    ChipSensed,
    DealRequested,
    Event,
    LockoutPressed,
    LockoutReleased,
    PowerUp,
    ReshuffleRequested,
    ShuffleCompleted,
    ShuffleStarted,
)
from tablectl.core.table import Rejected, TableState, step
from tablectl.util.clock import run_virtual

from .test_table_core import tcp

TRACES = Path(__file__).parent / "traces"
SETTINGS = LinkSettings(poll_interval_ms=100, response_timeout_ms=100, retries=2)
RUN_S = 3.0  # virtual seconds each scenario runs


Sim = ShufflerSimulator | ShoeSimulator


@dataclass
class Scenario:
    device: str  # shuffler, shoe
    why: str
    prepare: Callable[[Sim], None]
    table: list[Event]  # inputs from the rest of the table, stepped once the link is up
    # Later, at these virtual seconds: what the simulator is made to do (only when recording:
    # replaying, the trace's bytes say it), or an input from the rest of the table.
    later: list[tuple[float, Callable[[Sim], None] | Event]] = field(default_factory=list)


def _nak_polls(sim: ShufflerSimulator | ShoeSimulator) -> None:
    sim.lies.nak_polls, sim.lies.nak_reason = 4, NakReason.ILLEGAL_IN_STATE


def _absurd_id(sim: ShufflerSimulator | ShoeSimulator) -> None:
    sim.lies.absurd_next_event = True
    assert isinstance(sim, ShufflerSimulator)
    sim.remove_card()


def _completion_after_jam(sim: ShufflerSimulator | ShoeSimulator) -> None:
    assert isinstance(sim, ShufflerSimulator)
    sim.knobs.jam_next_shuffle = True
    sim.event(EventKind.SHUFFLE_STARTED)
    sim.fail(sim.fault.JAM)
    sim.event(EventKind.SHUFFLE_COMPLETE, 52)  # a hostile device: "complete" after its jam


def _shoe_jam(sim: ShufflerSimulator | ShoeSimulator) -> None:
    assert isinstance(sim, ShoeSimulator)
    sim.knobs.jam_at = 4


def _jam_in_status(sim: Sim) -> None:
    assert isinstance(sim, ShufflerSimulator)
    sim.fail(FaultCode.JAM, as_event=False)  # no event: only STATUS says so


def _count_restated(sim: Sim) -> None:
    sim.lies.restate_next_event, sim.lies.restate_kind = 51, EventKind.SHUFFLE_COMPLETE


def _dealt_card_face_up(sim: Sim) -> None:
    assert isinstance(sim, ShoeSimulator)
    sim.knobs.dealt_again_face_up_at = 3  # seat 2's third card, found again face up


def _two_short(sim: Sim) -> None:
    assert isinstance(sim, ShoeSimulator)
    sim.knobs.short_by = 2


def _nothing(sim: Sim) -> None:
    pass


RULES = tcp()
SHOE_RULES = tcp().model_copy(update={"shoe": True})
LOCKED: list[Event] = [
    ShuffleStarted(),
    ShuffleCompleted(card_count=52),
    ChipSensed(seat=2, present=True, since_ns=1),
    LockoutPressed(at_ns=10),
    LockoutReleased(at_ns=20),
    ChipSensed(seat=2, present=False, since_ns=30),  # collected before the deal (649a.10(a)(2))
    DealRequested(by="dealer"),
]
SCENARIOS = {
    "shuffler-nak-livelock": Scenario(
        "shuffler",
        "a NAK to POLL used to drop the link and restart SEQ at 1: the device answered every "
        "new POLL from its cache with the same NAK, for good",
        _nak_polls,
        [],
    ),
    "shuffler-absurd-event-id": Scenario(
        "shuffler",
        "an event id of 2^32-1 used to make every later event ignored (a count of 51 among them)",
        _absurd_id,
        [],
    ),
    "shuffler-completion-after-jam": Scenario(
        "shuffler",
        "a completion reported after a jam used to let a round open without a new shuffle "
        "(649a.13(e))",
        _completion_after_jam,
        [],
    ),
    "shoe-jam-mid-deal": Scenario(
        "shoe",
        "the shoe jams on the fifth card: the round is void and the wagers returned (649a.13(f))",
        _shoe_jam,
        LOCKED,
    ),
    "shuffler-jam-in-status": Scenario(
        "shuffler",
        "a jam the shuffler showed only in STATUS, at a later poll, used to be acted on only "
        "at connect (649a.13(e)); the reshuffle then clears it",
        _nothing,
        [],
        [(0.6, _jam_in_status), (1.5, ReshuffleRequested(by="dealer"))],
    ),
    "shuffler-conflicting-count": Scenario(
        "shuffler",
        "one event id reported as a count of 52 and again as 51 was skipped as a replay and "
        "the round opened; it is a fault: the deck leaves and the round is void (649a.10(f))",
        _count_restated,
        [],
    ),
    "shoe-dealt-card-face-up": Scenario(
        "shoe",
        "a card already dealt, found again face up, was only discarded; it is not one deck of "
        "52 distinct cards: the deck leaves and the round is void (649a.10(f))",
        _dealt_card_face_up,
        LOCKED,
    ),
    "shoe-deal-two-short": Scenario(
        "shoe",
        "a deal two cards short of the plan was voided as a misdeal (13(c)); it is a failure "
        "to deal all cards (649a.13(f))",
        _two_short,
        LOCKED,
    ),
}


class TraceDevice:
    """Answers each request with the bytes the device sent after it in the trace."""

    def __init__(self, items: list[tuple[str, bytes]]) -> None:
        self.items = items
        self.mismatches = 0
        self.send: Callable[[bytes], None] | None = None

    def attach(self, send: Callable[[bytes], None] | None) -> None:
        self.send = send

    def receive(self, data: bytes) -> None:
        while self.items and self.items[0][0] == "<":
            self.items.pop(0)  # the device spoke first (noise): already gone by
        if self.items:
            self.mismatches += self.items.pop(0)[1] != data
        while self.items and self.items[0][0] == "<":
            if self.send:
                self.send(self.items.pop(0)[1])
            else:
                self.items.pop(0)


def read_trace(path: Path) -> tuple[dict[str, str], list[tuple[str, bytes]]]:
    header: dict[str, str] = {}
    items: list[tuple[str, bytes]] = []
    for line in path.read_text().splitlines():
        _ms, tag, text = line.split(" ", 2)
        if tag == "#":
            key, sep, value = text.partition(": ")
            if sep:
                header[key] = value
        elif tag in "<>":
            items.append((tag, bytes.fromhex(text)))
    return header, items


async def _drive(device: DeviceSide, scenario: Scenario, trace: TraceWriter | None) -> list[str]:
    """The driver on `device`, the core on its reports; what was journaled, as text."""
    rules = SHOE_RULES if scenario.device == "shoe" else RULES
    lines: list[str] = []
    state = TableState.initial(rules)
    port = MemoryPort(scenario.device)
    port.plug(device)
    make = ReferenceShoe if scenario.device == "shoe" else ReferenceShuffler
    driver: PolledDevice | None = None
    pending: list[Coroutine[Any, Any, None]] = []  # commands, as the daemon sends them

    def core(event: Event) -> None:
        nonlocal state
        lines.append(f"input {event.TYPE} {event.model_dump_json()}")
        try:
            state, effects = step(rules, state, event)
        except Rejected as exc:
            lines.append(f"  refused {exc}")
            return
        for effect in effects:
            if isinstance(effect, Record):
                lines.append(f"  {effect.TYPE} {effect.model_dump_json()}")
            elif isinstance(effect, DealCards) and isinstance(driver, ReferenceShoe):
                pending.append(driver.deal(effect.stacks))
            elif isinstance(effect, RequestShuffle) and isinstance(driver, ReferenceShuffler):
                pending.append(driver.shuffle())

    def on_report(report: DeviceReport) -> None:
        core(report.input)
        assert driver is not None
        driver.acknowledge(report)  # "journaled"

    driver = make(MemoryConnector(port), on_report, SETTINGS, None, trace)
    driver.seq._seq = 0  # a trace's SEQ numbers start at 1
    core(PowerUp(rules=rules))
    task = asyncio.create_task(driver.run())
    await driver.wait_link_up()
    for event in scenario.table:
        core(event)
    later = sorted(scenario.later, key=lambda item: item[0])
    for tick in range(int(RUN_S / 0.1)):
        while later and later[0][0] <= tick * 0.1:
            _, what = later.pop(0)
            if not callable(what):
                core(what)
            elif isinstance(device, SimulatedDevice):
                what(device)  # type: ignore[arg-type]  # a shuffler's or a shoe's knob
        while pending:
            with contextlib.suppress(LinkError):
                await pending.pop(0)
        await asyncio.sleep(0.1)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return lines


def record(name: str) -> None:
    scenario = SCENARIOS[name]

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        out = io.StringIO()
        trace = TraceWriter(out, clock=loop.time)
        trace.comment(f"device: {scenario.device}")
        trace.comment(f"who: the tablectl {scenario.device} simulator, scenario {name}")
        trace.comment(f"why: {scenario.why}")
        rng = random.Random(7)
        sim = (
            ShoeSimulator(card_ms=5, rng=rng)
            if scenario.device == "shoe"
            else ShufflerSimulator(shuffle_ms=50, rng=rng)
        )
        scenario.prepare(sim)
        lines = await _drive(sim, scenario, trace)
        (TRACES / f"{name}.trace").write_text(out.getvalue())
        return lines

    lines = run_virtual(main())
    (TRACES / f"{name}.chk").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_trace_replays_to_its_recorded_journal(name: str) -> None:
    if os.environ.get("TABLECTL_RECORD_TRACES"):
        record(name)
    header, items = read_trace(TRACES / f"{name}.trace")
    scenario = SCENARIOS[name]
    assert header["device"] == scenario.device
    device = TraceDevice(items)
    lines = run_virtual(_drive(device, scenario, None))
    assert device.mismatches == 0, "the driver asked something else than in the trace"
    expected = (TRACES / f"{name}.chk").read_text().splitlines()
    assert lines == expected

"""No round opens on a deck that was not counted 52 (649a.5(b), 649a.13(e)): a property test.

Hypothesis drives the pure core with random interleavings of shuffler reports (fresh and
stale), faults (as events, on connect, in a later STATUS), reboots, swaps, refused and
conflicting events, power-ups, and the dealer's and technician's commands. `DeckRule` states
the rule independently of the core, over what the core was given and what it journaled: a
round opens only if the last shuffle completed since the previous opening counted 52 and
began after the last event that makes a deck unverified, with none since.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import random
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from tablectl.drivers.api import DeviceReport, LinkError
from tablectl.drivers.reference.framing import FrameParser
from tablectl.drivers.reference.link import LinkSettings
from tablectl.drivers.reference.messages import MsgType, ProtocolError, decode_status
from tablectl.drivers.reference.shuffler_codec import EventKind, FaultCode, ShufflerState
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.drivers.transport.base import TraceWriter
from tablectl.drivers.transport.memory import MemoryConnector, MemoryPort
from tablectl.simulators.shuffler import ShufflerSimulator

from tablectl.core import effects as rec
from tablectl.core.effects import Effect, RequestShuffle
from tablectl.core.events import (
    ChipSensed,
    ClearGpioFault,
    DeviceAccepted,
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceLinkReset,
    DeviceReportConflict,
    Event,
    GpioFault,
    LockoutPressed,
    LockoutReleased,
    NewDeckRegistered,
    PowerUp,
    ReshuffleRequested,
    ShuffleCompleted,
    ShuffleRequestFailed,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
    TableRules,
    VoidRound,
)
from tablectl.core.table import Phase, Rejected, TableState, step
from tablectl.util.clock import monotonic_ms, run_virtual

from .test_table_core import tcp

# Each example is a table's life of up to STEPS rules (EXAMPLES x STEPS in all).
EXAMPLES = 300
STEPS = 60
# Through the production link, on a simulated shuffler and virtual time: LINK_EXAMPLES
# tables of up to LINK_ACTIONS things happening, 100 ms (virtual) apart.
LINK_EXAMPLES = 120
LINK_ACTIONS = 30


@dataclass
class DeckRule:
    """The rule, kept apart from the core: fed each input the core took and its records."""

    started: bool = False  # a fresh shuffle began since the last unverifying event
    verified: bool = False  # ...and completed with 52, with nothing unverifying since
    serial: str | None = None  # the shuffler last identified
    history: list[str] = field(default_factory=list)
    rounds_opened: int = 0

    def unverifies(self, event: Event, records: list[rec.Record]) -> bool:
        """Power-up, a fault, a reboot, a block or its end, another shuffler: whatever
        shuffled before cannot be the deck in play (649a.5(b), 649a.13(e))."""
        if isinstance(
            event,
            PowerUp | ShufflerFault | ShufflerRebooted | NewDeckRegistered | ReshuffleRequested,
        ):
            return True
        if (
            isinstance(
                event,
                DeviceEventsRefused | DeviceReportConflict | DeviceAccepted | DeviceLinkReset,
            )
            and event.device == "shuffler"
        ):
            return True
        if isinstance(event, DeviceIdentified) and event.device == "shuffler":
            changed = self.serial is not None and event.serial_number != self.serial
            self.serial = event.serial_number
            return changed
        return any(isinstance(r, rec.DeckMiscount | rec.DeckIrregular) for r in records)

    def forget(self, why: str) -> None:
        """Something outside the core's inputs makes every deck so far unverified."""
        self.history.append(why)
        self.started = self.verified = False

    def observe(self, event: Event, effects: list[Effect]) -> None:
        records = [e for e in effects if isinstance(e, rec.Record)]
        self.history.append(f"{event.TYPE} {event.model_dump_json()}")
        if self.unverifies(event, records):
            self.started = self.verified = False
        if isinstance(event, ShuffleStarted) and not event.stale:
            self.started = True
        if isinstance(event, ShuffleCompleted):
            self.verified = self.started and not event.stale and event.card_count == 52
            self.started = False
        if any(isinstance(r, rec.RoundOpened) for r in records):
            assert self.verified, "a round opened on an unverified deck after:\n" + "\n".join(
                self.history[-25:]
            )
            self.verified = False  # the next round needs a shuffle of its own
            self.rounds_opened += 1


def _shuffler_report() -> st.SearchStrategy[tuple[Event, ...]]:
    """What one STATUS of the shuffler may bring: most often a fresh shuffle counted 52 (so
    rounds do open), otherwise any report a shuffler, its link or a hostile device makes."""
    fresh = st.just((ShuffleStarted(), ShuffleCompleted(card_count=52)))
    count = st.sampled_from([52, 52, 51, 53, 0])
    single: st.SearchStrategy[Event] = st.one_of(
        st.builds(ShuffleStarted, stale=st.booleans()),
        st.builds(ShuffleCompleted, card_count=count, stale=st.booleans()),
        st.builds(
            ShufflerFault,
            code=st.sampled_from(["jam", "stopped", "cycle-incomplete", "door-open"]),
            at_connect=st.booleans(),
            from_status=st.booleans(),
            stale=st.booleans(),
        ),
        st.just(ShufflerRebooted()),
        st.builds(
            DeviceIdentified,
            device=st.just("shuffler"),
            model=st.just("m"),
            serial_number=st.sampled_from(["SHF-A", "SHF-B"]),
            firmware=st.just("1"),
        ),
        st.builds(
            DeviceEventsRefused,
            device=st.just("shuffler"),
            boot_id=st.just(7),
            event_id=st.integers(1, 6),
            expected_event_id=st.just(1),
            kind=st.just(2),
        ),
        st.builds(
            DeviceReportConflict,
            device=st.just("shuffler"),
            boot_id=st.just(7),
            event_id=st.integers(1, 6),
            kind=st.just(2),
        ),
        st.builds(
            ShuffleRequestFailed,
            reason=st.sampled_from(["device refused SHUFFLE: BUSY", "no reply to SHUFFLE"]),
            retrying=st.booleans(),
        ),
    )
    return st.sampled_from([0, 0, 0, 1, 1, 2]).flatmap(
        lambda pick: (
            fresh
            if pick == 0
            else single.map(lambda e: (e,))
            if pick == 1
            else st.tuples(single, single)
        )
    )


PEOPLE: list[Event] = [
    NewDeckRegistered(by="dealer"),
    ReshuffleRequested(by="dealer"),
    DeviceAccepted(device="shuffler", serial_number="SHF-A", by="tech"),
    DeviceAccepted(device="shuffler", serial_number="SHF-B", by="tech"),
    DeviceLinkReset(device="shuffler", boot_id=7, from_event_id=0, to_event_id=6, by="tech"),
    GpioFault(reason="edges lost", at_ns=5),
    ClearGpioFault(by="dealer"),
]


class Table(RuleBasedStateMachine):
    """The core, and what happens to a table: devices, people, power, rounds."""

    rules_: TableRules
    state: TableState

    def __init__(self) -> None:
        super().__init__()
        self.rule_check = DeckRule()
        self.inputs = 0

    def feed(self, event: Event) -> None:
        self.inputs += 1
        try:
            self.state, effects = step(self.rules_, self.state, event)
        except Rejected:
            return  # refused: nothing happened
        self.rule_check.observe(event, effects)

    @initialize(decks=st.sampled_from([1, 2]))
    def start(self, decks: int) -> None:
        self.rules_ = tcp().model_copy(update={"decks": decks})
        self.state = TableState.initial(self.rules_)
        self.feed(PowerUp(rules=self.rules_))

    @rule(reports=_shuffler_report())
    def shuffler(self, reports: tuple[Event, ...]) -> None:
        for report in reports:
            self.feed(report)

    @rule()
    def tend_the_table(self) -> None:
        """A diligent dealer and technician clear whatever stands, as `status` tells them."""
        s = self.state
        for device, refused in s.events_refused.items():
            self.feed(
                DeviceLinkReset(
                    device=device,
                    boot_id=refused.boot_id,
                    from_event_id=0,
                    to_event_id=refused.event_id,
                    by="tech",
                )
            )
        for device, serial in s.devices_pending.items():
            self.feed(DeviceAccepted(device=device, serial_number=serial, by="tech"))
        if s.blocked is not None:
            self.feed(NewDeckRegistered(by="dealer"))
        if s.shuffler_fault is not None:
            self.feed(ReshuffleRequested(by="dealer"))
        if s.gpio_fault is not None:
            self.feed(ClearGpioFault(by="dealer"))

    @rule(command=st.sampled_from([*PEOPLE, "power-up"]))
    def person(self, command: Event | str) -> None:
        """A dealer's or technician's command, a GPIO fault, or the daemon restarting."""
        self.feed(PowerUp(rules=self.rules_) if command == "power-up" else command)  # type: ignore[arg-type]

    @rule(seats=st.lists(st.integers(1, 7), max_size=3), close=st.booleans())
    def play(self, seats: list[int], close: bool) -> None:
        """Chips, "no more bets", and (close) the round voided: the table moves on."""
        for seat in seats:
            self.feed(ChipSensed(seat=seat, present=True, since_ns=1))
        self.feed(LockoutPressed(at_ns=10))
        self.feed(LockoutReleased(at_ns=20))  # no round opens while the button is down
        if close:
            self.feed(VoidRound(reason="shoe-jam", by="dealer"))

    def teardown(self) -> None:
        # Shown by --hypothesis-show-statistics: how often the examples opened rounds.
        event(f"rounds opened: {min(self.rule_check.rounds_opened, 3)}+")
        event(f"inputs: {min(self.inputs // 25 * 25, 100)}+")

    @invariant()
    def ready_only_when_nothing_stands_in_the_way(self) -> None:
        s = getattr(self, "state", None)
        if s is not None and s.deck_ready:
            assert s.blocked is None and s.shuffler_fault is None
            assert "shuffler" not in s.devices_pending and "shuffler" not in s.events_refused


Table.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None)
test_no_round_opens_on_an_unverified_deck = Table.TestCase


def test_the_property_test_plays_rounds() -> None:
    """The machine is not vacuous: a plain run of it opens rounds, and the rule sees them."""
    table = Table()
    table.start(decks=2)
    for _ in range(3):
        table.shuffler((ShuffleStarted(), ShuffleCompleted(card_count=52)))
        table.play(seats=[2], close=True)
    assert table.rule_check.rounds_opened == 3
    assert table.state.phase is Phase.CLOSED


# --- the same rule through the link: faults shown only in STATUS, conflicting event ids ---

LINK = LinkSettings(poll_interval_ms=100, response_timeout_ms=100, retries=2)
Action = tuple[str, int]
HOSTILE: st.SearchStrategy[Action] = st.one_of(
    st.tuples(st.just("fault-in-status"), st.sampled_from(list(FaultCode)[1:])),
    st.tuples(st.just("fault-event"), st.sampled_from(list(FaultCode)[1:])),
    st.tuples(st.just("restate-next-event"), st.sampled_from([51, 52, 53, 0])),
    st.tuples(
        st.sampled_from(["lose-card", "reboot", "gap", "absurd-id", "ignore-acks"]), st.just(0)
    ),
)
# Mostly time passing, a dealer playing rounds out and clearing what stands; then the device.
ACTIONS: st.SearchStrategy[Action] = st.sampled_from(
    ["wait"] * 3 + ["people"] * 3 + ["device"] * 2
).flatmap(
    lambda kind: (
        st.tuples(st.just("wait"), st.integers(1, 6))
        if kind == "wait"
        else st.tuples(st.sampled_from(["tend", "play"]), st.just(0))
        if kind == "people"
        else HOSTILE
    )
)


class WireSpy(TraceWriter):
    """What the shuffler said on the wire, read as the driver reads it (a trace's hook): a
    STATUS showing a fault no event reports makes every deck so far unverified, whatever the
    driver makes of it; an event id the core took, said again differently, is a conflict the
    core must hear of."""

    def __init__(self, check: DeckRule) -> None:
        super().__init__(io.StringIO())
        self.check = check
        self.parser = FrameParser()
        self.first: dict[tuple[int, int], tuple[int, int]] = {}  # (boot, id) -> (kind, arg)
        self.said_again: set[tuple[int, int]] = set()

    def received(self, data: bytes) -> None:
        for frame in self.parser.feed(data, monotonic_ms()):
            if frame.type != MsgType.STATUS:
                continue
            with contextlib.suppress(ProtocolError):
                status = decode_status(frame.payload)
                fault_events = [e for e in status.events if e.kind == EventKind.FAULT]
                if status.state == ShufflerState.FAULT and not fault_events:
                    # A fault no event reports: it stands before anything this STATUS
                    # brings (an event that reports it is an input, in device order).
                    self.check.forget(f"(on the wire: STATUS shows fault {status.fault})")
                for e in status.events:
                    key = (status.boot_id, e.event_id)
                    if self.first.setdefault(key, (e.kind, e.arg)) != (e.kind, e.arg):
                        self.said_again.add(key)


async def _table_on_a_link(actions: list[Action]) -> DeckRule:
    """The core on the production shuffler driver, the simulator misbehaving as told; a
    dealer who clears whatever stands ("tend") and plays rounds out ("play")."""
    rules = tcp().model_copy(update={"decks": 1})
    sim = ShufflerSimulator(shuffle_ms=60, rng=random.Random(3))
    port = MemoryPort("deck-rule")
    port.plug(sim)
    check = DeckRule()
    spy = WireSpy(check)
    state = TableState.initial(rules)
    tasks: set[asyncio.Task[None]] = set()
    taken: set[tuple[int, int]] = set()  # (boot, event id) of every report the core took
    conflicts: set[tuple[int, int]] = set()  # ...and of every conflict it heard of

    async def shuffle() -> None:
        try:
            await driver.shuffle()
        except LinkError as exc:
            await asyncio.sleep(0.5)
            core(ShuffleRequestFailed(reason=exc.summary))  # the core asks again

    def spawn(work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def core(event: Event) -> bool:
        nonlocal state
        try:
            state, effects = step(rules, state, event)
        except Rejected:
            return False
        check.observe(event, effects)
        if RequestShuffle() in effects:
            spawn(shuffle())
        return True

    def on_report(report: DeviceReport) -> None:
        if report.boot_id is not None and report.event_id is not None:
            taken.add((report.boot_id, report.event_id))
        if isinstance(report.input, DeviceReportConflict):
            conflicts.add((report.input.boot_id, report.input.event_id))
        core(report.input)
        driver.acknowledge(report)  # "journaled"

    driver = ReferenceShuffler(MemoryConnector(port), on_report, LINK, trace=spy)
    core(PowerUp(rules=rules))
    link = asyncio.get_running_loop().create_task(driver.run())
    for what, arg in actions:
        match what:
            case "wait":
                await asyncio.sleep(arg / 10)
            case "tend":
                _tend(state, sim, driver, core)
            case "play":
                for seat in (2, 5):
                    core(ChipSensed(seat=seat, present=True, since_ns=1))
                core(LockoutPressed(at_ns=10))
                core(VoidRound(reason="shoe-jam", by="dealer"))
            case "fault-in-status":
                sim.fail(FaultCode(arg), as_event=False)  # a jam the STATUS shows, no event
            case "fault-event":
                sim.fail(FaultCode(arg))
            case "restate-next-event":
                sim.lies.restate_next_event = arg  # this id again, later, differently
            case "lose-card":
                sim.remove_card()
            case "reboot":
                sim.reboot()
            case "gap":
                sim.lies.gap_next_event = True
            case "absurd-id":
                sim.lies.absurd_next_event = True
            case "ignore-acks":
                sim.lies.ignore_acks = not sim.lies.ignore_acks
        await asyncio.sleep(0.1)
        unheard = (spy.said_again & taken) - conflicts
        assert not unheard, f"events said again differently, taken as replays: {unheard}"
    link.cancel()
    for task in (link, *tasks):
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return check


def _tend(state: TableState, sim: ShufflerSimulator, driver: ReferenceShuffler, core: Any) -> None:
    """What `status` tells the dealer and the technician to do, done."""
    if "shuffler" in state.events_refused:
        try:
            boot, journaled, last = driver.reset_point()
        except LinkError:
            sim.reboot()  # an id that cannot go on: the technician power-cycles it
        else:
            reset = DeviceLinkReset(
                device="shuffler", boot_id=boot, from_event_id=journaled, to_event_id=last
            )
            if core(reset):
                driver.reset_to(boot, last)
    if state.blocked is not None:
        sim.load_full_deck()
        core(NewDeckRegistered(by="dealer"))
    if state.shuffler_fault is not None:
        core(ReshuffleRequested(by="dealer"))


@settings(max_examples=LINK_EXAMPLES, deadline=None)
@given(actions=st.lists(ACTIONS, min_size=LINK_ACTIONS // 3, max_size=LINK_ACTIONS))
def test_no_round_opens_on_an_unverified_deck_through_the_link(actions: list[Action]) -> None:
    check = run_virtual(_table_on_a_link(actions))
    event(f"rounds opened: {min(check.rounds_opened, 3)}+")

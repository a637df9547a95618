"""The polled-device link, in-process on a memory port and virtual time (no sleeps).

A hostile device and a hostile line: lost, corrupt, split and replayed replies, NAKs, events
out of order, absurd or repeated, faults on connect, reboots, unplug, another device plugged
in. Every assertion is on what the driver reports and acknowledges.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from structlog.testing import capture_logs
from tablectl.drivers.api import DeviceReport, LinkDown, LinkError, ResetRefused
from tablectl.drivers.reference.framing import Frame
from tablectl.drivers.reference.link import AWAITED_POLL_S, FAST_POLL_S, LinkSettings
from tablectl.drivers.reference.messages import Identity, MsgType, NakReason
from tablectl.drivers.reference.shuffler_codec import FaultCode
from tablectl.drivers.shoe.reference import ReferenceShoe
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.drivers.transport.memory import MemoryConnector, MemoryPort
from tablectl.simulators.shoe import ShoeSimulator
from tablectl.simulators.shuffler import ShufflerSimulator

from tablectl.core.events import (
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceReportConflict,
    Event,
    ShoeCard,
    ShuffleCompleted,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
)
from tablectl.util.clock import run_virtual

SETTINGS = LinkSettings(poll_interval_ms=100, response_timeout_ms=100, retries=2)


@dataclass
class Bench:
    """A shuffler simulator plugged into a memory port, a driver on it, a pretend journal."""

    sim: ShufflerSimulator
    cursor: tuple[int, int] | None = None
    journal_acks: bool = True  # acknowledge each report as the daemon does after its commit
    port: MemoryPort = field(default_factory=MemoryPort)
    reports: list[DeviceReport] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.port.plug(self.sim)
        self.queue: asyncio.Queue[DeviceReport] = asyncio.Queue()
        self.driver = ReferenceShuffler(
            MemoryConnector(self.port), self._emit, SETTINGS, self.cursor
        )

    def _emit(self, report: DeviceReport) -> None:
        self.reports.append(report)
        self.queue.put_nowait(report)
        if self.journal_acks:
            self.driver.acknowledge(report)

    async def next(self, timeout_s: float = 10) -> Event:
        async with asyncio.timeout(timeout_s):
            return (await self.queue.get()).input

    async def until(self, wanted: type[Event], timeout_s: float = 10) -> Event:
        async with asyncio.timeout(timeout_s):
            while True:
                event = (await self.queue.get()).input
                if isinstance(event, wanted):
                    return event

    async def until_quiet(self) -> None:
        """Until the device holds only events the driver cannot take (virtual time)."""
        for _ in range(50):
            await asyncio.sleep(0.1)
            if all(e.event_id != self.driver.health()["event_cursor"] + 1 for e in self.sim.events):
                return

    def inputs(self, kind: type[Event] | None = None) -> list[Event]:
        return [r.input for r in self.reports if kind is None or isinstance(r.input, kind)]


def virtual(test: Callable[[Bench], Awaitable[None]], **bench: object) -> None:
    """Run a test against a running driver, on virtual time."""

    async def main() -> None:
        b = Bench(ShufflerSimulator(shuffle_ms=30, rng=random.Random(5)), **bench)  # type: ignore[arg-type]
        task = asyncio.create_task(b.driver.run())
        try:
            async with asyncio.timeout(10):
                await b.driver.wait_link_up()
            await test(b)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    run_virtual(main())


def test_identity_is_read_on_connect_and_a_shuffle_reports_its_count() -> None:
    async def t(b: Bench) -> None:
        assert b.inputs()[0] == DeviceIdentified(
            device="shuffler",
            model="tablectl-sim-shuffler",
            serial_number="SHF-0001",
            firmware="1.0",
        )
        await b.driver.shuffle()
        assert await b.until(ShuffleStarted) == ShuffleStarted()
        assert await b.next() == ShuffleCompleted(card_count=52)
        assert b.sim.shuffles == 1

    virtual(t)


def test_polls_keep_their_cadence_and_poll_soon_brings_the_next_one_forward() -> None:
    """A POLL every poll_interval_ms, counted from the last one's start; after poll_soon the
    next one goes FAST_POLL_S after the last at the earliest, or at once."""

    async def t(b: Bench) -> None:
        loop = asyncio.get_running_loop()
        sent: list[float] = []

        def spy(data: bytes) -> list[bytes]:
            sent.append(loop.time())
            return [data]

        b.port.set_manipulator(to_device=spy)
        await asyncio.sleep(1.0)
        gaps = [round(after - before, 6) for before, after in itertools.pairwise(sent)]
        assert len(gaps) >= 8 and set(gaps) == {0.1}
        await asyncio.sleep(sent[-1] + 0.002 - loop.time())  # 2 ms after a poll
        b.driver.poll_soon()
        await asyncio.sleep(0.05)
        assert round(sent[-1] - sent[-2], 6) == FAST_POLL_S
        await asyncio.sleep(sent[-1] + 0.060 - loop.time())  # 60 ms after a poll
        soon = loop.time()
        b.driver.poll_soon()
        await asyncio.sleep(0.005)
        assert sent[-1] == soon  # at once
        await asyncio.sleep(0.35)
        gaps = [round(after - before, 6) for before, after in itertools.pairwise(sent[-4:])]
        assert gaps == [0.1, 0.1, 0.1]  # the interval again

    virtual(t)


def test_lost_and_corrupt_replies_are_retried_without_executing_twice() -> None:
    async def t(b: Bench) -> None:
        b.sim.line.drop = 2
        await b.driver.shuffle()
        b.sim.line.corrupt = 1
        b.sim.line.noise = bytes([0x02, 0x01, 0xFF]) + b"\x00garbage\x02"
        b.sim.line.split = 3
        assert await b.until(ShuffleStarted) == ShuffleStarted()
        assert await b.next() == ShuffleCompleted(card_count=52)
        health = b.driver.health()
        assert b.sim.shuffles == 1
        assert health["retransmits"] >= 3 and health["bad_crc"] >= 1
        assert health["link"] == "up"

    virtual(t)


def test_a_nak_to_poll_never_livelocks_the_link() -> None:
    """Before: a NAK dropped the link, SEQ restarted at 1 and the device answered every new
    POLL from its cache with the same NAK, for good."""

    async def t(b: Bench) -> None:
        b.sim.lies.nak_next = 3
        b.sim.lies.nak_reason = NakReason.ILLEGAL_IN_STATE
        await asyncio.sleep(1)  # virtual: three polls refused, the next ones answered
        assert b.driver.health()["naks"] == 3 and b.driver.link_up
        await b.driver.shuffle()
        assert await b.until(ShuffleCompleted) == ShuffleCompleted(card_count=52)

    virtual(t)


def test_replayed_events_after_a_lost_ack_are_not_reported_twice() -> None:
    async def t(b: Bench) -> None:
        b.sim.lies.ignore_acks = True  # the device forgets every ack: it repeats its events
        await b.driver.shuffle()
        await b.until(ShuffleCompleted)
        await asyncio.sleep(1)  # virtual: ten more polls, each repeating both events
        assert len(b.inputs(ShuffleStarted)) == 1 and len(b.inputs(ShuffleCompleted)) == 1
        assert b.driver.health()["events_replayed"] >= 10

    virtual(t)


def test_unacknowledged_events_come_again_to_the_next_daemon_but_journaled_ones_do_not() -> None:
    async def main() -> None:
        sim = ShufflerSimulator(shuffle_ms=30, rng=random.Random(2))
        first = Bench(sim, journal_acks=False)  # a daemon that dies before committing
        task = asyncio.create_task(first.driver.run())
        await first.driver.wait_link_up()
        await first.driver.shuffle()
        await first.until(ShuffleCompleted)
        started = next(r for r in first.reports if isinstance(r.input, ShuffleStarted))
        first.driver.acknowledge(started)  # only the start was committed
        await asyncio.sleep(0.5)  # the device hears that ack
        task.cancel()
        first.port.unplug()
        assert started.boot_id is not None and started.event_id is not None
        second = Bench(sim, cursor=(started.boot_id, started.event_id))
        task = asyncio.create_task(second.driver.run())
        await second.until(ShuffleCompleted)
        await asyncio.sleep(0.5)
        # Only the completion (not yet journaled) comes again, marked as from before start-up.
        assert second.inputs(ShuffleStarted) == []
        assert second.inputs(ShuffleCompleted) == [ShuffleCompleted(card_count=52, stale=True)]
        assert second.inputs(ShufflerRebooted) == []
        task.cancel()

    run_virtual(main())


def test_out_of_sequence_and_absurd_event_ids_are_refused_not_skipped() -> None:
    """Before: an id of 2^32-1 made every later event ignored, and a gap let a count of 51
    pass unseen. Now the absurd one is refused (the core hears of it once) and the count of
    51 behind it still arrives, in order."""

    async def t(b: Bench) -> None:
        b.sim.lies.absurd_next_event = True
        b.sim.remove_card()
        await b.driver.shuffle()  # its start gets the absurd id, its completion id 1
        refused = await b.until(DeviceEventsRefused)
        assert isinstance(refused, DeviceEventsRefused) and refused.event_id == 2**32 - 1
        await asyncio.sleep(1)
        assert b.inputs(ShuffleStarted) == []
        assert b.inputs(ShuffleCompleted) == [ShuffleCompleted(card_count=51)]
        assert len(b.inputs(DeviceEventsRefused)) == 1  # told once, counted every time
        assert b.driver.health()["events_refused"] > 1

    virtual(t)


def test_a_refused_event_polled_again_is_logged_as_a_warning_once() -> None:
    """The device lists the refused event at every poll (it holds it until acknowledged):
    one WARNING per boot, the rest at DEBUG, not a warning every 150 ms in the log."""

    async def t(b: Bench) -> None:
        b.sim.lies.absurd_next_event = True
        await b.driver.shuffle()
        await b.until(DeviceEventsRefused)
        await asyncio.sleep(1)
        assert b.driver.health()["events_refused"] > 1  # refused at every poll

    with capture_logs() as logs:
        virtual(t)
    levels = [e["log_level"] for e in logs if e["event"] == "shuffler event refused"]
    assert levels.count("warning") == 1 and levels[0] == "warning"


def test_a_gap_in_event_ids_stops_the_stream_there() -> None:
    async def t(b: Bench) -> None:
        b.sim.lies.gap_next_event = True
        b.sim.remove_card()
        await b.driver.shuffle()  # ids 2 and 3: id 1 never comes
        refused = await b.until(DeviceEventsRefused)
        assert isinstance(refused, DeviceEventsRefused) and refused.expected_event_id == 1
        await asyncio.sleep(1)
        assert b.inputs(ShuffleStarted) == [] and b.inputs(ShuffleCompleted) == []

    virtual(t)


def test_events_listed_out_of_order_are_taken_in_order() -> None:
    async def t(b: Bench) -> None:
        b.sim.lies.reorder_events = True
        b.sim.remove_card()
        b.journal_acks = False  # let both events pile up in the device
        await b.driver.shuffle()
        await b.until(ShuffleCompleted)
        assert b.inputs()[-2:] == [ShuffleStarted(), ShuffleCompleted(card_count=51)]

    virtual(t)


def test_a_reboot_is_reported_and_its_new_events_are_not_lost() -> None:
    async def t(b: Bench) -> None:
        await b.driver.shuffle()
        await b.until(ShuffleCompleted)
        b.sim.reboot()
        assert await b.until(ShufflerRebooted) == ShufflerRebooted()
        await b.driver.shuffle()
        assert await b.until(ShuffleStarted) == ShuffleStarted()  # event id 1 of the new boot
        assert await b.next() == ShuffleCompleted(card_count=52)

    virtual(t)


def test_a_fault_showing_on_connect_is_a_fault() -> None:
    async def main() -> None:
        sim = ShufflerSimulator(rng=random.Random(1))
        sim.fail(FaultCode.JAM, as_event=False)  # jammed before we ever polled it
        b = Bench(sim)
        task = asyncio.create_task(b.driver.run())
        assert await b.until(ShufflerFault) == ShufflerFault(code="jam", at_connect=True)
        task.cancel()

    run_virtual(main())


def test_silence_takes_the_link_down_and_it_is_back_within_two_seconds() -> None:
    async def t(b: Bench) -> None:
        loop = asyncio.get_running_loop()
        b.sim.line.drop = 10**9
        while b.driver.link_up:  # noqa: ASYNC110 -- virtual time: each turn is a poll
            await asyncio.sleep(0.05)
        await asyncio.sleep(30)  # a long outage: polling backs off to its ceiling
        b.sim.line.drop = 0
        answered_at = loop.time()
        await b.driver.wait_link_up()
        assert loop.time() - answered_at < 2.0
        assert b.driver.health()["identity_reads"] >= 2  # asked again who it is

    virtual(t)


def test_unplug_and_replug_reconnects_within_two_seconds() -> None:
    async def t(b: Bench) -> None:
        loop = asyncio.get_running_loop()
        b.port.unplug()
        await asyncio.sleep(20)
        assert not b.driver.link_up
        b.port.plug(b.sim)
        plugged_at = loop.time()
        await b.driver.wait_link_up()
        assert loop.time() - plugged_at < 2.0
        assert b.driver.reconnector.counters.failures > 3  # tried, backing off, meanwhile

    virtual(t)


def test_another_device_plugged_in_is_identified_as_such() -> None:
    async def t(b: Bench) -> None:
        await b.until(DeviceIdentified)  # the first one's
        b.port.unplug()
        other = ShufflerSimulator(identity=Identity("vendor-x", "SHF-9999", "7.1"))
        b.port.plug(other)
        ident = await b.until(DeviceIdentified)
        assert isinstance(ident, DeviceIdentified) and ident.serial_number == "SHF-9999"
        assert await b.until(ShufflerRebooted) == ShufflerRebooted()  # another boot id

    virtual(t)


def test_something_that_does_not_speak_the_protocol_never_brings_the_link_up() -> None:
    async def main() -> None:
        class Chatter:
            """A program on a reused pty: it echoes and babbles, and never frames a reply."""

            send: Callable[[bytes], None] | None = None

            def attach(self, send: Callable[[bytes], None] | None) -> None:
                self.send = send

            def receive(self, data: bytes) -> None:
                if self.send:
                    self.send(b"$ " + data + b"\x02\x01garbage")

        port = MemoryPort()
        port.plug(Chatter())
        reports: list[DeviceReport] = []
        driver = ReferenceShuffler(MemoryConnector(port), reports.append, SETTINGS)
        task = asyncio.create_task(driver.run())
        await asyncio.sleep(60)
        assert not driver.link_up and reports == []  # nothing journaled, nothing published
        assert driver.health()["bytes_dropped"] > 0
        task.cancel()

    run_virtual(main())


# --- the technician's diagnostics: COUNT and SELF_TEST ----------------------------------------


def test_the_shuffler_counts_its_deck_and_runs_its_self_test_when_at_rest() -> None:
    async def t(b: Bench) -> None:
        assert await b.driver.count_deck() == (52, 52)
        b.sim.remove_card()
        assert await b.driver.count_deck() == (51, 52)
        assert await b.driver.self_test() == (True, "motors, sensors and counter ok")
        b.sim.self_test_failure = "card counter sensor dirty"
        assert await b.driver.self_test() == (False, "FAILED: card counter sensor dirty")
        # Busy while shuffling; a fault leaves the counter unusable, not the self-test.
        await b.driver.shuffle()
        with pytest.raises(LinkError, match="refused COUNT: it is shuffling"):
            await b.driver.count_deck()
        await b.until(ShuffleCompleted)
        b.sim.fail(FaultCode.JAM)
        with pytest.raises(LinkError, match="refused COUNT: it is in fault"):
            await b.driver.count_deck()
        assert (await b.driver.self_test())[0] is False
        assert b.driver.health()["link"] == "up"  # a refusal ends that request only

    virtual(t)


def test_a_diagnostic_reply_that_does_not_decode_is_an_error_not_a_result() -> None:
    async def t(b: Bench) -> None:
        real = b.sim.command

        def lying(request: Frame) -> Frame:
            if request.type == MsgType.COUNT:
                return b.sim.reply(request, MsgType.COUNTED, b"\x34")  # one byte of two
            if request.type == MsgType.SELF_TEST:
                return b.sim.reply(request, MsgType.SELF_TESTED, b"\x07\x02ok")  # passed = 7?
            return real(request)

        b.sim.command = lying  # type: ignore[method-assign]
        with pytest.raises(LinkError, match="COUNTED payload must be 2 bytes"):
            await b.driver.count_deck()
        with pytest.raises(LinkError, match="neither 0 nor 1"):
            await b.driver.self_test()
        assert b.driver.health()["bad_replies"] == 2

    virtual(t)


# --- issue 14: a link that closes under a command, faults in STATUS, conflicts, resets ------


def test_a_link_that_closes_under_a_command_is_a_link_down_not_a_crash() -> None:
    """Before: TransportClosed (not a LinkError) came out of the command and ended the
    daemon's task group."""

    async def t(b: Bench) -> None:
        b.sim.line.drop = 10**9  # the shuffler stops answering...
        shuffle = asyncio.create_task(b.driver.shuffle())
        await asyncio.sleep(0.15)  # virtual: the SHUFFLE is being retried
        b.port.unplug()  # ...and the cable is pulled under the retry
        with pytest.raises(LinkDown, match="the shuffler link is down: memory:memory: unplugged"):
            await shuffle
        assert not b.driver.link_up
        b.sim.line.drop = 0
        b.port.plug(b.sim)
        await b.driver.wait_link_up()  # and back, by itself
        await b.driver.shuffle()
        assert await b.until(ShuffleCompleted) == ShuffleCompleted(card_count=52)

    virtual(t)


def test_a_fault_shown_only_in_status_is_a_fault_at_any_poll() -> None:
    """Before: a jam reported only in STATUS (no event) was acted on only at connect."""

    async def t(b: Bench) -> None:
        await asyncio.sleep(1)  # virtual: polling, all quiet
        b.sim.fail(FaultCode.JAM, as_event=False)
        assert await b.until(ShufflerFault) == ShufflerFault(code="jam", from_status=True)
        assert b.driver.fault_showing() == ShufflerFault(code="jam", from_status=True)
        await asyncio.sleep(1)  # ten more polls showing the jam: the core heard of it once
        assert len(b.inputs(ShufflerFault)) == 1
        await b.driver.shuffle()  # the reshuffle takes it out of its fault...
        await b.until(ShuffleCompleted)
        assert b.driver.fault_showing() is None
        b.sim.fail(FaultCode.JAM, as_event=False)  # ...so the same jam later is news again
        await b.until(ShufflerFault)
        assert len(b.inputs(ShufflerFault)) == 2

    virtual(t)


def test_a_fault_event_is_not_reported_again_from_the_status_that_shows_it() -> None:
    async def t(b: Bench) -> None:
        b.sim.fail(FaultCode.STOPPED)  # an event, and STATUS shows the fault from now on
        assert await b.until(ShufflerFault) == ShufflerFault(code="stopped")
        await asyncio.sleep(1)
        assert b.inputs(ShufflerFault) == [ShufflerFault(code="stopped")]

    virtual(t)


def test_one_event_id_reported_again_differently_is_a_conflict_not_a_replay() -> None:
    """Before: the second report of the id was skipped as a replay: 52 stood."""

    async def t(b: Bench) -> None:
        b.sim.lies.restate_next_event = 51  # the start says nothing of a count...
        await b.driver.shuffle()
        await b.until(ShuffleCompleted)
        await asyncio.sleep(0.5)
        (conflict,) = b.inputs(DeviceReportConflict)
        assert isinstance(conflict, DeviceReportConflict) and conflict.kind == 1  # started
        b.sim.lies.ignore_acks = True  # a replay that says the same is still a replay
        await b.driver.shuffle()
        await b.until(ShuffleCompleted)
        await asyncio.sleep(0.5)
        assert len(b.inputs(DeviceReportConflict)) == 1
        assert b.driver.health()["events_conflicting"] == 1
        assert b.driver.health()["events_replayed"] > 0

    virtual(t)


def test_a_count_of_52_restated_as_51_under_its_id_is_a_conflict() -> None:
    async def t(b: Bench) -> None:
        b.sim.shuffle_ms = 500  # the start and the completion come in separate STATUS
        await b.driver.shuffle()
        await b.until(ShuffleStarted)
        b.sim.lies.restate_next_event = 51  # the completion: 52, then 51 under its id
        assert await b.until(ShuffleCompleted) == ShuffleCompleted(card_count=52)
        conflict = await b.until(DeviceReportConflict)
        assert isinstance(conflict, DeviceReportConflict) and conflict.kind == 2

    virtual(t)


def test_a_link_stopped_at_a_refused_event_is_reset_past_the_events_it_holds() -> None:
    async def t(b: Bench) -> None:
        with pytest.raises(ResetRefused, match="not refused"):
            b.driver.reset_point()
        b.sim.lies.gap_next_event = True
        await b.driver.shuffle()  # ids 2 and 3: id 1 never comes
        await b.until(DeviceEventsRefused)
        await b.until_quiet()
        boot, journaled, last = b.driver.reset_point()
        assert (journaled, last) == (0, 3) and boot == b.sim.boot_id
        b.driver.reset_to(boot, last)  # as the daemon does once the reset is journaled
        await asyncio.sleep(0.5)
        assert b.sim.events == []  # skipped: acknowledged, never taken as reports
        assert b.inputs(ShuffleStarted) == [] and b.inputs(ShuffleCompleted) == []
        await b.driver.shuffle()
        assert await b.until(ShuffleCompleted) == ShuffleCompleted(card_count=52)
        # A new refusal in the same boot is news again.
        b.sim.lies.gap_next_event = True
        await b.driver.shuffle()
        await b.until(DeviceEventsRefused)
        assert len(b.inputs(DeviceEventsRefused)) == 2

    virtual(t)


def test_a_link_stopped_at_an_absurd_event_id_is_not_reset_but_needs_a_reboot() -> None:
    async def t(b: Bench) -> None:
        b.sim.lies.absurd_next_event = True
        await b.driver.shuffle()  # its start gets id 2^32-1
        await b.until(DeviceEventsRefused)
        await b.until_quiet()
        with pytest.raises(ResetRefused, match="reboot the shuffler"):
            b.driver.reset_point()
        b.sim.reboot()
        await b.until(ShufflerRebooted)
        await b.driver.shuffle()
        assert await b.until(ShuffleCompleted) == ShuffleCompleted(card_count=52)

    virtual(t)


def test_a_device_gone_as_the_daemon_stops_is_a_stop_not_an_error() -> None:
    """The table's devices lose their cable in the moment the daemon is told to stop (both
    processes of a simulated table ended at once, a PC powering down): the driver ends as
    cancelled, not with the transport's error, which would end the daemon in 'internal
    error' (seen by the install test)."""

    async def main() -> None:
        b = Bench(ShufflerSimulator(shuffle_ms=30, rng=random.Random(5)))
        task = asyncio.create_task(b.driver.run())
        async with asyncio.timeout(10):
            await b.driver.wait_link_up()
        b.port.unplug()  # the reader fails ...
        task.cancel()  # ... as the stop arrives
        with pytest.raises(asyncio.CancelledError):
            await task

    run_virtual(main())


def test_while_the_shoe_deals_it_is_polled_at_the_dealing_cadence() -> None:
    """The round waits for every hand: while the shoe deals, a POLL every AWAITED_POLL_S (its
    last card is heard within that), then the interval again."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        port = MemoryPort()
        sim = ShoeSimulator(card_ms=5, rng=random.Random(3))
        port.plug(sim)
        sent: list[float] = []

        def spy(data: bytes) -> list[bytes]:
            sent.append(loop.time())
            return [data]

        reports: list[DeviceReport] = []

        def emit(report: DeviceReport) -> None:
            reports.append(report)
            driver.acknowledge(report)

        driver = ReferenceShoe(MemoryConnector(port), emit, SETTINGS)
        task = asyncio.create_task(driver.run())
        try:
            await driver.wait_link_up()
            await asyncio.sleep(0.5)
            port.set_manipulator(to_device=spy)
            await driver.deal((3, 3, 3, 3))  # 12 cards, 5 ms each
            await asyncio.sleep(0.5)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        gaps = [round(after - before, 6) for before, after in itertools.pairwise(sent)]
        dealing = [g for g in gaps if g < SETTINGS.poll_interval_ms / 1000]
        # 0: the DEAL right after a poll; FAST_POLL_S: the deal's last events, once dealt.
        assert dealing.count(AWAITED_POLL_S) >= 12, gaps
        assert set(dealing) <= {0.0, AWAITED_POLL_S, FAST_POLL_S}, gaps
        assert gaps[-1] == SETTINGS.poll_interval_ms / 1000  # dealt: the interval again
        assert sum(isinstance(r.input, ShoeCard) for r in reports) == 12

    run_virtual(main())

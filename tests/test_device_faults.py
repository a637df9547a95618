"""Every device fault keeps the daemon up and is shown with what clears it (issue 14).

The daemon runs in this process on a simulated shuffler and a simulated shoe (memory ports,
the production drivers), a private broker and the mock GPIO backend; the dealer and the
technician use `tablectl`'s own main on the control socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tablectl.drivers.reference.framing import Frame
from tablectl.drivers.reference.messages import MsgType, NakReason
from tablectl.drivers.reference.shoe_codec import ShoeFaultCode
from tablectl.drivers.transport.memory import MemoryPort, memory_port
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.shoe import ShoeSimulator
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl import cli
from tablectl.config import load_config
from tablectl.core.table import Phase, TableState
from tablectl.service.daemon import Daemon
from tablectl.status import Devices, FaultView, Status, Stops

from .conftest import EXAMPLE_CONFIG


class Shuffler(ShufflerSimulator):
    """A shuffler that can refuse SHUFFLE, or drop off the line in the middle of one."""

    def __init__(self) -> None:
        super().__init__(shuffle_ms=20, rng=random.Random(1))
        self.refuse_shuffles = False
        self.shuffles_asked = 0
        self.asked_five_times = asyncio.Event()
        self.drop_off_at_next_shuffle: MemoryPort | None = None

    def command(self, request: Frame) -> Frame:
        if request.type == MsgType.SHUFFLE:
            self.shuffles_asked += 1
            if self.shuffles_asked >= 5:
                self.asked_five_times.set()
            port = self.drop_off_at_next_shuffle
            if port is not None:
                self.drop_off_at_next_shuffle = None
                self.line.drop = 10**9  # no reply to this SHUFFLE...
                asyncio.get_running_loop().call_later(0.1, port.unplug)  # ...cable pulled
            if self.refuse_shuffles:
                return self.nak(request, NakReason.ILLEGAL_IN_STATE)
        return super().command(request)


class Shoe(ShoeSimulator):
    """A shoe that can refuse the next DEAL (as one in fault would)."""

    def __init__(self) -> None:
        super().__init__(card_ms=1, rng=random.Random(2))
        self.refuse_deals = 0

    def command(self, request: Frame) -> Frame:
        if request.type == MsgType.DEAL and self.refuse_deals:
            self.refuse_deals -= 1
            return self.nak(request, NakReason.ILLEGAL_IN_STATE)
        return super().command(request)


@dataclass
class Table:
    daemon: Daemon
    task: asyncio.Task[None]
    shuffler: Shuffler
    shoe: Shoe
    shuffler_port: MemoryPort
    shoe_port: MemoryPort
    inputs: SimulatedTableInputs
    capsys: pytest.CaptureFixture[str]

    @property
    def state(self) -> TableState:
        assert self.daemon.state is not None
        return self.daemon.state

    async def until(self, predicate: Any, timeout_s: float = 10) -> None:
        await self.daemon.wait_until(predicate, timeout_s)

    async def tablectl(self, *argv: str) -> tuple[int, str]:
        """`tablectl ARGV --socket S`, as a dealer or technician runs it (its main, in a
        thread): the exit code, and what it printed (with the daemon's log lines)."""
        sock = str(self.daemon.config.storage.socket_path)
        self.capsys.readouterr()
        code = await asyncio.to_thread(cli.main, [*argv, "--socket", sock])
        out, err = self.capsys.readouterr()
        return code, out + err

    async def locked_with_wagers(self, *seats: int) -> None:
        await self.until(lambda s: s.phase is Phase.BETTING)
        for seat in seats:
            self.inputs.place_chip(seat)
        await self.until(lambda s: set(s.wagers) == set(seats))
        self.inputs.press_lockout()
        await self.until(lambda s: s.phase is Phase.LOCKED and s.counted)

    async def until_the_shoe_shows_no_fault(self) -> None:
        shoe = self.daemon.shoe
        assert shoe is not None
        async with asyncio.timeout(10):
            while shoe.fault_showing() is not None:  # noqa: ASYNC110 -- the driver's last poll
                await asyncio.sleep(0.05)

    def journal_types(self) -> list[str]:
        assert self.daemon.store is not None
        return [row.type for row in self.daemon.store.rows_after(0, limit=10_000)]


@contextlib.asynccontextmanager
async def table_with_a_shoe(
    broker: PrivateBroker,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    **daemon_args: Any,
) -> AsyncIterator[Table]:
    shuffler, shoe = Shuffler(), Shoe()
    tag = f"{tmp_path.name}-{id(shuffler)}"
    shuffler_port, shoe_port = memory_port(f"shuffler-{tag}"), memory_port(f"shoe-{tag}")
    shuffler_port.plug(shuffler)
    shoe_port.plug(shoe)
    cfg = simulated_config(
        load_config(EXAMPLE_CONFIG),
        port=f"memory://shuffler-{tag}",
        shoe_port=f"memory://shoe-{tag}",
        broker=broker,
        data_dir=tmp_path / "data",
    )
    cfg = cfg.model_copy(update={"gpio": cfg.gpio.model_copy(update={"chip_present_ms": 40})})
    inputs = SimulatedTableInputs(cfg.table.seats)
    daemon = Daemon(cfg, gpio_backend=inputs.backend(), **daemon_args)
    task = asyncio.create_task(daemon.run(), name="daemon-under-test")
    async with asyncio.timeout(10):
        await daemon.ready.wait()
    table = Table(daemon, task, shuffler, shoe, shuffler_port, shoe_port, inputs, capsys)
    try:
        yield table
        assert not task.done(), "the daemon stopped by itself"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        shuffler_port.unplug()
        shoe_port.unplug()


def faults_of(status: Status, what: str) -> list[FaultView]:
    return [f for f in status.faults if f.what == what]


def link_of(status: Status, device: str) -> str | None:
    found = status.serial_devices().get(device)
    return None if found is None else found.link


async def test_a_link_that_drops_under_a_shuffle_request_leaves_the_daemon_up(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: TransportClosed came out of the SHUFFLE and the daemon's task group ended."""
    async with table_with_a_shoe(broker, tmp_path, capsys) as table:
        await table.until(lambda s: s.phase is Phase.BETTING)
        table.shuffler.drop_off_at_next_shuffle = table.shuffler_port
        await table.locked_with_wagers(2)
        code, out = await table.tablectl("dealer", "void", "shoe-jam", "--by", "D1")
        assert code == 0, out  # a new deck is wanted: the SHUFFLE that loses its line
        async with asyncio.timeout(10):
            while table.shuffler_port.device is not None:  # noqa: ASYNC110 -- until unplugged
                await asyncio.sleep(0.05)
        async with asyncio.timeout(10):
            while link_of(table.daemon.status(), "shuffler") != "down":
                assert not table.task.done()  # the daemon stays up through the drop
                await asyncio.sleep(0.01)
        assert not table.task.done()
        status = table.daemon.status()
        (down,) = faults_of(status, "link-down")
        assert down.device == "shuffler" and down.since and down.command is None
        table.shuffler.line.drop = 0
        table.shuffler_port.plug(table.shuffler)  # plugged back: asked again, round 2 opens
        await table.until(lambda s: s.phase is Phase.BETTING and s.round_id == 2)


async def test_a_refused_shuffle_is_journaled_once_and_shown_until_it_is_taken(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a refused SHUFFLE journaled a row a second and status showed nothing."""
    async with table_with_a_shoe(broker, tmp_path, capsys, shuffle_retry_s=0.02) as table:
        await table.until(lambda s: s.phase is Phase.BETTING)
        table.shuffler.refuse_shuffles = True
        table.shuffler.shuffles_asked = 0
        await table.locked_with_wagers(3)
        assert (await table.tablectl("dealer", "void", "shoe-jam"))[0] == 0
        async with asyncio.timeout(10):
            await table.shuffler.asked_five_times.wait()
        assert table.journal_types().count("shuffler.request_failed") == 1
        (refused,) = faults_of(table.daemon.status(), "shuffle-refused")
        assert refused.cause == (
            "the shuffler will not shuffle: device refused SHUFFLE: ILLEGAL_IN_STATE"
        )
        assert refused.since and refused.seq and refused.stops is Stops.SHUFFLING
        _, out = await table.tablectl("status")
        assert "SHUFFLE REFUSED [shuffler]" in out and "asked again by itself" in out, out
        table.shuffler.refuse_shuffles = False  # asked again, it shuffles the idle deck
        await table.until(lambda s: s.shuffle_refused is None and s.deck_ready, 15)
        assert not faults_of(table.daemon.status(), "shuffle-refused")


async def test_dealer_deal_on_a_faulted_shoe_exits_1_with_the_reason_and_the_recovery(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `dealer deal` exited 0 and the journal recorded ILLEGAL_IN_STATE."""
    async with table_with_a_shoe(broker, tmp_path, capsys) as table:
        await table.until(lambda s: s.phase is Phase.BETTING)
        table.shoe.fail(ShoeFaultCode.JAM, as_event=False)  # shown in STATUS only
        await table.until(lambda s: s.shoe_fault == "jam")
        await table.locked_with_wagers(1, 4)
        code, out = await table.tablectl("dealer", "deal")
        assert code == 1, out
        assert "refused: the shoe is in fault (jam, 649a.13(f))" in out
        assert "`tablectl dealer clear-shoe --by ID`" in out
        # Not cleared while the shoe still says it is jammed.
        code, out = await table.tablectl("dealer", "clear-shoe", "--by", "D7")
        assert code == 1 and "the shoe still reports jam" in out, out
        table.shoe.clear()  # the dealer takes the cards out (649a.13(f))
        await table.until_the_shoe_shows_no_fault()
        code, out = await table.tablectl("dealer", "clear-shoe", "--by", "D7")
        assert code == 0 and "shoe.fault_cleared" in out and "by=D7" in out, out
        # The shoe refuses the DEAL itself: the dealer hears why, not "done".
        table.shoe.refuse_deals = 1
        code, out = await table.tablectl("dealer", "deal")
        assert code == 1, out
        assert "the shoe did not take the deal: device refused DEAL: ILLEGAL_IN_STATE" in out
        code, out = await table.tablectl("dealer", "deal")
        assert code == 0 and "deal.started" in out, out
        await table.until(lambda s: s.deal is not None and s.deal.complete)
        code, out = await table.tablectl("dealer", "settle", "--by", "D7")
        assert code == 0 and "round.settled" in out, out


async def test_a_shoe_jam_mid_deal_voids_the_round_and_clear_shoe_reopens_the_table(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with table_with_a_shoe(broker, tmp_path, capsys) as table:
        await table.locked_with_wagers(2)
        table.shoe.knobs.jam_at = 2
        assert (await table.tablectl("dealer", "deal"))[0] == 0
        await table.until(lambda s: s.phase is Phase.CLOSED and s.shoe_fault == "jam")
        _, out = await table.tablectl("status")
        assert "SHOE FAULT [shoe]" in out and "`tablectl dealer clear-shoe --by ID`" in out, out
        _, out = await table.tablectl("devices")
        shoe_lines = [line for line in out.splitlines() if "last fault jam" in line]
        assert shoe_lines, out  # the shoe's last fault, shown (was: the shuffler's only)
        table.shoe.clear()
        await table.until_the_shoe_shows_no_fault()
        assert (await table.tablectl("dealer", "clear-shoe", "--by", "D2"))[0] == 0
        await table.until(lambda s: s.phase is Phase.BETTING and s.round_id == 2)
        _, out = await table.tablectl("devices", "--json")
        shoe = Devices.model_validate_json(out).devices["shoe"]
        assert shoe.serial is not None and shoe.serial.last_fault is not None
        assert shoe.serial.last_fault.startswith("jam (cleared; seq ") and shoe.faults == []


async def test_a_shuffler_stopped_at_a_refused_event_is_restarted_by_reset_link(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `reshuffle` cleared the shown fault, the link stayed stopped at the refused
    event, and the table stalled with "shuffler fault: none"."""
    async with table_with_a_shoe(broker, tmp_path, capsys) as table:
        await table.until(lambda s: s.phase is Phase.BETTING)
        table.shuffler.lies.gap_next_event = True  # the next shuffle's events skip an id
        await table.locked_with_wagers(5)
        assert (await table.tablectl("dealer", "void", "shoe-jam"))[0] == 0
        await table.until(lambda s: "shuffler" in s.events_refused)
        code, out = await table.tablectl("dealer", "reshuffle", "--by", "D1")
        assert code == 1 and "a reshuffle cannot fix that" in out, out
        code, out = await table.tablectl("status")
        assert "EVENTS REFUSED [shuffler]" in out
        assert "`tablectl devices reset-link shuffler --by ID`" in out, out
        code, out = await table.tablectl("devices", "reset-link", "shuffler", "--by", "T9")
        assert code == 0 and "device.link_reset" in out and "by=T9" in out, out
        assert table.daemon.store is not None
        # The cursor moved past every event the shuffler held, with the reset's commit.
        boot, last = table.shuffler.boot_id, table.shuffler.history[-1][1].event_id
        assert table.daemon.store.get("device.shuffler.cursor") == f"{boot}:{last}"
        code, out = await table.tablectl("devices", "reset-link", "shuffler", "--by", "T9")
        assert code == 1 and "not refused" in out, out
        assert (await table.tablectl("dealer", "reshuffle", "--by", "D1"))[0] == 0
        await table.until(lambda s: s.phase is Phase.BETTING and s.round_id == 2)


async def test_status_names_every_blocked_state_with_the_command_that_clears_it(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with table_with_a_shoe(broker, tmp_path, capsys) as table:
        await table.until(lambda s: s.phase is Phase.BETTING)
        table.shuffler.remove_card()  # the next count is 51
        await table.locked_with_wagers(2, 6)
        table.shoe.knobs.jam_at = 1
        assert (await table.tablectl("dealer", "deal"))[0] == 0
        await table.until(lambda s: s.blocked == "deck-miscount:51" and s.shoe_fault == "jam")
        table.shoe_port.unplug()
        await table.daemon.wait_until(lambda s: True, 1)
        async with asyncio.timeout(10):
            while link_of(table.daemon.status(), "shoe") != "down":  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        code, out = await table.tablectl("status")
        assert code == 0
        with capsys.disabled():
            print(out)  # an example of a blocked table, for people: pytest -s shows it
        for title, command in (
            ("DECK MISCOUNT [shuffler]", "`tablectl dealer new-deck --by ID`"),
            ("SHOE FAULT [shoe]", "`tablectl dealer clear-shoe --by ID`"),
            ("LINK DOWN [shoe]", "comes back by itself"),
        ):
            line = next((i for i, text in enumerate(out.splitlines()) if title in text), None)
            assert line is not None, f"{title} missing:\n{out}"
            assert command in out.splitlines()[line + 1], out
        code, out = await table.tablectl("status", "--json")
        status = Status.model_validate_json(out)
        (miscount,) = faults_of(status, "deck-miscount")
        assert miscount.rule == "649a.5(b)" and miscount.seq and miscount.since
        assert miscount.stops is Stops.ROUNDS
        (shoe,) = faults_of(status, "shoe-fault")
        assert shoe.rule == "649a.13(f)" and shoe.command == "tablectl dealer clear-shoe --by ID"


async def test_the_status_line_each_second_says_what_the_full_status_says(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """STATUS= and the watchers' links come from a headline built without a full status
    (no journal read on the loop each second); it is the full status's own, up or down."""
    async with table_with_a_shoe(broker, tmp_path, capsys) as table:
        await table.until(lambda s: s.phase is Phase.BETTING)
        headline = table.daemon.headline()
        assert headline == table.daemon.status().headline()
        assert headline.links == {
            "shuffler": "up",
            "shoe": "up",
            "gpio": "up",
            "broker": "connected",
        }
        table.shoe_port.unplug()
        async with asyncio.timeout(10):
            while table.daemon.headline().links["shoe"] != "down":  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        headline = table.daemon.headline()
        assert headline == table.daemon.status().headline()
        assert [f.what for f in headline.faults] == ["link-down"]
        assert "shoe link down" in headline.status_line()

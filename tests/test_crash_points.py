"""A power cut at every step of a command to a device, then a restart on the same journal.

The daemon runs as systemd runs it (`tablectl run`, its own process); the shuffler and the
shoe are the simulators on real pseudo-terminals, in this process, so they outlive the kill
and keep whatever the daemon had not acknowledged. `TABLECTL_FAULT_POINT` names the one step
at which the daemon SIGKILLs itself (util/faultpoint.py): after the commit that journals the
command, before it is sent, once it is on the line, once the device answered, and before and
after the commit of the device's first and last event. The next daemon, on the same journal
and the same devices, must leave the table where it plays on by itself or where `status`
tells a person what to do: the round completed, dealt again exactly once, or void with the
game's section and every wager returned; every device event journaled exactly once; the
journal verified and replayed identically. The store's own commit path has its points too
(`journal:`, store/journal.py): a power cut there leaves a journal that passes as it lies.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tablectl.drivers.api import parse_cursor
from tablectl.drivers.reference.messages import DeviceEvent
from tablectl.drivers.reference.shoe_codec import ShoeState
from tablectl.drivers.reference.shuffler_codec import ShufflerState
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.shoe import ShoeSimulator
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.control import client as control
from tablectl.control.client import ControlClientError
from tablectl.service.replay import replay
from tablectl.status import Status
from tablectl.store.integrity import check_integrity, verify_journal
from tablectl.store.journal import JournalRow, Store
from tablectl.util.faultpoint import ENV

from .test_hostile_devices import SHOE_INPUTS, SHUFFLER_INPUTS, _device_inputs, _expected
from .test_service import TABLECTL, table_toml

GUARD_S = 30  # a hang fails the test here; not a timing claim
SEATS = (2, 5)


@dataclass
class Table:
    """The table's devices and inputs, which outlive every daemon; one daemon at a time."""

    tmp_path: Path
    config: Path
    shuffler: ShufflerSimulator
    shoe: ShoeSimulator
    inputs: SimulatedTableInputs
    proc: asyncio.subprocess.Process | None = None

    @property
    def socket(self) -> Path:
        return self.tmp_path / "c.sock"

    @property
    def database(self) -> Path:
        return self.tmp_path / "data" / "tablectl.sqlite3"

    async def start(self, fault_point: str | None = None, *, wait: bool = True) -> None:
        env = {k: v for k, v in os.environ.items() if k != ENV}
        if fault_point is not None:
            env[ENV] = fault_point
        with (self.tmp_path / "daemon.log").open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                str(TABLECTL), "run", "--config", str(self.config),
                env=env, stdout=asyncio.subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        if wait:  # answering, and past its power-up (the first input it commits)
            await self.until(lambda s: s.journal.steps_committed > 0)

    async def call(self, **request: Any) -> dict[str, Any]:
        return await asyncio.to_thread(control.call, self.socket, request)

    async def status(self) -> Status:
        reply = await self.call(cmd="status")
        assert reply["ok"], reply
        return Status.model_validate(reply["data"])

    async def until(self, predicate: Callable[[Status], bool]) -> Status:
        """Poll `status` until predicate holds (the daemon in another process: no event to
        wait on)."""
        assert self.proc is not None
        status: Status | None = None
        try:
            async with asyncio.timeout(GUARD_S):
                while True:
                    assert self.proc.returncode is None, self.log()
                    with contextlib.suppress(ControlClientError, OSError):
                        status = await self.status()
                        if predicate(status):
                            return status
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"never so; the last status: {status}") from None

    async def killed(self) -> None:
        """The daemon reached its fault point: it died by SIGKILL, by its own hand."""
        assert self.proc is not None
        async with asyncio.timeout(GUARD_S):
            code = await self.proc.wait()
        assert code == -signal.SIGKILL, f"exit {code}, not the fault point's kill\n{self.log()}"

    async def stop(self) -> None:
        """Once both devices hold nothing unjournaled, SIGTERM."""
        assert self.proc is not None
        async with asyncio.timeout(GUARD_S):
            while (  # noqa: ASYNC110 -- the simulators' state is plain attributes
                self.shuffler.state is ShufflerState.SHUFFLING
                or self.shoe.state is ShoeState.DEALING
                or self.shuffler.events
                or self.shoe.events
            ):
                await asyncio.sleep(0.05)
        self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(GUARD_S):
            assert await self.proc.wait() == 0, self.log()

    def log(self) -> str:
        return (self.tmp_path / "daemon.log").read_text()[-4000:]

    async def locked_with_wagers(self) -> None:
        await self.until(lambda s: s.phase == "betting")
        for seat in SEATS:
            self.inputs.place_chip(seat)
        await self.until(lambda s: sorted(s.wagers) == [str(x) for x in SEATS])
        self.inputs.press_lockout()
        await self.until(lambda s: s.phase == "locked" and s.count_final)
        for seat in SEATS:  # the dealer collects the wagers before the deal (649a.10(a)(2))
            self.inputs.remove_chip(seat)
        await asyncio.sleep(0.3)  # pacing: the sensors decide after chip_present_ms (40)

    async def deal(self) -> None:
        """`dealer deal`; the daemon may die under it (the fault point)."""
        with contextlib.suppress(ControlClientError, OSError):
            await self.call(cmd="deal", by="D1")

    async def shuffler_at_rest(self) -> None:
        async with asyncio.timeout(GUARD_S):
            while self.shuffler.state is ShufflerState.SHUFFLING:  # noqa: ASYNC110
                await asyncio.sleep(0.02)

    async def shoe_idle(self) -> None:
        async with asyncio.timeout(GUARD_S):
            while self.shoe.state is ShoeState.DEALING:  # noqa: ASYNC110 -- a plain attribute
                await asyncio.sleep(0.02)

    async def play_on(self) -> None:
        """Until a round takes bets with nothing standing in the way. A round that was taking
        bets at the power cut was locked out at the restart (cause: power-up); with no card
        dealt, the dealer voids it."""
        status = await self.until(lambda s: s.phase in ("betting", "locked"))
        if status.phase == "locked":
            reply = await self.call(cmd="void", reason="shoe-jam", by="D1")
            assert reply["ok"], reply
        await self.until(lambda s: s.phase == "betting" and not s.faults)

    def check_rounds_opened_on_fresh_shuffles(self) -> None:
        """No round opened on a completion from before its power-up (649a.5(b))."""
        started_since_power_up = False
        with contextlib.closing(Store(self.database, boot_id="check")) as store:
            for row in store.inputs():
                if row.type in ("power_up", "shuffler_fault", "shuffler_rebooted"):
                    started_since_power_up = False
                elif row.type == "shuffle_started" and not row.data["stale"]:
                    started_since_power_up = True
                elif row.type == "shuffle_completed":
                    rows = (
                        []
                        if row.first_seq is None
                        else store.rows_between(row.first_seq, row.last_seq or 0)
                    )
                    if any(r.type == "round.opened" for r in rows):
                        assert started_since_power_up and not row.data["stale"], row
                    started_since_power_up = False

    def shoe_cursor(self) -> tuple[int, int] | None:
        """The shoe's cursor as the journal keeps it (read-only: no daemon is running)."""
        uri = f"file:{self.database}?mode=ro"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
            row = db.execute("SELECT value FROM kv WHERE key = 'device.shoe.cursor'").fetchone()
        return parse_cursor(row[0] if row else None)

    def rows(self) -> list[JournalRow]:
        with contextlib.closing(Store(self.database, boot_id="check")) as store:
            return store.rows_between(1, store.last_seq)

    def check_journal(self, shoe_lost: frozenset[tuple[int, int]] = frozenset()) -> None:
        """Every device event exactly once and in order, but those the device still holds
        (the next start takes them: a shuffle asked for as the daemon stopped) and those a
        reboot of the shoe lost before any daemon took them, (boot, event id); every check
        passes; replay agrees."""

        def taken(sim: ShufflerSimulator | ShoeSimulator) -> list[tuple[int, DeviceEvent]]:
            held = {(sim.boot_id, e.event_id) for e in sim.events} | shoe_lost
            return [h for h in sim.history if (h[0], h[1].event_id) not in held]

        with contextlib.closing(Store(self.database, boot_id="check")) as store:
            assert _device_inputs(store, SHUFFLER_INPUTS) == _expected(
                taken(self.shuffler), "shuffler"
            )
            assert _device_inputs(store, SHOE_INPUTS) == _expected(taken(self.shoe), "shoe")
            with contextlib.closing(store.reader()) as reader:
                report = verify_journal(reader, ["pgs"])
            assert report.ok, report.problems
            result = replay(store)
            assert result.identical, result.difference


@contextlib.asynccontextmanager
async def a_table(tmp_path: Path, broker: PrivateBroker) -> AsyncIterator[Table]:
    shuffler = ShufflerSimulator(shuffle_ms=30, rng=random.Random(1))
    shoe = ShoeSimulator(card_ms=5, rng=random.Random(2))
    shoe.refill = True  # a new shuffled deck whenever the one inside runs short
    config = table_toml(tmp_path, shuffler.open_pty(), broker)
    config.write_text(
        config.read_text().replace("chip_present_ms = 150", "chip_present_ms = 40")
        + f'\n[shoe]\nport = "{shoe.open_pty()}"\npoll_interval_ms = 100\n'
        "response_timeout_ms = 100\n"
    )
    inputs = SimulatedTableInputs(6)  # the daemon's mock GPIO backend connects to it
    (tmp_path / "data").mkdir()
    server = await inputs.serve(tmp_path / "data" / "table-simulator.sock")
    table = Table(tmp_path, config, shuffler, shoe, inputs)
    try:
        yield table
    finally:
        if table.proc is not None and table.proc.returncode is None:
            table.proc.kill()
            await table.proc.wait()
        server.close()
        shuffler.close()
        shoe.close()


def of(rows: list[JournalRow], type_: str) -> list[dict[str, Any]]:
    return [r.data for r in rows if r.type == type_]


# Each step between journaling the deal and the shoe's answer being journaled, in order.
DEAL_POINTS = [
    "after-commit:deal_requested",  # deal.started is on disk; nothing has run
    "effect:DealCards",  # the command is about to go to the shoe
    "send:DEAL",  # the frame is built, not written
    "sent:DEAL",  # on the line, the shoe's ACK not read
    "reply:DEAL",  # the shoe took it; nothing of its deal journaled
    "before-commit:shoe_card",  # its first card, taken but not journaled
    "after-commit:shoe_card",  # ... journaled, not yet acknowledged to the shoe
    "before-commit:shoe_deal_completed",  # its last event, taken but not journaled
    "after-commit:shoe_deal_completed",  # ... journaled, not yet acknowledged
]
NEVER_SENT = {"after-commit:deal_requested", "effect:DealCards", "send:DEAL"}


@pytest.mark.slow
@pytest.mark.parametrize("point", DEAL_POINTS)
async def test_a_power_cut_at_each_step_of_a_deal(
    point: str, tmp_path: Path, broker: PrivateBroker
) -> None:
    async with a_table(tmp_path, broker) as table:
        await table.start(fault_point=point)
        await table.locked_with_wagers()
        await table.deal()
        await table.killed()
        await table.shoe_idle()  # whatever it was asked, it has done while no daemon ran

        await table.start()
        # Settled by the shoe's own word: the deal complete, or asked again and complete.
        await table.until(lambda s: s.dealing is not None and s.dealing.complete)
        status = await table.status()
        assert not [f for f in status.faults if f.what in ("deal-unconfirmed", "shoe-fault")]
        reply = await table.call(cmd="settle", by="D1")
        assert reply["ok"], reply
        await table.until(lambda s: s.phase == "betting" and s.round_id == 2)
        await table.stop()

        assert table.shoe.deals == 1  # dealt exactly once, whichever step the power went at
        rows = table.rows()
        resolved = of(rows, "deal.resolved")
        if point in NEVER_SENT:
            # The shoe showed it never dealt: asked again, once.
            assert [r["outcome"] for r in resolved] == ["reissued"], resolved
            assert resolved[0]["rule"] == "649a.10(b)"
        else:
            assert all(r["outcome"] == "dealing" for r in resolved), resolved
        (completed,) = of(rows, "deal.completed")
        assert completed["round_id"] == 1 and completed["hands_read"] == len(SEATS)
        assert of(rows, "round.voided") == []
        (settled,) = of(rows, "round.settled")
        assert settled["hands_read_by_shoe"] == len(SEATS)
        table.check_journal()


@pytest.mark.slow
@pytest.mark.parametrize("point", ["effect:DealCards", "reply:DEAL", "before-commit:shoe_card"])
async def test_a_shoe_that_restarted_while_the_daemon_was_down_voids_the_round(
    point: str, tmp_path: Path, broker: PrivateBroker
) -> None:
    """It cannot show what it dealt: void (649a.13(f)), wagers returned, and status tells the
    dealer to empty the shoe."""
    async with a_table(tmp_path, broker) as table:
        await table.start(fault_point=point)
        await table.locked_with_wagers()
        await table.deal()
        await table.killed()
        await table.shoe_idle()
        journaled = table.shoe_cursor()
        lost = frozenset(
            (table.shoe.boot_id, e.event_id)
            for e in table.shoe.events
            if journaled is None or journaled[0] != table.shoe.boot_id or e.event_id > journaled[1]
        )
        table.shoe.reboot()  # its power went too: what it held is gone

        await table.start()
        status = await table.until(lambda s: s.phase == "closed" and s.shoe_fault is not None)
        (fault,) = [f for f in status.faults if f.what == "shoe-fault"]
        assert fault.command == "tablectl dealer clear-shoe --by ID"
        assert not [f for f in status.faults if f.what == "deal-unconfirmed"]
        table.shoe.clear()  # the dealer takes every card out (649a.13(f))
        await asyncio.sleep(0.3)  # pacing: the next poll shows it clear
        reply = await table.call(cmd="clear-shoe", by="D1")
        assert reply["ok"], reply
        await table.until(lambda s: s.phase == "betting" and s.round_id == 2)
        await table.stop()

        rows = table.rows()
        (voided,) = of(rows, "round.voided")
        assert voided["rule"] == "649a.13(f)" and voided["wagers_returned"] == list(SEATS)
        assert voided["round_id"] == 1
        assert of(rows, "round.settled") == []
        table.check_journal(shoe_lost=lost)


@pytest.mark.slow
async def test_status_tells_the_dealer_while_the_shoe_is_away(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    """A deal in flight and a shoe that does not answer after the restart: never a silent
    "dealing"; voiding it is the dealer's way out."""
    async with a_table(tmp_path, broker) as table:
        await table.start(fault_point="effect:DealCards")
        await table.locked_with_wagers()
        await table.deal()
        await table.killed()
        table.shoe.line.drop = 10**9  # it answers nothing

        await table.start()
        status = await table.until(lambda s: any(f.what == "deal-unconfirmed" for f in s.faults))
        (fault,) = [f for f in status.faults if f.what == "deal-unconfirmed"]
        assert fault.rule == "649a.13(f)" and fault.seq is not None
        assert fault.command == "tablectl dealer void shoe-jam --by ID"
        reply = await table.call(cmd="void", reason="shoe-jam", by="D1")
        assert reply["ok"], reply
        status = await table.status()
        assert status.phase == "closed"
        assert not [f for f in status.faults if f.what == "deal-unconfirmed"]
        table.shoe.line.drop = 0
        await table.stop()
        (voided,) = of(table.rows(), "round.voided")
        assert voided["wagers_returned"] == list(SEATS) and voided["rule"] == "649a.13(f)"
        assert table.shoe.deals == 0
        table.check_journal()


SHUFFLE_POINTS = [
    "effect:RequestShuffle",  # the core wants a deck; SHUFFLE not sent
    "send:SHUFFLE",
    "sent:SHUFFLE",
    "reply:SHUFFLE",  # the shuffler took it; nothing journaled
    "before-commit:shuffle_started",
    "after-commit:shuffle_started",
    "before-commit:shuffle_completed",
    "after-commit:shuffle_completed",  # the count is journaled, not acknowledged
]


@pytest.mark.slow
@pytest.mark.parametrize("point", SHUFFLE_POINTS)
async def test_a_power_cut_at_each_step_of_a_shuffle(
    point: str, tmp_path: Path, broker: PrivateBroker
) -> None:
    """A power-up forgets the deck: whatever the shuffler did is journaled stale, and a new
    shuffle counts the deck before a round opens (649a.5(b), 649a.13(e))."""
    async with a_table(tmp_path, broker) as table:
        await table.start(fault_point=point, wait=False)  # it may die before it answers
        await table.killed()
        await table.shuffler_at_rest()

        await table.start()
        await table.play_on()
        await table.stop()
        table.check_rounds_opened_on_fresh_shuffles()
        table.check_journal()


@pytest.mark.slow
@pytest.mark.parametrize("point", ["send:COUNT", "sent:COUNT", "reply:COUNT"])
async def test_a_power_cut_during_a_technicians_count(
    point: str, tmp_path: Path, broker: PrivateBroker
) -> None:
    """COUNT changes nothing and is never journaled: after the restart nothing waits on it,
    and the count can be asked again."""
    async with a_table(tmp_path, broker) as table:
        await table.start(fault_point=point)
        await table.until(lambda s: s.phase == "betting")
        await table.shuffler_at_rest()
        with contextlib.suppress(ControlClientError, OSError):
            await table.call(cmd="shuffler-count", by="T1")
        await table.killed()

        await table.start()
        await table.play_on()
        while True:  # asked again; a shuffler that is shuffling the other deck says so
            await table.shuffler_at_rest()
            reply = await table.call(cmd="shuffler-count", by="T1")
            if reply["ok"] or "it is shuffling" not in reply["error"]:
                break
        assert reply["ok"], reply
        assert reply["data"] == {"counted": 52, "expected": 52, "matches": True}
        await table.stop()
        table.check_journal()


# The store's commit path (store/journal.py), at the daemon's first commit (its power-up) and
# at its third (the shuffle it asks for at the start): inside the transaction, once SQLite
# committed (the rows handed on, the mark not yet written), once the mark is written.
JOURNAL_POINTS = [
    "journal:rows-written",
    "journal:committed",
    "journal:rows-written#3",
    "journal:committed#3",
    "journal:mark-written#3",
]


@pytest.mark.slow
@pytest.mark.parametrize("point", JOURNAL_POINTS)
async def test_a_power_cut_in_the_journals_own_commit(
    point: str, tmp_path: Path, broker: PrivateBroker
) -> None:
    """The journal as the kill left it passes every check the start makes, with the commit's
    rows wherever SQLite had committed them (the mark one commit behind until it is
    written); the next daemon starts on it and the table plays on."""
    nth = int(point.partition("#")[2] or 1)
    landed = not point.startswith("journal:rows-written")
    marked = point.startswith("journal:mark-written")
    async with a_table(tmp_path, broker) as table:
        await table.start(fault_point=point, wait=False)
        await table.killed()
        await table.shuffler_at_rest()
        with contextlib.closing(Store(table.database, boot_id="check")) as store:
            assert check_integrity(store, ["pgs"]) == [], table.log()
            record = store.mark().record
            assert (store.head.commit_gen or 0) == (nth if landed else nth - 1)
            assert (0 if record is None else record.gen) == (nth if marked else nth - 1)
            inputs = list(store.inputs())
        assert len(inputs) >= (nth if landed else nth - 1)  # every commit held an input

        await table.start()
        await table.play_on()
        await table.stop()
        table.check_journal()

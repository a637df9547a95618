"""A hostile shuffler and a hostile shoe against the daemon, killed at random moments.

The simulators live in the test's process (over TCP), so they outlive every SIGKILL of the
daemon and keep whatever it had not acknowledged. They lie on the line (drops, corruption,
duplicates, splits, noise), NAK, list events out of order, forget acks, and report events
nobody asked for. After the last restart has drained both devices, the journal must hold each
device event exactly once and in order, its hash chain intact, replayable, and no round may
have opened on a shuffle completed before the power-up it opened in.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from tablectl.drivers.reference.messages import DeviceEvent, NakReason
from tablectl.drivers.reference.shoe_codec import ShoeEventKind, card_byte
from tablectl.drivers.reference.shuffler_codec import EventKind, FaultCode
from tablectl.drivers.transport.memory import memory_port
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.shoe import ShoeSimulator
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.core.events import input_from_journal
from tablectl.core.table import Phase
from tablectl.rules.cards import full_deck
from tablectl.service.daemon import Daemon
from tablectl.service.replay import replay
from tablectl.store.integrity import verify_journal
from tablectl.store.journal import Store

from .conftest import EXAMPLE_CONFIG
from .test_service import TABLECTL, table_toml

KILLS = 12
SHUFFLER_INPUTS = {"shuffle_started", "shuffle_completed", "shuffler_fault"}
SHOE_INPUTS = {"shoe_card", "shoe_stack", "shoe_deal_completed", "shoe_fault"}


def _misbehave(rng: random.Random, sim: SimulatedDevice) -> None:
    """One random lie on the line or in the protocol (never a gap: those are refused)."""
    roll = rng.randrange(8)
    if roll == 0:
        sim.line.drop = rng.randint(1, 4)
    elif roll == 1:
        sim.line.corrupt = rng.randint(1, 3)
    elif roll == 2:
        sim.line.duplicate = rng.randint(1, 3)
    elif roll == 3:
        sim.line.split = rng.randint(1, 5)
    elif roll == 4:
        sim.line.noise = rng.randbytes(rng.randint(1, 30))
    elif roll == 5:
        sim.lies.nak_next = rng.randint(1, 3)
        sim.lies.nak_reason = rng.choice(list(NakReason))
    elif roll == 6:
        sim.lies.reorder_events = not sim.lies.reorder_events
    else:
        sim.lies.ignore_acks = not sim.lies.ignore_acks


def _report(rng: random.Random, shuffler: ShufflerSimulator, shoe: ShoeSimulator) -> None:
    """Events nobody asked for: the journal must take each exactly once all the same."""
    if rng.random() < 0.5:
        kind = rng.choice([EventKind.SHUFFLE_STARTED, EventKind.SHUFFLE_COMPLETE, EventKind.FAULT])
        arg = {EventKind.SHUFFLE_COMPLETE: rng.choice([52, 52, 51]), EventKind.FAULT: FaultCode.JAM}
        shuffler.event(kind, arg.get(kind, 0))
    else:
        shoe_kind = rng.choice([ShoeEventKind.CARD, ShoeEventKind.STACK_COMPLETE])
        card = card_byte(rng.choice(full_deck()))
        shoe.event(shoe_kind, card if shoe_kind == ShoeEventKind.CARD else 3)


def _device_inputs(store: Store, types: set[str]) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for row in store.inputs():
        if row.type in types:
            data = dict(row.data)
            data.pop("stale", None)
            if data.pop("at_connect", False) or data.pop("from_status", False):
                continue  # a fault read from STATUS (on connect or later), not an event
            out.append((row.type, sorted(data.items())))
    return out


def _expected(history: list[tuple[int, DeviceEvent]], device: str) -> list[tuple[str, object]]:
    from tablectl.drivers.reference.shoe_codec import ShoeCodec
    from tablectl.drivers.reference.shuffler_codec import ShufflerCodec

    codec = ShoeCodec() if device == "shoe" else ShufflerCodec()
    out: list[tuple[str, object]] = []
    for _boot, event in history:
        inp = codec.event_input(event, stale=False)
        assert inp is not None
        data = inp.model_dump(mode="json")
        data.pop("stale", None)
        data.pop("at_connect", None)
        out.append((inp.TYPE, sorted(data.items())))
    return out


@pytest.mark.slow
async def test_no_device_event_is_lost_or_journaled_twice_across_kills(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    rng = random.Random(int(os.environ.get("TABLECTL_HOSTILE_SEED", "11")))
    shuffler = ShufflerSimulator(shuffle_ms=30, rng=random.Random(1))
    shoe = ShoeSimulator(card_ms=5, rng=random.Random(2))
    shuffler_server = await shuffler.serve_tcp()
    shoe_server = await shoe.serve_tcp()
    table = SimulatedTableInputs(6)  # the daemon's mock GPIO backend connects to it
    (tmp_path / "data").mkdir()
    table_server = await table.serve(tmp_path / "data" / "table-simulator.sock")
    s_port = shuffler_server.sockets[0].getsockname()[1]
    h_port = shoe_server.sockets[0].getsockname()[1]
    config = table_toml(tmp_path, f"socket://127.0.0.1:{s_port}", broker)
    config.write_text(
        config.read_text() + f'\n[shoe]\nport = "socket://127.0.0.1:{h_port}"\n'
        "poll_interval_ms = 100\nresponse_timeout_ms = 100\n"
    )

    log = tmp_path / "daemon.log"

    async def start() -> asyncio.subprocess.Process:
        with log.open("ab") as err:
            return await asyncio.create_subprocess_exec(
                str(TABLECTL), "run", "--config", str(config),
                stdout=asyncio.subprocess.DEVNULL, stderr=err,
            )  # fmt: skip

    try:
        for _ in range(KILLS):
            proc = await start()
            deadline = asyncio.get_running_loop().time() + rng.uniform(0.8, 3.0)
            while asyncio.get_running_loop().time() < deadline:
                if rng.random() < 0.6:
                    _report(rng, shuffler, shoe)
                if rng.random() < 0.3:
                    _misbehave(rng, rng.choice([shuffler, shoe]))
                await asyncio.sleep(rng.uniform(0.01, 0.2))
            for _ in range(rng.randint(10, 40)):  # a burst, so the kill lands mid-commit
                _report(rng, shuffler, shoe)
            await asyncio.sleep(rng.uniform(0.0, 0.3))  # so the kill lands anywhere
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)  # a power cut, wherever it is
            # Ended by the kill, not by itself at any time before it:
            died = "the daemon exited by itself:\n"
            assert await proc.wait() == -signal.SIGKILL, died + log.read_text()[-3000:]
        # A last, honest run drains both devices: every event acknowledged, so journaled.
        for sim in (shuffler, shoe):
            sim.line.__init__()  # type: ignore[misc]
            sim.lies.__init__()  # type: ignore[misc]
        runs = log.read_text().count("tablectl running")
        proc = await start()
        async with asyncio.timeout(90):  # a hang guard: four workers share two cores
            # Up (its start-up checks passed, SIGTERM handled), and both devices drained: a
            # SIGTERM before it is up would end it by the signal's default, not its stop.
            while log.read_text().count("tablectl running") == runs:  # noqa: ASYNC110 -- a log file
                await asyncio.sleep(0.1)
            while shuffler.events or shoe.events:  # noqa: ASYNC110 -- the simulators expose lists
                await asyncio.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        shuffler_server.close()
        shoe_server.close()
        table_server.close()

    with contextlib.closing(
        Store(tmp_path / "data" / "tablectl.sqlite3", boot_id="check")
    ) as store:
        assert _device_inputs(store, SHUFFLER_INPUTS) == _expected(shuffler.history, "shuffler")
        assert _device_inputs(store, SHOE_INPUTS) == _expected(shoe.history, "shoe")
        assert len(shuffler.history) > 10 and len(shoe.history) > 10
        assert store.verify_chain() is None
        # Every restart after a kill passed the start-up check (or the daemon would have
        # exited by itself); the whole journal passes every check.
        with contextlib.closing(store.reader()) as reader:
            report = verify_journal(reader, ["pgs"])
        assert report.ok, report.problems
        result = replay(store)
        assert result.identical, result.difference
        # No round opened on a completion from before its power-up.
        started_since_power_up = False
        for row in store.inputs():
            event = input_from_journal(row.type, row.data)
            if row.type in (
                "power_up",
                "shuffler_fault",
                "shuffler_rebooted",
                "reshuffle_requested",
            ):
                started_since_power_up = False
            elif row.type == "shuffle_started" and not row.data["stale"]:
                started_since_power_up = True
            elif row.type == "shuffle_completed":
                rows = (
                    []
                    if row.first_seq is None
                    else store.rows_between(row.first_seq, row.last_seq or 0)
                )
                opened = any(r.type == "round.opened" for r in rows)
                assert not opened or (started_since_power_up and not row.data["stale"]), event
                started_since_power_up = False
    print(
        f"{KILLS} kills, {len(shuffler.history)} shuffler and {len(shoe.history)} shoe events",
        file=sys.stderr,
    )


async def test_a_device_event_is_acknowledged_only_after_its_commit(
    tmp_path: Path, broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the commit that journals a completion is held, the shuffler keeps hearing no ack
    for it; a power cut before the commit returns loses nothing: the next daemon journals it."""
    sim = ShufflerSimulator(shuffle_ms=10, rng=random.Random(4))
    memory_port("ack-after-commit").plug(sim)
    base = load_config(EXAMPLE_CONFIG)
    cfg = simulated_config(
        base, port="memory://ack-after-commit", broker=broker, data_dir=tmp_path / "data"
    )
    held, release = threading.Event(), threading.Event()
    real_commit = Store.commit_steps

    def commit(self: Store, steps: Any, **options: Any) -> Any:
        # Steps that arrive together share one commit: hold the one holding the completion.
        if any(
            st.step_input is not None and st.step_input.type == "shuffle_completed" for st in steps
        ):
            held.set()
            release.wait(10)
            raise sqlite3.OperationalError("disk I/O error (the power went)")
        return real_commit(self, steps, **options)

    monkeypatch.setattr(Store, "commit_steps", commit)
    inputs = SimulatedTableInputs(cfg.table.seats)
    daemon = Daemon(cfg, gpio_backend=inputs.backend())
    task = asyncio.create_task(daemon.run())
    async with asyncio.timeout(10):
        while not held.is_set():  # noqa: ASYNC110 -- a thread's event
            await asyncio.sleep(0.01)
    polls = sim.requests_executed
    async with asyncio.timeout(10):
        while sim.requests_executed < polls + 5:  # noqa: ASYNC110 -- five more polls
            await asyncio.sleep(0.05)
    # Not acknowledged: the completion (and whatever shares its held commit, its start).
    assert [e.kind for e in sim.events][-1] == EventKind.SHUFFLE_COMPLETE
    release.set()
    with pytest.raises(ExceptionGroup):
        await task
    monkeypatch.setattr(Store, "commit_steps", real_commit)
    daemon = Daemon(cfg, gpio_backend=inputs.backend())
    task = asyncio.create_task(daemon.run())
    try:
        await daemon.wait_until(lambda s: s.phase is Phase.BETTING or s.deck_ready, 10)
        async with asyncio.timeout(10):
            while sim.events:  # noqa: ASYNC110 -- now acknowledged
                await asyncio.sleep(0.05)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    with contextlib.closing(Store(cfg.storage.database, boot_id="check")) as store:
        completions = [r for r in store.inputs() if r.type == "shuffle_completed"]
        # Journaled once, by the daemon that came after the power cut (stale: from before it).
        assert completions[0].data["stale"] is True
        assert sum(c.data["stale"] for c in completions) == 1

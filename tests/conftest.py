"""Shared fixtures: the example config, a private Mosquitto, and a whole simulated table."""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tablectl.drivers.reference.shuffler_codec import ShufflerState
from tablectl.simulators import patroni
from tablectl.simulators.backend import ReferenceBackend
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.demo import simulated_config
from tablectl.simulators.postgres import PrivatePostgres
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import TableConfig, load_config
from tablectl.control import client as control
from tablectl.core.effects import Effect
from tablectl.core.events import ChipSensed, Event
from tablectl.core.table import Phase, TableState
from tablectl.rules.meters import LocalMeter
from tablectl.service.daemon import Daemon
from tablectl.status import Status
from tablectl.util import logs

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_CONFIG = REPO / "config" / "three-card-poker.toml"


# The longest modules first: under xdist (pyproject's addopts, --dist loadfile) a module runs
# on one worker, and one started last would run on alone at the end. Stable: the order within
# a module, and of every other module, stays.
LONGEST_FIRST = (
    "test_link_failover.py",
    "test_deb.py",
    "test_records.py",
    "test_simulate_table.py",
    "test_report.py",
    "test_link_controller.py",
    "test_poker.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(
        key=lambda item: (
            LONGEST_FIRST.index(item.path.name)
            if item.path.name in LONGEST_FIRST
            else len(LONGEST_FIRST)
        )
    )


@pytest.fixture(autouse=True, scope="session")
def _logs_to_stderr() -> None:
    # structlog's default prints to stdout, which would mix with what CLI tests read.
    logs.configure("INFO", json=False)


@pytest.fixture
def example_config() -> TableConfig:
    return load_config(EXAMPLE_CONFIG)


@pytest.fixture
def broker() -> Iterator[PrivateBroker]:
    with PrivateBroker() as b:
        yield b


# How long a test waits on the daemon before it calls it hung (never a timing assertion).
HANG_GUARD_S = 30.0


@dataclass
class SimulatedTable:
    """The daemon on simulated devices, with a backend listening; restartable."""

    config: TableConfig
    sim: ShufflerSimulator
    backend: ReferenceBackend
    broker: PrivateBroker
    daemon: Daemon = field(init=False)
    inputs: SimulatedTableInputs = field(init=False)  # the physical table: kept over restarts
    _task: asyncio.Task[None] | None = None
    _decided: defaultdict[int, list[int]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        self.inputs = SimulatedTableInputs(self.config.table.seats)

    async def start(self, **daemon: Any) -> None:
        """A daemon on this table (daemon: its other fields, e.g. verify_before_start_rows)."""
        self.daemon = Daemon(self.config, gpio_backend=self.inputs.backend(), **daemon)
        self.daemon.observers.append(self._count_decisions)
        self._task = asyncio.create_task(self.daemon.run(), name="daemon-under-test")
        async with asyncio.timeout(10):
            await self.daemon.ready.wait()

    async def stop(self) -> None:
        """Stop the daemon the way a power cut would: mid-whatever, no goodbye."""
        assert self._task is not None
        self._task.cancel()
        try:
            async with asyncio.timeout(15):
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
        except TimeoutError:
            for task in asyncio.all_tasks():  # say where it is stuck, then fail
                task.print_stack(file=sys.stderr)
            raise

    @property
    def state(self) -> TableState:
        assert self.daemon.state is not None
        return self.daemon.state

    @property
    def meter(self) -> LocalMeter:
        meter = self.state.meter
        assert isinstance(meter, LocalMeter), "this table has no meter of its own"
        return meter

    async def wait_phase(self, phase: Phase, timeout_s: float = 10) -> None:
        await self.daemon.wait_until(lambda s: s.phase is phase, timeout_s)

    def _count_decisions(self, event: Event, state: TableState, effects: list[Effect]) -> None:
        # Observers see a step before it is committed (the core steps ahead of the commits in
        # flight): it is done once steps_done reaches the steps taken with it.
        if isinstance(event, ChipSensed) and event.present:
            self._decided[event.seat].append(self.daemon.steps_taken)

    async def until_decided(self, *seats: int, timeout_s: float = 10) -> None:
        """Wait until the core has committed the next resting decision of each seat."""
        before = {seat: len(self._decided[seat]) for seat in seats}

        def done(_: TableState) -> bool:
            return all(
                len(self._decided[seat]) > n and self._decided[seat][n] <= self.daemon.steps_done
                for seat, n in before.items()
            )

        await self.daemon.wait_until(done, timeout_s)

    async def place_wagers(self, *seats: int) -> None:
        """Chips rest on these seats; returns once the core has decided each one."""
        decided = asyncio.create_task(self.until_decided(*seats))
        await asyncio.sleep(0)  # count from before the chips land
        for seat in seats:
            self.inputs.place_chip(seat)
        await decided

    async def lock(self) -> None:
        """The lock-out button; then the dealer collects the progressive chips (649a.8(b))."""
        self.inputs.press_lockout()
        await self.daemon.wait_until(lambda s: s.phase is Phase.LOCKED and s.counted, 10)
        for seat in self.state.wagers:
            self.inputs.remove_chip(seat)

    async def validate_hits(self) -> None:
        """The floorperson validates every pending hit (and documents meter payouts)."""
        for hit in self.state.hits_pending:
            assert (await self.dealer(cmd="validate", hit_id=hit.hit_id, by="floor-1"))["ok"]
            if not hit.paid_from_table_inventory:
                assert (await self.dealer(cmd="document", hit_id=hit.hit_id, by="floor-1"))["ok"]

    async def dealer(self, **request: object) -> dict[str, object]:
        # A hang guard, not a timing: four test workers on two cores stall a reply for seconds.
        return await asyncio.to_thread(
            control.call, self.config.storage.socket_path, request, HANG_GUARD_S
        )

    async def status(self) -> Status:
        """The daemon's status as the control socket sends it, read back as the CLI does."""
        reply = await self.dealer(cmd="status")
        assert reply["ok"] is True, reply
        return Status.model_validate(reply["data"])

    async def until_shuffler_has_nothing_left(self, timeout_s: float = 10) -> None:
        """Until nothing more can come from the shuffler: no shuffle asked for or under way,
        and every event it reported committed (the daemon acknowledges only after)."""
        async with asyncio.timeout(timeout_s):
            while (  # noqa: ASYNC110 -- the simulator's state is a plain attribute
                self.state.shuffle_requested
                or self.sim.state is ShufflerState.SHUFFLING
                or self.sim.events
            ):
                await asyncio.sleep(0.01)

    async def wait_backend_caught_up(self, timeout_s: float = 15) -> None:
        assert self.daemon.store is not None
        store = self.daemon.store
        await self.backend.wait_for(
            lambda: self.backend.last_contiguous_seq >= store.last_seq, timeout_s
        )


@contextlib.asynccontextmanager
async def simulated_table(
    broker: PrivateBroker,
    data_dir: Path,
    *,
    mqtt: dict[str, object] | None = None,
    backend: dict[str, object] | None = None,
    **config_updates: object,
) -> AsyncIterator[SimulatedTable]:
    """The daemon on simulated devices and this broker, with a reference backend.

    mqtt: changes to the [mqtt] section; backend: arguments for the ReferenceBackend;
    config_updates replace whole config sections.
    """
    sim = ShufflerSimulator(shuffle_ms=50, rng=random.Random(1))
    port = sim.open_pty()
    base = load_config(EXAMPLE_CONFIG)
    cfg = simulated_config(base, port=port, broker=broker, data_dir=data_dir)
    cfg = cfg.model_copy(
        update={
            "gpio": cfg.gpio.model_copy(update={"chip_present_ms": 40}),
            "mqtt": cfg.mqtt.model_copy(update=mqtt or {}),
            **config_updates,
        }
    )
    reference = ReferenceBackend(
        broker.host,
        broker.port,
        site=cfg.table.site_id,
        table=cfg.table.table_id,
        **{"backend_id": cfg.mqtt.backends[0], **(backend or {})},  # type: ignore[arg-type]
    )
    backend_task = asyncio.create_task(reference.run(), name="backend-under-test")
    t = SimulatedTable(cfg, sim, reference, broker)
    await t.start()
    try:
        yield t
    finally:
        await t.stop()
        backend_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await backend_task
        sim.close()


@pytest.fixture
async def table(broker: PrivateBroker, tmp_path: Path) -> AsyncIterator[SimulatedTable]:
    async with simulated_table(broker, tmp_path / "data") as t:
        yield t


@pytest.fixture(scope="session")
def postgres() -> Iterator[PrivatePostgres]:
    """One private PostgreSQL for the session (fsync off: tests kill processes, not the
    machine); each test makes its own database in it (tests/link_support.py)."""
    with PrivatePostgres(fsync=False) as pg:
        yield pg


@pytest.fixture(scope="module")
def patroni_cluster() -> Iterator[patroni.PatroniCluster]:
    """Three etcd members and three PostgreSQL nodes under Patroni (Debian's packages), on the
    shipped configs, for a module; each node in its own network namespace where `ip netns` is
    allowed (root), else all on loopback. Skipped, with the reason, without the packages."""
    reason = patroni.missing()
    if reason is not None:
        print(f"replicated-ledger tests skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    namespaces = patroni.namespaces_unavailable() is None
    with patroni.PatroniCluster(namespaces=namespaces) as cluster:
        yield cluster

"""A second vendor's shuffler, added as its own package with no line of tablectl changed.

examples/tablectl-asciishuffler speaks another protocol than the reference (ASCII lines, an
additive checksum, SEQ 0..999, a boot counter, an unsolicited reboot notice). It is installed
here with pip, as a floor would install a vendor's package (into a directory of its own on the
daemon's PYTHONPATH: the test venv is left as it was), chosen by the config's
`driver = "asciishuffler"`, and played through `tablectl run` in its own process, with a
`kill -9` in the middle: every event of the shuffler journaled once, the journal whole.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.dealer import as_request, deal_round
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import load_config
from tablectl.conformance import kit
from tablectl.control import client as control
from tablectl.control.client import ControlClientError
from tablectl.service.replay import replay
from tablectl.status import Status
from tablectl.store.integrity import verify_journal
from tablectl.store.journal import Store

from .conftest import EXAMPLE_CONFIG, REPO
from .test_service import TABLECTL

EXAMPLE = REPO / "examples" / "tablectl-asciishuffler"
SOURCES = EXAMPLE / "src" / "tablectl_asciishuffler"
GUARD_S = 30  # a hang fails the test here; not a timing claim
SEATS = (2, 5)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The example package, pip-installed into a directory of its own; importable here too
    (its simulator)."""
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run([*pip, "--target", str(target), str(EXAMPLE)], check=True)
    sys.path.insert(0, str(target))
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        for name in [m for m in sys.modules if m.startswith("tablectl_asciishuffler")]:
            del sys.modules[name]


def _env(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(site)}


def test_the_example_imports_only_the_public_driver_api() -> None:
    """Of tablectl, the package imports tablectl.drivers.api and nothing else."""
    seen = set()
    for path in SOURCES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                seen.add(node.module)
            elif isinstance(node, ast.Import):
                seen.update(alias.name for alias in node.names)
    of_tablectl = {m for m in seen if m == "tablectl" or m.startswith("tablectl.")}
    assert of_tablectl == {"tablectl.drivers.api"}, of_tablectl
    assert "tablectl_asciishuffler" in seen  # the walk saw the package's own imports


def _config_text(port: str, tmp_path: Path, broker: PrivateBroker, extra: str = "") -> str:
    text = EXAMPLE_CONFIG.read_text()
    shuffler = f'[shuffler]\ndriver = "asciishuffler"\nport = "{port}"\ndecks = 2\n{extra}\n'
    text, replaced = re.subn(r"\[shuffler\]\n(?:[^\[#\n][^\n]*\n)*", shuffler, text)
    assert replaced == 1
    for old, new in [
        ('backend = "auto" ', 'backend = "mock" '),
        ("port = 1883", f"port = {broker.port}"),
        ('data_dir = "/var/lib/tablectl"', f'data_dir = "{tmp_path / "data"}"'),
        ('control_socket = "/run/tablectl/control.sock"', f'control_socket = "{tmp_path}/c.sock"'),
        ("chip_present_ms = 150", "chip_present_ms = 40"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_config_check_reports_the_drivers_own_keys(
    site: Path, tmp_path: Path, broker: PrivateBroker
) -> None:
    """The driver's settings model judges its keys; check names each by its field path."""
    config = tmp_path / "table.toml"
    good = _config_text("socket://127.0.0.1:7001", tmp_path, broker)
    config.write_text(good)
    check = [str(TABLECTL), "config", "check", str(config)]
    ok = subprocess.run(check, env=_env(site), capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    config.write_text(
        _config_text("socket://nohost", tmp_path, broker, "line_timeout_ms = 1\nbaudrate = 9600")
    )
    bad = subprocess.run(check, env=_env(site), capture_output=True, text=True, check=False)
    assert bad.returncode == 2, bad
    assert "shuffler.port: 'socket://nohost': write socket://HOST:PORT" in bad.stderr
    assert "shuffler.line_timeout_ms: Input should be greater than or equal to 20" in bad.stderr
    assert "shuffler.baudrate: unknown key" in bad.stderr  # the reference's, not this one's
    # Without the package installed the driver is unknown, and the message says which are.
    config.write_text(good)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    gone = subprocess.run(check, env=env, capture_output=True, text=True, check=False)
    assert gone.returncode == 2
    assert "shuffler.driver: unknown driver 'asciishuffler'; one of reference" in gone.stderr


@dataclass
class Table:
    """The simulated shuffler and table inputs outlive each daemon; one daemon at a time."""

    tmp_path: Path
    config: Path
    site: Path
    sim: Any  # AsciiShufflerSimulator (imported from the installed package)
    inputs: SimulatedTableInputs
    proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with (self.tmp_path / "daemon.log").open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                str(TABLECTL), "run", "--config", str(self.config),
                env=_env(self.site), stdout=asyncio.subprocess.DEVNULL, stderr=log,
            )  # fmt: skip
        await self.until(lambda s: s.journal.steps_committed > 0)

    def log(self) -> str:
        return (self.tmp_path / "daemon.log").read_text()[-4000:]

    async def call(self, **request: Any) -> dict[str, Any]:
        return await asyncio.to_thread(control.call, self.tmp_path / "c.sock", request)

    async def until(self, predicate: Callable[[Status], bool]) -> Status:
        assert self.proc is not None
        status: Status | None = None
        try:
            async with asyncio.timeout(GUARD_S):
                while True:
                    assert self.proc.returncode is None, self.log()
                    with contextlib.suppress(ControlClientError, OSError):
                        reply = await self.call(cmd="status")
                        status = Status.model_validate(reply["data"])
                        if predicate(status):
                            return status
                    await asyncio.sleep(0.05)
        except TimeoutError:
            raise AssertionError(f"never so; the last status: {status}\n{self.log()}") from None

    async def play_round(self, rng: random.Random) -> int:
        """One round, betting to settlement, as a dealer and players do; its id."""
        status = await self.until(lambda s: s.phase == "betting" and not s.faults)
        for seat in SEATS:
            self.inputs.place_chip(seat)
        await self.until(lambda s: sorted(s.wagers) == [str(x) for x in SEATS])
        self.inputs.press_lockout()
        await self.until(lambda s: s.phase == "locked" and s.count_final)
        self.inputs.release_lockout()
        for seat in SEATS:  # the dealer collects the wagers before the deal (649a.10(a)(2))
            self.inputs.remove_chip(seat)
        await asyncio.sleep(0.3)  # pacing: the sensors decide after chip_present_ms (40)
        game = load_config(self.config).rules().game.table_game()
        # Hands that win nothing on the progressive: no jackpot to validate between rounds.
        cards = deal_round(game.deal_plan(list(SEATS)), {2: "2c7d9h", 5: "3s8dJh"}, rng)
        reply = await self.call(**as_request(cards))
        assert reply["ok"], reply
        await self.until(lambda s: s.round_id > status.round_id)
        return status.round_id

    async def play_on(self) -> None:
        """A round taking bets at the power cut was locked at the restart (cause: power-up);
        with no card dealt the dealer voids it (as tests/test_crash_points.py does)."""
        status = await self.until(lambda s: s.phase in ("betting", "locked"))
        if status.phase == "locked":
            reply = await self.call(cmd="void", reason="shoe-jam", by="D1")
            assert reply["ok"], reply

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        assert await self.proc.wait() == -signal.SIGKILL

    async def stop(self) -> None:
        """Once the shuffler holds nothing unjournaled, SIGTERM."""
        assert self.proc is not None
        async with asyncio.timeout(GUARD_S):
            while self.sim.state == "busy" or self.sim.events:  # noqa: ASYNC110 -- attributes
                await asyncio.sleep(0.05)
        self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(GUARD_S):
            assert await self.proc.wait() == 0, self.log()

    def check_journal(self) -> None:
        """Each event the shuffler listed journaled exactly once, in its order; the journal's
        chains verified; its replay identical."""
        kinds = {"STA": "shuffle_started", "END": "shuffle_completed", "FLT": "shuffler_fault"}
        expected = [
            (kinds[e.kind], int(e.arg) if e.kind == "END" else None) for _, e in self.sim.history
        ]
        database = self.tmp_path / "data" / "tablectl.sqlite3"
        with contextlib.closing(Store(database, boot_id="check")) as store:
            journaled = [
                (row.type, row.data.get("card_count"))
                for row in store.inputs()
                if row.type in kinds.values()
            ]
            assert journaled == expected
            with contextlib.closing(store.reader()) as reader:
                report = verify_journal(reader, ["pgs"])
            assert report.ok, report.problems
            result = replay(store)
            assert result.identical, result.difference


@contextlib.asynccontextmanager
async def a_table(site: Path, tmp_path: Path, broker: PrivateBroker) -> AsyncIterator[Table]:
    from tablectl_asciishuffler.simulator import AsciiShufflerSimulator

    sim = AsciiShufflerSimulator(shuffle_ms=30, rng=random.Random(1))
    port = await sim.start()
    config = tmp_path / "table.toml"
    config.write_text(_config_text(port, tmp_path, broker))
    inputs = SimulatedTableInputs(6)  # the daemon's mock GPIO backend connects to it
    (tmp_path / "data").mkdir()
    server = await inputs.serve(tmp_path / "data" / "table-simulator.sock")
    table = Table(tmp_path, config, site, sim, inputs)
    try:
        yield table
    finally:
        if table.proc is not None and table.proc.returncode is None:
            table.proc.kill()
            await table.proc.wait()
        server.close()
        sim.close()


async def test_rounds_on_the_example_shuffler_through_the_daemon_and_a_kill_9(
    site: Path, tmp_path: Path, broker: PrivateBroker
) -> None:
    rng = random.Random(7)
    async with a_table(site, tmp_path, broker) as table:
        await table.start()
        status = await table.until(lambda s: s.shuffler is not None and s.shuffler.link == "up")
        assert status.shuffler is not None and status.shuffler.model == "ACME-LS2"
        assert status.shuffler.serial_number == "ACME-0001"
        first = await table.play_round(rng)
        await table.play_round(rng)
        # The power cut: the next deck is being shuffled, its events not yet all taken.
        async with asyncio.timeout(GUARD_S):
            while table.sim.state != "busy":  # noqa: ASYNC110 -- a plain attribute
                await asyncio.sleep(0.005)
        await table.kill9()
        await table.start()
        await table.play_on()
        last = await table.play_round(rng)
        assert last > first + 1
        await table.play_round(rng)
        await table.stop()
        assert table.sim.shuffles >= 4
        table.check_journal()


async def test_the_example_passes_the_conformance_kit(site: Path) -> None:
    """Every hostile scenario of the kit, on the pip-installed driver and its simulator (the
    package's own tests run the same through the kit's pytest plugin)."""
    results = await kit.run_all("asciishuffler")
    assert {r.scenario: r.detail for r in results if r.outcome != "pass"} == {}
    # It drives no shoe: every shuffler scenario runs, none of the shoe's applies.
    assert [r.scenario for r in results] == [s.name for s in kit.SCENARIOS if s.role == "shuffler"]
    report = kit.report("asciishuffler", results)
    assert f"{len(results)} of {len(results)} passed" in report
    assert "It drives no shoe: the shoe's scenarios do not apply." in report


def test_the_examples_own_tests_run_the_kit_through_its_plugin(site: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=EXAMPLE,
        env=_env(site),
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-3000:]
    shuffler = sum(s.role == "shuffler" for s in kit.SCENARIOS)
    assert f"{shuffler} passed, {len(kit.SCENARIOS) - shuffler} skipped" in ran.stdout

"""`tablectl simulate table` in one process, `tablectl run` in another, commands in a third:
the round the README shows, played end to end as a technician would."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tablectl.simulators.broker import PrivateBroker

from tablectl import cli
from tablectl.config import load_config

from .conftest import REPO

TABLECTL = Path(sys.executable).with_name("tablectl")


def sim_config(tmp_path: Path, broker: PrivateBroker) -> Path:
    text = (REPO / "config" / "simulated-table.toml").read_text()
    text = text.replace("/tmp/tablectl-sim", str(tmp_path / "sim")).replace(
        "port = 1883", f"port = {broker.port}"
    )
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


class Simulator:
    """The simulated table's terminal: type a command, read what it says."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def said(self, predicate: Callable[[str], bool]) -> str:
        assert self.proc.stdout is not None
        async with asyncio.timeout(15):
            while True:
                line = (await self.proc.stdout.readline()).decode()
                assert line, "the simulator exited"
                if predicate(line):
                    return line

    async def type(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        await self.proc.stdin.drain()
        return await self.said(lambda line: True)


async def tablectl(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(TABLECTL), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(30):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode() + err.decode()


async def status_until(config: Path, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    async with asyncio.timeout(20):
        while True:
            code, out = await tablectl("status", "--config", str(config), "--json")
            data: dict[str, Any] = json.loads(out) if code == 0 else {}
            if data and predicate(data):
                return data
            await asyncio.sleep(0.1)


async def test_a_round_played_from_another_terminal(tmp_path: Path, broker: PrivateBroker) -> None:
    config = sim_config(tmp_path, broker)
    sim_proc = await asyncio.create_subprocess_exec(
        str(TABLECTL),
        "simulate",
        "table",
        "--config",
        str(config),
        "--shuffle-ms",
        "50",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    sim = Simulator(sim_proc)
    daemon = None
    try:
        await sim.said(lambda line: "simulated table ready" in line)
        daemon = await asyncio.create_subprocess_exec(
            str(TABLECTL), "run", "--config", str(config), stderr=asyncio.subprocess.DEVNULL
        )
        await status_until(config, lambda s: s["phase"] == "betting")

        assert await sim.type("place 2 5") == "chip on seat 2, 5\n"
        await status_until(config, lambda s: s["wagers"] == {"2": 100, "5": 100})
        assert await sim.type("lamps") == "lamps lit: 2, 5\n"
        await sim.type("press")
        locked = await status_until(config, lambda s: s["phase"] == "locked" and s["count_final"])
        assert locked["gpio"]["backend"] == "mock" and locked["gpio"]["faults"] == 0
        await sim.type("remove 2 5")  # the dealer collects the wagers
        code, out = await tablectl(
            "dealer", "settle", "--config", str(config), "--hand", "2=2c7d9h", "--hand", "5=3c8d4s"
        )
        assert code == 0, out
        assert "round.settled" in out

        # The next round: the cable to the sensors is pulled while it takes bets.
        await status_until(config, lambda s: s["phase"] == "betting" and s["round_id"] == 2)
        await sim.type("unplug gpio")
        faulted = await status_until(config, lambda s: s["gpio_fault"] is not None)
        assert faulted["phase"] == "locked" and "simulated table" in faulted["gpio_fault"]
        code, out = await tablectl("status", "--config", str(config))
        assert "GPIO FAULT" in out and "dealer clear-fault" in out
        await sim.type("plug gpio")
        code, out = await tablectl("dealer", "void", "--config", str(config), "shoe-jam")
        assert code == 0, out
        code, out = await tablectl("dealer", "clear-fault", "--config", str(config), "--by", "T9")
        assert code == 0 and "gpio.fault_cleared" in out, out
        await status_until(config, lambda s: s["phase"] == "betting" and s["round_id"] == 3)
    finally:
        for proc in (daemon, sim_proc):
            if proc is not None and proc.returncode is None:
                proc.terminate()
                async with asyncio.timeout(15):
                    await proc.wait()
    assert sim_proc.returncode == 0


def test_simulate_table_refuses_a_config_the_daemon_would_not_simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "table.toml"
    path.write_text((REPO / "config" / "three-card-poker.toml").read_text())
    assert load_config(path).gpio.backend == "auto"
    assert cli.main(["simulate", "table", "--config", str(path)]) == 2
    assert 'set gpio.backend = "mock"' in capsys.readouterr().err


async def test_simulated_table_commands_say_what_they_did(tmp_path: Path) -> None:
    from tablectl.simulators.table import SimulatedTable

    table = SimulatedTable(load_config(REPO / "config" / "simulated-table.toml"))
    assert table.command("place 3") == "chip on seat 3"
    assert table.inputs.levels[3]
    assert table.command("miscount").endswith("the next count is 51")
    assert table.command("jam") == "the shuffler jams on its next shuffle"
    for bad, message in (
        ("place", "usage: place SEAT [SEAT...]"),
        ("place seven", "seats are numbers 1 to 6"),
        ("place 9", "seat 9: this table has seats 1 to 6"),
        ("unplug toaster", "usage: unplug gpio|shuffler"),
        ("dance", "unknown command 'dance'; type help"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            table.command(bad)

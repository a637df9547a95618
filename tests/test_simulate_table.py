"""`tablectl simulate table` in one process, `tablectl run` in another, commands in a third:
the round the README shows, played end to end as a technician would."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tablectl.simulators.broker import PrivateBroker

from tablectl import cli
from tablectl.config import load_config
from tablectl.control import client

from .conftest import REPO

TABLECTL = Path(sys.executable).with_name("tablectl")


def sim_config(tmp_path: Path, broker: PrivateBroker, name: str = "simulated-table") -> Path:
    text = (REPO / "config" / f"{name}.toml").read_text()
    text = re.sub(r"/tmp/tablectl-sim[-a-z]*", str(tmp_path / "sim"), text).replace(
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
    """Poll the daemon's status (in this process: the commands under test are the
    subprocesses, and a CLI start per poll only slows the test down)."""
    socket = load_config(config).storage.socket_path
    async with asyncio.timeout(20):
        while True:
            try:
                reply = await asyncio.to_thread(client.call, socket, {"cmd": "status"})
            except client.ControlClientError:
                reply = {}
            data: dict[str, Any] = reply.get("data") or {}
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
        # The README's round: the shoe deals seat 2 a mini-royal and seat 5 a straight flush.
        assert await sim.type("shoe deck AsKsQs 9c8c7c") == (
            "the shoe deals next: As Ks Qs 9c 8c 7c, then a shuffled rest\n"
        )
        code, out = await tablectl("dealer", "deal", "--config", str(config), "--by", "D117")
        assert code == 0, out
        await status_until(config, lambda s: bool(s["dealing"]) and s["dealing"]["complete"])
        code, out = await tablectl("dealer", "settle", "--config", str(config), "--by", "D117")
        assert code == 0, out
        assert "round.settled" in out
        code, out = await tablectl("status", "--config", str(config))
        assert "`tablectl floor validate 1-2 --by ID`" in out, out
        assert "`tablectl floor validate 1-5 --by ID`" in out, out
        for verb, hit in (("validate", "1-2"), ("validate", "1-5"), ("document", "1-2")):
            code, out = await tablectl("floor", verb, hit, "--config", str(config), "--by", "F042")
            assert code == 0, out

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
        ("place seven", "'seven': a seat: a whole number, 1 to 6 (table.seats in the config)"),
        ("place 9", "'9': a seat: 1 to 6 (table.seats in the config)"),
        ("place 1 1 1", "seat 1 is named twice"),
        ("place 2 7", "'7': a seat: 1 to 6"),  # refused before seat 2 has its chip
        ("drop-edges -5", "'-5': drop-edges N: 0 to 1,000"),
        ("drop-edges 1e9", "'1e9': drop-edges N: a whole number, 0 to 1,000"),
        ("shoe jam 52", "'52': shoe jam N: 0 to 51 (the 52 cards of a deck, from 0)"),
        ("shoe short 0", "'0': shoe short N: 1 to 51"),
        ("shoe extra 16", "'16': shoe extra N: 0 to 15 (the reference DEAL's 16 stacks, from 0)"),
        ("shoe gap 3", "usage: shoe FAULT [N]"),
        ("unplug toaster", "usage: unplug gpio|shuffler|shoe"),
        ("shoe dance", "unknown shoe fault 'dance'; type help"),
        ("shoe deck AsAs", "deck: a card is named twice"),
        ("swap shoe SHOE-0001", "the shoe connected already has serial SHOE-0001"),
        ("dance", "unknown command 'dance'; type help"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            table.command(bad)
    assert not table.inputs.levels[2]  # nothing typed wrong moved a chip
    assert table.command("drop-edges 3").startswith("the next 3 sensor edges are lost")
    assert table.command("shoe short") == "the shoe reports the next deal complete 1 card(s) early"


@pytest.mark.parametrize(
    "name", ["simulated-table", "simulated-ultimate-texas-holdem", "simulated-let-it-ride"]
)
async def test_every_game_with_every_device_simulated(
    tmp_path: Path, broker: PrivateBroker, name: str
) -> None:
    """For each game, a round dealt by the simulated shoe; for one, the shoe swapped for
    another and accepted by a technician for real, the shoe's walk test, stdin closed."""
    config = sim_config(tmp_path, broker, name)
    sim_proc = await asyncio.create_subprocess_exec(
        str(TABLECTL),
        *("simulate", "table", "--config", str(config), "--shuffle-ms", "50"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    sim = Simulator(sim_proc)
    daemon = None
    try:
        await sim.said(lambda line: "simulated table ready" in line)
        daemon = await asyncio.create_subprocess_exec(
            str(TABLECTL), "run", "--config", str(config), stderr=asyncio.subprocess.DEVNULL
        )
        await status_until(config, lambda s: s["phase"] == "betting")
        await sim.type("place 1")
        await status_until(config, lambda s: s["wagers"] == {"1": 100})
        await sim.type("press")
        await status_until(config, lambda s: s["phase"] == "locked" and s["count_final"])
        await sim.type("shoe deck AhAdKhKdQhQdJhJd9h")  # no spade: the community's are by hand
        code, out = await tablectl("dealer", "deal", "--config", str(config), "--by", "D1")
        assert code == 0, out
        await status_until(config, lambda s: bool(s["dealing"]) and s["dealing"]["complete"])
        settle = ["dealer", "settle", "--config", str(config), "--by", "D1"]
        if "ultimate" in name:  # 653a.10(c): the community cards are dealt by hand
            settle += ["--community", "QsJsTs2s3s"]
        code, out = await tablectl(*settle)
        assert code == 0 and "round.settled" in out, out
        await sim.type("remove 1")
        opened = await status_until(config, lambda s: s["phase"] == "betting")
        if name != "simulated-table":
            return  # the swap and the shoe's walk test are the same for every game

        # Another shoe is connected: play is blocked until a technician accepts it.
        said = await sim.type("swap shoe SHOE-0002")
        assert "tablectl devices accept shoe SHOE-0002" in said, said
        await status_until(
            config, lambda s: s["device_acceptance"].get("shoe", {}).get("waiting") == "SHOE-0002"
        )
        code, out = await tablectl(
            "devices", "accept", "shoe", "SHOE-0002", "--config", str(config), "--by", "T9"
        )
        assert code == 0, out
        await status_until(
            config,
            lambda s: (
                s["device_acceptance"]["shoe"] == {"accepted": "SHOE-0002", "waiting": None}
                and s["phase"] == "betting"
                and s["round_id"] >= opened["round_id"]
            ),
        )

        # The shoe's walk test (no more bets first), with a card it cannot read.
        await sim.type("press")
        await status_until(config, lambda s: s["phase"] == "locked" and s["count_final"])
        await sim.type("shoe deck AsKsQsJsTs")
        code, out = await tablectl("test", "shoe", "--config", str(config), "--cards", "5")
        assert code == 0, out
        assert "card 1: As" in out and "card 5: Ts" in out and "5 of 5 cards read; passed" in out
        await sim.type("shoe unread 1")
        code, out = await tablectl("test", "shoe", "--config", str(config), "--json")
        reply = json.loads(out.splitlines()[0])  # stdout; the prompt went to stderr
        assert code == 1 and reply["ok"] is False and reply["cards"][1] == "unread", out
        assert sim_proc.stdin is not None
        sim_proc.stdin.close()  # stdin at its end: the table keeps serving, no traceback
        code, out = await tablectl("status", "--config", str(config))
        assert code == 0, out
    finally:
        for proc in (daemon, sim_proc):
            if proc is not None and proc.returncode is None:
                proc.terminate()
                async with asyncio.timeout(15):
                    await proc.wait()
    assert sim_proc.returncode == 0
    assert sim_proc.stderr is not None
    assert "Traceback" not in (await sim_proc.stderr.read()).decode()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "place",
                    "remove",
                    "bounce",
                    "press",
                    "lamps",
                    "jam",
                    "shoe",
                    "swap",
                    "unplug",
                    "plug",
                    "reboot",
                    "drop-edges",
                    "miscount",
                    "deck",
                    "help",
                ]
            ),
            st.sampled_from(["1", "9", "-1", "0", "99999999999", "shoe", "gpio", "x", "AsAs"]),
            st.text(max_size=8),
        ),
        max_size=5,
    )
)
def test_no_typed_line_ends_the_simulated_table(words: list[str]) -> None:
    """Whatever is typed, the table answers or says what is wrong (ValueError, shown as
    `? ...`): nothing else escapes, so no input can end it in a traceback."""
    from tablectl.simulators.table import SimulatedTable

    async def typed() -> None:
        table = SimulatedTable(load_config(REPO / "config" / "simulated-table.toml"))
        with contextlib.suppress(ValueError):
            table.command(" ".join(words))

    asyncio.run(typed())


def test_simulate_table_survives_any_stdin(tmp_path: Path) -> None:
    """Commands from /dev/null, a closed stdin or bytes that are not UTF-8: it keeps serving
    and ends on SIGTERM without a traceback."""
    config = tmp_path / "table.toml"
    config.write_text(
        (REPO / "config" / "simulated-table.toml")
        .read_text()
        .replace("/tmp/tablectl-sim", str(tmp_path / "sim"))
    )
    argv = [str(TABLECTL), "simulate", "table", "--config", str(config)]
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"place 1\n\xff\xfe\x00 jam\nshoe dance\n\x1b[A\n")

    def close_stdin() -> None:
        os.close(0)  # `<&-`: no standard input at all

    for case in ("/dev/null", "closed", "garbage"):
        with garbage.open("rb") as typed:
            stdin: int | IO[bytes] | None = {"/dev/null": subprocess.DEVNULL}.get(case)
            proc = subprocess.Popen(
                argv,
                stdin=typed if case == "garbage" else stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=close_stdin if case == "closed" else None,
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                if "simulated table ready" in line:
                    break
            if case == "garbage":
                said = [proc.stdout.readline() for _ in range(4)]
                assert said[0] == "chip on seat 1\n" and said[1].startswith("? unknown command")
            proc.terminate()
            out, err = proc.communicate(timeout=15)
        assert proc.returncode == 0 and "Traceback" not in out + err, (case, out, err)

"""`tablectl run` as systemd runs it: a separate process, READY and WATCHDOG, orderly stop."""

from __future__ import annotations

import asyncio
import glob
import json
import os
import signal
import socket
import sys
import tomllib
from pathlib import Path

import aiomqtt
import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.mqtt.relay import topic_root

from .conftest import EXAMPLE_CONFIG

TABLECTL = Path(sys.executable).with_name("tablectl")


def table_toml(tmp_path: Path, shuffler_port: str, broker: PrivateBroker) -> Path:
    text = EXAMPLE_CONFIG.read_text()
    for old, new in [
        ('port = "/dev/tablectl-shuffler"', f'port = "{shuffler_port}"'),
        ('backend = "auto" ', 'backend = "mock" '),
        ("port = 1883", f"port = {broker.port}"),
        ('data_dir = "/var/lib/tablectl"', f'data_dir = "{tmp_path / "data"}"'),
        (
            'control_socket = "/run/tablectl/control.sock"',
            f'control_socket = "{tmp_path / "c.sock"}"',
        ),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "table.toml"
    path.write_text(text)
    tomllib.loads(text)
    return path


async def test_daemon_notifies_systemd_and_stops_in_order(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    sim = ShufflerSimulator(shuffle_ms=20)
    config = table_toml(tmp_path, sim.open_pty(), broker)
    table = SimulatedTableInputs(6)  # the daemon's mock backend connects to it
    sim_server = await table.serve(tmp_path / "data" / "table-simulator.sock")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.setblocking(False)
    env = {**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "400000"}
    root = topic_root("pa-demo-casino", "tcp-07")
    async with aiomqtt.Client(broker.host, broker.port) as watcher:
        await watcher.subscribe(f"{root}/status", qos=1)
        proc = await asyncio.create_subprocess_exec(
            str(TABLECTL),
            "run",
            "--config",
            str(config),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        loop = asyncio.get_running_loop()
        try:
            messages: list[bytes] = []
            async with asyncio.timeout(15):
                while not any(b"WATCHDOG=1" in m for m in messages):
                    messages.append(await loop.sock_recv(notify, 4096))
            assert messages[0].startswith(b"READY=1")

            status = await asyncio.create_subprocess_exec(
                str(TABLECTL),
                "status",
                "--config",
                str(config),
                "--json",
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await status.communicate()
            assert status.returncode == 0
            assert json.loads(out)["table"] == "tcp-07"

            statuses = []
            async with asyncio.timeout(10):
                async for message in watcher.messages:
                    statuses.append(json.loads(message.payload)["status"])
                    if statuses[-1] == "online":
                        break
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(10):
                assert await proc.wait() == 0
                async for message in watcher.messages:
                    if json.loads(message.payload)["status"] == "offline":
                        break
            assert not (tmp_path / "c.sock").exists()  # the control socket is cleaned up
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            notify.close()
            sim.close()
            sim_server.close()


async def run_until_it_exits(config: Path) -> tuple[int | None, str]:
    """`tablectl run` that is expected to refuse to start: its exit code and stderr."""
    proc = await asyncio.create_subprocess_exec(
        str(TABLECTL), "run", "--config", str(config), stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(30):
        _, err = await proc.communicate()
    return proc.returncode, err.decode()


@pytest.mark.skipif(bool(glob.glob("/dev/gpiochip*")), reason="this machine has GPIO chips")
async def test_auto_gpio_without_hardware_is_a_clear_error(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    sim = ShufflerSimulator()
    config = table_toml(tmp_path, sim.open_pty(), broker)
    config.write_text(config.read_text().replace('backend = "mock" ', 'backend = "auto" '))
    code, err = await run_until_it_exits(config)
    sim.close()
    assert code == 1
    assert "GPIO unavailable: no GPIO chip: looked for /dev/gpiochip*, found none" in err
    assert 'gpio.backend = "mock"' in err and "Traceback" not in err


async def test_mock_gpio_without_a_simulated_table_says_how_to_start_one(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    sim = ShufflerSimulator()
    config = table_toml(tmp_path, sim.open_pty(), broker)
    code, err = await run_until_it_exits(config)
    sim.close()
    assert code == 1
    assert f"no simulated table on {tmp_path / 'data' / 'table-simulator.sock'}" in err
    assert not (tmp_path / "data").exists()  # refused before anything was created
    assert "tablectl simulate table --config" in err and "Traceback" not in err


async def test_unwritable_data_dir_is_a_clear_error(tmp_path: Path, broker: PrivateBroker) -> None:
    sim = ShufflerSimulator()
    config = table_toml(tmp_path, sim.open_pty(), broker)
    (tmp_path / "blocker").write_text("a file where the data directory should be")
    config.write_text(config.read_text().replace(str(tmp_path / "data"), str(tmp_path / "blocker")))
    code, err = await run_until_it_exits(config)
    sim.close()
    assert code == 1
    assert f"storage.data_dir {tmp_path / 'blocker'} is not a directory" in err

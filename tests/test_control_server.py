"""The control socket of a running daemon: replies to everything, timeouts, caps, roles,
watchers, devices and the shuffler's diagnostics."""

from __future__ import annotations

import asyncio
import contextlib
import grp
import json
import os
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tablectl.drivers import reference_driver
from tablectl.drivers.api import DriverContext
from tablectl.drivers.reference.shuffler_codec import ShufflerState
from tablectl.drivers.registry import connector_for
from tablectl.drivers.shuffler.reference import ReferenceShuffler
from tablectl.simulators.broker import PrivateBroker

from tablectl import cli
from tablectl.config import AccessSection, StorageSection
from tablectl.core.table import Phase
from tablectl.status import Devices

from .conftest import SimulatedTable, simulated_table


async def exchange(path: Path, raw: bytes, *, eof: bool = False) -> list[dict[str, Any]]:
    """Send raw bytes; every line the server sends back until it hangs up."""
    reader, writer = await asyncio.open_unix_connection(str(path), limit=1 << 20)
    try:
        writer.write(raw)
        await writer.drain()
        if eof:
            writer.write_eof()
        async with asyncio.timeout(10):
            data = await reader.read()
        return [json.loads(line) for line in data.splitlines()]
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("raw", "eof", "message"),
    [
        (b"\xff\xfe{}\n", False, "not JSON: not UTF-8"),
        (b"NaN\n", False, "NaN is not a JSON number"),
        (b'{"cmd": "settle", "folded": [1e999999]}\n', False, "folded.0"),
        (b'{"cmd": "settle", "folded": [' + b"9" * 5000 + b"]}\n", False, "not JSON"),
        (b"[" * 40000 + b"]" * 40000 + b"\n", False, "request longer than 65536 bytes"),
        (b"[" * 20000 + b"\n", False, "not JSON"),
        (b'{"cmd": "status"', True, "not JSON"),
        (b"\n", False, "not JSON"),
        (b'"status"\n', False, "one JSON object"),
        (b'{"cmd": "settle", "folded": [1.7]}\n', False, "folded.0: Input should be a valid"),
        (b'{"cmd": "status", "by": ""}\n', False, "by: String should have at least 1"),
    ],
)
async def test_every_malformed_request_gets_an_error_reply(
    table: SimulatedTable, raw: bytes, eof: bool, message: str
) -> None:
    replies = await exchange(table.config.storage.socket_path, raw, eof=eof)
    assert len(replies) == 1
    assert replies[0]["ok"] is False and message in replies[0]["error"]
    # ...and the table goes on answering.
    assert (await table.dealer(cmd="status"))["ok"] is True


@contextlib.asynccontextmanager
async def tight_table(
    broker: PrivateBroker, tmp_path: Path, **access: Any
) -> AsyncIterator[SimulatedTable]:
    section = AccessSection(**access)
    async with simulated_table(broker, tmp_path / "data", access=section) as t:
        yield t


async def test_a_client_that_sends_nothing_is_told_and_disconnected(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    async with tight_table(broker, tmp_path, request_timeout_s=0.2) as table:
        replies = await exchange(table.config.storage.socket_path, b"")
        assert replies == [{"ok": False, "error": "no request within 0.2s"}]


async def test_idle_connections_cannot_keep_status_from_answering(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with tight_table(broker, tmp_path, max_connections=8, max_watchers=2) as table:
        path = table.config.storage.socket_path
        idle = [await asyncio.open_unix_connection(str(path)) for _ in range(40)]
        try:
            # Each client past the cap made room by dropping the one that had waited longest:
            # 32 for the idle ones, one more for this status request.
            status = await table.dealer(cmd="status")
            assert status["ok"] is True
            for reader, _ in idle[:33]:
                async with asyncio.timeout(10):
                    assert await reader.read() == b""  # dropped, no reply
            reply = await table.dealer(cmd="devices")
            assert reply["ok"] is True
            control = Devices.model_validate(reply["data"]).control
            assert control is not None and control.dropped >= 33 and control.open <= 8
        finally:
            for _, writer in idle:
                writer.close()
    # One warning, not a line per connection.
    assert capsys.readouterr().err.count("control connections dropped") == 1


async def test_watch_streams_journal_rows_and_link_changes(table: SimulatedTable) -> None:
    await table.wait_phase(Phase.BETTING)
    reader, writer = await asyncio.open_unix_connection(str(table.config.storage.socket_path))
    try:
        writer.write(b'{"cmd": "watch"}\n')
        async with asyncio.timeout(10):
            reply = json.loads(await reader.readline())
        assert reply["ok"] is True and reply["data"]["links"]["shuffler"] == "up"
        first_new = reply["data"]["last_seq"] + 1
        assert (await table.dealer(cmd="void", reason="shoe-jam", by="D7"))["ok"]
        # Every row from the watch's start, in order; the next deck's shuffle may come first.
        rows: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            while not rows or rows[-1]["type"] != "round.voided":
                event = json.loads(await reader.readline())
                if event["event"] == "journal":
                    rows.append(event)
        assert [r["seq"] for r in rows] == list(range(first_new, first_new + len(rows)))
        assert rows[-1]["data"]["by"].startswith("D7 (")

        table.sim.line.drop = 1_000_000  # the shuffler goes silent: link down
        async with asyncio.timeout(20):
            while True:
                event = json.loads(await reader.readline())
                if event["event"] == "links" and event["links"]["shuffler"] == "down":
                    break
        table.sim.line.drop = 0
    finally:
        writer.close()


async def test_watchers_are_capped_below_the_connection_cap(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    async with tight_table(broker, tmp_path, max_connections=8, max_watchers=1) as table:
        path = table.config.storage.socket_path
        reader, writer = await asyncio.open_unix_connection(str(path))
        try:
            writer.write(b'{"cmd": "watch"}\n')
            async with asyncio.timeout(10):
                assert json.loads(await reader.readline())["ok"] is True
            second = await exchange(path, b'{"cmd": "watch"}\n')
            assert second == [{"ok": False, "error": "busy: 1 watchers already"}]
            assert (await table.dealer(cmd="status"))["ok"] is True
        finally:
            writer.close()


def test_watchers_must_leave_room_for_status() -> None:
    with pytest.raises(ValueError, match="max_watchers 8 must be below max_connections 8"):
        AccessSection(max_connections=8, max_watchers=8)


async def test_data_directory_database_and_socket_are_not_for_others(
    table: SimulatedTable,
) -> None:
    storage = table.config.storage
    assert stat.S_IMODE(storage.data_dir.stat().st_mode) == 0o750
    assert stat.S_IMODE(storage.database.stat().st_mode) == 0o640
    assert stat.S_IMODE(storage.socket_path.stat().st_mode) == 0o660


# --- who may do what ------------------------------------------------------------------------

CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\\n")
print(s.makefile().readline(), end="")
"""


def as_user(path: Path, request: dict[str, Any], *groups: str) -> dict[str, Any]:
    """A request from another process, as `nobody` with these supplementary groups."""
    proc = subprocess.run(
        ["/usr/bin/python3", "-c", CLIENT, str(path), json.dumps(request)],
        user="nobody",
        group="nogroup",
        extra_groups=["users", *groups],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    reply: dict[str, Any] = json.loads(proc.stdout)
    return reply


@pytest.fixture
def shared_socket_dir() -> Iterator[Path]:
    """A directory other users can reach (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="tablectl-roles-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user needs root")
async def test_roles_come_from_the_callers_groups(
    broker: PrivateBroker, tmp_path: Path, shared_socket_dir: Path
) -> None:
    sock = shared_socket_dir / "control.sock"
    async with simulated_table(
        broker,
        tmp_path / "data",
        access=AccessSection(technician=("staff",), dealer=("games",), floorperson=("audio",)),
        storage=StorageSection(data_dir=tmp_path / "data", control_socket=sock),
    ) as table:
        await table.wait_phase(Phase.BETTING)
        # The socket's group lets `users` connect; the roles come from the other groups.
        os.chown(sock, -1, grp.getgrnam("users").gr_gid)

        def ask(request: dict[str, Any], *groups: str) -> dict[str, Any]:
            return as_user(sock, request, *groups)

        nobody = await asyncio.to_thread(ask, {"cmd": "status"})
        assert nobody == {
            "ok": False,
            "error": "permission denied: status needs the dealer or floorperson or technician "
            "role; nobody holds none",
        }
        assert (await asyncio.to_thread(ask, {"cmd": "status"}, "games"))["ok"] is True
        denied = await asyncio.to_thread(ask, {"cmd": "devices"}, "games")
        assert "devices needs the technician role; nobody holds dealer" in denied["error"]
        assert (await asyncio.to_thread(ask, {"cmd": "devices"}, "staff"))["ok"] is True
        refused = await asyncio.to_thread(
            ask, {"cmd": "void", "reason": "shoe-jam", "by": "D9"}, "staff", "audio"
        )
        assert "void needs the dealer role" in refused["error"]
        assert table.state.round_id == 1 and table.state.phase is Phase.BETTING

        voided = await asyncio.to_thread(
            ask, {"cmd": "void", "reason": "shoe-jam", "by": "D9"}, "games"
        )
        assert voided["ok"] is True
        row = voided["data"]["journaled"][0]
        assert row["type"] == "round.voided" and row["data"]["by"] == "D9 (nobody)"
        status = await table.dealer(cmd="status")
        assert status["ok"] is True  # root holds every role


# --- devices and the shuffler's diagnostics -------------------------------------------------


async def test_devices_lists_each_device_and_the_broker(
    table: SimulatedTable, capsys: pytest.CaptureFixture[str]
) -> None:
    await table.wait_phase(Phase.BETTING)
    sock = str(table.config.storage.socket_path)
    assert await asyncio.to_thread(cli.main, ["devices", "--socket", sock, "--json"]) == 0
    data = Devices.model_validate_json(capsys.readouterr().out)
    shuffler = data.devices["shuffler"].serial
    assert shuffler is not None and shuffler.link == "up"
    assert shuffler.port == table.config.shuffler.port
    assert shuffler.last_fault is None and shuffler.counters["requests"] > 0
    assert data.broker.connected is True
    assert await asyncio.to_thread(cli.main, ["devices", "--socket", sock]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("shuffler   link up  model tablectl-sim-shuffler  serial_number SHF-0001")
        for line in out
    ), out
    assert any(line.startswith("gpio       link up  model -") for line in out), out
    assert any(line.startswith("broker     connected") for line in out), out
    assert not any("True" in line or "False" in line for line in out), out
    gpio = data.devices["gpio"].gpio
    assert gpio is not None and gpio.backend == "mock"


class ShufflerWithoutDiagnostics(ReferenceShuffler):
    """A vendor's driver that has no count or self-test message."""

    count_deck = None  # type: ignore[assignment]
    self_test = None  # type: ignore[assignment]


async def test_shuffler_diagnostics_need_a_driver_that_has_them(
    broker: PrivateBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The reference driver's entry point, made to build a shuffler without diagnostics: the
    # supervisor loads it by name as it would a vendor's.
    def without_diagnostics(settings: Any, context: DriverContext) -> ShufflerWithoutDiagnostics:
        return ShufflerWithoutDiagnostics(
            connector_for(settings.port, baudrate=settings.baudrate),
            context.emit,
            settings.link(),
            context.cursor,
        )

    monkeypatch.setattr(
        reference_driver, "DRIVER", replace(reference_driver.DRIVER, shuffler=without_diagnostics)
    )
    async with simulated_table(broker, tmp_path / "data") as table:
        sock = str(table.config.storage.socket_path)
        argv = ["shuffler", "count", "--socket", sock, "--json"]
        assert await asyncio.to_thread(cli.main, argv) == 1
        reply = json.loads(capsys.readouterr().out)
        assert reply["ok"] is False and "has no count or self-test" in reply["error"]


async def test_shuffler_count_and_self_test(
    table: SimulatedTable, capsys: pytest.CaptureFixture[str]
) -> None:
    # The reference shuffler's COUNT and SELF_TEST, answered by the simulator on its pty.
    await table.wait_phase(Phase.BETTING)
    # The round opened on the first deck; the second is shuffled while it plays.
    async with asyncio.timeout(5):
        while table.sim.shuffles < 2 or table.sim.state is ShufflerState.SHUFFLING:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    sock = str(table.config.storage.socket_path)

    def run(*argv: str) -> int:
        return cli.main([*argv, "--socket", sock])

    assert await asyncio.to_thread(run, "shuffler", "count", "--json") == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "counted": 52,
        "expected": 52,
        "matches": True,
    }
    table.sim.remove_card()
    assert await asyncio.to_thread(run, "shuffler", "count") == 1
    assert "counted 51 of 52 cards: MISCOUNT" in capsys.readouterr().out
    table.sim.load_full_deck()
    assert await asyncio.to_thread(run, "shuffler", "self-test") == 0
    assert "self-test passed: motors, sensors and counter ok" in capsys.readouterr().out
    table.sim.self_test_failure = "card counter sensor dirty"
    assert await asyncio.to_thread(run, "shuffler", "self-test", "--json") == 1
    assert json.loads(capsys.readouterr().out) == {
        "ok": False,
        "passed": False,
        "report": "FAILED: card counter sensor dirty",
    }

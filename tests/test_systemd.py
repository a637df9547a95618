"""The daemon under systemd: the unit passes `systemd-analyze verify` and rates 2.5 or lower
in `systemd-analyze security`; READY once the journal is open, STATUS= follows the links,
log lines carry journald priorities."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tablectl.simulators.broker import PrivateBroker

from .conftest import REPO
from .daemons import daemon_process
from .test_service import TABLECTL, table_toml

UNIT = REPO / "systemd" / "tablectl.service"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")


def unit_root(tmp_path: Path) -> Path:
    """A root holding the unit and the program it starts, as the package installs them."""
    root = tmp_path / "root"
    unit_dir = root / "usr/lib/systemd/system"
    # The system's own units, for the dependencies every service has (sysinit.target...).
    shutil.copytree("/usr/lib/systemd/system", unit_dir, symlinks=True)
    shutil.copy(UNIT, unit_dir)
    exec_start = re.search(r"^ExecStart=(\S+)", UNIT.read_text(), re.MULTILINE)
    assert exec_start is not None
    program = root / exec_start[1].lstrip("/")
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    return root


@needs_analyze
def test_the_unit_verifies(tmp_path: Path) -> None:
    root = unit_root(tmp_path)
    proc = subprocess.run(
        # --man=no: the man page the unit names is installed by the package (test_deb.py).
        [str(ANALYZE), "verify", "--man=no", f"--root={root}", "tablectl.service"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr


@needs_analyze
def test_the_unit_is_hardened(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(ANALYZE), "security", "--offline=yes", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Overall exposure level for tablectl.service: (\d+\.\d)", proc.stdout)
    assert found is not None, proc.stdout + proc.stderr
    assert float(found[1]) <= 2.5, proc.stdout


def test_the_unit_starts_what_the_package_installs() -> None:
    text = UNIT.read_text()
    assert "ExecStart=/usr/bin/tablectl run\n" in text
    assert "/usr/local" not in text and "/opt/" not in text


def _unit_setting(name: str) -> list[str]:
    return re.findall(rf"^{name}=(.*)$", UNIT.read_text(), re.MULTILINE)


def test_every_device_rule_gives_the_device_to_the_service_user_alone() -> None:
    """udev and the unit agree: each device node the daemon opens belongs to the unit's User=
    with mode 0600, and no group, seat ACL (uaccess) or supplementary group lets anyone
    else reach the shoe, the shuffler or the GPIO chips."""
    (user,) = _unit_setting("User")
    assert _unit_setting("SupplementaryGroups") == []
    sysusers = (REPO / "systemd/tablectl.sysusers").read_text()
    assert re.search(rf"^u {user} ", sysusers, re.MULTILINE)
    subsystems = set()
    for rules in (REPO / "systemd").glob("*.rules"):
        for line in rules.read_text().splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            subsystems.add(re.search(r'SUBSYSTEM=="(\w+)"', line)[1])  # type: ignore[index]
            assert f'OWNER="{user}"' in line and 'MODE="0600"' in line, line
            assert "GROUP=" not in line and "uaccess" not in line, line
    assert {"tty", "usb", "gpio"} <= subsystems  # shuffler and CDC-ACM shoe, USB shoe, chips
    # And the unit lets the daemon open what the rules hand it.
    allowed = {d.split()[0] for d in _unit_setting("DeviceAllow")}
    assert {"char-ttyUSB", "char-ttyACM", "char-usb_device", "char-gpiochip"} <= allowed


async def test_ready_then_status_follows_the_links(tmp_path: Path, broker: PrivateBroker) -> None:
    argv = (str(TABLECTL), "run", "--config", "CONFIG")
    async with daemon_process(tmp_path, broker, *argv) as daemon:
        assert daemon.ready.startswith("READY=1\nSTATUS=")
        assert (tmp_path / "data" / "tablectl.sqlite3").exists()  # the journal is open
        async with asyncio.timeout(30):
            status = daemon.ready
            while not ("shuffler link up" in status and "broker connected" in status):
                status = await daemon.notification()
            daemon.sim.line.drop = 1_000_000  # the shuffler falls silent
            while "shuffler link down" not in status:
                status = await daemon.notification()
            assert status.startswith("STATUS=") and "broker connected" in status
            daemon.sim.line.drop = 0
            broker.stop()
            while "broker disconnected" not in status:
                status = await daemon.notification()
        code, _ = await daemon.stop()
    assert code == 0


def journal_stream() -> tuple[int, int, str]:
    """A pipe standing in for journald's stream, and $JOURNAL_STREAM naming it."""
    read_end, write_end = os.pipe()
    st = os.fstat(write_end)
    return read_end, write_end, f"{st.st_dev}:{st.st_ino}"


def test_log_lines_carry_journald_priorities(tmp_path: Path, broker: PrivateBroker) -> None:
    sim_port = "socket://127.0.0.1:9"  # nobody there: the shuffler link warns
    config = table_toml(tmp_path, sim_port, broker)
    (tmp_path / "blocker").write_text("where the data directory should be")
    read_end, write_end, stream = journal_stream()
    env = {**os.environ, "JOURNAL_STREAM": stream}
    # A daemon that cannot start (its data directory is a file): an error, priority 3.
    config.write_text(config.read_text().replace(str(tmp_path / "data"), str(tmp_path / "blocker")))
    proc = subprocess.run(
        [str(TABLECTL), "run", "--config", str(config)],
        env=env,
        stderr=write_end,
        timeout=60,
        check=False,
    )
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        lines = pipe.read().splitlines()
    assert proc.returncode == 1
    assert lines and all(re.match(r"<[0-7]>", line) for line in lines), lines
    assert any(line.startswith("<3>tablectl: not starting: storage.data_dir") for line in lines)


def test_library_and_daemon_logs_under_journald(tmp_path: Path) -> None:
    """Info is <6>, warnings <4>, errors <3>; Python's logging (asyncio, psycopg) too."""
    read_end, write_end, stream = journal_stream()
    code = (
        "import logging, structlog\n"
        "from tablectl.util import logs\n"
        "logs.configure('DEBUG')\n"
        "log = structlog.get_logger('t')\n"
        "log.debug('d', n=1); log.info('i'); log.warning('w', why='x'); log.error('e')\n"
        "logging.getLogger('asyncio').error('socket.accept() out of system resource')\n"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "JOURNAL_STREAM": stream},
        stderr=write_end,
        check=True,
        timeout=60,
    )
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        lines = pipe.read().splitlines()
    assert lines == [
        "<7>event='d' n=1",
        "<6>event='i'",
        "<4>event='w' why='x'",
        "<3>event='e'",
        "<3>asyncio: socket.accept() out of system resource",
    ]

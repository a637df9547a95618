"""The link controller's unit: it verifies, and rates 2.5 or lower in systemd-analyze security."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UNIT = REPO / "systemd" / "tablectl-link.service"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")


@needs_analyze
def test_the_link_unit_verifies(tmp_path: Path) -> None:
    root = tmp_path / "root"
    unit_dir = root / "usr/lib/systemd/system"
    shutil.copytree("/usr/lib/systemd/system", unit_dir, symlinks=True)
    shutil.copy(UNIT, unit_dir)
    program = root / "opt/tablectl/venv/bin/tablectl"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    proc = subprocess.run(
        [str(ANALYZE), "verify", f"--root={root}", UNIT.name],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr


@needs_analyze
def test_the_link_unit_is_hardened() -> None:
    proc = subprocess.run(
        [str(ANALYZE), "security", "--offline=yes", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Overall exposure level for tablectl-link.service: (\d+\.\d)", proc.stdout)
    assert found is not None, proc.stdout + proc.stderr
    assert float(found[1]) <= 2.5, proc.stdout


def test_the_link_unit_runs_the_link_controller() -> None:
    text = UNIT.read_text()
    assert (
        "ExecStart=/opt/tablectl/venv/bin/tablectl link run --config /etc/tablectl/link.toml\n"
        in text
    )
    assert "RestartPreventExitStatus=2\n" in text

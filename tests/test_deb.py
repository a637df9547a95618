"""The Debian package a table PC installs: built by `make deb`'s script, inspected with
dpkg-deb, installed into a scratch root, its unit verified and rated there."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

DPKG_DEB = shutil.which("dpkg-deb")
SYSTEM_PYTHON = Path("/usr/bin/python3")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(DPKG_DEB is None, reason="dpkg-deb is not installed"),
    pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no /usr/bin/python3 to build on"),
]
VENV = "opt/tablectl/venv"


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("deb")
    proc = subprocess.run(
        [sys.executable, str(REPO / "packaging/build_deb.py"), "--out", str(work / "dist")],
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=work,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.exists() and path.name.startswith("tablectl_0.1.0_")
    return path


def dpkg_deb(*argv: str) -> str:
    assert DPKG_DEB is not None
    return subprocess.run([DPKG_DEB, *argv], capture_output=True, text=True, check=True).stdout


def test_the_package_holds_everything_a_table_pc_needs(deb: Path) -> None:
    listing = dpkg_deb("--contents", str(deb))
    entries = {}
    for line in listing.splitlines():
        mode, owner, *_rest, path = line.split(maxsplit=5)
        entries[path.split(" -> ")[0].removeprefix(".")] = (mode, owner)
    for path in [
        f"/{VENV}/bin/tablectl",
        "/usr/bin/tablectl",
        "/etc/tablectl/examples/three-card-poker.toml",
        "/etc/tablectl/examples/ultimate-texas-holdem.toml",
        "/etc/tablectl/examples/let-it-ride.toml",
        "/usr/lib/systemd/system/tablectl.service",
        "/usr/lib/sysusers.d/tablectl.conf",
        "/usr/lib/tmpfiles.d/tablectl.conf",
        "/usr/lib/udev/rules.d/99-tablectl.rules",
        "/usr/share/doc/tablectl/README.md",
        "/usr/share/doc/tablectl/LICENSE",
        "/usr/share/doc/tablectl/copyright",
    ]:
        assert path in entries, path
    assert all(owner == "root/root" for _, owner in entries.values())
    for rules in (REPO / "systemd").glob("*.rules"):  # the shoe's and any later ones too
        assert f"/usr/lib/udev/rules.d/{rules.name}" in entries
    if (REPO / "config" / "mosquitto").is_dir():
        assert any(p.startswith("/etc/tablectl/examples/mosquitto/") for p in entries)
    assert "/usr/bin/tablectl -> /opt/tablectl/venv/bin/tablectl" in listing

    control = dpkg_deb("--field", str(deb))
    assert re.search(
        r"^Depends: python3 \(>= 3\.\d+\), python3 \(<< 3\.\d+\), systemd", control, re.M
    )
    info = dpkg_deb("--info", str(deb), "conffiles").split()
    assert "/etc/tablectl/examples/three-card-poker.toml" in info


@pytest.fixture(scope="module")
def installed(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Installed with dpkg into a scratch root (maintainer scripts run against it), or, when
    not root, unpacked there."""
    root = tmp_path_factory.mktemp("root")
    if os.geteuid() == 0 and shutil.which("dpkg"):
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"):
            (root / d).mkdir(parents=True)
        for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
            (root / f).touch()
        subprocess.run(
            [
                "dpkg",
                f"--root={root}",
                "--force-script-chrootless",  # postinst runs here, with $DPKG_ROOT set
                "--force-depends",  # python3, systemd, udev are the host's, not the root's
                "--log=/dev/null",
                "--install",
                str(deb),
            ],
            check=True,
            capture_output=True,
        )
    else:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


def test_the_installed_program_runs_from_its_venv(installed: Path) -> None:
    venv = installed / VENV
    for script in ("tablectl", "pip"):
        first = (venv / "bin" / script).read_text().splitlines()[0]
        assert first == f"#!/{VENV}/bin/python3", first
    assert str(installed) not in (venv / "pyvenv.cfg").read_text()
    example = installed / "etc/tablectl/examples/three-card-poker.toml"
    proc = subprocess.run(
        [
            str(venv / "bin/python"),
            "-c",
            "import sys, tablectl.drivers.shuffler, tablectl.simulators.shuffler\n"
            "from tablectl.cli import main\n"
            "sys.exit(main(['config', 'check', sys.argv[1], '--json']))",
            str(example),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=installed,  # not the checkout: its tablectl/ would shadow the installed one
    )
    assert proc.returncode == 0, proc.stderr
    assert '"ok": true' in proc.stdout
    assert not list(venv.glob("lib/python*/site-packages/drivers"))  # no generic top-level names


@pytest.mark.skipif(os.geteuid() != 0, reason="dpkg --root runs the maintainer scripts as root")
def test_the_maintainer_scripts_create_users_groups_and_private_directories(
    installed: Path,
) -> None:
    groups = {line.split(":")[0] for line in (installed / "etc/group").read_text().splitlines()}
    assert {"tablectl", "gpio", "tablectl-technician", "tablectl-dealer", "tablectl-floor"} <= (
        groups
    )
    passwd = (installed / "etc/passwd").read_text()
    assert re.search(r"^tablectl:x:\d+:\d+:.*:/var/lib/tablectl:/usr/sbin/nologin$", passwd, re.M)
    for path, mode in (("var/lib/tablectl", 0o750), ("etc/tablectl", 0o750)):
        assert stat.S_IMODE((installed / path).stat().st_mode) == mode, path
    # The table's records-signing key, made at install: the table's user alone reads it.
    key = installed / "var/lib/tablectl/records-signing.key"
    user = re.search(r"^tablectl:x:(\d+):", passwd, re.M)
    assert user is not None
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_uid == int(user[1])
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_installed_unit_verifies_and_is_hardened(installed: Path) -> None:
    units = installed / "usr/lib/systemd/system"
    # The system's own units, for the dependencies every service has (sysinit.target...).
    shutil.copytree("/usr/lib/systemd/system", units, symlinks=True, dirs_exist_ok=True)
    verify = subprocess.run(
        ["systemd-analyze", "verify", f"--root={installed}", "tablectl.service"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0 and verify.stderr == "", verify.stderr
    security = subprocess.run(
        ["systemd-analyze", "security", "--offline=yes", str(units / "tablectl.service")],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Overall exposure level for tablectl.service: (\d+\.\d)", security.stdout)
    assert found is not None and float(found[1]) <= 2.5, security.stdout

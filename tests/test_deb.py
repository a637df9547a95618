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
VENV = "usr/lib/tablectl/venv"
DOC = "/usr/share/doc/tablectl"
LINTIAN = shutil.which("lintian")
# What a library's test program is called; LIBRARY_CODE: names like it that are run-time code
# (tablectl's walk tests are a verb; structlog imports its testing module at start).
TEST_PROGRAM = re.compile(
    r"/(tests?|testing)/|/test[^/]*$|/conftest\.py$|_test[^/]*$|pytest_plugin|_imagingtk|ImageTk"
)
LIBRARY_CODE = (
    "/tablectl/cli/test.py",
    "/tablectl/service/walk_test.py",
    "/structlog/testing.py",
)


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
    # `make deb` says what it is doing: a line per step, then the package and its size.
    steps = [line for line in proc.stderr.splitlines() if line.startswith("build_deb [")]
    assert len(steps) >= 5 and steps[-1].startswith("build_deb [7/7]"), proc.stderr[-3000:]
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
        f"/{VENV}/bin/python3",
        "/usr/bin/tablectl",
        "/usr/lib/systemd/system/tablectl.service",
        "/usr/lib/sysusers.d/tablectl.conf",
        "/usr/lib/tmpfiles.d/tablectl.conf",
        "/usr/lib/udev/rules.d/99-tablectl.rules",
        "/usr/share/man/man1/tablectl.1.gz",
        "/usr/share/bash-completion/completions/tablectl",
        "/usr/share/zsh/vendor-completions/_tablectl",
        f"{DOC}/README.md",
        f"{DOC}/CHANGELOG.md",
        f"{DOC}/changelog.gz",
        f"{DOC}/copyright",
    ]:
        assert path in entries, path
    assert all(owner == "root/root" for _, owner in entries.values())
    for rules in (REPO / "systemd").glob("*.rules"):  # the shoe's and any later ones too
        assert f"/usr/lib/udev/rules.d/{rules.name}" in entries
    # Every doc and example config, readable by anyone (not under /etc/tablectl, 0750).
    for folder, dest in (("docs", f"{DOC}/docs"), ("config", f"{DOC}/examples")):
        for src in (REPO / folder).rglob("*"):
            if src.is_file():
                assert f"{dest}/{src.relative_to(REPO / folder)}" in entries, src
    assert f"{DOC}/docs/asyncapi.json" in entries
    assert not any(p.startswith("/etc/") for p in entries if not p.endswith("/"))
    # Nothing a table PC never runs: build tools, activate scripts, bytecode, other
    # packages' commands.
    venv_bin = {p.rsplit("/", 1)[1] for p in entries if p.startswith(f"/{VENV}/bin/")}
    assert venv_bin <= {"python", "python3", "python3.11", "python3.12", ""}, venv_bin
    for banned in ("/pip/", "/setuptools/", "__pycache__", ".pyc", "Activate.ps1", "gpiozerocli"):
        assert not [p for p in entries if banned in p], banned
    # No library's test programs (reportlab's test modules, multidict's _testcapi, Pillow's
    # Tk binding ...): pruned by build_deb.py.
    tests = [p for p in entries if TEST_PROGRAM.search(p) and not p.endswith(LIBRARY_CODE)]
    assert not tests, tests

    control = dpkg_deb("--field", str(deb))
    depends = re.search(r"^Depends: (.*)$", control, re.M)
    assert depends is not None
    relations = [d.strip() for d in depends[1].split(",")]
    assert re.fullmatch(r"python3 \(>= 3\.\d+\)", relations[0])
    assert re.fullmatch(r"python3 \(<< 3\.\d+\)", relations[1])
    names = {r.split()[0] for r in relations}
    # libusb: pyusb loads it for the USB shoe; libc: pydantic-core's and gpiod's extensions.
    assert {"libusb-1.0-0", "libc6", "systemd", "udev"} <= names, relations
    assert "mosquitto-clients" not in control  # nothing in tablectl runs it


def dpkg(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """dpkg on a scratch root, its maintainer scripts run here with $DPKG_ROOT set."""
    return subprocess.run(
        [
            "dpkg",
            f"--root={root}",
            "--force-script-chrootless",  # the scripts run here, with $DPKG_ROOT set
            "--force-depends",  # python3, systemd, udev are the host's, not the root's
            "--log=/dev/null",
            *argv,
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def scratch_root(deb: Path, root: Path) -> Path:
    """The package installed with dpkg into root (maintainer scripts run against it), or,
    when not root, unpacked there."""
    # The python3 the package depends on: the host's, where the root would have its own.
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/python3").symlink_to(SYSTEM_PYTHON)
    if os.geteuid() == 0 and shutil.which("dpkg"):
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"):
            (root / d).mkdir(parents=True)
        for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
            (root / f).touch()
        dpkg(root, "--install", str(deb))
    else:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


@pytest.fixture(scope="module")
def installed(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scratch_root(deb, tmp_path_factory.mktemp("root"))


def test_the_installed_program_runs_from_its_venv(installed: Path) -> None:
    venv = installed / VENV
    wrapper = (installed / "usr/bin/tablectl").read_text()
    assert (
        wrapper.startswith("#!/bin/sh\n") and f"exec /{VENV}/bin/python3 -I -m tablectl" in wrapper
    )
    assert str(installed) not in (venv / "pyvenv.cfg").read_text()
    example = installed / DOC.lstrip("/") / "examples/three-card-poker.toml"
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
    assert {"tablectl", "tablectl-technician", "tablectl-dealer", "tablectl-floor"} <= groups
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
        # Documentation=man:tablectl(1): man must find the page the package installed.
        env={**os.environ, "MANPATH": str(installed / "usr/share/man")},
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


@pytest.mark.skipif(os.geteuid() != 0, reason="dpkg --root runs the maintainer scripts as root")
def test_postinst_compiles_the_bytecode_and_prerm_removes_it(installed: Path) -> None:
    caches = list((installed / VENV).rglob("__pycache__"))
    assert any(c.parent.name == "tablectl" for c in caches)  # postinst compiled them
    # As dpkg runs them: deb-systemd-helper refuses to run for anything else.
    env = {**os.environ, "DPKG_ROOT": str(installed), "DPKG_MAINTSCRIPT_PACKAGE": "tablectl"}
    script = installed / "var/lib/dpkg/info/tablectl.prerm"
    proc = subprocess.run(
        [str(script), "upgrade", "0.1.0"], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout == proc.stderr == "", proc
    assert not list((installed / VENV).rglob("__pycache__"))
    postinst = installed / "var/lib/dpkg/info/tablectl.postinst"
    proc = subprocess.run(
        [str(postinst), "configure", "0.1.0"], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout == proc.stderr == "", proc  # silent
    assert list((installed / VENV).rglob("__pycache__"))


@pytest.mark.skipif(os.geteuid() != 0, reason="dpkg --root runs the maintainer scripts as root")
@pytest.mark.skipif(shutil.which("systemctl") is None, reason="no systemctl to enable the unit")
def test_purge_removes_the_link_systemctl_enable_made(
    deb: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The README's `systemctl enable` makes multi-user.target.wants/tablectl.service; the
    postinst records the unit's links with deb-systemd-helper, as dh_installsystemd does, so
    a purge removes it (it was left behind). The journal's directory and the key stay."""
    root = scratch_root(deb, tmp_path_factory.mktemp("purge"))
    state = root / "var/lib/systemd/deb-systemd-helper-enabled"
    assert (state / "tablectl.service.dsh-also").exists()  # registered, not enabled
    wants = root / "etc/systemd/system/multi-user.target.wants/tablectl.service"
    assert not wants.exists() and not wants.is_symlink()
    enable = ["systemctl", f"--root={root}", "enable", "tablectl.service"]
    subprocess.run(enable, check=True, capture_output=True)
    assert wants.is_symlink()
    dpkg(root, "--remove", "tablectl")  # removed, not purged: the administrator's choice kept
    assert wants.is_symlink()
    purged = dpkg(root, "--purge", "tablectl")
    assert "deb-systemd-helper" not in purged.stderr, purged.stderr
    assert not wants.is_symlink() and not list(root.glob("etc/systemd/system/*/tablectl*"))
    assert not list(state.glob("**/tablectl*"))
    assert (root / "var/lib/tablectl/records-signing.key").exists()  # never removed


@pytest.mark.skipif(LINTIAN is None, reason="lintian is not installed (make lintian installs it)")
def test_lintian_finds_no_error_and_every_warning_is_explained(deb: Path) -> None:
    """Errors are fixed, never overridden; a warning that stands has an override in
    packaging/deb/lintian-overrides with a comment giving its reason."""
    assert LINTIAN is not None
    proc = subprocess.run(
        [LINTIAN, "--no-override", "--tag-display-limit", "0", str(deb)],
        capture_output=True,
        text=True,
        check=False,
        cwd=deb.parent,
    )
    assert proc.returncode in (0, 2), proc.stderr  # 2: tags found; anything else: no verdict
    errors = [line for line in proc.stdout.splitlines() if line.startswith("E:")]
    assert not errors, "\n".join(errors)
    overrides = (REPO / "packaging/deb/lintian-overrides").read_text().splitlines()
    explained = set()
    for i, line in enumerate(overrides):
        if line.startswith("tablectl:"):
            assert overrides[i - 1].startswith("#"), f"an override without its reason: {line}"
            explained.add(line.split()[1])
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("W:")]
    assert all(w.split()[2] in explained for w in warnings), "\n".join(warnings)

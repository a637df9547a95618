"""The README's install steps, in order, on a fresh Debian 12: a root made by debootstrap
(minbase, with what a Debian 12 server has: sudo, python3, systemd, udev), entered with
chroot in a mount and PID namespace of its own (unshare), so every process it starts ends
with it. A user alice with sudo runs each line of the README's install block in a login
shell of its own (a new login each time: new groups count, as after "log in again"), then
the lines that try the package on simulated devices; `config check`, `--version` and
`journal verify` must answer as alice, a member of the tablectl group.

Minutes the first time (debootstrap downloads and unpacks Debian); the root is kept as a
tarball in ~/.cache/tablectl/ (TABLECTL_TEST_CACHE) and unpacked in seconds after that.
Not in the default run (marker `install`): `make test-install`, which .ci/run calls.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import REPO

pytestmark = [
    pytest.mark.install,
    pytest.mark.skipif(os.geteuid() != 0, reason="debootstrap and chroot need root"),
    pytest.mark.skipif(shutil.which("debootstrap") is None, reason="debootstrap is not installed"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare is not installed"),
]
SUITE = "bookworm"
MIRROR = os.environ.get("TABLECTL_TEST_MIRROR", "http://deb.debian.org/debian")
CACHE = Path(os.environ.get("TABLECTL_TEST_CACHE", Path.home() / ".cache" / "tablectl"))
# What a Debian 12 server has beyond minbase (the installer's "standard system utilities").
INCLUDE = "sudo,python3,systemd,udev,procps,ca-certificates"
BASE = CACHE / f"debian-{SUITE}-{hashlib.sha256(INCLUDE.encode()).hexdigest()[:8]}-root.tar"
USER = "alice"


def readme_block(marker: str) -> list[str]:
    """The shell lines of the README block after `<!-- marker: ... -->`, comments cut."""
    text = (REPO / "README.md").read_text()
    found = re.search(rf"<!-- {marker}:[^>]*-->\n```sh\n(.*?)```", text, re.S)
    assert found is not None, f"README.md has no {marker} block"
    lines = []
    for raw in found[1].splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        if line:
            lines.append(line)
    return lines


def _base_root(work: Path) -> Path:
    """A fresh Debian 12 root in work/root, from the cached tarball (made once)."""
    root = work / "root"
    if not BASE.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        fresh = work / "bootstrap"
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={INCLUDE}",
                SUITE,
                str(fresh),
                MIRROR,
            ],
            check=True,
            capture_output=True,
            timeout=1800,
        )
        partial = BASE.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(fresh), "-cf", str(partial), "."], check=True)
        partial.rename(BASE)
        shutil.rmtree(fresh)
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xf", str(BASE)], check=True)
    return root


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, str(REPO / "packaging/build_deb.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def fresh_debian(tmp_path_factory: pytest.TempPathFactory, deb: Path) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("install")
    root = _base_root(work)
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")  # apt reaches the mirror
    home = root / "home" / USER
    setup = (
        f"useradd --create-home --shell /bin/bash {USER} && "
        f"echo '{USER} ALL=(ALL:ALL) NOPASSWD: ALL' > /etc/sudoers.d/{USER} && "
        # sudoedit's editor: it saves the file unchanged (the example passes as it is)
        f"echo 'export EDITOR=true' >> /home/{USER}/.profile && "
        # alice answers apt's "Do you want to continue? [Y/n]" with yes
        "echo 'APT::Get::Assume-Yes \"true\";' > /etc/apt/apt.conf.d/90-alice-says-yes && "
        # the machine knows its own name (sudo looks it up)
        'echo "127.0.1.1 $(hostname)" >> /etc/hosts'
    )
    chroot(root, setup)
    shutil.copy(deb, home / deb.name)
    yield root
    shutil.rmtree(work, ignore_errors=True)


def chroot(
    root: Path, script: str, *, timeout: float = 600, network: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a shell script as root in the fresh system: /dev, /proc and /run of its own,
    every process it leaves ended with the namespace; network=False: a network namespace
    of its own too (no broker but its own, nothing reaches this machine's services)."""
    inner = (
        f"mount --rbind /dev {root}/dev && mount -t proc proc {root}/proc && "
        f"mount -t tmpfs tmpfs {root}/run && mount -t tmpfs tmpfs {root}/tmp && "
        f"exec chroot {root} /bin/sh -c {shlex.quote(script)}"
    )
    if not network:
        inner = f"ip link set lo up 2>/dev/null; {inner}"
    spaces = ["--mount", "--pid", "--fork", "--propagation", "private"]
    return subprocess.run(
        ["unshare", *spaces, *([] if network else ["--net"]), "sh", "-c", inner],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root"},
    )


def as_user(line: str) -> str:
    """A README line as alice types it, in a login shell of its own."""
    return f"su - {USER} -c {shlex.quote(line)}"


def test_the_readme_install_steps_work_in_order_on_a_fresh_debian(fresh_debian: Path) -> None:
    started = time.monotonic()
    install = readme_block("install-steps")
    try_it = readme_block("try-steps")
    # A fresh machine's package lists are current (the installer, then unattended updates).
    script = ["set -e", "apt-get update -qq", f"cd /home/{USER}"]
    for i, line in enumerate(install):
        if line.startswith("su - "):
            continue  # "log in again": every line below is a new login already
        # No systemd as PID 1 in a chroot: systemctl enables the unit and says it cannot
        # start it, journalctl finds no journal, the daemon is not there for status;
        # each must still end without a traceback.
        may_fail = re.match(r"(sudo )?(systemctl|journalctl)\b|tablectl (status|devices)", line)
        script.append(f"echo '>>> {i}: {line}'")
        script.append(as_user(line) + (' || echo "(exit $?)"' if may_fail else ""))
    # The checks the issue names, as alice: a member of tablectl (and technician) now.
    script += [
        "echo '>>> checks'",
        as_user("id -nG"),
        as_user("tablectl config check --json"),
        as_user("tablectl --version"),
        "systemctl is-enabled tablectl",
    ]
    installed = chroot(fresh_debian, "\n".join(script), timeout=1200)
    # Trying it on simulated devices, on no network: the daemon runs, is stopped, and the
    # journal it left is verified by alice with the daemon stopped (read-only).
    script = ["set -e", f"cd /home/{USER}"]
    for line in try_it:
        script.append(f"echo '>>> {line}'")
        if line.startswith("tablectl status"):
            # the daemon needs a moment to open its journal: ask as a person would, again
            script.append(
                "for i in $(seq 1 60); do "
                + as_user(line + " >/dev/null 2>&1")
                + " && break; sleep 0.5; done; "
                + as_user(line)
            )
        elif line.startswith("sudo pkill"):
            script.append(as_user(line) + "; sleep 3")
        else:
            script.append(as_user(line))
    script.append(as_user("tablectl journal verify --json --config " + _sim_config(try_it)))
    tried = chroot(fresh_debian, "\n".join(script), timeout=600, network=False)
    out = "\n".join(p.stdout + p.stderr for p in (installed, tried))
    elapsed = time.monotonic() - started
    print(f"install test: {elapsed:.0f} s in the fresh root\n{out[-6000:]}")
    assert installed.returncode == 0 and tried.returncode == 0, out[-6000:]
    assert "Traceback" not in out and "internal error" not in out, out[-6000:]
    assert "Failed to send reload request" not in out  # maintainer scripts are silent
    assert re.search(rf"^{USER} .*\btablectl\b.*\btablectl-technician\b", out, re.M), out
    assert '"ok": true' in out and '"game": "three-card-poker"' in out  # config check
    assert re.search(r"^tablectl \d+\.\d+\.\d+", out, re.M)  # --version
    assert "enabled" in out  # systemctl enable, offline
    assert "round 1" in out or "phase" in out  # status from the simulated table's daemon
    verified = re.findall(r'^\{"ok": ?true,.*?"rows": ?(\d+)', out, re.M)
    assert verified and int(verified[-1]) > 0, out[-3000:]  # journal verify, daemon stopped


def _sim_config(lines: list[str]) -> str:
    for line in lines:
        if "--config " in line:
            return line.split("--config ", 1)[1].split()[0]
    raise AssertionError("the try-steps name no config")


def test_purge_leaves_no_unit_link_behind(fresh_debian: Path, deb: Path) -> None:
    """After the README's `systemctl enable`, `apt-get purge` removes the link it made
    (multi-user.target.wants/tablectl.service): the postinst records the unit's links with
    deb-systemd-helper, as dh_installsystemd does. The journal's directory and the key stay."""
    wants = "/etc/systemd/system/multi-user.target.wants/tablectl.service"
    script = [
        "set -e",
        f"apt-get install -y -qq /home/{USER}/{deb.name} >/dev/null",  # done already, or now
        "systemctl enable tablectl 2>&1",
        f"test -L {wants} && echo enabled-link",
        "apt-get remove -y -qq tablectl >/dev/null",
        f"test -L {wants} && echo kept-on-remove",
        "apt-get purge -y -qq tablectl >/dev/null",
        f"if [ -e {wants} ] || [ -L {wants} ]; then echo LEFT-BEHIND; fi",
        "ls /var/lib/systemd/deb-systemd-helper-enabled/ | grep tablectl || echo no-state-left",
        "test -e /var/lib/tablectl/records-signing.key && echo key-kept",
    ]
    done = chroot(fresh_debian, "\n".join(script), timeout=900)
    out = done.stdout + done.stderr
    print(out[-3000:])
    assert done.returncode == 0, out[-3000:]
    assert "enabled-link" in out and "kept-on-remove" in out, out[-3000:]
    assert "LEFT-BEHIND" not in out and "no-state-left" in out, out[-3000:]
    assert "key-kept" in out, out[-3000:]

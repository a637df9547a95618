"""What a technician sees on a real table PC when something is not theirs to touch: a
permission is a message naming the file, its owner and group and the command that lets
them in, never an "internal error"; the journal's readers never write; `run` creates
nothing it would leave to the wrong user; argument errors are usage errors (exit 2).

The tests that switch to the user nobody run a copy of tablectl and its libraries staged
where nobody can reach it: the checkout itself may sit where nobody may enter (a clone
under /root, or in a `mktemp -d` directory)."""

from __future__ import annotations

import grp
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tablectl
from tablectl import cli
from tablectl.cli.control import print_status
from tablectl.config import load_config
from tablectl.core.table import Phase
from tablectl.service.preflight import data_dir_problems
from tablectl.status import BrokerStats, GpioStatus, Hit, JournalStats, Status
from tablectl.store.journal import Store

from .conftest import EXAMPLE_CONFIG, REPO

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switches to another user (setpriv)")
NOBODY = 65534
GROUP = "staff"  # a group every Debian system has, standing in for tablectl's
AsUser = Callable[..., subprocess.CompletedProcess[str]]


def reachable_by_others(path: Path) -> bool:
    """Whether a user with no group of ours can walk down to path (o+x all the way)."""
    return all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


def public_tmp() -> Path:
    """A temporary directory's parent that every user can enter ($TMPDIR may be private)."""
    for where in (Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")):
        if where.is_dir() and reachable_by_others(where):
            return where
    pytest.skip("no temporary directory every user may enter (/tmp, /var/tmp)")


def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where it can be (instant, no space), else a copy: either way a file that
    nobody reaches through the staged directory, whatever the checkout's own modes."""
    real = os.path.realpath(src)  # link() on Linux links a symlink itself, not its file
    try:
        os.link(real, dst)
    except OSError:
        shutil.copy2(real, dst)


def _stage(top: Path) -> Path:
    """tablectl (its strict editable install's link tree, resolved) and every library of
    this environment, as plain files under top."""
    site = top / "site-packages"
    skip = shutil.ignore_patterns("__editable__*", "tablectl")  # bytecode too: no compiling
    paths = sysconfig.get_paths()
    for lib in dict.fromkeys((paths["purelib"], paths["platlib"])):
        shutil.copytree(lib, site, ignore=skip, copy_function=_link_or_copy, dirs_exist_ok=True)
    package = Path(tablectl.__file__).parent  # tablectl.drivers, .simulators: links inside
    shutil.copytree(package, site / "tablectl", ignore=skip, copy_function=_link_or_copy)
    for path in (top, *top.rglob("*")):
        if path.is_dir():
            path.chmod(0o755)
    return site


def _interpreters() -> list[str]:
    """Pythons of this version, the system's first (its standard library is everyone's)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    found = [f"/usr/bin/python{version}", getattr(sys, "_base_executable", sys.executable)]
    found.append(os.path.realpath(sys.executable))
    return [p for p in dict.fromkeys(found) if Path(p).is_file()]


def _as_nobody(argv: list[str], groups: str) -> subprocess.CompletedProcess[str]:
    who = ["--groups", groups] if groups else ["--clear-groups"]
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", *who, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/", "LANG": "C.UTF-8"},
        cwd="/",
    )


@pytest.fixture(scope="module")
def as_user() -> Iterator[AsUser]:
    """tablectl as the user nobody, in the groups named (none: --clear-groups), run from a
    copy staged under a directory every user may enter; skipped, saying why, when no Python
    of this version is one nobody may run."""
    if os.geteuid() != 0:
        pytest.skip("switches to another user (setpriv)")
    top = Path(tempfile.mkdtemp(prefix="tablectl-staged-", dir=public_tmp()))
    try:
        site = _stage(top)
        # -I -S: none of the user's or the system's site-packages, nor the current directory;
        # the staged ones alone (their .pth files read, as at a normal start).
        runner = (
            f"import site, sys; site.addsitedir({str(site)!r}); "
            "from tablectl.cli import main; sys.exit(main())"
        )
        tried = []
        for python in _interpreters():
            command = [python, "-I", "-S", "-c", runner]
            probe = _as_nobody([*command, "--version"], "")
            if probe.returncode == 0 and probe.stdout.startswith("tablectl "):
                break
            tried.append(f"{python}: {(probe.stderr or probe.stdout).strip()[-300:]}")
        else:
            pytest.skip("no Python that the user nobody may run: " + "; ".join(tried))

        def run(*argv: str, groups: str = "") -> subprocess.CompletedProcess[str]:
            return _as_nobody([*command, *argv], groups)

        yield run
    finally:
        shutil.rmtree(top)


def test_the_staged_tablectl_is_reachable_wherever_the_checkout_is(as_user: AsUser) -> None:
    """What nobody runs is this checkout's code, from a directory nobody may enter."""
    proc = as_user("config", "check", "--json", "/nonexistent/table.toml")
    assert proc.returncode == 2 and json.loads(proc.stdout)["ok"] is False, proc
    where = as_user("--version")
    assert where.returncode == 0 and where.stdout.startswith("tablectl "), where


@pytest.fixture
def journal_dir() -> Iterator[Path]:
    """A table's data directory as the package leaves it: 0750 root:GROUP, the database
    0640, the daemon stopped (no WAL). Outside pytest's 0700 tmp, so others can look."""
    top = Path(tempfile.mkdtemp(prefix="tablectl-perm-", dir=public_tmp()))
    top.chmod(0o755)
    data = top / "data"
    store = Store(data / "tablectl.sqlite3", boot_id="b1")
    store.commit('{"x": 1}', [("table.opened", {"round_id": 1}), ("round.voided", {"n": 2})])
    store.close()
    assert not (data / "tablectl.sqlite3-wal").exists()  # a clean stop checkpoints it away
    gid = grp.getgrnam(GROUP).gr_gid
    for path in (data, *data.iterdir()):
        os.chown(path, 0, gid)
    data.chmod(0o750)
    (data / "tablectl.sqlite3").chmod(0o640)
    yield data
    shutil.rmtree(top)


@pytest.mark.parametrize("verb", ["tail", "verify", "export", "replay"])
def test_a_reader_outside_the_group_is_told_which_group_to_join(
    journal_dir: Path, verb: str, as_user: AsUser
) -> None:
    proc = as_user("journal", verb, "--data-dir", str(journal_dir))
    assert proc.returncode == 1, proc
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert "permission denied" in proc.stderr and f"root:{GROUP}" in proc.stderr
    assert f"sudo usermod -aG {GROUP} nobody, then log in again" in proc.stderr


def test_a_group_member_verifies_and_replays_with_the_daemon_stopped(
    journal_dir: Path, as_user: AsUser
) -> None:
    """Read-only (SQLite mode=ro): no 'attempt to write a readonly database', nothing
    written, though the directory is not theirs to write."""
    gid = str(grp.getgrnam(GROUP).gr_gid)
    before = sorted(p.name for p in journal_dir.iterdir())
    verify = as_user("journal", "verify", "--data-dir", str(journal_dir), "--json", groups=gid)
    assert verify.returncode == 0, verify
    report = json.loads(verify.stdout)  # the mark beside it read too (0640, the group's)
    assert (report["ok"], report["rows"], report["acked"]) == (True, 2, {})
    tail = as_user("journal", "tail", "--data-dir", str(journal_dir), groups=gid)
    assert tail.returncode == 0 and "round.voided" in tail.stdout, tail
    replay = as_user("journal", "replay", "--data-dir", str(journal_dir), groups=gid)
    assert "readonly" not in replay.stderr and "Traceback" not in replay.stderr, replay
    assert sorted(p.name for p in journal_dir.iterdir()) == before


def test_the_signing_key_is_read_as_its_user_as_the_readme_says(as_user: AsUser) -> None:
    """The key file holds the private key (0600): the group that reads the journal cannot
    print its public half, its owner can, and the README runs `records key` as that user."""
    from tablectl.records.signing import create_key

    readme = (REPO / "README.md").read_text()
    assert "sudo -u tablectl tablectl records key > table12.pub" in readme
    assert "\ntablectl records key" not in readme
    top = Path(tempfile.mkdtemp(prefix="tablectl-key-", dir=public_tmp()))
    try:
        top.chmod(0o755)
        gid = grp.getgrnam(GROUP).gr_gid
        os.chown(top, 0, gid)
        key = top / "records-signing.key"
        create_key(key)  # as root: given to the directory's owner, root here; 0600
        denied = as_user("records", "key", "--key-file", str(key), groups=str(gid))
        assert denied.returncode == 1 and "Traceback" not in denied.stderr, denied
        assert "run as the table's user (sudo -u tablectl tablectl records" in denied.stderr
        os.chown(key, NOBODY, NOBODY)  # nobody stands in for the table's user
        printed = as_user("records", "key", "--key-file", str(key))
        assert printed.returncode == 0, printed
        assert printed.stdout.startswith("-----BEGIN PUBLIC KEY-----"), printed
    finally:
        shutil.rmtree(top)


def test_no_journal_says_when_there_will_be_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["journal", "verify", "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no journal at" in err and "the daemon creates it when it first runs" in err


def test_a_config_the_user_may_not_read_names_the_group(as_user: AsUser) -> None:
    etc = Path(tempfile.mkdtemp(prefix="tablectl-etc-", dir=public_tmp()))
    try:
        etc.chmod(0o750)
        os.chown(etc, 0, grp.getgrnam(GROUP).gr_gid)
        shutil.copy(EXAMPLE_CONFIG, etc / "table.toml")
        proc = as_user("config", "check", str(etc / "table.toml"))
        assert proc.returncode == 2, proc
        assert f"sudo usermod -aG {GROUP} nobody" in proc.stderr, proc.stderr
        assert "1 error\n" in proc.stderr
    finally:
        shutil.rmtree(etc)


@as_root
def test_run_refuses_a_data_directory_of_another_user_and_creates_nothing(tmp_path: Path) -> None:
    """Root starting the daemon by hand would leave a journal the service cannot write."""
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, NOBODY, NOBODY)
    config = tmp_path / "table.toml"
    config.write_text(
        EXAMPLE_CONFIG.read_text()
        .replace('"/var/lib/tablectl"', f'"{data}"')
        .replace('backend = "auto"', 'backend = "mock"')
    )
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("tablectl")), "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc
    assert f"storage.data_dir {data} belongs to nobody" in proc.stderr
    assert f"sudo -u nobody tablectl run --config {config}" in proc.stderr
    assert list(data.iterdir()) == []


def test_only_the_service_user_may_create_the_data_directory(tmp_path: Path) -> None:
    config = load_config(EXAMPLE_CONFIG)
    config = config.model_copy(
        update={"storage": config.storage.model_copy(update={"data_dir": tmp_path / "new"})}
    )
    service = "root" if os.geteuid() != 0 else "nobody"  # someone this process is not
    problems = data_dir_problems(config, EXAMPLE_CONFIG, service_user=service)
    assert len(problems) == 1 and f"the service user is {service}" in problems[0]
    assert data_dir_problems(config, EXAMPLE_CONFIG, service_user="no-such-user-here") == []


def test_an_unknown_option_shows_the_verb_s_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--bogus"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tablectl status ") and "{run,config" not in err
    assert "tablectl status: error: unrecognized arguments: --bogus" in err


def test_a_malformed_card_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["dealer", "settle", "--hand", "3=AsKsQx", "--socket", "/nonexistent.sock"]
    assert cli.main(argv) == 2
    assert "argument --hand: 3=AsKsQx: 'AsKsQx': not a card: 'Qx'" in capsys.readouterr().err


def test_a_missing_file_is_bad_input_for_every_verb(tmp_path: Path) -> None:
    assert cli.main(["mqtt", "schema", "--check", str(tmp_path / "missing.json")]) == 2
    assert cli.main(["config", "check", str(tmp_path / "missing.toml")]) == 2


def test_status_wording(capsys: pytest.CaptureFixture[str]) -> None:
    hit = Hit(
        hit_id="1-2",
        round_id=1,
        seat=2,
        hand="mini-royal",
        amount_cents=100_000,
        basis="odds-for-1",
        paid_from_table_inventory=True,
        validated_by=None,
        documented_by=None,
        link_claim=False,
        answered=False,
    )
    print_status(
        Status(
            table="t1",
            site="s",
            game="three-card-poker",
            boot_id="b1",
            uptime_s=1.0,
            round_id=2,
            phase=Phase.BETTING,
            accepting_wagers=True,
            table_wager="progressive",
            wagers={},
            undecided_seats=[],
            count_final=True,
            seat_lamps=[],
            meter=None,
            hits_pending=[],
            hit_history=[hit],
            deck_ready=True,
            shuffle_requested=False,
            shuffler_fault=None,
            shoe_fault=None,
            gpio_fault=None,
            lockout_held=False,
            sensor_test=None,
            gpio=GpioStatus(
                backend="mock",
                where="sim",
                polled=False,
                resolution_ns=1,
                kernel_sequence=False,
                edges=0,
                coarsest_resolution_ns=1,
                faults=0,
                last_fault=None,
            ),
            blocked=None,
            dealing=None,
            shoe_out_of_order=False,
            device_acceptance={},
            counters={},
            journal=JournalStats(last_seq=1, commits=1, steps_committed=1),
            shuffler=None,
            shoe=None,
            mqtt=BrokerStats(
                connected=True,
                broker="b",
                published_through_seq=1,
                handed_through_seq=1,
                acked_through_seq=1,
                acked={},
                backlog_alarms=[],
                delivery_fault=None,
                redelivery={},
                last_error=None,
                counters={},
            ),
            faults=[],
            decks=None,
            pace=None,
            link=None,
        )
    )
    out = capsys.readouterr().out
    assert "last 1 hit, newest first" in out
    assert "mini-royal $1,000.00 not validated" in out

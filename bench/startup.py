"""Start-up: `tablectl run` on simulated devices -> READY, against `python -c pass` in the same
run (issue 29, P4: READY <= 0.6 s).

The daemon is started as systemd starts it (`python -m tablectl run --config FILE`, the
package's /usr/bin/tablectl, with NOTIFY_SOCKET set): from the fork until the READY=1
datagram reaches the notify socket. Its devices are those of `tablectl simulate table` (the
shuffler and the shoe on pseudo-terminals, the mock GPIO's socket), started once in a
process of its own as the README's three terminals do, and a private Mosquitto. Each start
has a fresh data directory (an empty journal: a first start of the day is no different, the
journal being read from its mark). The interpreter reads each module's bytecode from a cache
the first (warm-up) start wrote, as on a table PC, whose package compiles it at install
(packaging/build_deb.py, postinst), even where PYTHONDONTWRITEBYTECODE is set, as it is in
some shells; --no-bytecode compiles every module from source at every start instead. Beside
each start, in the same moments, the interpreter's own: `python -c pass` from fork to exit,
the floor no Python daemon can beat. Printed, min / median / max over --runs: READY, the
baseline, READY less the baseline; the CPU time both used (every thread's: on a loaded
machine a steadier figure than the wall clock); the daemon's RSS when READY came (VmRSS, and
its anonymous part, RssAnon). With --importtime, one more start under `python -X importtime`
lists what the daemon imported by READY, the slowest first.

Run: .venv/bin/python bench/startup.py [--runs 7] [--importtime]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from figures import spread
from tablectl.simulators.broker import PrivateBroker

REPO = Path(__file__).resolve().parents[1]
SIMULATED = REPO / "config" / "simulated-table.toml"
READY_TIMEOUT_S = 60  # a daemon that never gets ready fails the bench, not hangs it
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \| (\s*)(\S+)$")


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def table_config(tmp: Path, broker: PrivateBroker, data_dir: Path) -> Path:
    """The README's simulated table, with its files under tmp and the private broker."""
    text = SIMULATED.read_text()
    text = text.replace('"/tmp/tablectl-sim/shuffler"', f'"{tmp / "shuffler"}"')
    text = text.replace('"/tmp/tablectl-sim/shoe"', f'"{tmp / "shoe"}"')
    text = text.replace('data_dir = "/tmp/tablectl-sim"', f'data_dir = "{data_dir}"')
    text = text.replace("port = 1883", f"port = {broker.port}")
    # One simulated table serves every start, each with a data directory of its own.
    text = text.replace("# simulator_socket =", f'simulator_socket = "{tmp / "table.sock"}"  #', 1)
    path = data_dir.with_suffix(".toml")
    path.write_text(text)
    return path


@contextlib.contextmanager
def simulated_table(tmp: Path, broker: PrivateBroker, env: dict[str, str]) -> Iterator[None]:
    """`tablectl simulate table` in a process of its own, until its devices are there."""
    config = table_config(tmp, broker, tmp / "sim-data")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tablectl", "simulate", "table", "--config", str(config)],
        cwd=tmp,
        env=env,
        stdin=subprocess.PIPE,  # its prompt reads commands: kept open, none typed
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        wanted = (tmp / "table.sock", tmp / "shuffler", tmp / "shoe")
        while not all(p.exists() for p in wanted):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the simulated table did not come up")
            time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait()


def _cpu_s(pid: int) -> float:
    """The CPU time the process has used, every thread's (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kb(pid: int) -> tuple[int, int]:
    """VmRSS and its anonymous part (RssAnon), in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon"):
            fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["RssAnon"]


@dataclass
class Start:
    ready_s: float
    cpu_s: float
    rss_kb: int
    anon_kb: int
    stderr: str


def python_env(tmp: Path, bytecode: bool) -> dict[str, str]:
    """The environment of every process started: bytecode cached under tmp (or never)."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def start_daemon(
    tmp: Path, broker: PrivateBroker, run: int, env: dict[str, str], *flags: str
) -> Start:
    """One `tablectl run` on a fresh data directory: fork -> READY=1, then SIGTERM."""
    data_dir = tmp / f"data-{run}"
    config = table_config(tmp, broker, data_dir)
    notify_path = tmp / f"notify-{run}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify:
        notify.bind(str(notify_path))
        notify.settimeout(READY_TIMEOUT_S)
        err = tmp / f"stderr-{run}"
        with err.open("wb") as stderr:
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, *flags, "-m", "tablectl", "run", "--config", str(config)],
                cwd=tmp,
                env={**env, "NOTIFY_SOCKET": str(notify_path)},
                stdout=subprocess.DEVNULL,
                stderr=stderr,
            )
            try:
                while not notify.recv(4096).startswith(b"READY=1"):
                    pass
                ready_s = time.perf_counter() - t0
                cpu_s = _cpu_s(proc.pid)
                rss, anon = _rss_kb(proc.pid)
                text = err.read_text()  # what it wrote by READY (-X importtime: every import)
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(READY_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return Start(ready_s, cpu_s, rss, anon, text)


def python_pass(env: dict[str, str]) -> tuple[float, float]:
    """`python -c pass`: its wall time, fork to exit, and its CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def imports_by_ready(stderr: str) -> list[tuple[float, float, str]]:
    """-X importtime's lines: (self ms, cumulative ms, module with its depth's indent)."""
    out = []
    for line in stderr.splitlines():
        if m := IMPORT_LINE.match(line):
            out.append((int(m[1]) / 1000, int(m[2]) / 1000, m[3] + m[4]))
    return out


def main(runs: int, importtime: bool, bytecode: bool) -> None:
    ready: list[float] = []
    floor: list[float] = []
    cpu: list[float] = []
    floor_cpu: list[float] = []
    rss: list[float] = []
    anon: list[float] = []
    loads = [_load()]
    with (
        tempfile.TemporaryDirectory(prefix="tablectl-startup-") as tmp_name,
        PrivateBroker() as broker,
    ):
        tmp = Path(tmp_name)
        env = python_env(tmp, bytecode)
        with simulated_table(tmp, broker, env):
            start_daemon(tmp, broker, 0, env)  # warms the page cache, writes the bytecode
            for run in range(1, runs + 1):
                wall, wall_cpu = python_pass(env)  # beside each start, in the same moments
                floor.append(wall)
                floor_cpu.append(wall_cpu)
                start = start_daemon(tmp, broker, run, env)
                ready.append(start.ready_s)
                cpu.append(start.cpu_s)
                rss.append(start.rss_kb / 1024)
                anon.append(start.anon_kb / 1024)
            loads.append(_load())
            traced = (
                start_daemon(tmp, broker, runs + 1, env, "-X", "importtime") if importtime else None
            )
    how = "cached" if bytecode else "compiled at every start (--no-bytecode)"
    print(f"runs: {runs}, bytecode {how}, load average {loads[0]} before, {loads[-1]} after")
    print(f"{'python -c pass (s)':<40} {spread(floor, '8.3f')}")
    print(f"{'tablectl run -> READY (s)':<40} {spread(ready, '8.3f')}  (goal <= 0.600)")
    less = [r - f for r, f in zip(ready, floor, strict=True)]
    print(f"{'READY less python -c pass (s)':<40} {spread(less, '8.3f')}")
    print(f"{'python -c pass, CPU (s)':<40} {spread(floor_cpu, '8.3f')}")
    print(f"{'tablectl run -> READY, CPU (s)':<40} {spread(cpu, '8.3f')}  (every thread's)")
    print(f"{'RSS at READY (MB)':<40} {spread(rss, '8.1f')}")
    print(f"{'  of it anonymous (MB)':<40} {spread(anon, '8.1f')}")
    if traced is not None:
        found = imports_by_ready(traced.stderr)
        top = [m for m in found if not m[2].startswith(" ")]  # what the entry point asked for
        print(
            f"\n-X importtime (one more start, READY {traced.ready_s:.3f} s): {len(found)} modules,"
        )
        print(f"top-level imports by cumulative ms (sum {sum(m[1] for m in top):.0f} ms):")
        for self_ms, cumulative_ms, name in sorted(top, key=lambda m: -m[1])[:15]:
            print(f"  {cumulative_ms:8.1f} {self_ms:8.1f}  {name}")
        print("slowest modules by their own ms:")
        for self_ms, cumulative_ms, name in sorted(found, key=lambda m: -m[0])[:25]:
            print(f"  {self_ms:8.1f} {cumulative_ms:8.1f}  {name.strip()}")
    print(f"median READY {statistics.median(ready):.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--importtime", action="store_true", help="one more start, traced")
    parser.add_argument(
        "--no-bytecode", action="store_true", help="compile every module at every start"
    )
    args = parser.parse_args()
    main(args.runs, args.importtime, not args.no_bytecode)

"""A private replicated ledger for tests and benches: three etcd members and three PostgreSQL
nodes under Patroni, from Debian's `etcd-server` and `patroni` packages.

It runs the shipped configs (config/etcd.conf.yml, config/patroni.yml): their cluster-wide
settings (`bootstrap.dcs`: ttl, synchronous_mode_strict, ...) and PostgreSQL parameters are
the floor's, only names, addresses, ports, paths, authentication (trust) and pg_hba are the
test's. The YAML is read with Debian's python3-yaml (Patroni's own dependency), so tablectl
needs no YAML library.

Two ways to lay the nodes out:
- loopback: every process on 127.0.0.1, on free ports (any user);
- namespaces (root with `ip netns`): each PostgreSQL node and its Patroni in a network
  namespace of its own, joined to the others and to this host by a bridge in a switch
  namespace; `isolate(node)` sets the node's veth down, as a pulled cable would, while the
  controllers on this host keep writing.

As root, Patroni and PostgreSQL run as the package's `postgres` user (PostgreSQL refuses
root); data lives in a temporary directory removed by close().
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from tablectl.simulators.broker import free_port
from tablectl.simulators.postgres import SUPERUSER, find_bindir

INSTALL_HINT = (
    "install Debian's patroni and etcd-server packages: sudo apt-get install patroni etcd-server"
)
SHIPPED = Path(__file__).resolve().parents[1] / "config"
DEBIAN_PYTHON = "/usr/bin/python3"  # Patroni's interpreter: it has python3-yaml
START_GUARD_S = 90.0  # a cluster that has not come up by then is reported broken


class ClusterError(RuntimeError):
    """The cluster did not do what was asked in time; the message has the logs' tails."""


def missing() -> str | None:
    """Why a private cluster cannot run here (None: it can)."""
    for program in ("patroni", "etcd"):
        if shutil.which(program) is None:
            return f"no `{program}` on PATH; {INSTALL_HINT}"
    if not Path(DEBIAN_PYTHON).is_file():
        return f"no {DEBIAN_PYTHON} (Patroni's interpreter); {INSTALL_HINT}"
    try:
        find_bindir()
    except FileNotFoundError as exc:
        return str(exc)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "as root PostgreSQL runs as the postgres user, and there is none"
    return None


def load_shipped(name: str) -> dict[str, Any]:
    """A shipped YAML config as data (read by Debian's python3-yaml)."""
    result = subprocess.run(
        [
            DEBIAN_PYTHON,
            "-c",
            "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)",
        ],
        input=(SHIPPED / name).read_text(),
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: dict[str, Any] = json.loads(result.stdout)
    return loaded


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def namespaces_unavailable() -> str | None:
    """Why nodes cannot have network namespaces of their own here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root for `ip netns` (run as root, as .ci/run does)"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian: iproute2)"
    probe = f"tctl-probe-{os.getpid()}"
    try:
        ip("netns", "add", probe)
        ip("netns", "del", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        return f"`ip netns add` is not allowed here: {err.decode().strip() or exc}"
    return None


class Switch:
    """A bridge in a namespace of its own; this host and each node on a port of it."""

    def __init__(self, nodes: int) -> None:
        self.tag = f"{os.getpid() % 100000}"
        self.netns = f"tctl-sw-{self.tag}"
        net = 232 + os.getpid() % 20
        self.prefix = f"10.{net}.{os.getpid() % 250}"
        self.host_ip = f"{self.prefix}.254"
        self.host_if = f"tsh{self.tag}"
        self.node_netns = [f"tctl-pg{i}-{self.tag}" for i in range(1, nodes + 1)]
        self.node_ips = [f"{self.prefix}.{i}" for i in range(1, nodes + 1)]
        self._ports: list[str] = []
        ip("netns", "add", self.netns)
        try:
            self._in(self.netns, "ip", "link", "add", "br0", "type", "bridge")
            self._in(self.netns, "ip", "link", "set", "br0", "up")
            self._plug(self.host_if, None, self.host_ip)
            for netns, address in zip(self.node_netns, self.node_ips, strict=True):
                ip("netns", "add", netns)
                self._in(netns, "ip", "link", "set", "lo", "up")
                self._plug(f"tsn{len(self._ports)}-{self.tag}"[:15], netns, address)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _in(netns: str, *args: str) -> None:
        ip("netns", "exec", netns, *args)

    def _plug(self, name: str, netns: str | None, address: str) -> None:
        """A veth pair: `name` with this address (here or in netns), its peer on the bridge."""
        port = f"tsp{len(self._ports)}-{self.tag}"[:15]
        ip("link", "add", name, "type", "veth", "peer", "name", port)
        self._ports.append(port)
        ip("link", "set", port, "netns", self.netns)
        self._in(self.netns, "ip", "link", "set", port, "master", "br0")
        self._in(self.netns, "ip", "link", "set", port, "up")
        if netns is not None:
            ip("link", "set", name, "netns", netns)
            self._in(netns, "ip", "addr", "add", f"{address}/24", "dev", name)
            self._in(netns, "ip", "link", "set", name, "up")
        else:
            ip("addr", "add", f"{address}/24", "dev", name)
            ip("link", "set", name, "up")

    def set_node_link(self, index: int, up: bool) -> None:
        """The node's cable: its port on the bridge up or down."""
        self._in(self.netns, "ip", "link", "set", self._ports[index + 1], "up" if up else "down")

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            ip("link", "del", self.host_if)
        for netns in [*self.node_netns, self.netns]:
            with contextlib.suppress(subprocess.CalledProcessError):
                ip("netns", "del", netns)


def _http(url: str, *, method: str = "GET", timeout_s: float = 2.0) -> Any:
    body = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, method=method, data=body)  # noqa: S310 - http://
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as reply:  # noqa: S310 - our own
            return json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as exc:  # Patroni answers 503 with a body for a replica
        body = exc.read()
        return json.loads(body) if body else None


@dataclass
class EtcdMember:
    name: str
    client_url: str
    peer_url: str
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class PatroniNode:
    name: str
    index: int
    host: str
    port: int
    rest_port: int
    netns: str | None
    data_dir: Path
    config: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def rest(self) -> str:
        return f"http://{self.host}:{self.rest_port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        return None


@dataclass
class Member:
    """What Patroni's /cluster says of a node."""

    name: str
    role: str  # leader, sync_standby, replica
    state: str
    timeline: int | None


@dataclass
class PatroniCluster:
    """Three etcd members and `nodes` PostgreSQL nodes under Patroni; start(), close()."""

    nodes_count: int = 3
    namespaces: bool = False
    fsync: bool = False  # tests kill processes, never the machine; a bench wants it on
    scope: str = "tablectl-ledger"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tablectl-patroni-")))
    etcd: list[EtcdMember] = field(default_factory=list)
    nodes: list[PatroniNode] = field(default_factory=list)
    switch: Switch | None = None

    def __post_init__(self) -> None:
        reason = missing()
        if reason is not None:
            raise FileNotFoundError(reason)
        self.bindir = find_bindir()
        self._owner = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self._patroni_shipped = load_shipped("patroni.yml")
        self._etcd_shipped = load_shipped("etcd.conf.yml")
        if self._owner:
            os.chown(self.root, self._owner.pw_uid, self._owner.pw_gid)
        if self.namespaces:
            self.switch = Switch(self.nodes_count)
        etcd_host = self.switch.host_ip if self.switch else "127.0.0.1"
        for i in range(1, 4):
            self.etcd.append(
                EtcdMember(
                    name=f"etcd{i}",
                    client_url=f"http://{etcd_host}:{free_port()}",
                    peer_url=f"http://127.0.0.1:{free_port()}",
                    data_dir=self.root / f"etcd{i}",
                    log=self.root / f"etcd{i}.log",
                )
            )
        for i in range(self.nodes_count):
            host = self.switch.node_ips[i] if self.switch else "127.0.0.1"
            same = self.switch is not None  # each its own namespace: the same ports will do
            self.nodes.append(
                PatroniNode(
                    name=f"pg{i + 1}",
                    index=i,
                    host=host,
                    port=5432 if same else free_port(),
                    rest_port=8008 if same else free_port(),
                    netns=self.switch.node_netns[i] if self.switch else None,
                    data_dir=self.root / f"pg{i + 1}" / "data",
                    config=self.root / f"pg{i + 1}" / "patroni.yml",
                    log=self.root / f"pg{i + 1}" / "patroni.log",
                )
            )

    # --- configs ----------------------------------------------------------------------------

    def _etcd_config(self, member: EtcdMember) -> dict[str, Any]:
        config = dict(self._etcd_shipped)
        client = member.client_url
        config.update(
            {
                "name": member.name,
                "data-dir": str(member.data_dir),
                "listen-client-urls": client,
                "advertise-client-urls": client,
                "listen-peer-urls": member.peer_url,
                "initial-advertise-peer-urls": member.peer_url,
                "initial-cluster": ",".join(f"{m.name}={m.peer_url}" for m in self.etcd),
                "initial-cluster-token": f"tablectl-test-{os.getpid()}",
                "log-outputs": ["stderr"],
            }
        )
        return config

    def _patroni_config(self, node: PatroniNode) -> dict[str, Any]:
        config: dict[str, Any] = json.loads(json.dumps(self._patroni_shipped))
        run = node.data_dir.parent / "run"
        config["scope"] = self.scope
        config["name"] = node.name
        config["restapi"] = {
            "listen": f"{node.host}:{node.rest_port}",
            "connect_address": f"{node.host}:{node.rest_port}",
        }
        config["etcd3"] = {
            "hosts": ",".join(m.client_url.removeprefix("http://") for m in self.etcd)
        }
        config["watchdog"] = {"mode": "off"}
        config.setdefault("log", {})["level"] = "INFO"
        pg = config["postgresql"]
        pg.update(
            {
                "listen": f"{node.host}:{node.port}",
                "connect_address": f"{node.host}:{node.port}",
                "data_dir": str(node.data_dir),
                "bin_dir": str(self.bindir),
                "pgpass": str(node.data_dir.parent / "pgpass"),
                "authentication": {
                    "superuser": {"username": SUPERUSER},
                    "replication": {"username": "replicator"},
                    "rewind": {"username": "rewinder"},
                },
                "pg_hba": [
                    "local all all trust",
                    "host all all 0.0.0.0/0 trust",
                    "host replication replicator 0.0.0.0/0 trust",
                ],
            }
        )
        pg["parameters"] = {
            **{k: v for k, v in pg.get("parameters", {}).items() if not k.startswith("ssl")},
            "unix_socket_directories": str(run),
            "ssl": "off",
            # Off unless asked: a test kills processes, never the machine. full_page_writes
            # stays on: pg_rewind needs it to bring an old primary back.
            "fsync": "on" if self.fsync else "off",
            "shared_buffers": "32MB",
            "log_min_messages": "warning",
        }
        return config

    # --- processes ------------------------------------------------------------------------------

    def _as_postgres(self) -> dict[str, Any]:
        if self._owner is None:
            return {}
        return {"user": self._owner.pw_uid, "group": self._owner.pw_gid, "extra_groups": []}

    def start_etcd(self, member: EtcdMember) -> None:
        config = member.data_dir.with_suffix(".yml")
        config.write_text(json.dumps(self._etcd_config(member)))
        log = member.log.open("ab")
        member.proc = subprocess.Popen(
            ["etcd", "--config-file", str(config)], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def start_node(self, node: PatroniNode) -> None:
        directory = node.data_dir.parent
        run = directory / "run"
        run.mkdir(parents=True, exist_ok=True)
        node.config.write_text(json.dumps(self._patroni_config(node)))
        if self._owner:
            for path in (directory, run, node.config):
                os.chown(path, self._owner.pw_uid, self._owner.pw_gid)
        log = node.log.open("ab")
        command = ["patroni", str(node.config)]
        kwargs: dict[str, Any] = self._as_postgres()
        if node.netns is not None:
            # Entering a namespace needs root: drop to postgres once inside it.
            command = ["ip", "netns", "exec", node.netns, "setpriv", "--reuid=postgres",
                       "--regid=postgres", "--init-groups", "--", *command]  # fmt: skip
            kwargs = {}
        node.proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            **kwargs,
        )
        log.close()

    def start(self) -> None:
        """Everything up: etcd healthy, a leader with a synchronous standby, every node
        streaming."""
        try:
            for member in self.etcd:
                self.start_etcd(member)
            self.wait(self.etcd_healthy, "etcd's three members healthy")
            for node in self.nodes:
                self.start_node(node)
            self.wait(self.healthy, "a leader, a synchronous standby and every node streaming")
        except BaseException:
            self.close()
            raise

    # --- what the cluster says -------------------------------------------------------------------

    def etcd_status(self, member: EtcdMember) -> dict[str, Any] | None:
        with contextlib.suppress(OSError, ValueError):
            found: dict[str, Any] | None = _http(
                f"{member.client_url}/v3/maintenance/status", method="POST", timeout_s=1
            )
            return found
        return None

    def etcd_healthy(self) -> bool:
        statuses = [self.etcd_status(m) for m in self.etcd if m.running]
        return len(statuses) == 3 and all(s and s.get("leader") for s in statuses)

    def etcd_leader(self) -> EtcdMember:
        for member in self.etcd:
            status = self.etcd_status(member) if member.running else None
            if status and status.get("leader") == status.get("header", {}).get("member_id"):
                return member
        raise ClusterError("no etcd member says it leads")

    def members(self) -> list[Member]:
        """The cluster as any reachable node's Patroni says it is (empty if none answers)."""
        for node in self.nodes:
            if not node.running:
                continue
            with contextlib.suppress(OSError, ValueError):
                found = _http(f"{node.rest}/cluster", timeout_s=1)
                if found and "members" in found:
                    return [
                        Member(m["name"], m["role"], m.get("state", ""), m.get("timeline"))
                        for m in found["members"]
                    ]
        return []

    def leader(self) -> PatroniNode | None:
        for member in self.members():
            if member.role == "leader" and member.state == "running":
                return self.node(member.name)
        return None

    def sync_standby(self) -> PatroniNode | None:
        for member in self.members():
            if member.role == "sync_standby" and member.state in ("running", "streaming"):
                return self.node(member.name)
        return None

    def new_leader_seen(self, old: PatroniNode, timeout_s: float = START_GUARD_S) -> datetime:
        """When the cluster first names a leader other than `old` (polled every 0.1 s): the
        moment a failover's new primary is known."""
        deadline = time.monotonic() + timeout_s
        while (leader := self.leader()) is None or leader is old:
            if time.monotonic() > deadline:
                raise ClusterError(f"no leader but {old.name}\n{self.tails()}")
            time.sleep(0.1)
        return datetime.now(UTC)

    def node(self, name: str) -> PatroniNode:
        return next(n for n in self.nodes if n.name == name)

    def healthy(self) -> bool:
        members = self.members()
        roles = sorted(m.role for m in members)
        # Patroni 3.0 says `running` of a replica (later ones say `streaming`).
        running = [m for m in members if m.state in ("running", "streaming")]
        return (
            len(running) == len(self.nodes)
            and roles.count("leader") == 1
            and "sync_standby" in roles
            and len({m.timeline for m in members}) == 1
        )

    def wait(self, predicate: Any, what: str, timeout_s: float = START_GUARD_S) -> None:
        """Until predicate() holds (polled: other processes' state), or ClusterError with logs."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            if time.monotonic() > deadline:
                raise ClusterError(f"never: {what}\n{self.tails()}")
            time.sleep(0.2)

    def tails(self, chars: int = 1500) -> str:
        parts = []
        for path in [*(m.log for m in self.etcd), *(n.log for n in self.nodes)]:
            if path.exists():
                parts.append(f"--- {path.name} ---\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    # --- for a controller ---------------------------------------------------------------------

    def conninfo(self, dbname: str = "postgres", *, read_write: bool = True) -> str:
        """A libpq multi-host connection string naming every node; with read_write, libpq
        connects to whichever accepts writes (target_session_attrs=read-write)."""
        parts = [
            "host=" + ",".join(n.host for n in self.nodes),
            "port=" + ",".join(str(n.port) for n in self.nodes),
            f"user={SUPERUSER}",
            f"dbname={dbname}",
        ]
        if read_write:
            parts.append("target_session_attrs=read-write")
        return " ".join(parts)

    def node_conninfo(self, node: PatroniNode, dbname: str = "postgres") -> str:
        return f"host={node.host} port={node.port} user={SUPERUSER} dbname={dbname}"

    def psql(self, sql: str, dbname: str = "postgres", node: PatroniNode | None = None) -> str:
        """SQL on a node (the leader by default), tuples only."""
        target = node or self.leader()
        if target is None:
            raise ClusterError("no leader to run SQL on")
        result = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
             "-h", target.host, "-p", str(target.port), "-U", SUPERUSER, "-d", dbname, "-c", sql],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        if result.returncode != 0:
            raise ClusterError(f"psql on {target.name}: {result.stderr.strip()}")
        return result.stdout.strip()

    def create_database(self, name: str) -> str:
        self.psql(f'CREATE DATABASE "{name}"')
        return self.conninfo(name)

    # --- faults ----------------------------------------------------------------------------------

    def kill_postmaster(self, node: PatroniNode) -> int:
        """SIGKILL the node's postmaster (a crash of PostgreSQL, Patroni left running)."""
        pid = node.postmaster_pid
        if pid is None:
            raise ClusterError(f"{node.name} has no postmaster.pid")
        os.kill(pid, signal.SIGKILL)
        return pid

    def kill_patroni(self, node: PatroniNode) -> None:
        """SIGKILL the node's Patroni (its PostgreSQL runs on, holding no leader key)."""
        assert node.proc is not None
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(30)

    def stop_node(self, node: PatroniNode) -> None:
        """Patroni stops its PostgreSQL and leaves (SIGTERM): a replica restarted by hand."""
        if node.proc is not None and node.proc.poll() is None:
            node.proc.terminate()
            try:
                node.proc.wait(60)
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()

    def stop_etcd(self, member: EtcdMember) -> None:
        if member.proc is not None and member.proc.poll() is None:
            member.proc.terminate()
            member.proc.wait(30)

    def isolate(self, node: PatroniNode, *, isolated: bool = True) -> None:
        """The node's cable pulled (or plugged back): it reaches neither etcd, nor the other
        nodes, nor the controllers."""
        if self.switch is None:
            raise ClusterError("isolation needs network namespaces (namespaces=True)")
        self.switch.set_node_link(node.index, not isolated)

    def heal(self) -> None:
        """Every cable plugged, every etcd member and Patroni running again (what a test
        broke and did not mend, it mends here)."""
        if self.switch is not None:
            for node in self.nodes:
                self.switch.set_node_link(node.index, True)
        for member in self.etcd:
            if not member.running:
                self.start_etcd(member)
        for node in self.nodes:
            if not node.running:
                self.start_node(node)

    # --- the end -------------------------------------------------------------------------------

    def close(self) -> None:
        for node in self.nodes:
            if node.running:
                assert node.proc is not None
                node.proc.terminate()
        for node in self.nodes:
            if node.proc is not None:
                try:
                    node.proc.wait(30)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait()
            pid = node.postmaster_pid
            if pid is not None and _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        for member in self.etcd:
            if member.proc is not None and member.proc.poll() is None:
                member.proc.kill()
                member.proc.wait()
        if self.switch is not None:
            self.switch.close()
            self.switch = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PatroniCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --- the faults a floor meets, for tests and benches -----------------------------------------


@dataclass(frozen=True)
class Fault:
    """What to break (given the primary) and how to mend it (given what brake returned); both
    block, so callers on a loop run them in a thread."""

    name: str
    brake: Callable[[PatroniCluster, PatroniNode], Any]
    mend: Callable[[PatroniCluster, Any], None]
    fails_over: bool  # the primary changes
    needs_namespaces: bool = False


def _kill_postmaster(c: PatroniCluster, primary: PatroniNode) -> None:
    c.kill_postmaster(primary)


def _new_leader(c: PatroniCluster, old: PatroniNode) -> None:
    c.wait(lambda: (leader := c.leader()) is not None and leader is not old, "a new leader")


def _kill_patroni(c: PatroniCluster, primary: PatroniNode) -> PatroniNode:
    # Its PostgreSQL runs on, a primary to anyone who asks it, until its Patroni is back
    # (a floor has the watchdog for that: config/patroni.yml); the others fail over meanwhile.
    c.kill_patroni(primary)
    _new_leader(c, primary)
    return primary


def _restart_patroni(c: PatroniCluster, node: PatroniNode) -> None:
    c.start_node(node)


def _stop_etcd_leader(c: PatroniCluster, primary: PatroniNode) -> EtcdMember:
    member = c.etcd_leader()
    c.stop_etcd(member)
    return member


def _start_etcd(c: PatroniCluster, member: EtcdMember) -> None:
    c.start_etcd(member)


def _isolate(c: PatroniCluster, primary: PatroniNode) -> PatroniNode:
    c.isolate(primary)
    _new_leader(c, primary)
    return primary


def _plug_back(c: PatroniCluster, node: PatroniNode) -> None:
    c.isolate(node, isolated=False)


def _restart_replica(c: PatroniCluster, primary: PatroniNode) -> None:
    replica = c.sync_standby() or next(n for n in c.nodes if n is not primary)
    c.stop_node(replica)
    c.start_node(replica)


def _nothing(c: PatroniCluster, _: object) -> None:
    pass


FAULTS = {
    f.name: f
    for f in (
        Fault("kill-postmaster", _kill_postmaster, _nothing, fails_over=True),
        Fault("kill-patroni", _kill_patroni, _restart_patroni, fails_over=True),
        Fault("stop-etcd-leader", _stop_etcd_leader, _start_etcd, fails_over=False),
        Fault("isolate-primary", _isolate, _plug_back, fails_over=True, needs_namespaces=True),
        Fault("restart-replica", _restart_replica, _nothing, fails_over=False),
    )
}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

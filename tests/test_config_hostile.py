"""Configs that cannot crash the daemon (issue 16 item 4): a property test.

Each example takes a shipped config (config/*.toml), sets one field (one the file has, or any
the schema knows) to a hostile value (inf, nan, huge or negative numbers, NUL, long strings
and paths, lists and tables nested thousands deep, wrong types) and asserts that `config
check` either exits 2 naming that field, or accepts the file. A second property starts
`tablectl run` on simulated devices with values at the edges of what check accepts (each
bound, the longest socket path) and asserts that it starts, tells systemd READY, and stops
cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import os
import signal
import socket
import subprocess
import tempfile
import tomllib
import typing
from collections.abc import Iterator
from datetime import time
from pathlib import Path

import annotated_types
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl import cli
from tablectl.config import (
    UNIX_SOCKET_PATH_MAX_BYTES,
    ConfigError,
    DeviceSection,
    TableConfig,
    load_config,
)
from tablectl.link.config import LinkConfig, load_link_config

from .conftest import REPO
from .test_service import TABLECTL, table_toml

TABLE_CONFIGS = sorted(p for p in (REPO / "config").glob("*.toml") if p.name != "link.toml")
LINK_CONFIG = REPO / "config" / "link.toml"
HANG_GUARD_S = 60  # a hang fails here instead of stalling CI; not a timing claim

Path_ = tuple[str | int, ...]


# ---- a small TOML writer: hostile values need spellings (inf, nan, NUL) tomli-w refuses ----


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        escaped = "".join(
            c if c.isprintable() and c not in '"\\' else f"\\U{ord(c):08x}" for c in value
        )
        return f'"{escaped}"'
    if isinstance(value, time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml_value(v)}' for k, v in value.items()) + "}"
    if isinstance(value, Nested):
        return "[" * value.depth + "1" + "]" * value.depth
    if isinstance(value, Deep):  # where a header cannot go (in a list): inline tables
        return '{"a" = ' * value.depth + "1" + "}" * value.depth
    raise TypeError(value)


class Nested:
    """A list nested `depth` deep around a 1, written without building it (3,000 deep)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"Nested({self.depth})"


class Deep:
    """Tables nested `depth` deep under a key, written as one dotted header
    ([gpio.lockout_pin.a.a.a...]) without building them: issue 27 found 500 crashing."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"Deep({self.depth})"


def _tables(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def toml_text(doc: dict[str, object]) -> str:
    """Tables as [headers] and arrays of tables as [[headers]] (as the shipped files write
    them), everything else inline."""
    lines: list[str] = []

    def table(header: str, prefix: str, body: dict[str, typing.Any]) -> None:
        if header:
            lines.append(header)
        for key, value in body.items():
            if not isinstance(value, dict | Deep) and not _tables(value):
                lines.append(f'"{key}" = {_toml_value(value)}')
        for key, value in body.items():
            name = f'{prefix}."{key}"' if prefix else f'"{key}"'
            if isinstance(value, dict):
                table(f"[{name}]", name, value)
            elif isinstance(value, Deep):
                lines.extend((f"[{name}{'.a' * value.depth}]", "x = 1"))
            elif _tables(value):
                for item in value:
                    table(f"[[{name}]]", name, item)

    table("", "", doc)
    return "\n".join(lines) + "\n"


def _set(doc: dict[str, object], path: Path_, value: object) -> None:
    node: typing.Any = doc
    for key in path[:-1]:
        if isinstance(node, dict) and key not in node:
            node[key] = {}
        node = node[key]
    node[path[-1]] = value


def _file_leaves(node: object, path: Path_ = ()) -> Iterator[Path_]:
    """Every value the file sets, list elements included (link.0.level.0.title)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _file_leaves(value, (*path, key))
    elif isinstance(node, list):
        yield path
        for i, value in enumerate(node):
            if not isinstance(value, list):
                yield from _file_leaves(value, (*path, i))
    else:
        yield path


def _model_of(annotation: object) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _keys(section: type[BaseModel]) -> dict[str, FieldInfo]:
    """A section's keys: a device's are the table's and its (reference) driver's own."""
    if issubclass(section, DeviceSection):
        return section.keys()
    return section.model_fields


def _schema_fields(model: type[BaseModel]) -> Iterator[Path_]:
    """Every field of every section the schema knows (those the file leaves at default too)."""
    for name, info in model.model_fields.items():
        section = _model_of(info.annotation)
        if section is None:
            continue
        if typing.get_origin(info.annotation) is list:  # [[link]]: its first entry
            yield from ((name, 0, field) for field in _keys(section))
        else:
            yield from ((name, field) for field in _keys(section))


def field_paths(config: Path, model: type[BaseModel]) -> list[Path_]:
    doc = tomllib.loads(config.read_text())
    paths = {*_file_leaves(doc), *_schema_fields(model)}
    return sorted(paths, key=lambda p: tuple(map(str, p)))


# ---- hostile values ----

LONG = [108, 256, 4096, 70_000]
hostile_values = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 1e300, -1e300, 5e-324, -0.0, 0.5]),
    st.floats(),
    st.sampled_from([0, -1, 2**31, 2**63 - 1, -(2**63), 10**21, 10**100]),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=0, max_value=5_000_000),  # plausible: some pass, and must run
    st.floats(min_value=0, max_value=1e5),
    st.booleans(),
    st.text(max_size=12).map(lambda t: t + "\0" + t),
    st.sampled_from(LONG).map(lambda n: "x" * n),
    st.sampled_from(LONG).map(lambda n: "/tmp/" + "d" * n),
    st.sampled_from([1, 60, 100, 3000]).map(Nested),
    st.sampled_from([1, 60, 500, 3000]).map(Deep),
    st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=5),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.sampled_from(["a", "port", "pin"]), st.integers(), max_size=2),
    st.sampled_from(["", "auto", "socket://127.0.0.1:0", "usb:0000:0000", "06:00"]),
    st.just(time(6)),
)


def _check(path: Path) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(["config", "check", str(path)])
    return code, err.getvalue()


def _field_name(path: Path_) -> str:
    """The key an error must mention: the deepest named one (seat_sensor_pins, not its [2])."""
    return next(str(p) for p in reversed(path) if isinstance(p, str))


def names_the_field(lines: list[str], path: Path_, original: dict[str, object]) -> bool:
    """An error names the field set; or, where setting it created its section (a shoe where
    the file has none), one of that section's fields (its required port)."""
    if any(_field_name(path) in line for line in lines):
        return True
    return path[0] not in original and any(ln.strip().startswith(f"{path[0]}.") for ln in lines)


@st.composite
def table_mutations(draw: st.DrawFn) -> tuple[Path, Path_, object]:
    config = draw(st.sampled_from(TABLE_CONFIGS))
    path = draw(st.sampled_from(field_paths(config, TableConfig)))
    return config, path, draw(hostile_values)


@settings(max_examples=400, derandomize=True, database=None, deadline=None)
@given(table_mutations())
def test_config_check_names_the_field_or_accepts(mutation: tuple[Path, Path_, object]) -> None:
    config, path, value = mutation
    doc = tomllib.loads(config.read_text())
    original = tomllib.loads(config.read_text())
    _set(doc, path, value)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "table.toml"
        file.write_text(toml_text(doc))
        code, err = _check(file)
    event(f"exit {code}")
    assert code in (0, 2), err
    if code == 2:
        lines = err.splitlines()[1:]
        assert lines, err
        assert names_the_field(lines, path, original), (path, value, err)


@st.composite
def link_mutations(draw: st.DrawFn) -> tuple[Path_, object]:
    path = draw(st.sampled_from(field_paths(LINK_CONFIG, LinkConfig)))
    return path, draw(hostile_values)


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(link_mutations())
def test_link_config_names_the_field_or_accepts(mutation: tuple[Path_, object]) -> None:
    path, value = mutation
    doc = tomllib.loads(LINK_CONFIG.read_text())
    original = tomllib.loads(LINK_CONFIG.read_text())
    _set(doc, path, value)
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "link.toml"
        file.write_text(toml_text(doc))
        errors: list[str] = []
        try:
            load_link_config(file)
        except ConfigError as exc:
            errors = exc.errors or ["(a ConfigError listing nothing)"]
    assert not errors or names_the_field(errors, path, original), (path, value, errors)


# ---- run: values at the edges of what check accepts, on simulated devices ----


def _bounds(model: type[BaseModel]) -> Iterator[tuple[str, int | float]]:
    """(field, value) at each numeric bound of a section: ge/le themselves, just inside gt/lt."""
    for name, info in _keys(model).items():
        for rule in info.metadata:
            whole = info.annotation is int
            step = 1 if whole else 1e-3
            if isinstance(rule, annotated_types.Ge):
                yield name, rule.ge  # type: ignore[misc]
            elif isinstance(rule, annotated_types.Le):
                yield name, rule.le  # type: ignore[misc]
            elif isinstance(rule, annotated_types.Gt):
                yield name, rule.gt + step  # type: ignore[operator]
            elif isinstance(rule, annotated_types.Lt):
                yield name, rule.lt - step  # type: ignore[operator]


# The sections a daemon on simulated devices can run with any accepted value of (the
# shuffler's port and the GPIO backend are what make it simulated).
RUN_SECTIONS = ["shuffler", "gpio", "mqtt", "access", "records"]


def _edges() -> list[tuple[Path_, object]]:
    edges: list[tuple[Path_, object]] = []
    for section in RUN_SECTIONS:
        model = _model_of(TableConfig.model_fields[section].annotation)
        assert model is not None
        edges += [((section, name), value) for name, value in _bounds(model)]
    # The longest Unix socket paths check accepts (the daemon binds one, connects to the other).
    edges += [(("storage", "control_socket"), "SOCKET"), (("storage", "data_dir"), "DATA_DIR")]
    return sorted(set(edges), key=str)


def _run_fields() -> list[Path_]:
    """Every field of the sections a simulated daemon runs with any value of."""
    return [path for path in _schema_fields(TableConfig) if path[0] in RUN_SECTIONS]


def _longest(base: Path, suffix: str = "") -> str:
    """A path in base that, with suffix appended, is exactly the AF_UNIX limit long."""
    room = UNIX_SOCKET_PATH_MAX_BYTES - len(os.fsencode(str(base))) - 1 - len(suffix)
    assert room > 0, "the test's temporary directory is too deep for this case"
    return str(base / ("d" * room))


async def _run_daemon(config: Path, cfg: TableConfig) -> tuple[int, str]:
    """Start `tablectl run`, wait for READY=1, SIGTERM: its exit code and log."""
    table = SimulatedTableInputs(cfg.table.seats)
    server = await table.serve(cfg.simulator_socket)
    notify_path = config.parent / "notify"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.setblocking(False)
    proc = await asyncio.create_subprocess_exec(
        str(TABLECTL),
        "run",
        "--config",
        str(config),
        env={**os.environ, "NOTIFY_SOCKET": str(notify_path)},
        cwd=config.parent,  # a relative path the config names lands here
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    log = asyncio.create_task(proc.stderr.read())
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            loop = asyncio.get_running_loop()
            ready = asyncio.ensure_future(loop.sock_recv(notify, 4096))
            exited = asyncio.ensure_future(proc.wait())
            await asyncio.wait([ready, exited], return_when=asyncio.FIRST_COMPLETED)
            if not ready.done():
                ready.cancel()
                return await proc.wait(), (await log).decode()
            assert ready.result().startswith(b"READY=1"), ready.result()
            proc.send_signal(signal.SIGTERM)
            return await proc.wait(), (await log).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        notify.close()
        server.close()


@settings(
    max_examples=20,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    edge=st.one_of(
        st.sampled_from(_edges()), st.tuples(st.sampled_from(_run_fields()), hostile_values)
    )
)
# Always: the cases issue 16 found crashing, and the edges check now draws around them.
@example(edge=(("mqtt", "backlog_alarm_hours"), math.inf))
@example(edge=(("shuffler", "baudrate"), 10**21))
@example(edge=(("storage", "control_socket"), "SOCKET"))
@example(edge=(("storage", "data_dir"), "DATA_DIR"))
@example(edge=(("shuffler", "baudrate"), 4_000_000))
@example(edge=(("shuffler", "baudrate"), 50))
@example(edge=(("mqtt", "backlog_alarm_hours"), 366 * 24))
def test_what_check_accepts_runs_and_stops(
    edge: tuple[Path_, object], tmp_path: Path, broker: PrivateBroker
) -> None:
    # Not under tmp_path: under pytest-xdist its path is longer (popen-gwN/...), and the
    # default sockets in data_dir would pass the AF_UNIX limit for a reason not the edge's.
    with tempfile.TemporaryDirectory(prefix="tc-") as home:
        asyncio.run(_edge_runs_or_is_refused(Path(home), broker, *edge))


async def _edge_runs_or_is_refused(
    home: Path, broker: PrivateBroker, path: Path_, value: object
) -> None:
    sim = ShufflerSimulator(shuffle_ms=20)
    try:
        doc = tomllib.loads(table_toml(home, sim.open_pty(), broker).read_text())
        if value == "SOCKET":
            value = _longest(home)
        elif value == "DATA_DIR":
            value = _longest(home, "/table-simulator.sock")
            doc["storage"]["control_socket"] = str(home / "c.sock")
        _set(doc, path, value)
        config = home / "edge.toml"
        config.write_text(toml_text(doc))
        code, err = _check(config)
        event(f"check exit {code}")
        if code != 0:
            assert code == 2 and _field_name(path) in err, err
            return
        cfg = load_config(config)
        code, log = await _run_daemon(config, cfg)
        assert code == 0, (path, value, log[-3000:])
        assert "internal error" not in log
    finally:
        sim.close()


def test_the_edges_reach_every_bounded_field() -> None:
    """The run property covers each section's bounds (a new field without bounds shows here)."""
    bounded = {path[:2] for path, _ in _edges()}
    for section in RUN_SECTIONS:
        model = _model_of(TableConfig.model_fields[section].annotation)
        assert model is not None
        for name, info in _keys(model).items():
            if info.annotation in (int, float):
                assert (section, name) in bounded, f"{section}.{name} has no bounds"


@pytest.mark.parametrize(
    ("section", "line", "field"),
    [
        ("mqtt", "backlog_alarm_hours = inf", "mqtt.backlog_alarm_hours"),
        ("mqtt", "backlog_alarm_hours = 1e300", "mqtt.backlog_alarm_hours"),
        ("mqtt", "ack_stall_s = nan", "mqtt.ack_stall_s"),
        ("shuffler", "baudrate = 1000000000000000000000", "shuffler.baudrate"),
        ("shuffler", "baudrate = 49", "shuffler.baudrate"),
        ("storage", 'control_socket = "/run/' + "s" * 103 + '"', "storage.control_socket"),
        ("storage", 'data_dir = "/var/lib/tablectl\\u0000x"', "storage.data_dir"),
        ("shuffler", 'port = "/dev/ttyS0\\u0000"', "shuffler.port"),
        ("mqtt", 'host = "a\\u0000b"', "mqtt.host"),
        ("mqtt", 'host = "' + "h" * 64 + '.example"', "mqtt.host"),
        ("records", 'time_zone = "' + "Z" * 300 + '"', "records.time_zone"),
        ("gpio", "seat_sensor_pins = " + "[" * 3000 + "]" * 3000, "gpio.seat_sensor_pins"),
        # issue 27: a table header 500 levels deep was exit 70 (a RecursionError).
        ("mqtt", "[mqtt" + ".a" * 500 + "]", "mqtt.a"),
        ("storage", 'data_dir = ""', "storage.data_dir"),
        ("storage", 'data_dir = "tablectl"', "storage.data_dir"),
        ("mqtt", 'host = "broker example"', "mqtt.host"),
    ],
)
def test_the_known_crashes_are_config_errors(
    tmp_path: Path, section: str, line: str, field: str
) -> None:
    """The values issue 16 found crashing `run` (exit 70) are refused by check, exit 2."""
    text = (REPO / "config" / "three-card-poker.toml").read_text()
    key = line.split(" = ")[0]
    lines = [ln for ln in text.splitlines() if not ln.startswith(f"{key} =")]
    if f"[{section}]" not in lines:
        lines.append(f"[{section}]")
    at = lines.index(f"[{section}]")
    lines.insert(at + 1, line)
    path = tmp_path / "table.toml"
    path.write_text("\n".join(lines) + "\n")
    code, err = _check(path)
    assert code == 2, err
    assert any(entry.strip().startswith(field) for entry in err.splitlines()[1:]), err


def test_run_refuses_a_bad_config_before_it_starts_anything(tmp_path: Path) -> None:
    """`run` on a config check refuses: exit 2 naming the field, no data directory made."""
    text = (REPO / "config" / "simulated-table.toml").read_text()
    data_dir = tmp_path / "data"
    text = text.replace('data_dir = "/tmp/tablectl-sim"', f'data_dir = "{data_dir}"')
    text = text.replace("[mqtt]\n", "[mqtt]\nbacklog_alarm_hours = inf\n")
    config = tmp_path / "table.toml"
    config.write_text(text)
    run = subprocess.run(
        [str(TABLECTL), "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert "mqtt.backlog_alarm_hours: Input should be a finite number" in run.stderr
    assert not data_dir.exists()


def test_a_sections_own_rule_is_reported_beside_its_bad_field(tmp_path: Path) -> None:
    """Every error at once: a bad mqtt.port does not hide mqtt's TLS rule, nor a bad GPIO
    timing the pins the seats need (fixing one error must not reveal the next)."""
    text = (REPO / "config" / "three-card-poker.toml").read_text()
    for old, new in [
        ("port = 1883", 'port = 0\ncert_file = "/etc/hostname"\nkey_file = "/etc/hostname"'),
        ("lockout_debounce_ms = 50", "lockout_debounce_ms = inf"),
        ("seat_light_pins = [17, 27, 22, 23, 24, 25]", "seat_light_pins = [17, 27]"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "table.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.errors == [
        "gpio.lockout_debounce_ms: Input should be a finite number",
        "mqtt.port: Input should be greater than or equal to 1",
        "mqtt: cert_file is set but tls is false: set tls = true",
        "gpio.seat_light_pins lists 2 pins for 6 seats: 649a.2(c)(1) needs a wagering device "
        "at each betting position",
    ]

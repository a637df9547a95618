"""A linked table whose network drops: the daemon in its own network namespace (`ip netns` +
veth), its link set down and up, against a real link controller, PostgreSQL and Mosquitto.

Shown: LINK DOWN within the configured time, no progressive wager accepted while down (the
base game goes on), and every contribution in the outbox applied exactly once after. Needs
root and `ip netns`; elsewhere the test is skipped with the reason (`pytest -rs`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.patroni import ip, namespaces_unavailable
from tablectl.simulators.postgres import PrivatePostgres
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.control import client as control
from tablectl.link import ledger
from tablectl.link.audit import verify
from tablectl.status import Status
from tablectl.store.journal import JournalReader

from .link_support import HANG_GUARD_S, ControllerProcess, new_database, prepare, write_config
from .test_service import table_toml

pytestmark = pytest.mark.timeout(240)
TABLE_REF = "pa-demo-casino/tcp-07"
# Hands that win nothing on the Progressive Payout Wager, one per seat, no card twice.
LOSING_HANDS = {1: "2c7d9h", 2: "2d7c9s", 3: "3c8d9c", 4: "4h8s2s", 5: "5h9c3d"}
TIMEOUT_MS = 2000  # the table's link timeout: LINK DOWN after this much silence


@contextlib.contextmanager
def table_namespace() -> Iterator[tuple[str, str, str, str]]:
    """A network namespace joined to this one by a veth pair: (netns, the table's side of
    the link, the host's address, the table's address)."""
    pid = os.getpid()
    netns, host_if, table_if = f"tctl-{pid}", f"tch{pid % 100000}", f"tct{pid % 100000}"
    net = f"10.231.{pid % 250}"
    ip("netns", "add", netns)
    try:
        ip("link", "add", host_if, "type", "veth", "peer", "name", table_if)
        ip("link", "set", table_if, "netns", netns)
        ip("addr", "add", f"{net}.1/30", "dev", host_if)
        ip("link", "set", host_if, "up")
        ip("netns", "exec", netns, "ip", "addr", "add", f"{net}.2/30", "dev", table_if)
        ip("netns", "exec", netns, "ip", "link", "set", table_if, "up")
        ip("netns", "exec", netns, "ip", "link", "set", "lo", "up")
        yield netns, table_if, f"{net}.1", f"{net}.2"
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            ip("link", "del", host_if)
        ip("netns", "del", netns)


def linked_toml(tmp_path: Path, shuffler_port: str, broker: PrivateBroker) -> Path:
    path = table_toml(tmp_path, shuffler_port, broker)
    text = path.read_text()
    for old, new in [
        ('host = "127.0.0.1"', f'host = "{broker.host}"'),
        ('wager = "1.00"', 'wager = "5.00"'),
    ]:
        assert old in text, old
        text = text.replace(old, new, 1)
    text += f'\n[progressive]\nlink = "bank"\nlink_timeout_ms = {TIMEOUT_MS}\n'
    path.write_text(text)
    return path


async def until(predicate: Callable[[], Any], what: str, timeout_s: float = HANG_GUARD_S) -> Any:
    """Until predicate() is truthy (another process's state: asked, not awaited)."""
    try:
        async with asyncio.timeout(timeout_s):
            while not (found := await asyncio.to_thread(predicate)):  # noqa: ASYNC110 -- another process
                await asyncio.sleep(0.05)
            return found
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def test_a_table_whose_network_drops_locks_its_progressive_and_drains_once(
    postgres: PrivatePostgres, tmp_path: Path
) -> None:
    reason = namespaces_unavailable()
    if reason is not None:
        print(f"network-namespace test skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    with table_namespace() as (netns, table_if, host_ip, _), PrivateBroker(host=host_ip) as broker:
        setup = write_config(
            tmp_path, new_database(postgres), broker, tables=TABLE_REF, broadcast_ms=200
        )
        await prepare(setup)
        controller = ControllerProcess(setup.path, "c1")
        await controller.start()
        sim = ShufflerSimulator(shuffle_ms=20)
        config = linked_toml(tmp_path, sim.open_pty(), broker)
        inputs = SimulatedTableInputs(6)
        server = await inputs.serve(tmp_path / "data" / "table-simulator.sock")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(tmp_path / "notify"))
        notify.setblocking(False)
        tablectl = Path(sys.executable).with_name("tablectl")
        proc = await asyncio.create_subprocess_exec(
            "ip", "netns", "exec", netns, str(tablectl), "run", "--config", str(config),
            env={**os.environ, "NOTIFY_SOCKET": str(tmp_path / "notify")},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=(tmp_path / "daemon.log").open("wb"),
        )  # fmt: skip
        sock = tmp_path / "c.sock"

        def status() -> Status:
            reply = control.call(sock, {"cmd": "status"})
            assert reply["ok"], reply
            return Status.model_validate(reply["data"])

        def link_state(s: Status) -> str | None:
            return None if s.link is None else s.link.state

        def dealer(**request: object) -> dict[str, Any]:
            return control.call(sock, {**request, "by": "dealer-1"})

        async def round_(seats: tuple[int, ...]) -> Status:
            """A round: chips on these seats, the lock-out, the chips collected, settled."""
            opened: Status = await until(
                lambda: (s := status()).phase == "betting" and s, "betting"
            )
            for seat in seats:
                inputs.place_chip(seat)
            round_id = opened.round_id
            await until(
                lambda: (
                    (s := status()).counters.get("wagers_rejected", 0) + len(s.wagers)
                    >= len(seats) + opened.counters.get("wagers_rejected", 0)
                ),
                "every chip decided",
            )
            inputs.press_lockout()
            locked: Status = await until(
                lambda: (
                    (s := status()).round_id == round_id
                    and s.phase == "locked"
                    and s.count_final
                    and s
                ),
                "the count",
            )
            for seat in seats:
                inputs.remove_chip(seat)
            hands = {seat: LOSING_HANDS[int(seat)] for seat in locked.wagers}
            reply = await asyncio.to_thread(dealer, cmd="settle", hands=hands)
            assert reply["ok"], reply
            return locked

        def journal(type_: str) -> list[tuple[int, dict[str, Any]]]:
            reader = JournalReader(tmp_path / "data" / "tablectl.sqlite3")
            try:
                return [
                    (r.seq, r.data)
                    for r in reader.rows_between(1, reader.last_seq)
                    if r.type == type_
                ]
            finally:
                reader.close()

        try:
            async with asyncio.timeout(HANG_GUARD_S):
                while not (await asyncio.get_running_loop().sock_recv(notify, 4096)).startswith(
                    b"READY=1"
                ):
                    pass
            await until(lambda: link_state(status()) == "up", "the link up")
            await round_((2, 5))
            assert len(journal("link.contribution")) == 2

            # The table's network drops. A round counted before LINK DOWN is noticed keeps
            # its contributions in the outbox (retried if LINK DOWN came first).
            ip("netns", "exec", netns, "ip", "link", "set", table_if, "down")
            while True:
                before = len(journal("link.contribution"))
                locked = await round_((1, 3))
                if len(journal("link.contribution")) > before:
                    break
                assert link_state(locked) == "LINK DOWN"
            outage_rows = journal("link.contribution")[before:]
            assert len(outage_rows) == 2

            # LINK DOWN within the configured time; the base game plays on, the progressive
            # wager is refused.
            down: Status = await until(
                lambda: link_state(s := status()) == "LINK DOWN" and s, "LINK DOWN"
            )
            assert link_state(down) == "LINK DOWN"
            refused_before = len(journal("wager.rejected"))
            await round_((4,))
            refused = journal("wager.rejected")[refused_before:]
            assert [(d["seat"], d["reason"], d["rule"]) for _, d in refused] == [
                (4, "link-down", "5321.18(c)")
            ]
            assert not inputs.light_is_on(4)
            await until(lambda: status().phase == "betting", "the next round")

            # The network returns: the link comes up and the outbox drains, each row once.
            ip("netns", "exec", netns, "ip", "link", "set", table_if, "up")
            await until(lambda: link_state(status()) == "up", "the link up again")
            last_seq = status().journal.last_seq

            async def cursor() -> int:
                conn = await ledger.connect(setup.conninfo, application_name="test-netns")
                try:
                    cur = await conn.execute(
                        "SELECT acked_through_seq FROM link_table WHERE table_ref = %s",
                        (TABLE_REF,),
                    )
                    row = await cur.fetchone()
                    return 0 if row is None else int(row[0])
                finally:
                    await conn.close()

            async with asyncio.timeout(HANG_GUARD_S):
                while await cursor() < last_seq:  # noqa: ASYNC110 -- PostgreSQL, polled
                    await asyncio.sleep(0.1)
            conn = await ledger.connect(setup.conninfo, application_name="test-netns")
            try:
                cur = await conn.execute(
                    "SELECT seq, contribution_units FROM link_event"
                    " WHERE kind = 'contribution' AND table_ref = %s ORDER BY seq",
                    (TABLE_REF,),
                )
                applied = await cur.fetchall()
                result = await verify(conn)
            finally:
                await conn.close()
            journaled = journal("link.contribution")
            assert applied == [
                (seq, d["contribution_ten_thousandths_cent"]) for seq, d in journaled
            ], "every contribution applied exactly once"
            assert {seq for seq, _ in outage_rows} <= {seq for seq, _ in applied}
            assert result.ok, result.failures
        except AssertionError as exc:
            # What the daemon said, for a failure seen once under load on a fresh clone.
            log = (tmp_path / "daemon.log").read_text(errors="replace")[-6000:]
            raise AssertionError(f"{exc}\n--- the daemon's log, last lines ---\n{log}") from exc
        finally:
            if proc.returncode is None:
                proc.terminate()
                await proc.wait()
            controller.stop()
            notify.close()
            server.close()
            sim.close()

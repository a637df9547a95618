"""A journal put back from an older copy is noticed; a chain broken in the middle holds the
table (docs/design.md, "A journal that proves it is whole").

The database and its mark copied back together from an older backup are a consistent journal:
`journal verify` passes it and the daemon starts. What shows the rollback is a registered
backend's acknowledgement past the journal's end: the table journals the fault, publishes
nothing more (the seqs it would hand out are rows that backend holds with other content) and
opens no round, naming `tablectl journal recover`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from tablectl.simulators.broker import PrivateBroker

from tablectl import cli
from tablectl.config import load_config
from tablectl.core.table import Phase
from tablectl.service.daemon import Daemon, StartupError
from tablectl.store.integrity import Check, VerifyReport
from tablectl.store.journal import Store
from tablectl.store.mark import mark_path

from .conftest import SimulatedTable, simulated_table
from .test_journal_integrity import journal_play, make_table, recover, verify


def _copy(database: Path, to: Path) -> None:
    """The database (SQLite's online backup) and its mark, as a backup takes them."""
    to.mkdir()
    with (
        contextlib.closing(sqlite3.connect(database)) as db,
        contextlib.closing(sqlite3.connect(to / database.name)) as copy,
    ):
        db.backup(copy)
    shutil.copy(mark_path(database), to / mark_path(database).name)


def _put_back(backup: Path, database: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    shutil.copy(backup / database.name, database)
    shutil.copy(backup / mark_path(database).name, mark_path(database))


async def _more_rows(table: SimulatedTable) -> None:
    """A round voided and the next one open: rows past the backup, acknowledged."""
    assert (await table.dealer(cmd="void", reason="wrong-card-count", by="d1"))["ok"]
    await table.daemon.wait_until(lambda s: s.round_id >= 2, 10)
    await table.until_shuffler_has_nothing_left()
    await table.wait_backend_caught_up()


async def test_a_journal_put_back_from_an_older_copy_stops_publishing(
    broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    async with simulated_table(broker, data) as table:
        database = table.config.storage.database
        await table.wait_phase(Phase.BETTING)
        await table.until_shuffler_has_nothing_left()
        await table.wait_backend_caught_up()
        assert table.daemon.store is not None
        backed_up = table.daemon.store.last_seq
        await table.stop()
        _copy(database, tmp_path / "backup")
        await table.start()
        await _more_rows(table)
        held = dict(table.backend.events)  # what the backend holds: each seq's event id
        acked = max(held)
        assert acked > backed_up
        await table.stop()

        _put_back(tmp_path / "backup", database)
        # At rest the copy is a consistent journal: verify passes it (what it cannot see).
        assert cli.main(["journal", "verify", "--data-dir", str(data), "--json"]) == 0
        capsys.readouterr()

        delivered = len(table.backend.deliveries)
        await table.start()
        await table.daemon.wait_until(lambda s: s.rolled_back is not None, 10)
        rolled = table.state.rolled_back
        assert rolled is not None and rolled.backend_id == "pgs"
        assert rolled.acked_through_seq == acked and rolled.last_seq >= backed_up
        fault = {f.what: f for f in table.daemon.faults()}["journal-rolled-back"]
        assert fault.command == "tablectl journal recover --by ID --accept acks"
        assert f"acknowledged rows through seq {acked}" in fault.cause and fault.since
        # Nothing it journals from here on leaves; nothing published since the start is a
        # seq the backend held with other content.
        assert table.daemon.bound is not None
        through = table.daemon.bound.publish_through
        assert through is not None and through <= backed_up
        for seq, _replay in table.backend.deliveries[delivered:]:
            assert seq <= through
        assert all(table.backend.events[seq] == event for seq, event in held.items())
        store = table.daemon.store
        assert store is not None
        rows = [r for r in store.rows_after(0, limit=10_000) if r.type == "journal.rolled_back"]
        assert len(rows) == 1 and "journal recover" in rows[0].data["action"]
        assert table.daemon.relay.stats().published_through_seq <= through
        await table.stop()

        # At rest, the journal now says so: verify fails on it and names the way on.
        assert cli.main(["journal", "verify", "--data-dir", str(data), "--json"]) == 1
        report = VerifyReport.model_validate_json(capsys.readouterr().out)
        (problem,) = [p for p in report.problems if p.check is Check.ACKS]
        assert "journaled as a rollback" in problem.message and problem.accept == "acks"
        with pytest.raises(StartupError, match=r"journal recover --by ID --accept acks"):
            await Daemon(table.config, gpio_backend=table.inputs.backend()).run()


def test_recover_accepts_a_rollback_shown_by_an_acknowledgement_found_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The backend's acknowledgement was wrong (withdrawn since): a technician accepts it, the
    acceptance is journaled, and the table publishes and plays again."""
    from tablectl.core.events import AckPastJournal
    from tablectl.core.table import TableState, step
    from tablectl.service.dispatcher import journal_entries, journal_input

    from .conftest import EXAMPLE_CONFIG

    table = make_table(tmp_path)
    rules = load_config(EXAMPLE_CONFIG).rules()
    with contextlib.closing(Store(table.db, boot_id="b2")) as store:
        saved = store.get("table_state")
        assert saved is not None
        state = TableState.model_validate_json(saved)
        found = AckPastJournal(backend_id="pgs", acked_through_seq=999, last_seq=store.last_seq)
        state, effects = step(rules, state, found)
        store.commit(state.model_dump_json(), journal_entries(effects), journal_input(found))
    code, report = verify(table, capsys)
    assert code == 1 and {p.check for p in report.problems} == {Check.ACKS}
    code, out = recover(table, capsys, "acks")
    assert code == 0, out
    done = out["done"]
    assert isinstance(done, list) and any("accepted as wrong" in line for line in done)
    code, report = verify(table, capsys)
    assert code == 0, report.problems
    with contextlib.closing(Store(table.db, boot_id="b3")) as store:
        assert json.loads(store.get("table_state") or "{}").get("rolled_back") is None
        journal_play(store, rounds=1, seed=3)  # it plays on


async def test_a_chain_broken_in_the_middle_is_found_at_start(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    """Start-up reads only the journal's tail; the whole walk finds a row edited in the
    middle. A short journal is walked before the daemon starts (it refuses, exit 1); a long
    one in the background, with no round opening until it passes (here: never)."""
    async with simulated_table(broker, tmp_path / "data") as table:
        await table.wait_phase(Phase.BETTING)
        await table.until_shuffler_has_nothing_left()
        await table.stop()
        with contextlib.closing(sqlite3.connect(table.config.storage.database)) as db, db:
            db.execute("UPDATE journal SET data = '{\"round_id\": 7}' WHERE seq = 3")
        with pytest.raises(StartupError, match=r"\[chain\] the journal does not chain at seq 3"):
            await Daemon(table.config, gpio_backend=table.inputs.backend()).run()

        await table.start(verify_before_start_rows=0)
        await table.daemon.wait_until(lambda s: s.chain_broken is not None, 10)
        broken = {f.what: f for f in table.daemon.faults()}["journal-chain-broken"]
        assert (
            "does not chain at seq 3" in broken.cause
            and broken.command == "tablectl journal verify"
        )
        assert broken.stops.value == "rounds"
        store = table.daemon.store
        assert store is not None
        types = [r.type for r in store.rows_after(0, limit=10_000)]
        assert (
            "journal.chain_broken" in types
            and "round.opened" not in types[types.index("journal.chain_broken") :]
        )


async def test_a_long_journal_whole_is_walked_then_the_table_plays_on(
    broker: PrivateBroker, tmp_path: Path
) -> None:
    async with simulated_table(broker, tmp_path / "data") as table:
        await table.wait_phase(Phase.BETTING)
        await table.stop()
        await table.start(verify_before_start_rows=0)
        await table.daemon.wait_until(lambda s: s.chain_pending is None, 10)
        assert (await table.dealer(cmd="void", reason="wrong-card-count", by="d1"))["ok"]
        await table.daemon.wait_until(lambda s: s.phase is Phase.BETTING, 10)
        store = table.daemon.store
        assert store is not None
        types = [r.type for r in store.rows_after(0, limit=10_000)]
        assert "journal.chain_verified" in types and types[-1] != "journal.chain_broken"


def test_no_round_opens_while_the_chains_are_walked() -> None:
    from tablectl.core.events import (
        JournalChainChecked,
        JournalCheckPending,
        ShuffleCompleted,
        ShuffleStarted,
    )

    from .test_table_core import RULES, opened, run

    state, _ = run([*opened()[:1], JournalCheckPending(through_seq=40_000, through_input=20_000)])
    state, _ = run([ShuffleStarted(), ShuffleCompleted(card_count=52)], state=state)
    assert state.phase is Phase.CLOSED and state.deck_ready
    state, _ = run([JournalChainChecked(through_seq=40_000, through_input=20_000)], state=state)
    assert state.phase is Phase.BETTING and state.round_id == 1
    assert RULES.revision == 4


def test_verify_of_a_data_dir_checks_acks_against_the_config_at_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With --data-dir alone the registered backends come from the config at hand
    ($TABLECTL_CONFIG here) when its data directory is that one, or from --config given with
    it (a backup checked against the table's config); else they are not known."""
    table = make_table(tmp_path)
    table.sql("INSERT INTO acks VALUES ('rogue', 3)")
    data = str(table.db.parent)
    monkeypatch.setenv("TABLECTL_CONFIG", str(tmp_path / "absent.toml"))
    assert cli.main(["journal", "verify", "--data-dir", data, "--json"]) == 0
    report = VerifyReport.model_validate_json(capsys.readouterr().out)
    (acks,) = [c for c in report.checks if c.check is Check.ACKS]
    assert "registered backends not checked" in acks.detail
    monkeypatch.setenv("TABLECTL_CONFIG", str(table.config))
    assert cli.main(["journal", "verify", "--data-dir", data, "--json"]) == 1
    report = VerifyReport.model_validate_json(capsys.readouterr().out)
    assert report.error is not None and "'rogue'" in report.error
    monkeypatch.delenv("TABLECTL_CONFIG")
    argv = ["journal", "verify", "--data-dir", data, "--config", str(table.config), "--json"]
    assert cli.main(argv) == 1
    assert "'rogue'" in capsys.readouterr().out

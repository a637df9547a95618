"""Inputs journaled, state replayable: a long simulated session of each game, replayed."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest
from tablectl.simulators.dealer import Wanted, as_request, deal_round

from tablectl import cli
from tablectl.control.protocol import parse_request, to_input
from tablectl.core.events import (
    ChipSensed,
    ClearStuckInput,
    ConfirmDocumentation,
    Event,
    LockoutHeld,
    LockoutPressed,
    LockoutReleased,
    NewDeckRegistered,
    PowerUp,
    ReshuffleRequested,
    ShuffleCompleted,
    ShufflerFault,
    ShuffleStarted,
    TableRules,
    ValidateHit,
    VoidRound,
    input_from_journal,
)
from tablectl.core.table import Phase, Rejected, TableState, step
from tablectl.service.dispatcher import journal_entries, journal_input
from tablectl.service.replay import replay
from tablectl.store.journal import Store

from .test_table_core import lir, tcp, uth

JOURNALS = Path(__file__).parent / "journals"

HITS: dict[str, list[Wanted]] = {
    "three-card-poker": [{1: "AsKsQs"}, {2: "9c8c7c"}, {3: "AhKhQh"}],
    "ultimate-texas-holdem": [
        {1: "AsKs", "community": "QsJsTs2d3c"},
        {2: "9h8h", "community": "7h6h5h2c3d"},
    ],
    "let-it-ride": [{1: "AsKsQs", "community": "JsTs"}, {2: "7c7d7s"}],
}


def session(rules: TableRules, rounds: int, seed: int) -> list[Event]:
    """Play `rounds` rounds with random chips, edges, faults, voids and hits: every input
    the core accepted, in order, as the daemon would have journaled them."""
    rng = random.Random(seed)
    game = rules.game.table_game()
    state = TableState.initial(rules)
    accepted: list[Event] = []
    clock = 0

    def feed(event: Event) -> None:
        nonlocal state
        try:
            state, _ = step(rules, state, event)
        except Rejected:
            return
        accepted.append(event)

    feed(PowerUp(rules=rules))
    while state.round_id < rounds or state.phase is not Phase.CLOSED:
        clock += rng.randint(1, 10) * 1_000_000
        if state.blocked:
            feed(NewDeckRegistered(by="dealer"))
        elif state.shuffler_fault:
            feed(ReshuffleRequested(by="dealer"))
        for hit in state.hits_pending:
            feed(ValidateHit(hit_id=hit.hit_id, by="floor"))
            feed(ConfirmDocumentation(hit_id=hit.hit_id, by="floor"))
        for stuck in state.stuck_inputs:  # freed, then cleared by a technician
            if stuck.seat is not None:
                feed(ChipSensed(seat=stuck.seat, present=False, since_ns=clock))
            feed(ClearStuckInput(seat=stuck.seat, by="tech"))
        if state.phase is Phase.CLOSED:
            roll = rng.random()
            if roll < 0.05:
                feed(ShufflerFault(code="jam"))
            feed(ShuffleStarted())
            feed(ShuffleCompleted(card_count=51 if roll > 0.95 else 52))
            continue
        if state.phase is Phase.BETTING:
            for seat in rng.sample(range(1, rules.seats + 1), rng.randint(0, rules.seats)):
                feed(ChipSensed(seat=seat, present=True, since_ns=clock))
            if rng.random() < 0.3 and state.wagers:
                feed(ChipSensed(seat=min(state.wagers), present=False, since_ns=clock))
            if rng.random() < 0.05:
                feed(PowerUp(rules=rules))  # a restart mid-round
                continue
            free = [s for s in range(1, rules.seats + 1) if s not in state.wagers]
            undecided = tuple(rng.sample(free, min(len(free), rng.randint(0, 2))))
            feed(LockoutPressed(at_ns=clock, undecided_seats=undecided))
            for seat in undecided:
                arrived = clock + rng.choice((-1, 0, 1)) * rng.randint(1, 1_000)
                feed(ChipSensed(seat=seat, present=rng.random() < 0.8, since_ns=arrived))
            feed(LockoutReleased(at_ns=clock + 1))
            continue
        # LOCKED: a late chip, then settle (cards through the game's own deal plan) or void;
        # the dealer collects every chip on a sensor first (649a.8(b))
        late = [s for s in range(1, rules.seats + 1) if s not in state.wagers]
        if late:
            feed(ChipSensed(seat=late[0], present=True, since_ns=clock))
        if rng.random() < 0.03:
            feed(LockoutHeld(since_ns=clock, at_ns=clock + 5_000_000_000))  # a stuck button
        if rng.random() < 0.95:  # now and then a chip stays: a stuck sensor, next round
            for seat in sorted(state.occupied):
                feed(ChipSensed(seat=seat, present=False, since_ns=clock))
        if rng.random() < 0.1:
            feed(VoidRound(reason="shoe-jam", by="dealer"))
            continue
        wanted: Wanted = rng.choice(HITS[game.name]) if rng.random() < 0.3 else {}
        seats = sorted(set(state.wagers) | {w for w in wanted if isinstance(w, int)})
        cards = deal_round(game.deal_plan(seats), wanted, rng)
        feed(to_input(parse_request(as_request(cards)), "dealer"))
    return accepted


def journal_session(path: Path, rules: TableRules, events: list[Event]) -> Store:
    store = Store(path, boot_id="test")
    state = TableState.initial(rules)
    for event in events:
        state, effects = step(rules, state, event)
        store.commit(state.model_dump_json(), journal_entries(effects), journal_input(event))
    return store


@pytest.mark.parametrize(
    "rules", [tcp(), uth("2019"), uth("2012"), lir()], ids=lambda r: r.game.name
)
def test_a_long_session_of_each_game_replays_identically(tmp_path: Path, rules: TableRules) -> None:
    events = session(rules, rounds=150, seed=11)
    store = journal_session(tmp_path / "t.sqlite3", rules, events)
    types = {row.type for row in store.rows_after(0, limit=1_000_000)}
    # The session went through every part of the round, so replay checks all of it.
    assert {"wagers.counted", "wager.settled", "round.voided", "wager.rejected"} <= types
    assert {"gpio.input_stuck", "gpio.input_stuck_cleared", "wager.withdrawn"} <= types
    assert "jackpot.validated" in types or rules.game.name == "let-it-ride"
    result = replay(store)
    assert result.identical, result.difference
    assert result.inputs == len(events) and result.rows == store.last_seq > 2_000


def test_replay_names_the_first_seq_that_differs(tmp_path: Path) -> None:
    rules = tcp()
    store = journal_session(tmp_path / "t.sqlite3", rules, session(rules, rounds=20, seed=3))
    target = next(r for r in store.rows_after(0, limit=100_000) if r.type == "meter.contribution")
    store.close()
    with sqlite3.connect(tmp_path / "t.sqlite3") as db:
        data = dict(target.data, wager_cents=500)
        db.execute("UPDATE journal SET data = ? WHERE seq = ?", (json.dumps(data), target.seq))
    result = replay(Store(tmp_path / "t.sqlite3", boot_id="check"))
    assert not result.identical and result.seq == target.seq
    assert f"seq {target.seq}" in (result.difference or "")


def test_a_forged_input_or_state_is_found_by_replay(tmp_path: Path) -> None:
    rules = lir()
    path = tmp_path / "t.sqlite3"
    store = journal_session(path, rules, session(rules, rounds=10, seed=5))
    inputs = list(store.inputs())
    chip = next(i for i in inputs if i.type == "chip_sensed" and i.first_seq is not None)
    quiet = next(i for i in inputs if i.first_seq is None)  # stepped, journaled no row
    store.close()
    with sqlite3.connect(path) as db:
        forged = dict(chip.data, seat=chip.data["seat"] % 7 + 1)
        db.execute(
            "UPDATE inputs SET data = ? WHERE input_seq = ?", (json.dumps(forged), chip.input_seq)
        )
    result = replay(Store(path, boot_id="check"))
    assert not result.identical and result.input_seq == chip.input_seq
    assert result.seq == chip.first_seq
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE inputs SET data = ? WHERE input_seq = ?",
            (json.dumps(chip.data), chip.input_seq),
        )
        db.execute(
            "UPDATE inputs SET state_hash = ? WHERE input_seq = ?", ("0" * 64, quiet.input_seq)
        )
    result = replay(Store(path, boot_id="check"))
    assert result.input_seq == quiet.input_seq and "state differs" in (result.difference or "")


def test_journal_replay_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = uth()
    journal_session(tmp_path / "tablectl.sqlite3", rules, session(rules, 8, seed=2)).close()
    assert cli.main(["journal", "replay", "--data-dir", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True and out["first_difference"] is None and out["rows"] > 50
    with sqlite3.connect(tmp_path / "tablectl.sqlite3") as db:
        db.execute("DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal)")
    assert cli.main(["journal", "replay", "--data-dir", str(tmp_path)]) == 1
    assert "replay differs" in capsys.readouterr().out


def test_fields_added_later_leave_old_journals_and_state_hashes_as_they_were() -> None:
    """Issue 14 added state and input fields; at their defaults they are not written, so a
    journal from before replays to the same state hashes (core/compat.py)."""
    rules = tcp()
    state, _ = step(rules, TableState.initial(rules), PowerUp(rules=rules))
    dumped = json.loads(state.model_dump_json())
    for later in ("shoe_fault", "events_refused", "shuffle_refused", "deal_refused"):
        assert later not in dumped
    assert TableState.model_validate_json(state.model_dump_json()) == state
    assert ShufflerFault(code="jam").model_dump_json() == (
        '{"stale":false,"code":"jam","at_connect":false}'
    )
    fault = ShufflerFault(code="jam", from_status=True)
    assert json.loads(fault.model_dump_json())["from_status"] is True
    assert input_from_journal("shuffler_fault", {"code": "jam"}) == ShufflerFault(code="jam")
    stuck = state.model_copy(update={"shoe_fault": "jam"})
    assert TableState.model_validate_json(stuck.model_dump_json()).shoe_fault == "jam"


@pytest.mark.parametrize("name", ["scripted", "demo"])
def test_a_journal_written_before_issue_14_replays_identically(tmp_path: Path, name: str) -> None:
    """Journals written by the code before the core kept the sensors' levels (its power-ups
    carry no `sensors` rules): every input still loads, and replays to the same rows and
    state hashes (tests/journals/README.md says how they were made)."""
    path = tmp_path / "tablectl.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript((JOURNALS / f"before-issue-14-{name}.sql").read_text())
    store = Store(path, boot_id="check")
    result = replay(store)
    assert result.identical, result.difference
    assert result.rows == store.last_seq > 40

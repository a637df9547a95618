"""Game pace: figures from a small scripted journal against hand-computed expectations, the
windows (rolling, per shift, across a DST change), the cause table, and `tablectl pace`."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import jsonschema
import pytest
from tablectl.simulators.journal_session import play_session

from tablectl import cli
from tablectl.core import effects as rec
from tablectl.core.effects import RECORD_TYPES, MeterReading, Record
from tablectl.records.pace import (
    BLOCK_RULES,
    LOOKBACK,
    PACE_RECORD_TYPES,
    BlockCause,
    Durations,
    LivePace,
    Pace,
    PaceFigures,
    PaceFold,
    _Facts,
    compute_pace,
    pace_reads_from,
    shifts_between,
)
from tablectl.records.source import EventRow, read_entries, read_rows_after
from tablectl.store.journal import journal_ts

from .conftest import REPO
from .test_records import table_config

UTC_ZONE = ZoneInfo("UTC")
T10 = datetime(2024, 6, 1, 10, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Row:
    ts: str
    type: str
    data: dict[str, Any]


def clock(hh_mm_ss: str) -> datetime:
    h, m, s = (int(x) for x in hh_mm_ss.split(":"))
    return T10.replace(hour=h, minute=m, second=s)


def row(hh_mm_ss: str, record: Record) -> Row:
    ts = clock(hh_mm_ss).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return Row(ts, record.TYPE, record.model_dump(mode="json"))


METER = MeterReading(meter_id="progressive", meter_cents=100000, meter_carry=0)


def settled(round_id: int, hands_entered: int = 0) -> rec.RoundSettled:
    return rec.RoundSettled(
        round_id=round_id,
        paid_cents=0,
        folded=[],
        hits_pending=[],
        meter=METER,
        by="D1",
        hands_entered=hands_entered,
    )


def counted(round_id: int) -> rec.WagersCounted:
    return rec.WagersCounted(
        round_id=round_id,
        accepted_wagers=1,
        seats=[1],
        total_wager_cents=100,
        decided_after_lockout=[],
        rule="649a.8(b)",
    )


def locked(round_id: int) -> rec.RoundLocked:
    return rec.RoundLocked(
        round_id=round_id,
        cause="lockout-button",
        accepted_wagers=1,
        seats=[1],
        undecided_seats=[],
        rule="649a.2(c)(2)",
    )


def hit(hit_id: str) -> rec.JackpotHit:
    return rec.JackpotHit(
        hit_id=hit_id,
        round_id=9,
        seat=1,
        hand="straight",
        cards="2c3d4h",
        amount_cents=600,
        basis="odds-for-1",
        meter_before_cents=100000,
        paid_from_table_inventory=True,
        rule="649a.12(e)",
    )


SCRIPT = [
    # A shuffle that ended before the window; one that was stale (not timed).
    row("09:59:00", rec.ShuffleStartedRecord()),
    row("09:59:45", rec.ShuffleCompletedRecord(card_count=52, count_ok=True, deck_ready=True)),
    # Round 1, dealt by the shoe to three seats: betting 30 s, deal 10 s, decision 60 s.
    row("10:00:00", rec.RoundOpened(round_id=1)),
    row("10:00:30", locked(1)),
    row("10:00:30", counted(1)),
    row(
        "10:00:40",
        rec.DealStarted(
            round_id=1,
            seats=[1, 2, 3],
            stacks=[3, 3, 3, 3],
            procedure="automated-shoe",
            rule="649a.10(b)",
            by="D1",
        ),
    ),
    row("10:00:50", rec.DealCompleted(round_id=1, cards_read=12, hands_read=3)),
    row("10:01:50", settled(1)),
    # A shuffle of 40 s, in the window.
    row("10:01:50", rec.ShuffleStartedRecord()),
    row("10:02:30", rec.ShuffleCompletedRecord(card_count=52, count_ok=True, deck_ready=True)),
    row("10:02:31", rec.ShuffleStartedRecord(stale=True)),
    # Round 2, dealt by hand, two hands entered: betting 20 s, decision (from the count) 60 s.
    row("10:02:00", rec.RoundOpened(round_id=2)),
    row("10:02:20", locked(2)),
    row("10:02:20", counted(2)),
    row("10:03:20", settled(2, hands_entered=2)),
    # Round 3, voided: betting 40 s, no decision.
    row("10:04:00", rec.RoundOpened(round_id=3)),
    row("10:04:40", locked(3)),
    row(
        "10:05:00",
        rec.RoundVoided(
            round_id=3,
            reason="shoe-jam",
            rule="649a.13(f)",
            wagers_returned=[1],
            contribution_reversed_ten_thousandths_cent=0,
            meter=METER,
            by="shoe",
        ),
    ),
    # Blocked: a miscount 10:10-10:15 with a GPIO fault 10:12-10:13 inside it.
    row("10:10:00", rec.DeckMiscount(card_count=51, expected=52, rule="649a.5(b)", action="x")),
    row(
        "10:12:00",
        rec.GpioFaultRecord(
            reason="edge-lost", round_id=3, round_locked=False, rule="649a.2(c)(2)"
        ),
    ),
    row("10:13:00", rec.GpioFaultCleared(reason="edge-lost", by="T1")),
    row("10:15:00", rec.DeckRegistered(replaces="deck-miscount:51", by="D1")),
    # Two hits of one round hold the table 10:20-10:30.
    row("10:20:00", hit("9-1")),
    row("10:21:00", hit("9-2")),
    row("10:30:00", rec.JackpotReleased(round_id=9)),
    # Another shoe 10:40-10:42 (the shuffler's identity meanwhile does not end it).
    row(
        "10:40:00",
        rec.DeviceIdentifiedRecord(
            device="shoe",
            model="S",
            serial_number="B",
            firmware="1",
            accepted=False,
            previous_serial_number="A",
        ),
    ),
    row(
        "10:41:00",
        rec.DeviceIdentifiedRecord(
            device="shuffler",
            model="S",
            serial_number="C",
            firmware="1",
            accepted=True,
            previous_serial_number=None,
        ),
    ),
    row(
        "10:42:00",
        rec.DeviceAcceptedRecord(device="shoe", serial_number="B", replaces="A", by="T1"),
    ),
    # A shuffler jam at 10:50, still standing at 11:00.
    row("10:50:00", rec.ShufflerFaultRecord(code="jam", rule="649a.13(e)")),
    # After the window: not counted.
    row("11:00:00", settled(4, hands_entered=6)),
]
ORDERED = sorted(SCRIPT, key=lambda r: r.ts)  # the journal's order (seq) follows time here


def pace(start: str = "10:00:00", end: str = "11:00:00", **kw: Any) -> Pace:
    return compute_pace(
        ORDERED,
        start=clock(start),
        end=clock(end),
        zone=kw.pop("zone", UTC_ZONE),
        shift_starts=kw.pop("shift_starts", [time(6), time(10, 30)]),
        **kw,
    )


def blocked(figures: PaceFigures) -> dict[str, tuple[int, int]]:
    return {b.cause.value: (b.ms, b.episodes) for b in figures.blocked if b.episodes}


def test_the_hour_against_hand_computed_figures() -> None:
    w = pace().window
    assert (w.hours, w.rounds, w.rounds_voided, w.hands) == (1.0, 2, 1, 5)  # 3 dealt + 2 entered
    assert (w.rounds_per_hour, w.hands_per_hour) == (2.0, 5.0)
    # Betting 30, 20, 40 s; the deal 10 s; decisions 60 s (from the deal) and 60 s (count).
    assert w.betting == Durations(count=3, mean_ms=30_000, median_ms=30_000, max_ms=40_000)
    assert w.deal == Durations(count=1, mean_ms=10_000, median_ms=10_000, max_ms=10_000)
    assert w.decision == Durations(count=2, mean_ms=60_000, median_ms=60_000, max_ms=60_000)
    assert w.shuffle == Durations(count=1, mean_ms=40_000, median_ms=40_000, max_ms=40_000)
    assert blocked(w) == {
        "miscount": (300_000, 1),
        "gpio-fault": (60_000, 1),
        "pending-jackpot": (600_000, 1),  # two hits, one hold
        "device-not-accepted": (120_000, 1),
        "jam": (600_000, 1),  # still standing: counted to the end of the window
    }
    # Any cause: the GPIO fault within the miscount counts once: 5 + 10 + 2 + 10 minutes.
    assert w.blocked_ms == 27 * 60_000
    assert [b.cause for b in w.blocked] == list(BlockCause)  # every cause, in a fixed order


def test_a_window_starting_inside_a_block_counts_only_its_part() -> None:
    w = pace(start="10:12:00").window
    assert blocked(w)["miscount"] == (180_000, 1)
    assert w.rounds == 0 and w.rounds_per_hour == 0.0 and w.betting.count == 0
    assert w.betting.mean_ms is None


def test_the_rolling_period_and_the_shifts() -> None:
    p = pace(rolling=timedelta(minutes=30))
    assert (p.rolling.start_utc, p.rolling.end_utc) == (
        "2024-06-01T10:30:00.000Z",
        "2024-06-01T11:00:00.000Z",
    )
    assert blocked(p.rolling) == {"device-not-accepted": (120_000, 1), "jam": (600_000, 1)}
    assert p.rolling.rounds == 0
    # Shifts at 06:00 and 10:30: the first is whole (06:00-10:30), the second runs to now.
    assert [(s.shift, s.start_local, s.end_local) for s in p.shifts] == [
        ("06:00", "2024-06-01T06:00+00:00", "2024-06-01T10:30+00:00"),
        ("10:30", "2024-06-01T10:30+00:00", "2024-06-02T06:00+00:00"),
    ]
    first, second = (s.figures for s in p.shifts)
    assert (first.hours, first.rounds, first.hands_per_hour) == (4.5, 2, round(5 / 4.5, 2))
    assert blocked(first)["pending-jackpot"] == (600_000, 1)
    assert second.hours == 0.5 and second.end_utc == "2024-06-01T11:00:00.000Z"
    assert p.ts == "2024-06-01T11:00:00.000Z" and p.time_zone == "UTC"


def test_shifts_follow_local_time_across_a_dst_change() -> None:
    new_york = ZoneInfo("America/New_York")
    # 2024-03-10 02:00 EST -> 03:00 EDT: the night shift 22:00-06:00 is seven hours long.
    start = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
    shifts = shifts_between(
        start - timedelta(hours=10), start, new_york, [time(6), time(14), time(22)]
    )
    night = next(s for s in shifts if s.name == "22:00")
    assert night.end - night.start == timedelta(hours=7)
    assert night.start.astimezone(new_york).isoformat() == "2024-03-09T22:00:00-05:00"


def test_reading_starts_early_enough_for_every_window() -> None:
    since = pace_reads_from(clock("10:00:00"), clock("11:00:00"), UTC_ZONE, [time(6), time(10, 30)])
    assert since == clock("06:00:00") - timedelta(hours=12)


def test_every_cause_names_record_types_the_core_journals() -> None:
    known = set(RECORD_TYPES.values())
    for rule in BLOCK_RULES:
        assert rule.starts in known and set(rule.ends) <= known, rule.cause
    # Causes with no rows yet (the floor link's) have no rule, and so never count.
    assert {r.cause for r in BLOCK_RULES} == set(BlockCause) - {BlockCause.LINK_DOWN}


def test_the_pace_message_is_in_the_contract() -> None:
    document = json.loads((REPO / "docs" / "asyncapi.json").read_text())
    assert document["channels"]["pace"]["messages"]["pace"]["$ref"].endswith("/Pace")
    # The message as the model serialises it validates against the published schema.
    schema = {**document["components"]["schemas"]["Pace"], "components": document["components"]}
    jsonschema.validate(pace().model_dump(mode="json"), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**pace().model_dump(mode="json"), "window": {}}, schema)


def test_pace_from_the_command_line_on_a_played_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    table, facts = play_session(tmp_path / "tablectl.sqlite3", rounds=40, start=start)
    table.close()
    config = table_config(tmp_path, time_zone='"UTC"', shift_starts='["06:00", "14:00"]')
    assert facts.ended is not None
    until = (facts.ended + timedelta(seconds=1)).isoformat()
    argv = ["pace", "--config", str(config), "--since", start.isoformat(), "--until", until]
    assert cli.main([*argv, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ok"] and shown["table"] == "tcp-07"
    window = shown["window"]
    assert (
        window["rounds"] == facts.rounds_settled and window["rounds_voided"] == facts.rounds_voided
    )
    assert window["deal"]["count"] == facts.rounds_settled  # each settled round was dealt
    # The same as computing it from the rows directly.
    rows = read_entries(
        tmp_path / "tablectl.sqlite3", start - timedelta(days=1), facts.ended + timedelta(seconds=1)
    )
    direct = compute_pace(
        rows,
        start=start,
        end=facts.ended + timedelta(seconds=1),
        zone=UTC_ZONE,
        shift_starts=[time(6), time(14)],
    )
    assert window == direct.window.model_dump(mode="json")
    assert [s["shift"] for s in shown["shifts"]] == ["06:00"]  # 12:00 to about 13:00
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "table tcp-07: game pace" in text and "shift Sat 06:00-14:00" in text
    assert cli.main(["pace", "--config", str(config), "--since", "tomorrow-ish"]) == 2


# --- the daemon's pace: each minute only the rows not read yet ------------------------------


def _normal(facts: _Facts) -> _Facts:
    """Facts in an order that does not depend on when a cause opened (blocks are summed)."""
    far = datetime.max.replace(tzinfo=UTC)
    blocks = sorted(facts.blocks, key=lambda b: (b[0].value, b[1].start, b[1].end or far))
    return replace(facts, blocks=blocks)


def test_forgetting_before_any_row_of_the_script_at_any_later_end() -> None:
    times = sorted({datetime.fromisoformat(r.ts) for r in ORDERED})
    for end in [*times, clock("12:00:00")]:
        for cut in (t for t in times if t <= end):
            for lag in (timedelta(0), timedelta(seconds=30)):  # on a row, and between two
                fold = PaceFold()
                fold.feed(ORDERED, end)
                fold.forget_before(cut + lag)
                fresh = PaceFold()
                fresh.feed((r for r in ORDERED if r.ts >= journal_ts(cut + lag)), end)
                assert _normal(fold.facts()) == _normal(fresh.facts()), (cut + lag, end)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, datetime, datetime]:
    """A journal of about 15 hours of play (longer than the lookback), with every block."""
    path = tmp_path_factory.mktemp("pace") / "tablectl.sqlite3"
    start = datetime(2024, 6, 1, 6, 0, tzinfo=UTC)
    table, facts = play_session(path, rounds=600, start=start)
    table.close()
    assert facts.ended is not None and facts.ended - start > LOOKBACK
    return path, start, facts.ended


def test_a_fold_that_forgets_what_is_before_a_cutoff_equals_one_of_the_rows_after_it(
    session: tuple[Path, datetime, datetime],
) -> None:
    path, start, ended = session
    rows = [
        r
        for r in read_entries(path, start - timedelta(days=1), ended + timedelta(minutes=1))
        if r.type in PACE_RECORD_TYPES  # the others change nothing (the test below reads all)
    ]
    end = ended + timedelta(minutes=1)
    kept = PaceFold()
    cut = start
    while cut < ended:
        # Forgetting step by step is forgetting at once: each cut against a fold of its own.
        whole = PaceFold()
        whole.feed(rows, end)
        whole.forget_before(cut)
        kept.forget_before(cut)
        fresh = PaceFold()
        fresh.feed((r for r in rows if datetime.fromisoformat(r.ts) >= cut), end)
        assert _normal(whole.facts()) == _normal(fresh.facts()), cut
        if cut == start:
            kept.feed(rows, end)
        assert _normal(kept.facts()) == _normal(fresh.facts()), cut
        cut += timedelta(minutes=17, seconds=13)  # across rounds, deals, shuffles and blocks


def test_the_daemons_pace_reads_only_new_rows_and_equals_reading_them_all(
    session: tuple[Path, datetime, datetime],
) -> None:
    path, start, ended = session
    zone, starts, rolling = UTC_ZONE, [time(6), time(14), time(22)], timedelta(minutes=45)
    live = LivePace(zone, starts, rolling)
    reads: list[int] = []

    def rows_after(after_seq: int, since: datetime, end: datetime) -> list[EventRow]:
        rows = read_rows_after(path, after_seq, since, end, PACE_RECORD_TYPES)
        reads.append(len(rows))
        return rows

    every = [
        r
        for r in read_entries(path, start, ended + timedelta(hours=1))
        if r.type in PACE_RECORD_TYPES
    ]
    now, before = start + timedelta(minutes=1), journal_ts(start)
    while now < ended + timedelta(minutes=2):
        pace = live.update(now, rows_after)
        # Only the rows of this minute (of the types pace reads) were read.
        assert reads[-1] == sum(1 for r in every if before <= r.ts < journal_ts(now))
        window = shifts_between(now - timedelta(days=1), now, zone, starts)[-1].start
        since = pace_reads_from(window, now, zone, starts, rolling)
        batch = compute_pace(
            read_entries(path, since, now),
            start=window,
            end=now,
            zone=zone,
            shift_starts=starts,
            rolling=rolling,
        )
        assert pace == batch, now
        before, now = journal_ts(now), now + timedelta(minutes=17)
    assert live.rows_read == sum(reads) == sum(1 for r in every if r.ts < before)
    assert sum(1 for n in reads if n) > 40  # the comparisons saw play, not empty minutes

"""`tablectl records`: the record set of a period, routed, reconciled, signed and verified.

A short scripted journal (every timestamp chosen) checks each sheet's rows exactly; a long
session made by stepping the core is exported in every format, verified, then tampered with
(a byte, a row, the manifest, a file added or removed, another key, rows rewritten and
re-signed): verify fails and names the file each time.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import itertools
import json
import random
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pypdf import PdfReader
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.journal_session import (
    JournaledTable,
    SessionFacts,
    deal_round,
    play_session,
    tcp_rules,
)

from tablectl import cli
from tablectl.core import effects as rec
from tablectl.core.effects import RECORD_TYPES, MeterReading, Record
from tablectl.core.events import (
    ChipSensed,
    ConfirmDocumentation,
    DeviceIdentified,
    LinkClaimAnswer,
    LinkLevelTerms,
    LinkLost,
    LinkParametersHeard,
    LinkRestored,
    LockoutPressed,
    LockoutReleased,
    PowerUp,
    Settle,
    TableRules,
    ValidateHit,
    VoidRound,
)
from tablectl.records.build import Summary
from tablectl.records.export import (
    Exported,
    ExportError,
    ExportRequest,
    Format,
    export_records,
)
from tablectl.records.pdf import activity_window, amount_axis, exact_dollars, time_ticks
from tablectl.records.sheets import (
    MOVEMENTS,
    NOT_MOVEMENTS,
    ROUTES,
    Movement,
    Sheet,
    check_record_set,
    columns,
)
from tablectl.records.signing import (
    MANIFEST,
    SIGNATURE,
    Manifest,
    SigningError,
    create_key,
    fingerprint,
    load_key,
    public_pem,
    sha256_file,
    verify_export,
    write_signed,
)
from tablectl.records.zones import duration_text, machine_zone
from tablectl.store.journal import StepInput, Store, journal_ts

from .conftest import EXAMPLE_CONFIG
from .daemons import daemon_process
from .test_service import TABLECTL

NEW_YORK = ZoneInfo("America/New_York")
T0 = datetime(2024, 6, 1, 3, 30, tzinfo=UTC)  # 23:30 on May 31 in New York (EDT)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def reading(cents: int, carry: int = 0) -> MeterReading:
    return MeterReading(meter_id="progressive", meter_cents=cents, meter_carry=carry)


class Journal:
    """Rows written with the times a test chooses, as the daemon writes them."""

    def __init__(self, path: Path) -> None:
        self.now = T0
        self.store = Store(path, boot_id="b1", clock=lambda: self.now)

    def write(self, minutes: float, *records: Record) -> None:
        self.now = at(minutes)
        self.store.commit("{}", [(r.TYPE, r.model_dump(mode="json")) for r in records])

    def raw(self, minutes: float, type_: str, data: dict[str, object]) -> None:
        self.now = at(minutes)
        self.store.commit("{}", [(type_, data)])

    def power_up(self, minutes: float, rate: str) -> None:
        self.now = at(minutes)
        event = PowerUp(rules=tcp_rules(rate))
        self.store.commit("{}", [], StepInput(event.TYPE, event.model_dump(mode="json")))


def scripted(path: Path) -> Path:
    """A round with a meter hit (validated, documented) and an Envy Bonus, a round the shoe
    voided, a GPIO fault, another shoe accepted, a restart with a new rate, and two rows this
    version cannot read."""
    j = Journal(path)
    j.power_up(0, "14.5")
    shoe = dict(device="shoe", model="S1", firmware="1")
    j.write(
        0,
        rec.DeviceIdentifiedRecord(
            **shoe, serial_number="SHOE-1", accepted=True, previous_serial_number=None
        ),
    )
    j.write(1, rec.RoundOpened(round_id=1))
    j.write(
        1.5,
        rec.WagerAccepted(round_id=1, seat=2, wager_cents=100),
        rec.WagerAccepted(round_id=1, seat=5, wager_cents=100),
    )
    contrib = dict(wager_cents=100, rate_bp=1450, contribution_ten_thousandths_cent=145000)
    j.write(
        2,
        rec.RoundLocked(
            round_id=1,
            cause="lockout-button",
            accepted_wagers=2,
            seats=[2, 5],
            undecided_seats=[],
            rule="649a.2(c)(2)",
        ),
        rec.MeterContribution(round_id=1, seat=2, **contrib, meter=reading(100014, 5000)),
        rec.MeterContribution(round_id=1, seat=5, **contrib, meter=reading(100029)),
        rec.WagersCounted(
            round_id=1,
            accepted_wagers=2,
            seats=[2, 5],
            total_wager_cents=200,
            decided_after_lockout=[],
            rule="649a.8(b)",
        ),
    )
    j.write(
        3,
        rec.DealStarted(
            round_id=1,
            seats=[2, 5],
            stacks=[3, 3, 3],
            procedure="automated-shoe",
            rule="649a.10(b)",
            by="D1 (ann)",
        ),
    )
    settled: dict[str, Any] = dict(
        round_id=1, wager="progressive", wager_cents=100, rule="649a.12(e)"
    )
    j.write(
        4,
        rec.WagerSettled(
            **settled, seat=2, outcome=rec.WagerOutcome.WON, paid_cents=100029, hand="mini-royal"
        ),
        rec.JackpotHit(
            hit_id="1-2",
            round_id=1,
            seat=2,
            hand="ace-king-queen-of-spades",
            cards="AsKsQs",
            amount_cents=100029,
            basis="100%-of-meter",
            meter_before_cents=100029,
            paid_from_table_inventory=False,
            rule="649a.12(e)",
        ),
        rec.MeterReset(
            round_id=1, hit_id="1-2", paid_cents=100029, reset_cents=100000, meter=reading(100000)
        ),
        rec.WagerSettled(**settled, seat=5, outcome=rec.WagerOutcome.LOST, paid_cents=0, hand=None),
        rec.EnvyBonusPaid(
            round_id=1,
            seat=5,
            for_seat=2,
            hand="ace-king-queen-of-spades",
            amount_cents=10000,
            rule="649a.12(e)(5)",
        ),
        rec.RoundSettled(
            round_id=1,
            paid_cents=110029,
            folded=[],
            hits_pending=["1-2"],
            meter=reading(100000),
            by="D1 (ann)",
            hands_read_by_shoe=2,
        ),
    )
    j.write(6, rec.JackpotValidated(hit_id="1-2", by="F1 (fay)"))
    j.write(7, rec.JackpotDocumented(hit_id="1-2", by="F1 (fay)"), rec.JackpotReleased(round_id=1))
    j.write(10, rec.RoundOpened(round_id=2))
    j.write(10.5, rec.WagerAccepted(round_id=2, seat=3, wager_cents=500))
    j.write(11, rec.MeterContribution(round_id=2, seat=3, **contrib, meter=reading(100014, 5000)))
    j.write(
        12,
        rec.ShoeFaultRecord(code="jam", round_id=2, round_voided=True, rule="649a.13(f)"),
        rec.RoundVoided(
            round_id=2,
            reason="shoe-jam",
            rule="649a.13(f)",
            wagers_returned=[3],
            contribution_reversed_ten_thousandths_cent=145000,
            meter=reading(100000),
            by="shoe",
        ),
    )
    j.write(
        13,
        rec.GpioFaultRecord(
            reason="edge-lost", round_id=2, round_locked=False, rule="649a.2(c)(2)"
        ),
    )
    j.write(14, rec.GpioFaultCleared(reason="edge-lost", by="T1 (tim)"))
    j.write(
        15,
        rec.DeviceIdentifiedRecord(
            **shoe, serial_number="SHOE-2", accepted=False, previous_serial_number="SHOE-1"
        ),
    )
    j.write(
        16,
        rec.DeviceAcceptedRecord(
            device="shoe", serial_number="SHOE-2", replaces="SHOE-1", by="T1 (tim)"
        ),
    )
    j.power_up(40, "15.25")
    j.raw(50, "link.down", {"since": "2024-06-01T04:20:00Z", "controller": "floor-1"})
    j.raw(51, "round.opened", {"round_id": 3, "added_in_a_later_version": True})
    j.store.close()
    return path


@pytest.fixture
def key(tmp_path: Path) -> Path:
    path = tmp_path / "records-signing.key"
    create_key(path)
    return path


def export(
    database: Path,
    out: Path,
    key: Path,
    *,
    start: datetime = T0,
    end: datetime = T0 + timedelta(hours=1),
    formats: tuple[Format, ...] = ("csv", "jsonl"),
) -> Manifest:
    return export_set(database, out, key, start=start, end=end, formats=formats).manifest


def export_set(
    database: Path,
    out: Path,
    key: Path,
    *,
    start: datetime = T0,
    end: datetime = T0 + timedelta(hours=1),
    formats: tuple[Format, ...] = ("csv", "jsonl"),
) -> Exported:
    """The record set of table tcp-07 in New York's local time, as `tablectl records` makes it."""
    request = ExportRequest(
        database=database,
        site="pa-demo-casino",
        table="tcp-07",
        game="three-card-poker",
        start=start,
        end=end,
        zone=NEW_YORK,
        formats=formats,
        out=out,
        generator="tablectl test",
    )
    return export_records(request, load_key(key))


def sheet(out: Path, name: Sheet) -> list[dict[str, str]]:
    with (out / f"{name}.csv").open(newline="") as f:
        return list(csv.DictReader(f))


# --- routing ------------------------------------------------------------------------------


def test_every_record_type_of_the_core_is_routed() -> None:
    assert set(RECORD_TYPES.values()) == set(ROUTES)


def test_each_sheet_holds_what_the_auditor_asks_for(tmp_path: Path, key: Path) -> None:
    db = scripted(tmp_path / "tablectl.sqlite3")
    manifest = export(db, tmp_path / "out", key)
    out = tmp_path / "out"

    # Hits: date, time (New York), table, seat, hand, amount; who validated and documented.
    (hit,) = sheet(out, Sheet.HITS)
    assert hit["local_date"] == "2024-05-31" and hit["local_time"] == "23:34:00"
    assert hit["ts_utc"] == "2024-06-01T03:34:00.000Z" and hit["table"] == "tcp-07"
    assert (hit["seat"], hit["hand"], hit["amount_cents"]) == (
        "2",
        "ace-king-queen-of-spades",
        "100029",
    )
    assert hit["validated_by"] == "F1 (fay)" and hit["validated_ts_utc"].startswith(
        "2024-06-01T03:36"
    )
    assert hit["documented_by"] == "F1 (fay)" and hit["paid_from_table_inventory"] == "false"

    # The meter per level, reconciled to the ten-thousandth of a cent.
    (meter,) = sheet(out, Sheet.METERS)
    assert meter == {
        "meter_id": "progressive",
        "opening_cents": "100000",  # the configured initial amount: the journal's first rows
        "opening_carry": "0",
        "opening_seq": "",
        "contributions": "3",
        "contributed_ten_thousandths_cent": "435000",
        "rounds_voided": "1",
        "reversed_ten_thousandths_cent": "145000",
        "hits": "1",
        "paid_cents": "100029",
        "resets": "1",
        "reseeded_cents": "100000",
        "closing_cents": "100000",
        "closing_carry": "0",
        "closing_seq": meter["closing_seq"],
        "reconciles": "true",
    }
    contributions = sheet(out, Sheet.CONTRIBUTIONS)
    assert [
        (c["round_id"], c["seat"], c["contribution_ten_thousandths_cent"]) for c in contributions
    ] == [("1", "2", "145000"), ("1", "5", "145000"), ("2", "3", "145000")]
    (reset,) = sheet(out, Sheet.RESETS)
    assert (reset["kind"], reset["paid_cents"], reset["reset_cents"]) == (
        "reset",
        "100029",
        "100000",
    )

    # A voided round with the section that voids it, and the wagers it returned.
    (void,) = sheet(out, Sheet.VOIDED_ROUNDS)
    assert (void["round_id"], void["reason"], void["rule"], void["by"]) == (
        "2",
        "shoe-jam",
        "649a.13(f)",
        "shoe",
    )
    assert (void["wagers_returned"], void["wagers_returned_cents"]) == ("3", "500")

    # The wagers collected, each one's result, and the Envy Bonus it earned another seat.
    (count,) = sheet(out, Sheet.WAGER_COUNTS)
    assert (count["round_id"], count["seats"], count["total_wager_cents"]) == ("1", "2 5", "200")
    assert [(w["seat"], w["outcome"], w["paid_cents"]) for w in sheet(out, Sheet.WAGERS)] == [
        ("2", "won", "100029"),
        ("5", "lost", "0"),
    ]
    (envy,) = sheet(out, Sheet.ENVY_BONUSES)
    assert (envy["seat"], envy["for_seat"], envy["amount_cents"], envy["local_time"]) == (
        "5",
        "2",
        "10000",
        "23:34:00",
    )

    # Device faults and swaps; control actions with who did them (not what the shoe did).
    devices = sheet(out, Sheet.DEVICE_EVENTS)
    assert [d["event"] for d in devices] == [
        "device.identified",
        "shoe.fault",
        "gpio.fault",
        "gpio.fault_cleared",
        "device.identified",
        "device.accepted",
    ]
    assert "previous_serial_number=SHOE-1" in devices[4]["detail"]
    actions = sheet(out, Sheet.CONTROL_ACTIONS)
    assert [(a["event"], a["by"]) for a in actions] == [
        ("deal.started", "D1 (ann)"),
        ("round.settled", "D1 (ann)"),
        ("jackpot.validated", "F1 (fay)"),
        ("jackpot.documented", "F1 (fay)"),
        ("gpio.fault_cleared", "T1 (tim)"),
        ("device.accepted", "T1 (tim)"),
    ]

    # Parameters: the first start-up sets them all, the restart changed the rate.
    changes = sheet(out, Sheet.PARAMETER_CHANGES)
    first = [c for c in changes if c["input_seq"] == "1"]
    assert {c["parameter"] for c in first} >= {
        "game.progressive.rate_of_progression_percent",
        "seats",
        "game.progressive.reset_amount",
    }
    assert all(c["previous"] == "" for c in first)
    (rate,) = [c for c in changes if c["input_seq"] == "2"]
    assert (rate["parameter"], rate["previous"], rate["value"]) == (
        "game.progressive.rate_of_progression_percent",
        "14.5",
        "15.25",
    )
    assert rate["local_time"] == "00:10:00" and rate["local_date"] == "2024-06-01"

    # Nothing is dropped: what this version cannot read is in other-events, and counted.
    others = sheet(out, Sheet.OTHER_EVENTS)
    assert [o["event"] for o in others] == ["link.down", "round.opened"]
    assert "controller=floor-1" in others[0]["detail"]
    assert "added_in_a_later_version=yes" in others[1]["detail"]
    assert manifest.unknown_record_types == {"link.down": 1, "round.opened": 1}

    # Every row of the period is in the journal sheet, as hashed.
    journal = sheet(out, Sheet.JOURNAL)
    assert len(journal) == manifest.journal.rows == manifest.journal.last_seq
    assert manifest.journal.first_seq == 1
    jsonl = [json.loads(line) for line in (out / "hits.jsonl").read_text().splitlines()]
    assert jsonl[0]["amount_cents"] == 100029 and jsonl[0]["paid_from_table_inventory"] is False


def test_the_period_is_from_inclusive_to_exclusive(tmp_path: Path, key: Path) -> None:
    db = scripted(tmp_path / "tablectl.sqlite3")
    manifest = export(db, tmp_path / "out", key, start=at(4), end=at(12))
    rows = sheet(tmp_path / "out", Sheet.JOURNAL)
    assert rows[0]["ts"] == "2024-06-01T03:34:00.000Z"
    assert rows[-1]["ts"] == "2024-06-01T03:41:00.000Z"  # 03:42 is the end: not in
    # A meter before the period opens it at the amount the last earlier row left.
    (meter,) = sheet(tmp_path / "out", Sheet.METERS)
    assert (meter["opening_cents"], meter["opening_carry"]) == ("100029", "0")
    assert meter["opening_seq"] != "" and meter["reconciles"] == "true"
    assert manifest.journal.first_prev_hash != "0" * 64  # chains to the row before


def test_a_meter_reading_that_does_not_add_up_is_flagged(tmp_path: Path, key: Path) -> None:
    j = Journal(tmp_path / "tablectl.sqlite3")
    j.power_up(0, "14.5")
    j.write(
        1,
        rec.MeterContribution(
            round_id=1,
            seat=1,
            wager_cents=100,
            rate_bp=1450,
            contribution_ten_thousandths_cent=145000,
            meter=reading(100014, 5000),
        ),
    )
    j.write(
        2,
        rec.RoundSettled(
            round_id=1,
            paid_cents=0,
            folded=[],
            hits_pending=[],
            meter=reading(100015, 5000),
            by="D1",
        ),
    )  # a cent from nowhere
    j.store.close()
    export(tmp_path / "tablectl.sqlite3", tmp_path / "out", key)
    (meter,) = sheet(tmp_path / "out", Sheet.METERS)
    assert meter["reconciles"] == "false"


def test_an_export_goes_to_a_new_or_empty_directory(tmp_path: Path, key: Path) -> None:
    db = scripted(tmp_path / "tablectl.sqlite3")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty"):
        export(db, tmp_path / "busy", key)
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["notes.txt"]
    with pytest.raises(ExportError, match="not before"):
        export(db, tmp_path / "new", key, start=at(10), end=at(10))


# --- the key ------------------------------------------------------------------------------


def test_the_key_is_made_once_private_and_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "k"
    first = create_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(SigningError, match="never replaced"):
        create_key(path)
    assert load_key(path).public_key() == first.public_key()
    path.chmod(0o644)
    with pytest.raises(SigningError, match="others may read"):
        load_key(path)
    with pytest.raises(SigningError, match="records key --init"):
        load_key(tmp_path / "missing")


def test_records_key_prints_the_public_half_an_auditor_verifies_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "k"
    assert cli.main(["records", "key", "--key-file", str(key)]) == 1
    assert "records key --init" in capsys.readouterr().err
    assert cli.main(["records", "key", "--init", "--key-file", str(key)]) == 0
    made = capsys.readouterr()
    assert made.out.startswith("-----BEGIN PUBLIC KEY-----") and "SHA256:" in made.err
    assert cli.main(["records", "key", "--init", "--key-file", str(key)]) == 1
    assert "never replaced" in capsys.readouterr().err
    assert cli.main(["records", "key", "--key-file", str(key), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["public_key"] == made.out and not shown["created"]


# --- a long session: exported, verified, tampered with -------------------------------------


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SessionFacts]:
    """About six hours of play (200 rounds): every kind of row the record set reports."""
    path = tmp_path_factory.mktemp("session") / "tablectl.sqlite3"
    table, facts = play_session(path, rounds=200, start=datetime(2024, 6, 1, 12, tzinfo=UTC))
    table.close()
    return path, facts


@pytest.fixture(scope="module")
def exported(
    session: tuple[Path, SessionFacts], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, Manifest]:
    """The session exported in every format (made once; tests tamper with copies)."""
    db, facts = session
    work = tmp_path_factory.mktemp("export")
    key = work / "k"
    create_key(key)
    assert facts.started is not None and facts.ended is not None
    manifest = export(
        db,
        work / "out",
        key,
        start=facts.started,
        end=facts.ended + timedelta(seconds=1),
        formats=("csv", "jsonl", "pdf"),
    )
    (work / "table.pub").write_bytes(
        subprocess.run(
            [str(TABLECTL), "records", "key", "--key-file", str(key)],
            capture_output=True,
            check=True,
        ).stdout
    )
    return work / "out", work / "table.pub", manifest


def copy(exported: tuple[Path, Path, Manifest], tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(exported[0], out)
    return out


@dataclasses.dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def verify(capsys: pytest.CaptureFixture[str]) -> Callable[..., Ran]:
    """`tablectl records verify DIR ...`, in this process."""

    def run(out: Path, *argv: str) -> Ran:
        code = cli.main(["records", "verify", str(out), *argv])
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run


def test_a_long_session_is_exported_whole_and_reconciles(
    session: tuple[Path, SessionFacts], exported: tuple[Path, Path, Manifest]
) -> None:
    _, facts = session
    out, _, manifest = exported
    assert {f.format for f in manifest.files} == {"csv", "jsonl", "pdf"}
    by_name = {f.name: f for f in manifest.files}
    assert by_name["hits.csv"].rows == facts.hits == by_name["hits.jsonl"].rows
    assert by_name["voided-rounds.csv"].rows == facts.rounds_voided
    (meter,) = sheet(out, Sheet.METERS)
    assert meter["reconciles"] == "true" and int(meter["resets"]) >= 4
    # Every control action names a person.
    assert all(a["by"] for a in sheet(out, Sheet.CONTROL_ACTIONS))
    settled = [a for a in sheet(out, Sheet.CONTROL_ACTIONS) if a["event"] == "round.settled"]
    assert len(settled) == facts.rounds_settled
    assert by_name["journal.csv"].rows == manifest.journal.rows == manifest.journal.last_seq
    assert manifest.unknown_record_types == {}


def test_the_pdf_is_a_report_a_person_reads(exported: tuple[Path, Path, Manifest]) -> None:
    out, _, manifest = exported
    pdf = PdfReader(out / "report.pdf")
    text = "\n".join(page.extract_text() for page in pdf.pages)
    assert "Table records: tcp-07" in text and "America/New_York" in text
    assert f"page 1 of {len(pdf.pages)}" in text
    for heading in (
        "Meters",
        "Money",
        "Per day",
        "Wagers by outcome",
        "Envy Bonuses",
        "Progressive hits",
        "Voided rounds",
        "Device faults and swaps",
        "Parameter changes",
        "Control actions",
    ):
        assert heading in text, heading
    assert "Envy Bonuses paid" in text and "envy-bonuses.csv: amount_cents" in text
    assert_read_by_people(text)
    assert "649a.13(f)" in text and "649a.13(d)" in text  # the sections that void rounds
    assert "F042 (fran)" in text and re.search(r"ace king queen of\s+spades", text)
    assert manifest.key_fingerprint in text
    # The meter chart, drawn as vector graphics: its key and its local-time axis are text.
    assert "hit paid from the meter" in text and "local time (America/New_York)" in text


def test_the_chart_caption_names_the_first_and_last_reading_of_the_meter(
    exported: tuple[Path, Path, Manifest],
) -> None:
    """The axis has a margin either side of the activity; the caption says when the journal
    first and last showed the meter (not the margin's ends, before any row of the period)."""
    out, _, _ = exported
    text = " ".join(page.extract_text() for page in PdfReader(out / "report.pdf").pages)
    zone = ZoneInfo("America/New_York")
    rows = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    shown = [
        datetime.fromisoformat(r["ts"]).astimezone(zone).strftime("%H:%M")
        for r in rows
        if "meter" in json.loads(r["data"]) or r["type"] == rec.JackpotHit.TYPE
    ]
    said = re.search(r"meter first journaled at (\d\d:\d\d), last at (\d\d:\d\d)", text)
    assert said is not None, text[text.find("local time (") :][:200]
    assert said.groups() == (min(shown), max(shown))


EPOCH_MS = re.compile(r"\b1[0-9]{12}\b")  # UTC milliseconds, 2001 to 2033


def assert_read_by_people(text: str) -> None:
    """A report a person reads: no epoch milliseconds, no Python None, no ISO milliseconds."""
    assert not EPOCH_MS.search(text), EPOCH_MS.findall(text)[:3]
    assert not re.search(r"\bNone\b", text), text[text.find("None") - 200 :][:400]
    assert not re.search(r"\d\d:\d\d:\d\d\.\d{3}", text)


def test_verify_accepts_the_export_and_names_the_key(
    exported: tuple[Path, Path, Manifest], verify: Callable[..., Ran]
) -> None:
    out, public, manifest = exported
    given = verify(out, "--public-key", str(public))
    assert given.returncode == 0, given.stderr
    assert f"signed by the given key {manifest.key_fingerprint}" in given.stdout
    own = verify(out)
    assert own.returncode == 0 and "give --public-key" in own.stdout


@pytest.mark.parametrize("victim", ["hits.csv", "journal.jsonl", "report.pdf"])
def test_a_byte_changed_in_a_file_is_named(
    exported: tuple[Path, Path, Manifest], tmp_path: Path, victim: str, verify: Callable[..., Ran]
) -> None:
    out = copy(exported, tmp_path)
    data = bytearray((out / victim).read_bytes())
    data[len(data) // 2] ^= 0x01
    (out / victim).write_bytes(bytes(data))
    result = verify(out, "--public-key", str(exported[1]))
    assert result.returncode == 1
    assert f"{out / victim}: SHA-256" in result.stderr and "changed" in result.stderr


def test_a_row_removed_is_named(
    exported: tuple[Path, Path, Manifest], tmp_path: Path, verify: Callable[..., Ran]
) -> None:
    out = copy(exported, tmp_path)
    lines = (out / "voided-rounds.csv").read_text().splitlines(keepends=True)
    (out / "voided-rounds.csv").write_text("".join(lines[:1] + lines[2:]))
    result = verify(out)
    assert result.returncode == 1 and f"{out / 'voided-rounds.csv'}:" in result.stderr


def test_an_edited_manifest_is_named(
    exported: tuple[Path, Path, Manifest], tmp_path: Path, verify: Callable[..., Ran]
) -> None:
    out = copy(exported, tmp_path)
    text = (out / MANIFEST).read_text()
    (out / MANIFEST).write_text(text.replace('"table": "tcp-07"', '"table": "tcp-08"'))
    result = verify(out, "--public-key", str(exported[1]))
    assert result.returncode == 1
    assert f"{out / MANIFEST}: does not match its signature" in result.stderr


def test_another_tables_key_is_refused(
    exported: tuple[Path, Path, Manifest], tmp_path: Path, verify: Callable[..., Ran]
) -> None:
    other = tmp_path / "other.key"
    create_key(other)
    public = tmp_path / "other.pub"
    public.write_text(public_pem(load_key(other).public_key()))
    result = verify(exported[0], "--public-key", str(public), "--json")
    assert result.returncode == 1
    answer = json.loads(result.stdout)
    assert answer["problems"][0]["file"] == SIGNATURE
    assert "not made with the given key" in answer["error"]


def test_a_file_added_or_removed_is_named(
    exported: tuple[Path, Path, Manifest], tmp_path: Path
) -> None:
    out = copy(exported, tmp_path)
    (out / "extra.csv").write_text("seq\n1\n")
    (out / "resets.jsonl").unlink()
    problems = {p.file: p.message for p in verify_export(out).problems}
    assert "not listed in the signed manifest" in problems["extra.csv"]
    assert "cannot read it" in problems["resets.jsonl"]


def test_rows_rewritten_and_re_signed_still_break_the_chain(
    exported: tuple[Path, Path, Manifest], tmp_path: Path
) -> None:
    """Whoever holds the key can re-sign, but not rewrite what the table's chain says."""
    out = copy(exported, tmp_path)
    journal = out / "journal.csv"
    text = journal.read_text()
    assert '""paid_cents"":600' in text
    journal.write_text(text.replace('""paid_cents"":600', '""paid_cents"":6000', 1))
    manifest = Manifest.model_validate_json((out / MANIFEST).read_bytes())
    files = [
        f.model_copy(update=dict(zip(("sha256", "bytes"), sha256_file(out / f.name), strict=True)))
        if f.name == "journal.csv"
        else f
        for f in manifest.files
    ]
    key = tmp_path.parent / "re-signer.key"
    create_key(key)
    public = load_key(key).public_key()
    forged = manifest.model_copy(
        update={
            "files": files,
            "public_key": public_pem(public),
            "key_fingerprint": fingerprint(public),
        }
    )
    write_signed(out, forged, load_key(key))
    problems = verify_export(out).problems
    assert [p.file for p in problems] == ["journal.csv"]
    assert "does not match its hash" in problems[0].message


def test_the_signature_checks_with_openssl_too(exported: tuple[Path, Path, Manifest]) -> None:
    """An auditor need not run tablectl: manifest.sig is a raw Ed25519 signature."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl")
    out, public, _ = exported
    result = subprocess.run(
        [
            "openssl",
            "pkeyutl",
            "-verify",
            "-pubin",
            "-inkey",
            str(public),
            "-rawin",
            "-in",
            str(out / MANIFEST),
            "-sigfile",
            str(out / SIGNATURE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and "Signature Verified Successfully" in result.stdout


# --- the command line ---------------------------------------------------------------------


def table_config(tmp_path: Path, **records: str) -> Path:
    text = EXAMPLE_CONFIG.read_text().replace(
        'data_dir = "/var/lib/tablectl"', f'data_dir = "{tmp_path}"'
    )
    if records:
        text += "\n[records]\n" + "".join(f"{k} = {v}\n" for k, v in records.items())
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def test_records_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scripted(tmp_path / "tablectl.sqlite3")
    config = table_config(tmp_path, time_zone='"America/New_York"')
    args = [
        "records",
        "--config",
        str(config),
        "--from",
        "2024-05-31T23:00",
        "--to",
        "2024-06-01T00:30",
        "--out",
        str(tmp_path / "out"),
    ]
    assert cli.main(args) == 1
    assert "records key --init" in capsys.readouterr().err  # no key yet: nothing written
    assert not (tmp_path / "out").exists()
    assert cli.main(["records", "key", "--init", "--config", str(config)]) == 0
    capsys.readouterr()
    assert cli.main(args) == 0
    out, err = capsys.readouterr()
    assert "meter progressive: $1,000.00 -> $1,000.00" in out and "reconciles" in out
    assert (
        "wagered $2.00, returned $5.00, paid on wagers $1,000.29, Envy Bonuses $100.00 (1)" in out
    )
    assert "link.down (1)" in err  # the rows this version cannot read are said
    manifest = Manifest.model_validate_json((tmp_path / "out" / MANIFEST).read_bytes())
    # Times without a zone are New York's (records.time_zone): 23:00 EDT is 03:00 UTC.
    assert manifest.period.start_utc == "2024-06-01T03:00:00.000Z"
    assert manifest.period.time_zone == "America/New_York"
    assert {f.name for f in manifest.files} >= {"hits.csv", "report.pdf"}  # csv,pdf: default
    assert cli.main([*args[:-1], str(tmp_path / "out")]) == 1  # not empty
    assert "not empty" in capsys.readouterr().err
    assert cli.main([*args[:-1], str(tmp_path / "json"), "--json"]) == 0
    money = {m["movement"]: m for m in json.loads(capsys.readouterr().out)["money"]}
    envy = money["Envy Bonuses paid"]
    assert (envy["records"], envy["amount"], envy["sheet"], envy["column"]) == (
        1,
        10000,
        "envy-bonuses",
        "amount_cents",
    )
    assert money["wagers collected at the final count"]["amount"] == 200
    assert cli.main(["records", "--config", str(config), "--json"]) == 2
    assert "--from" in json.loads(capsys.readouterr().out)["error"]
    assert cli.main(["records", "--config", str(config), "--from", "soon", "--out", "x"]) == 2
    assert cli.main(["records", "--format", "xls", "--from", "1h", "--out", "x"]) == 2
    capsys.readouterr()
    assert cli.main([*args[:-1], str(tmp_path / "tz"), "--tz", "Mars/Olympus"]) == 2
    assert "IANA" in capsys.readouterr().err


def test_a_bad_time_zone_or_shift_in_the_config_is_named(tmp_path: Path) -> None:
    from tablectl.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"records.time_zone: .*IANA"):
        load_config(table_config(tmp_path, time_zone='"Europe/Nowhere"'))
    with pytest.raises(ConfigError, match=r"records.shift_starts: .*in order"):
        load_config(table_config(tmp_path, shift_starts='["14:00", "06:00"]'))
    with pytest.raises(ConfigError, match=r"records.shift_starts\[0\]: .*time of day"):
        load_config(table_config(tmp_path, shift_starts='["6 am"]'))
    config = load_config(table_config(tmp_path, shift_starts="[06:00:00, 18:00:00]"))
    assert [t.hour for t in config.records.shift_starts] == [6, 18]


# --- small pieces -------------------------------------------------------------------------


def test_amounts_are_shown_exactly() -> None:
    assert exact_dollars(1_450_000) == "$1.45"
    assert exact_dollars(145_000) == "$0.145"
    assert exact_dollars(1_000_002_500) == "$1,000.0025"
    assert exact_dollars(1_000_000_025) == "$1,000.000025"
    assert exact_dollars(0) == "$0.00"


def test_the_chart_ticks_at_round_local_times_across_a_dst_change() -> None:
    # 2024-03-10: New York goes from 02:00 EST to 03:00 EDT.
    start = datetime(2024, 3, 10, 5, 0, tzinfo=UTC)  # 00:00 EST
    ticks = time_ticks(start, start + timedelta(hours=6), NEW_YORK)
    labels = [label.split("\n")[-1] for _, label in ticks]
    assert labels[:3] == ["00:00", "01:00", "03:00"]  # 02:00 does not exist that day
    assert [b - a for (a, _), (b, _) in itertools.pairwise(ticks)] == [3600.0] * (len(ticks) - 1)


def test_the_machine_zone_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TZ", raising=False)
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/Europe/Berlin")
    assert machine_zone(link).key == "Europe/Berlin"
    monkeypatch.setenv("TZ", "America/Chicago")
    assert machine_zone(link).key == "America/Chicago"
    monkeypatch.setenv("TZ", "not-a-zone")
    assert machine_zone(tmp_path / "none").key == "UTC"


def test_an_empty_period_still_makes_a_signed_set(tmp_path: Path, key: Path) -> None:
    db = scripted(tmp_path / "tablectl.sqlite3")
    start = datetime(2025, 1, 1, tzinfo=UTC)
    manifest = export(
        db,
        tmp_path / "out",
        key,
        start=start,
        end=start + timedelta(days=1),
        formats=("csv", "pdf"),
    )
    assert manifest.journal.rows == 0 and manifest.journal.first_seq is None
    assert verify_export(tmp_path / "out").ok
    text = "".join(
        p.extract_text()
        for p in PdfReader(io.BytesIO((tmp_path / "out" / "report.pdf").read_bytes())).pages
    )
    assert "Nothing in this period." in text


# --- with the daemon running, and stopped -------------------------------------------------


def has_wal(database: Path) -> bool:
    return Path(f"{database}-wal").exists()


async def tablectl(*argv: str) -> tuple[int, str, str]:
    """The installed command in its own process, without blocking the event loop."""
    proc = await asyncio.create_subprocess_exec(
        str(TABLECTL), *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_records_read_a_snapshot_while_the_daemon_writes_and_after_it_stopped(
    tmp_path: Path, broker: PrivateBroker
) -> None:
    now = datetime.now(UTC)
    period = [
        "--from",
        (now - timedelta(hours=1)).isoformat(),
        "--to",
        (now + timedelta(hours=1)).isoformat(),
        "--format",
        "csv",
    ]
    async with daemon_process(tmp_path, broker, str(TABLECTL), "run", "--config", "CONFIG") as d:
        config = str(d.config)
        assert (await tablectl("records", "key", "--init", "--config", config))[0] == 0
        database = tmp_path / "data" / "tablectl.sqlite3"
        assert has_wal(database)  # the daemon holds the journal open, in WAL mode
        code, _, err = await tablectl(
            "records", "--config", config, *period, "--out", str(tmp_path / "running")
        )
        assert code == 0, err
        code, out, err = await tablectl("pace", "--config", config, "--since", "1h", "--json")
        assert code == 0 and json.loads(out)["ok"], err
        stop_code, log = await d.stop()
    assert stop_code == 0, log
    code, _, err = await tablectl(
        "records", "--config", config, *period, "--out", str(tmp_path / "stopped")
    )
    assert code == 0, err
    for out_dir in ("running", "stopped"):
        assert verify_export(tmp_path / out_dir).ok
    running = sheet(tmp_path / "running", Sheet.JOURNAL)
    stopped = sheet(tmp_path / "stopped", Sheet.JOURNAL)
    # The daemon's start-up was journaled; what the running export saw is exactly the start
    # of what the stopped one sees (rows committed later were not half-read).
    assert "device.identified" in [r["type"] for r in running]
    assert stopped[: len(running)] == running
    manifest = Manifest.model_validate_json((tmp_path / "running" / MANIFEST).read_bytes())
    assert manifest.journal.last_seq is not None
    assert manifest.journal.journal_last_seq >= manifest.journal.last_seq


def test_a_snapshot_does_not_see_rows_committed_while_it_reads(tmp_path: Path) -> None:
    from tablectl.records.source import snapshot

    store = Store(tmp_path / "tablectl.sqlite3", boot_id="b1", clock=lambda: T0)
    for n in range(1, 4):
        store.commit("{}", [("round.opened", {"round_id": n})])
    with snapshot(tmp_path / "tablectl.sqlite3") as snap:
        rows = snap.entries("", "9999")
        assert next(rows).seq == 1  # the snapshot is taken
        store.commit("{}", [("round.opened", {"round_id": 4})])  # the daemon goes on
        assert [r.seq for r in rows] == [2, 3]
        assert snap.last_seq() == 3
    with snapshot(tmp_path / "tablectl.sqlite3") as snap:
        assert snap.last_seq() == 4
    store.close()


def test_the_records_package_stands_below_the_service() -> None:
    """records reads the journal itself: it imports no service module (the service will
    import it to publish pace)."""
    code = (
        "import sys, tablectl.records.export, tablectl.records.pace, tablectl.records.pdf\n"
        "bad = sorted(m for m in sys.modules if m.startswith('tablectl.service'))\n"
        "sys.exit(f'imports {bad}' if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def test_a_failed_export_leaves_nothing_behind(tmp_path: Path, key: Path) -> None:
    (tmp_path / "tablectl.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        export(tmp_path / "tablectl.sqlite3", tmp_path / "out", key)
    assert not (tmp_path / "out").exists()  # no unsigned half-export


# --- issue 27 item 4: every money movement in a sheet and in the summary, to the cent ------


def test_every_amount_a_record_carries_is_in_a_sheet_or_says_why_not() -> None:
    """Walks the record catalogue: each amount (`*_cents`, `*_ten_thousandths_cent`) is a
    movement with its sheet and column, or is listed with why it is not one; never both."""
    moved = {(m.record, m.amount) for m in MOVEMENTS}
    for cls in RECORD_TYPES.values():
        for name, info in cls.model_fields.items():
            if name.endswith(("_cents", "_ten_thousandths_cent")):
                assert info.annotation is int, f"{cls.TYPE}.{name}"
                assert ((cls, name) in moved) != ((cls, name) in NOT_MOVEMENTS), cls.TYPE
    for m in MOVEMENTS:
        assert m.sheet in ROUTES[m.record] and m.column in columns(m.sheet), m
    assert rec.EnvyBonusPaid in {m.record for m in MOVEMENTS}


def test_a_new_amount_routed_nowhere_fails_the_check() -> None:
    class TipPaid(Record):
        TYPE = "tip.paid"
        seat: int
        amount_cents: int

    record_types: dict[str, type[Record]] = {**RECORD_TYPES, TipPaid.TYPE: TipPaid}
    with pytest.raises(RuntimeError, match=r"ROUTES has no line for \['tip.paid'\]"):
        check_record_set(record_types)
    with pytest.raises(RuntimeError, match=r"tip.paid.amount_cents: an amount the record set"):
        check_record_set(record_types, {**ROUTES, TipPaid: (Sheet.CONTROL_ACTIONS,)})


@dataclasses.dataclass(frozen=True)
class Sums:
    records: int
    amount: int


def journal_sums(db: Path, start: datetime, end: datetime) -> dict[Movement, Sums]:
    """Each movement summed straight from the journal's rows, not through the record set."""
    with sqlite3.connect(db) as conn:
        out = {}
        for m in MOVEMENTS:
            n, total = conn.execute(
                "SELECT count(*), coalesce(sum(json_extract(data, '$.' || ?)), 0) FROM journal "
                "WHERE type = ? AND ts >= ? AND ts < ?",
                (m.amount, m.record.TYPE, journal_ts(start), journal_ts(end)),
            ).fetchone()
            out[m] = Sums(n, total)
    return out


def sheet_sums(out: Path, m: Movement, fmt: str) -> Sums:
    """A movement's column summed over the rows of its sheet that carry it, as written."""
    if fmt == "csv":
        rows: list[dict[str, object]] = list(sheet(out, m.sheet))  # type: ignore[arg-type]
    else:
        rows = [json.loads(line) for line in (out / f"{m.sheet}.jsonl").read_text().splitlines()]
    carried = [
        r[m.column]
        for r in rows
        if (m.kind is None or r["kind"] == m.kind) and r[m.column] not in ("", None)
    ]
    return Sums(len(carried), sum(int(str(v)) for v in carried))


def reconcile(db: Path, out: Path, summary: Summary, start: datetime, end: datetime) -> None:
    """Every movement: the journal's sum = the sheet's (CSV and JSON lines) = the summary's."""
    journal = journal_sums(db, start, end)
    for m in MOVEMENTS:
        assert sheet_sums(out, m, "csv") == journal[m], m.label
        assert sheet_sums(out, m, "jsonl") == journal[m], m.label
        assert Sums(summary.money[m].records, summary.money[m].amount) == journal[m], m.label


def movement(record: type[Record], amount: str) -> Movement:
    (found,) = [m for m in MOVEMENTS if m.record is record and m.amount == amount]
    return found


def test_a_day_of_play_reconciles_to_the_cent_envy_bonuses_included(
    session: tuple[Path, SessionFacts], tmp_path: Path, key: Path
) -> None:
    db, facts = session
    assert facts.started is not None and facts.ended is not None
    start, end = facts.started, facts.ended + timedelta(seconds=1)
    done = export_set(db, tmp_path / "out", key, start=start, end=end, formats=("csv", "jsonl"))
    reconcile(db, tmp_path / "out", done.summary, start, end)
    money = journal_sums(db, start, end)
    envy = money[movement(rec.EnvyBonusPaid, "amount_cents")]
    assert envy.records >= 3 and envy.amount == 100 * 100 * envy.records  # $100 each ($1)
    assert sum(d.envy_cents for d in done.summary.days.values()) == envy.amount
    # The round's total the journal gives is its wagers' payouts and its Envy Bonuses.
    with sqlite3.connect(db) as conn:
        (round_paid,) = conn.execute(
            "SELECT sum(json_extract(data, '$.paid_cents')) FROM journal WHERE type = ?",
            (rec.RoundSettled.TYPE,),
        ).fetchone()
    assert round_paid == money[movement(rec.WagerSettled, "paid_cents")].amount + envy.amount
    # What was collected is what was settled and what the voided rounds returned.
    collected = money[movement(rec.WagersCounted, "total_wager_cents")].amount
    settled = money[movement(rec.WagerSettled, "wager_cents")].amount
    assert done.summary.returned.records == facts.rounds_voided
    assert collected == settled + done.summary.returned.amount
    # The meter: contributed less reversed less paid plus reset is what it moved.
    (meter,) = done.summary.meters
    assert meter.reconciles


def test_a_linked_day_reconciles_to_the_cent(tmp_path: Path, key: Path) -> None:
    """Contributions to the link and their reversals, claims and the link's awards, a LINK
    DOWN that withdrew wagers, and Envy Bonuses: every amount in a sheet."""
    db = tmp_path / "tablectl.sqlite3"
    start = datetime(2024, 6, 1, 12, tzinfo=UTC)
    table = play_linked(db, rounds=40, start=start)
    end = table.at + timedelta(seconds=1)
    table.close()
    done = export_set(
        db, tmp_path / "out", key, start=start, end=end, formats=("csv", "jsonl", "pdf")
    )
    reconcile(db, tmp_path / "out", done.summary, start, end)
    money = journal_sums(db, start, end)
    expected: list[tuple[type[Record], str]] = [
        (rec.LinkContribution, "contribution_ten_thousandths_cent"),
        (rec.LinkContributionReversed, "contribution_ten_thousandths_cent"),
        (rec.LinkClaimAnswered, "amount_cents"),
        (rec.EnvyBonusPaid, "amount_cents"),
    ]
    for record, amount in expected:
        assert money[movement(record, amount)].records > 0, record.TYPE
    # A void takes back what the round sent the link, level by level.
    assert (
        money[movement(rec.RoundVoided, "contribution_reversed_ten_thousandths_cent")].amount
        == money[movement(rec.LinkContributionReversed, "contribution_ten_thousandths_cent")].amount
    )
    claims = sheet(tmp_path / "out", Sheet.LINK_CLAIMS)
    assert claims and all(c["status"] == "awarded" and c["validated_by"] for c in claims)
    assert done.summary.meters == []  # the link's meters are its controller's
    text = "\n".join(p.extract_text() for p in PdfReader(tmp_path / "out" / "report.pdf").pages)
    assert "Linked progressive: claims" in text and "awarded by the link" in text
    assert "the link's meters are its controller's" in text
    assert_read_by_people(text)


def linked_rules() -> TableRules:
    raw = tcp_rules().model_dump(mode="json")
    raw["game"]["progressive"]["wager"] = "5.00"
    raw["link"] = {"link_id": "bank", "table_ref": "pa-demo-casino/tcp-07", "link_timeout_ms": 5000}
    return TableRules.model_validate(raw)


def play_linked(path: Path, *, rounds: int, start: datetime) -> JournaledTable:
    """A linked table's session stepped through the core: a void every ninth round, two
    mini-royals every tenth (a claim on the link, answered, and an Envy Bonus), and the link
    lost once while bets are taken (they are withdrawn, then placed again)."""
    rng = random.Random(3)
    t = JournaledTable(path, linked_rules(), start)
    t.feed(PowerUp(rules=t.rules))
    t.feed(DeviceIdentified(device="shoe", model="S1", serial_number="SHOE-1", firmware="1"))
    level = LinkLevelTerms(
        level_id="progressive",
        contribution_rate_bp=1400,
        initial_cents=100_000,
        reset_cents=100_000,
    )
    t.feed(
        LinkParametersHeard(
            link_id="bank",
            parameters_version=1,
            parameters_sha256="sha-1",
            game="three-card-poker",
            paytable="A",
            wager_cents=500,
            tables=("pa-demo-casino/tcp-07",),
            levels=(level,),
        )
    )
    t.feed(LinkRestored(heard="state"))

    def chips(seats: list[int], present: bool) -> None:
        for seat in seats:
            t.advance(1)
            t.feed(ChipSensed(seat=seat, present=present, since_ns=t.ns()))

    for n in range(1, rounds + 1):
        t.wait_for_betting()
        seats = sorted(rng.sample(range(1, 7), 3))
        chips(seats, True)
        if n == 7:
            t.advance(6)
            t.feed(LinkLost(reason="no live broadcast for 5 s", silent_ms=5000))
            t.advance(20)
            t.feed(LinkRestored(heard="state"))
            chips(seats, False)
            chips(seats, True)
        t.advance(10)
        t.feed(LockoutPressed(at_ns=t.ns()))
        t.advance(0.3)
        t.feed(LockoutReleased(at_ns=t.ns()))
        chips(seats, False)
        if n % 9 == 4:
            t.advance(5)
            t.feed(VoidRound(reason="dealer-card-exposed", by="D117 (alice)"))
            continue
        rigged = {seats[0]: "AsKsQs", seats[1]: "AhKhQh"} if n % 10 == 5 else None
        deal_round(t, rng, rigged)
        t.advance(30)
        effects = t.feed(Settle(by="D117 (alice)"))
        for claim in (e for e in effects if isinstance(e, rec.LinkClaim)):
            t.advance(3)
            t.feed(
                LinkClaimAnswer(
                    claim_id=claim.claim_id, status="awarded", amount_cents=123_456, award_version=n
                )
            )
            t.advance(60)
            t.feed(ValidateHit(hit_id=claim.claim_id, by="F042 (fran)"))
            t.advance(60)
            t.feed(ConfirmDocumentation(hit_id=claim.claim_id, by="F042 (fran)"))
        for hit in (e for e in effects if isinstance(e, rec.JackpotHit)):
            t.advance(60)
            t.feed(ValidateHit(hit_id=hit.hit_id, by="F042 (fran)"))
        t.advance(5)
    return t


def test_a_void_in_the_period_of_a_round_opened_before_it_returns_its_wagers(
    tmp_path: Path, key: Path
) -> None:
    db = scripted(tmp_path / "tablectl.sqlite3")
    export(db, tmp_path / "out", key, start=at(11), end=at(13))
    (void,) = sheet(tmp_path / "out", Sheet.VOIDED_ROUNDS)
    assert (void["round_id"], void["wagers_returned_cents"]) == ("2", "500")


def test_the_meter_opens_and_closes_a_quiet_period(tmp_path: Path, key: Path) -> None:
    """Nothing moved it: it is there, at the amount the last row left it at; on a table whose
    meter no row has moved yet, at its configured initial amount."""
    db = scripted(tmp_path / "tablectl.sqlite3")
    export(db, tmp_path / "after", key, start=at(60), end=at(120))
    (meter,) = sheet(tmp_path / "after", Sheet.METERS)
    assert (meter["opening_cents"], meter["closing_cents"], meter["contributions"]) == (
        "100000",
        "100000",
        "0",
    )
    assert meter["opening_seq"] == meter["closing_seq"] != "" and meter["reconciles"] == "true"

    fresh = Journal(tmp_path / "fresh.sqlite3")
    fresh.power_up(0, "14.5")
    fresh.store.close()
    export(tmp_path / "fresh.sqlite3", tmp_path / "fresh", key, start=at(1), end=at(60))
    (meter,) = sheet(tmp_path / "fresh", Sheet.METERS)
    assert (meter["meter_id"], meter["opening_cents"], meter["closing_cents"]) == (
        "progressive",
        "100000",
        "100000",
    )
    assert meter["opening_seq"] == meter["closing_seq"] == "" and meter["reconciles"] == "true"


def test_times_and_durations_read_as_people_read_them(tmp_path: Path, key: Path) -> None:
    """A deck's introduction and an idle table's last activity (UTC milliseconds), ages and
    limits (milliseconds), a walk test's resolution (nanoseconds), and parameters a newer
    version set to nothing."""
    j = Journal(tmp_path / "tablectl.sqlite3")
    j.power_up(0, "14.5")
    hour = 3_600_000
    j.write(
        1,
        rec.DeckIntroducedRecord(
            deck_id="D-1",
            back="red",
            at_ms=int(at(1).timestamp() * 1000),
            max_age_ms=8 * hour,
            replaces=None,
            source="dealer",
            by="D1 (ann)",
            rule="649a.3(c)",
        ),
    )
    j.write(
        2,
        rec.DeckAgeWarning(
            deck_id="D-1", age_ms=7 * hour + 45 * 60_000, max_age_ms=8 * hour, rule="649a.3(c)"
        ),
    )
    j.write(3, rec.SensorTestStartedRecord(test="walk", by="T1 (tim)"))
    j.write(
        4,
        rec.SensorTestEndedRecord(
            test="walk", passed=[1, 2], failed=[], resolution_ns=1_500_000, by="T1 (tim)"
        ),
    )
    j.write(
        4.5,
        rec.IdleProcedureDue(
            since_ms=int(at(2).timestamp() * 1000),
            idle_ms=30 * 60_000,
            round_voided=None,
            rule="649a.5(f)",
            action="spread and inspect the cards",
        ),
    )
    raw = {"rules": {**tcp_rules().model_dump(mode="json"), "from_a_newer_version": None}}
    j.now = at(5)
    j.store.commit("{}", [], StepInput(PowerUp.TYPE, raw))
    j.store.close()
    export(tmp_path / "tablectl.sqlite3", tmp_path / "out", key, formats=("csv", "pdf"))
    text = "\n".join(p.extract_text() for p in PdfReader(tmp_path / "out" / "report.pdf").pages)
    assert_read_by_people(text)
    words = " ".join(text.split())
    assert "at: 2024-05-31 23:31:00" in words  # at_ms, in New York
    assert "max age: 8h00m" in words and "age: 7h45m" in words
    assert "resolution: 2 ms" in words  # 1.5 ms, rounded
    assert "since: 2024-05-31 23:32:00" in words and "idle: 30m00s" in words
    assert "from_a_newer_version" not in words  # set to nothing: not a parameter


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (100_000, 101_887, (100_000, 102_000, 500)),  # $1,000 to $1,018.87: every $5
        (99_827, 101_911, (99_500, 102_000, 500)),
        (100_870, 100_870, (100_800, 100_950, 50)),  # a quiet meter: a little room around it
        (1_000_000, 1_250_000, (1_000_000, 1_250_000, 50_000)),
        (0, 7, (0, 100, 50)),
    ],
)
def test_the_chart_axis_is_at_round_amounts(
    low: int, high: int, expected: tuple[int, int, int]
) -> None:
    bottom, top, step = amount_axis(low, high)
    assert (bottom, top, step) == expected
    assert bottom <= low and high <= top and bottom % step == 0 and top % step == 0
    assert step in {m * 10**k for m in (1, 2, 5) for k in range(8)} | {25 * 10**k for k in range(7)}


def test_the_chart_shows_the_periods_activity_not_its_quiet_hours(
    session: tuple[Path, SessionFacts],
) -> None:
    _, facts = session
    assert facts.started is not None and facts.ended is not None
    start = facts.started - timedelta(hours=6)
    end = facts.ended + timedelta(hours=10)
    summary = Summary(meter_points={"progressive": [(facts.started + timedelta(hours=1), 100_100)]})
    window = activity_window(summary, start, end)
    assert window is not None
    assert start < window[0] < facts.started + timedelta(hours=1) < window[1] < end
    assert window[1] - window[0] == timedelta(minutes=10)  # five minutes either side
    assert activity_window(Summary(), start, end) is None


def test_durations_read_as_people_read_them() -> None:
    assert [duration_text(ms) for ms in (0, 0.002, 250, 42_000, 185_000, 3_720_000)] == [
        "0s",
        "2 us",
        "250 ms",
        "42s",
        "3m05s",
        "1h02m",
    ]
    assert duration_text(3 * 86_400_000 + 3_600_000) == "3d01h"

"""`tablectl link verify` and `tablectl link report`: the ledger checked and summed.

Both read one snapshot (a REPEATABLE READ, READ ONLY transaction), so they pass on a live
floor: the links, the events and the levels are of one moment.

verify recomputes, independently of the database's trigger, every event's SHA-256 chain, and
checks for every link and level, to the ten-thousandth of a cent:
  meter = initial + contributions to the meter + reset amounts - awards from the meter
(each term summed from the events; a voided round's `contribution.reversed` events count as
negative contributions; resets and a full-amount-each award are put in by the
operator, so they are the events' `seed`), that the reserve and overflow pools are their own
sums, that every event balances, that every contribution is wager x rate, that versions run
1..N with the link's row at N, and that the NJ 1.39A meters of the SQL view agree.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from tablectl.link.book import utc_text
from tablectl.link.contract import UNITS_PER_CENT
from tablectl.link.ledger import (
    EVENT_COLUMNS,
    Connection,
    links,
    parameters_json,
    read_snapshot,
    sha256_text,
    stream_events,
)

ZERO_HASH = bytes(32)


def event_hash(previous: bytes, at: datetime, values: dict[str, Any]) -> bytes:
    """What the ledger's trigger hashes (migrations/0001_ledger.sql), computed here again."""

    def text(value: Any) -> str:
        return "" if value is None else str(value)

    fields = [
        previous.hex(),
        values["link_id"],
        str(values["version"]),
        values["kind"],
        utc_text(at),
        values["controller"],
        *(text(values[c]) for c in EVENT_COLUMNS[4:-1]),
        values["detail"],
    ]
    return hashlib.sha256("\x1f".join(fields).encode()).digest()


@dataclass
class LevelTotals:
    initial_units: int = 0
    contributions_to_meter_units: int = 0
    progressive_in_units: int = 0
    seed_units: int = 0  # initial and reset amounts, and awards funded outside the meter
    resets_units: int = 0
    awards_from_meter_units: int = 0
    display_units: int = 0
    reserve_units: int = 0
    overflow_units: int = 0
    hits: int = 0
    wins_cents: int = 0


@dataclass
class Verification:
    failures: list[str] = field(default_factory=list)
    events: int = 0
    links: dict[str, dict[str, LevelTotals]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures


async def verify(conn: Connection) -> Verification:
    """Every check, on one snapshot of the ledger (a live floor writes on meanwhile)."""
    async with read_snapshot(conn):
        return await _verify(conn)


async def _verify(conn: Connection) -> Verification:
    out = Verification()
    for link_id, row in (await links(conn)).items():
        if sha256_text(parameters_json(row.definition)) != row.parameters_sha256:
            out.failures.append(f"link {link_id}: its parameters do not match their SHA-256")
        totals: dict[str, LevelTotals] = {}
        previous, expected_version = ZERO_HASH, 1
        async for event in stream_events(conn, link_id):
            at, prev_hash, stored_hash = event[0], bytes(event[1]), bytes(event[2])
            values = dict(zip(EVENT_COLUMNS, event[3:], strict=True))
            version = values["version"]
            out.events += 1
            where = f"link {link_id} event {version} ({values['kind']})"
            if version != expected_version:
                out.failures.append(f"{where}: expected version {expected_version}")
            expected_version = version + 1
            if prev_hash != previous:
                out.failures.append(f"{where}: does not chain to the event before it")
            if event_hash(prev_hash, at, values) != stored_hash:
                out.failures.append(f"{where}: its SHA-256 does not match its contents")
            previous = stored_hash
            _count(out, where, totals, values)
        if expected_version - 1 != row.version:
            out.failures.append(
                f"link {link_id}: its row is at version {row.version}, its events end at "
                f"{expected_version - 1}"
            )
        out.links[link_id] = totals
    await _check_levels(conn, out)
    return out


def _count(
    out: Verification, where: str, totals: dict[str, LevelTotals], v: dict[str, Any]
) -> None:
    pools = v["display_units"] + v["reserve_units"] + v["overflow_units"]
    if pools != v["contribution_units"] + v["seed_units"] - v["award_cents"] * UNITS_PER_CENT:
        out.failures.append(f"{where}: does not balance")
    if v["level_id"] is None:
        if pools or v["seed_units"] or v["award_cents"]:
            out.failures.append(f"{where}: moves money without a level")
        return
    t = totals.setdefault(v["level_id"], LevelTotals())
    kind = v["kind"]
    if kind == "contribution":
        if v["contribution_units"] != v["wager_cents"] * v["rate_bp"]:
            out.failures.append(f"{where}: contribution is not wager x rate")
        t.progressive_in_units += v["contribution_units"]
        t.contributions_to_meter_units += v["display_units"]
    elif kind == "contribution.reversed":
        # A voided round's contribution taken back: the negative of one (migration 0002).
        if v["contribution_units"] != -v["wager_cents"] * v["rate_bp"]:
            out.failures.append(f"{where}: reversal is not -(wager x rate)")
        t.progressive_in_units += v["contribution_units"]
        t.contributions_to_meter_units += v["display_units"]
    elif kind == "level.initialized":
        t.initial_units += v["display_units"]
    elif kind == "meter.reset":
        t.resets_units += v["display_units"]
    elif kind == "award":
        t.hits += 1
        t.wins_cents += v["award_cents"]
        t.awards_from_meter_units -= v["display_units"]
    t.seed_units += v["seed_units"]
    t.display_units += v["display_units"]
    t.reserve_units += v["reserve_units"]
    t.overflow_units += v["overflow_units"]


async def _check_levels(conn: Connection, out: Verification) -> None:
    cur = await conn.execute(
        "SELECT link_id, level_id, row_display_units, row_reserve_units, row_overflow_units,"
        " display_units, progressive_in_units, hits, wins_cents, reserve_units, overflow_units"
        " FROM link_level_meters ORDER BY link_id, position"
    )
    for (
        link_id, level_id, row_display, row_reserve, row_overflow,
        view_display, view_in, view_hits, view_wins, view_reserve, view_overflow,
    ) in await cur.fetchall():  # fmt: skip
        t = out.links.get(link_id, {}).get(level_id, LevelTotals())
        where = f"link {link_id} level {level_id}"
        meter = (
            t.initial_units
            + t.contributions_to_meter_units
            + t.resets_units
            - t.awards_from_meter_units
        )
        if row_display != meter:
            out.failures.append(
                f"{where}: meter {row_display} units != initial {t.initial_units} + "
                f"contributions {t.contributions_to_meter_units} + resets {t.resets_units} - "
                f"awards {t.awards_from_meter_units} = {meter}"
            )
        if row_display != t.display_units:
            out.failures.append(f"{where}: meter {row_display} != its events' {t.display_units}")
        if row_reserve != t.reserve_units:
            out.failures.append(f"{where}: reserve {row_reserve} != its events' {t.reserve_units}")
        if row_overflow != t.overflow_units:
            out.failures.append(
                f"{where}: overflow {row_overflow} != its events' {t.overflow_units}"
            )
        view = (view_display, view_in, view_hits, view_wins, view_reserve, view_overflow)
        ours = (
            t.display_units, t.progressive_in_units, t.hits, t.wins_cents, t.reserve_units,
            t.overflow_units,
        )  # fmt: skip
        if view != ours:
            out.failures.append(f"{where}: the link_level_meters view says {view}, events {ours}")


# --- the report -----------------------------------------------------------------------------

REPORT_COLUMNS = (
    "link_id", "level_id", "table", "contributions", "wagers_cents", "progressive_in_units",
    "to_meter_units", "to_reserve_units", "to_overflow_units", "contributions_refused", "hits",
    "wins_cents", "claims_refused", "contributions_reversed",
)  # fmt: skip


async def report_rows(conn: Connection, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """Per link, level and table, what happened in [start, end): the ledger's own clock, read
    in one snapshot."""
    async with read_snapshot(conn):
        cur = await conn.execute(
            "SELECT link_id, coalesce(level_id, ''), table_ref,"
            " count(*) FILTER (WHERE kind = 'contribution'),"
            " coalesce(sum(wager_cents) FILTER (WHERE kind = 'contribution'), 0),"
            # Net of a voided round's reversals: its wagers were returned.
            " coalesce(sum(contribution_units)"
            " FILTER (WHERE kind IN ('contribution', 'contribution.reversed')), 0),"
            " coalesce(sum(display_units)"
            " FILTER (WHERE kind IN ('contribution', 'contribution.reversed')), 0),"
            " coalesce(sum(reserve_units)"
            " FILTER (WHERE kind IN ('contribution', 'contribution.reversed')), 0),"
            " coalesce(sum(overflow_units)"
            " FILTER (WHERE kind IN ('contribution', 'contribution.reversed')), 0),"
            " count(*) FILTER (WHERE kind = 'contribution.refused'),"
            " count(*) FILTER (WHERE kind = 'award'),"
            " coalesce(sum(award_cents) FILTER (WHERE kind = 'award'), 0),"
            " count(*) FILTER (WHERE kind = 'claim.refused'),"
            " count(*) FILTER (WHERE kind = 'contribution.reversed')"
            " FROM link_event WHERE at >= %s AND at < %s AND table_ref IS NOT NULL"
            " AND kind IN ('contribution', 'contribution.refused', 'award', 'claim.refused',"
            " 'contribution.reversed')"
            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            (start, end),
        )
        return [
            {
                k: int(v) if i >= 3 else v
                for i, (k, v) in enumerate(zip(REPORT_COLUMNS, r, strict=True))
            }
            for r in await cur.fetchall()
        ]


def report_csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=REPORT_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def report_json(rows: list[dict[str, Any]], verification: Verification | None = None) -> str:
    body: dict[str, Any] = {"rows": rows}
    if verification is not None:
        body["meters"] = {
            link: {level: asdict(t) for level, t in levels.items()}
            for link, levels in verification.links.items()
        }
    return json.dumps(body, indent=2)

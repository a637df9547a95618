"""The record set as a PDF a person reads: a summary, the meter over time, and the tables.

reportlab lays out the document (paginated tables whose header row repeats on every page, a
running footer with "page N of M") and draws the chart of each meter over time, with the hits
marked, as vector graphics (reportlab.graphics shapes on a time axis whose ticks fall on round
local times, `time_ticks`). One library: the package a table PC installs carries no plotting
stack (matplotlib and numpy embed their own copies of system libraries). Amounts are shown in
dollars here and only here; the CSV and JSON-lines files keep integer cents.

Contributions are summed per local day (each one is in contributions.csv); the control
actions every round has (settling, dealing) are counted per person, the others listed.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

from reportlab.graphics.shapes import Drawing, Line, Polygon, PolyLine, String
from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import landscape, letter
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import inch
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    CondPageBreak,
    Flowable,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from tablectl.core.effects import WagersCounted
from tablectl.records.build import Event, Summary
from tablectl.records.signing import Manifest
from tablectl.records.zones import duration_text
from tablectl.rules.meters import CARRY_DENOMINATOR
from tablectl.util.money import dollars

PAGE = landscape(letter)
CHART_ASPECT = 0.31  # height / width
MARGIN = 0.5 * inch
WIDTH = PAGE[0] - 2 * MARGIN
INK = colors.HexColor("#1f2933")
MUTED = colors.HexColor("#5f6b7a")
RULE = colors.HexColor("#c8d0d9")
BAND = colors.HexColor("#f2f5f8")
HEAD = colors.HexColor("#243b53")
ALERT = colors.HexColor("#b42318")
GOOD = colors.HexColor("#067647")

_base = getSampleStyleSheet()
TITLE = ParagraphStyle("title", parent=_base["Title"], alignment=0, fontSize=20, leading=24)
SUBTITLE = ParagraphStyle("subtitle", parent=_base["Normal"], fontSize=11, textColor=MUTED)
H2 = ParagraphStyle(
    "h2", parent=_base["Heading2"], fontSize=13, spaceBefore=14, spaceAfter=4, textColor=HEAD
)
NOTE = ParagraphStyle("note", parent=_base["Normal"], fontSize=8, leading=10, textColor=MUTED)
CELL = ParagraphStyle("cell", parent=_base["Normal"], fontSize=8, leading=9.5, textColor=INK)
CELL_RIGHT = ParagraphStyle("cell_right", parent=CELL, alignment=TA_RIGHT)
HEAD_CELL = ParagraphStyle("head", parent=CELL, fontName="Helvetica-Bold", textColor=colors.white)
HEAD_RIGHT = ParagraphStyle("head_right", parent=HEAD_CELL, alignment=TA_RIGHT)
FIGURE = ParagraphStyle("figure", parent=_base["Normal"], fontSize=14, leading=17, textColor=INK)
FIGURE_LABEL = ParagraphStyle("figure_label", parent=NOTE, fontSize=7.5)


def exact_dollars(units: int) -> str:
    """Ten-thousandths of a cent as dollars, to the last digit that is not zero (at least
    cents): 1450000 -> $1.45, 145000 -> $0.145."""
    cents, rest = divmod(units, CARRY_DENOMINATOR)
    text = dollars(cents)
    return text + f"{rest:04d}".rstrip("0") if rest else text


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _label(event_type: str) -> str:
    """shuffler.fault -> Shuffler fault (a type this code does not know still reads)."""
    words = event_type.replace(".", " ").replace("_", " ").strip().replace("gpio", "GPIO")
    return words[:1].upper() + words[1:]


def _words(text: str) -> str:
    """ace-king-queen-of-spades -> ace king queen of spades; 100%-of-meter -> 100% of meter."""
    return text.replace("-", " ")


_UNITS = ("_ten_thousandths_cent", "_cents", "_ms", "_ns")
_TIME_MS = re.compile(r"(.+_)?(at|since)_ms")  # at_ms, since_ms, introduced_at_ms: times


def _name(key: str) -> str:
    """A field as words, its unit left to the value: wager_cents -> wager."""
    for unit in _UNITS:
        key = key.removesuffix(unit)
    return key.replace("_", " ")


def _value(key: str, value: object, zone: ZoneInfo) -> str:
    """A value as a person reads it: dollars, local times, durations, yes/no; never None."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if type(value) is int:
        if key.endswith("_cents"):
            return dollars(value)
        if key.endswith("_ten_thousandths_cent"):
            return exact_dollars(value)
        if key.endswith("_ms") and (_TIME_MS.fullmatch(key) or value >= 10**12):
            # A time, UTC milliseconds (a "duration" past 2001's first 10**12 ms is one too).
            return _when(datetime.fromtimestamp(value / 1000, UTC), zone)
        if key.endswith("_ms"):
            return duration_text(value)
        if key.endswith("_ns"):
            return duration_text(value / 1_000_000)
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(_value(key, v, zone) for v in value) or "none"
    if isinstance(value, dict):
        return f"({readable(value, zone, skip=())})"
    return str(value)


def readable(
    data: dict[str, Any], zone: ZoneInfo, skip: Sequence[str] = ("device", "by", "rule")
) -> str:
    """A record's data for people: amounts in dollars, times local, durations in hours and
    minutes, yes/no; absent values and the meter left out (the meter has its own sections)."""
    parts = [
        f"{_name(key)}: {_value(key, value, zone)}"
        for key, value in data.items()
        if key not in skip and key != "meter" and value is not None
    ]
    return "; ".join(parts) or "-"


def _when(at: datetime, zone: ZoneInfo) -> str:
    return at.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    widths: Sequence[float],
    *,
    right: Sequence[int] = (),
    empty: str = "Nothing in this period.",
    alert_rows: Sequence[int] = (),
    total: float = WIDTH,
) -> Flowable:
    """A table whose header repeats on each page, text wrapped in its cells; numbers (the
    columns in `right`) aligned right, header included."""
    if not rows:
        return Paragraph(empty, NOTE)
    scale = total / sum(widths)
    data: list[list[Any]] = [
        [
            Paragraph(_escape(h), HEAD_RIGHT if i in right else HEAD_CELL)
            for i, h in enumerate(header)
        ]
    ]
    for row in rows:
        data.append(
            [Paragraph(_escape(v), CELL_RIGHT if i in right else CELL) for i, v in enumerate(row)]
        )
    table = Table(data, colWidths=[w * scale for w in widths], repeatRows=1, hAlign="LEFT")
    style: list[tuple[Any, ...]] = [
        ("BACKGROUND", (0, 0), (-1, 0), HEAD),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LINEBELOW", (0, 1), (-1, -1), 0.25, RULE),
        ("TOPPADDING", (0, 0), (-1, -1), 3),
        ("BOTTOMPADDING", (0, 0), (-1, -1), 3),
    ]
    style += [("BACKGROUND", (0, i), (-1, i), BAND) for i in range(2, len(data), 2)]
    style += [("TEXTCOLOR", (0, i + 1), (-1, i + 1), ALERT) for i in alert_rows]
    table.setStyle(TableStyle(style))
    return table


def _section(title: str, note: str | None, body: Flowable) -> list[Flowable]:
    # A heading never sits alone at the bottom of a page: it starts a new one unless there
    # is room for a few rows under it.
    head: list[Flowable] = [CondPageBreak(1.1 * inch), Paragraph(title, H2)]
    if note:
        head.append(Paragraph(note, NOTE))
        head.append(Spacer(1, 4))
    return [*head, body]


def _figures(items: Sequence[tuple[str, str]]) -> Flowable:
    cells = [[Paragraph(_escape(value), FIGURE) for _, value in items]]
    cells.append([Paragraph(_escape(label), FIGURE_LABEL) for label, _ in items])
    table = Table(cells, colWidths=[WIDTH / len(items)] * len(items))
    table.setStyle(
        TableStyle(
            [
                ("BOX", (0, 0), (-1, -1), 0.5, RULE),
                ("LINEBEFORE", (1, 0), (-1, -1), 0.5, RULE),
                ("BACKGROUND", (0, 0), (-1, -1), BAND),
                ("TOPPADDING", (0, 0), (-1, 0), 6),
                ("BOTTOMPADDING", (0, 1), (-1, 1), 6),
            ]
        )
    )
    return table


# Tick steps for a time axis, shortest first: a few ticks whatever the period.
_TICK_STEPS = (
    timedelta(minutes=15),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(hours=2),
    timedelta(hours=3),
    timedelta(hours=6),
    timedelta(hours=12),
    timedelta(days=1),
    timedelta(days=2),
    timedelta(days=7),
)


def time_ticks(start: datetime, end: datetime, zone: ZoneInfo) -> list[tuple[float, str]]:
    """Ticks at round local times (xx:00, midnight) between start and end: (epoch seconds,
    label). Labels carry the date where it changes; local wall times follow DST."""
    span = end - start
    step = next((t for t in _TICK_STEPS if span / t <= 9), _TICK_STEPS[-1])
    local = start.astimezone(zone)
    if step < timedelta(days=1):
        minutes = int(step.total_seconds() // 60)
        first = local.replace(minute=0, second=0, microsecond=0)
        if minutes >= 60:
            first = first.replace(hour=first.hour - first.hour % (minutes // 60))
    else:
        first = local.replace(hour=0, minute=0, second=0, microsecond=0)
    ticks: list[tuple[float, str]] = []
    when, last_day = first, None
    while when <= end:
        # Wall-clock steps in the zone, then the instant they name: a wall time that does
        # not exist (02:00 at the spring change) is the next one that does (03:00).
        instant = when.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)
        if instant >= start and (not ticks or instant.timestamp() > ticks[-1][0]):
            day = instant.date()
            label = f"{instant:%H:%M}" if step < timedelta(days=1) else ""
            if day != last_day:
                label = f"{instant:%b %d}\n{label}".strip()
                last_day = day
            ticks.append((instant.timestamp(), label))
        when = (when.replace(tzinfo=None) + step).replace(tzinfo=zone)
    return ticks


def amount_step(span_cents: int, lines: int = 5) -> int:
    """A round step in cents for about `lines` gridlines over span_cents: 1, 2, 2.5 or 5
    times a power of ten ($0.25, $1, $5, $25, $100 ...)."""
    want = max(span_cents, 1) / lines
    power = 1
    while True:
        for step in (power, 2 * power, 5 * power // 2, 5 * power):  # 2.5: 2 at power 1
            if step >= want:
                return step
        power *= 10


def amount_axis(low: int, high: int) -> tuple[int, int, int]:
    """The axis (bottom, top, step) in cents around the amounts low..high: at round
    amounts just outside them, a little room above and below a flat line."""
    step = amount_step(max(high - low, 200))
    bottom = max(low // step * step, 0)
    top = -(-high // step) * step
    if top - bottom < 2 * step:
        bottom, top = max(bottom - step, 0), top + step
    return bottom, top, step


def amount_label(cents: int, step: int) -> str:
    """$1,005 on an axis of whole dollars, $1,005.25 on one of cents."""
    text = dollars(cents)
    return text.removesuffix(".00") if step % 100 == 0 else text


def activity_window(
    summary: Summary, start: datetime, end: datetime
) -> tuple[datetime, datetime] | None:
    """From the period's first change of a meter (or hit) to its last, with a little room,
    within [start, end): the span the chart shows. None when no meter moved."""
    span = activity_span(summary, start, end)
    if span is None:
        return None
    first, last = span
    room = max((last - first) / 30, timedelta(minutes=5))
    return max(start, first - room), min(end, last + room)


def activity_span(
    summary: Summary, start: datetime, end: datetime
) -> tuple[datetime, datetime] | None:
    """The period's first row showing a meter (or a hit) and its last; None when none."""
    times = [t for points in summary.meter_points.values() for t, _ in points]
    times += [datetime.fromisoformat(h.ts_utc) for h in summary.hits]
    times = [t for t in times if start <= t < end]
    return (min(times), max(times)) if times else None


def meter_chart(
    summary: Summary,
    zone: ZoneInfo,
    start: datetime,
    end: datetime,
    width: float,
    height: float,
    *,
    known_until: datetime,
) -> Drawing | None:
    """Each meter's amount over the period's activity (a step at each change, from its first
    change to its last, or the whole period when none moved), hits marked, on an axis of
    round amounts: a vector drawing (points). None without a meter (a linked table's are
    its link controller's)."""
    if not summary.meters:
        return None
    palette = [colors.HexColor(c) for c in ("#1f6feb", "#8250df", "#bf8700", "#1a7f37")]
    drawing = Drawing(width, height)
    left, right, bottom, top = 62.0, width - 8, 34.0, height - 8
    end = max(min(end, known_until), start + timedelta(seconds=1))
    window = activity_window(summary, start, end)
    shown_from, shown_to = window or (start, end)
    t0, t1 = shown_from.timestamp(), max(shown_to.timestamp(), shown_from.timestamp() + 1)
    series: list[tuple[str, list[tuple[float, int]]]] = []
    for meter in summary.meters:
        # The meter as it stood through the window: its opening amount, each change, and
        # the last amount on to the window's end.
        points = [(start.timestamp(), meter.opening_cents)]
        points += [(t.timestamp(), c) for t, c in summary.meter_points.get(meter.meter_id, [])]
        points.append((max(points[-1][0], t1), points[-1][1]))
        series.append((meter.meter_id, points))
    hits = [h for h in summary.hits if not h.paid_from_table_inventory]
    cents = [c for _, pts in series for t, c in pts if t0 <= t <= t1]
    cents += [h.meter_before_cents for h in hits]
    cents += [_at(pts, t0) for _, pts in series]  # what stood when the window opens
    low, high, step = amount_axis(min(cents), max(cents)) if cents else (0, 100_000, 25_000)

    def x(t: float) -> float:
        return left + (min(max(t, t0), t1) - t0) / (t1 - t0) * (right - left)

    def y(c: int) -> float:
        return bottom + (c - low) / (high - low) * (top - bottom)

    grid = colors.HexColor("#e3e8ee")

    def label(x_: float, y_: float, text: str, anchor: Literal["middle", "end"]) -> String:
        return String(x_, y_, text, textAnchor=anchor, fontSize=7, fillColor=MUTED)

    for c in range(low, high + 1, step):  # amount gridlines at round amounts
        drawing.add(Line(left, y(c), right, y(c), strokeColor=grid, strokeWidth=0.6))
        drawing.add(label(left - 4, y(c) - 2.5, amount_label(c, step), "end"))
    for t, text in time_ticks(shown_from, shown_to, zone):
        drawing.add(Line(x(t), bottom, x(t), top, strokeColor=grid, strokeWidth=0.6))
        for n, part in enumerate(text.split("\n")):
            drawing.add(label(x(t), bottom - 10 - 8 * n, part, "middle"))
    drawing.add(Line(left, bottom, right, bottom, strokeColor=MUTED, strokeWidth=0.8))
    # The caption names the first and last rows that show a meter (the axis has a margin
    # either side), with their dates when the activity spans midnight.
    changes = ""
    if changed := activity_span(summary, start, end):
        first, last = (t.astimezone(zone) for t in changed)
        shown = "%H:%M" if first.date() == last.date() else "%Y-%m-%d %H:%M"
        changes = f"a meter first journaled at {first:{shown}}, last at {last:{shown}}"
    caption = (
        f"local time ({zone.key}): {changes} in the period"
        if window
        else f"local time ({zone.key}): no meter changed in the period"
    )
    drawing.add(String(left, 2, caption, fontSize=7, fillColor=MUTED))
    for i, (meter_id, points) in enumerate(series):
        steps: list[float] = []
        for n, (t, c) in enumerate(points):
            if n:  # a step: along at the old amount, then up or down to the new one
                steps += [x(t), y(points[n - 1][1])]
            steps += [x(t), y(c)]
        colour = palette[i % len(palette)]
        drawing.add(PolyLine(steps, strokeColor=colour, strokeWidth=1.2))
        key_x = right - 130 * (len(series) + bool(hits) - i)  # the key, under the axis
        drawing.add(Line(key_x, 4.5, key_x + 16, 4.5, strokeColor=colour))
        drawing.add(String(key_x + 20, 2, meter_id, fontSize=7, fillColor=INK))
    for h in hits:
        hx, hy = x(datetime.fromisoformat(h.ts_utc).timestamp()), y(h.meter_before_cents)
        drawing.add(
            Polygon([hx - 3, hy + 5, hx + 3, hy + 5, hx, hy], fillColor=ALERT, strokeWidth=0)
        )
    if hits:
        key_x = right - 130
        marker = [key_x + 5, 8, key_x + 11, 8, key_x + 8, 3]
        drawing.add(Polygon(marker, fillColor=ALERT, strokeWidth=0))
        drawing.add(String(key_x + 20, 2, "hit paid from the meter", fontSize=7, fillColor=INK))
    return drawing


def _at(points: Sequence[tuple[float, int]], t: float) -> int:
    """The amount a step series stands at at time t."""
    amount = points[0][1]
    for when, cents in points:
        if when > t:
            break
        amount = cents
    return amount


def _local(ts_utc: str | None, zone: ZoneInfo) -> str:
    if ts_utc is None:
        return "-"
    return datetime.fromisoformat(ts_utc).astimezone(zone).strftime("%Y-%m-%d %H:%M")


def _minute(local: str) -> str:
    """2024-06-01T08:00:00.000-04:00 -> 2024-06-01 08:00 (the zone is named beside it)."""
    return local[:16].replace("T", " ")


def _utc(ts_utc: str) -> str:
    """2024-06-01T12:00:00.000Z -> 2024-06-01 12:00 (seconds when not zero)."""
    at = datetime.fromisoformat(ts_utc).astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S" if at.second or at.microsecond else "%Y-%m-%d %H:%M")


def _money_rows(summary: Summary) -> list[list[str]]:
    """Each movement's records and sum, and the wagers returned with the voided rounds."""
    rows = []
    for movement, tally in summary.money.items():
        where = f"{movement.sheet}.csv: {movement.column}"
        if movement.kind is not None:
            where += f" (kind {movement.kind})"
        amount = exact_dollars(tally.amount) if movement.exact else dollars(tally.amount)
        rows.append([movement.label, f"{tally.records:,}", amount, where])
        if movement.record is WagersCounted:
            returned = summary.returned
            rows.append(
                [
                    "wagers returned (voided rounds)",
                    f"{returned.records:,}",
                    dollars(returned.amount),
                    "voided-rounds.csv: wagers_returned_cents (the rounds' wagers accepted)",
                ]
            )
    return rows


def _events(events: Sequence[Event], zone: ZoneInfo, *, who: bool = False) -> list[list[str]]:
    out = []
    for e in events:
        r = e.row
        row = [r.local_date, r.local_time, _label(r.event)]
        row += [r.by or "-"] if who else [r.device or _device_of(r.event)]
        row += [readable(e.data, zone), r.rule or "-"]
        out.append(row)
    return out


def _device_of(event_type: str) -> str:
    """The device a record without a device field is about, by its type: shoe.fault -> shoe."""
    kind = event_type.partition(".")[0]
    return {"gpio": "sensors", "shoe": "shoe", "shuffler": "shuffler", "link": "link"}.get(
        kind, "-"
    )


def _story(
    summary: Summary, manifest: Manifest, zone: ZoneInfo, chart: Drawing | None
) -> list[Flowable]:
    period = manifest.period
    start = datetime.fromisoformat(period.start_local)
    end = datetime.fromisoformat(period.end_local)
    game = (manifest.game or "").replace("-", " ").title()
    span = manifest.journal
    seqs = f"seq {span.first_seq} to {span.last_seq}" if span.rows else "no rows"
    days = summary.days.values()
    utc = f"{_utc(period.start_utc)} to {_utc(period.end_utc)} UTC"
    story: list[Flowable] = [
        Paragraph(f"Table records: {_escape(manifest.table)}", TITLE),
        Paragraph(
            _escape(
                f"{manifest.site} \u00b7 {game} \u00b7 {start:%a %d %b %Y %H:%M} to "
                f"{end:%a %d %b %Y %H:%M} ({zone.key})"
            ),
            SUBTITLE,
        ),
        Spacer(1, 8),
        Paragraph(
            _escape(
                f"The period runs from {start:%Y-%m-%d %H:%M} (included) to "
                f"{end:%Y-%m-%d %H:%M} (not included), {utc}; every time below is local "
                f"time in {zone.key}. Journal {seqs} ({span.rows:,} rows; the journal held "
                f"{span.journal_last_seq:,} rows when read). Made "
                f"{_local(manifest.generated_utc, zone)} by {manifest.generator}. Signed by "
                f"the table's key {manifest.key_fingerprint}: check the export with "
                "`tablectl records verify DIR --public-key TABLE.pub`."
            ),
            NOTE,
        ),
        Spacer(1, 8),
        _figures(
            [
                ("rounds settled", f"{sum(d.rounds_settled for d in days):,}"),
                ("rounds voided", f"{sum(d.rounds_voided for d in days):,}"),
                ("progressive wagers", f"{sum(d.wagers for d in days):,}"),
                ("wagered", dollars(sum(d.wagered_cents for d in days))),
                ("paid on wagers", dollars(sum(d.paid_cents for d in days))),
                ("Envy Bonuses", dollars(sum(d.envy_cents for d in days))),
                ("contributed", exact_dollars(sum(d.contributed for d in days))),
            ]
        ),
        Spacer(1, 4),
        _figures(
            [
                ("progressive hits", f"{len(summary.hits):,}"),
                ("device faults and swaps", f"{len(summary.device_events):,}"),
                ("deck events", f"{len(summary.deck_events):,}"),
                ("parameter changes", f"{len(summary.parameter_changes):,}"),
                (
                    "control actions",
                    f"{len(summary.control_actions) + sum(summary.routine_actions.values()):,}",
                ),
                ("other events", f"{len(summary.other_events):,}"),
            ]
        ),
        Spacer(1, 10),
        chart
        if chart is not None
        else Paragraph(
            "No meter of the table's own in this period"
            + (
                ": its progressive is linked, and the link's meters are its controller's."
                if summary.link_levels or summary.link_claims
                else "."
            ),
            NOTE,
        ),
    ]
    meter_rows = [
        [
            m.meter_id,
            exact_dollars(m.opening_cents * CARRY_DENOMINATOR + m.opening_carry),
            f"{m.contributions:,}",
            exact_dollars(m.contributed_ten_thousandths_cent),
            f"{m.rounds_voided:,}",
            exact_dollars(m.reversed_ten_thousandths_cent),
            f"{m.hits:,}",
            dollars(m.paid_cents),
            dollars(m.reseeded_cents),
            exact_dollars(m.closing_cents * CARRY_DENOMINATOR + m.closing_carry),
            "yes" if m.reconciles else "NO",
        ]
        for m in summary.meters
    ]
    story += _section(
        "Meters",
        "Per meter (the table's progressive level), opening and closing even when nothing "
        "moved it. Reconciled: every amount the journal shows the meter at equals opening + "
        "contributions - reversals - payouts + resets, to the ten-thousandth of a cent.",
        _table(
            [
                "meter",
                "opening",
                "contributions",
                "contributed",
                "voided rounds",
                "reversed",
                "hits",
                "paid",
                "reset to",
                "closing",
                "reconciled",
            ],
            meter_rows,
            [10, 9, 8, 9, 7, 8, 5, 9, 9, 9, 7],
            right=range(1, 10),
            alert_rows=[i for i, m in enumerate(summary.meters) if not m.reconciles],
            empty="No meter on this table in this period.",
        ),
    )
    story += _section(
        "Money",
        "Every amount the journal records moving in the period, summed over its records; "
        "each record is a row of the file named, the amount in the column named. Paid on "
        "wagers includes the progressive hits; a share of the meter is paid from the meter, "
        "not the table inventory.",
        _table(
            ["movement", "records", "amount", "file: column"],
            _money_rows(summary),
            [30, 8, 12, 40],
            right=(1, 2),
        ),
    )
    story += _section(
        "Per day",
        f"Local days in {zone.key}. Wagered: collected at the final count; returned: the "
        "wagers of voided rounds; paid: on wagers settled, hits included.",
        _table(
            [
                "date",
                "rounds",
                "voided",
                "wagers",
                "wagered",
                "returned",
                "paid",
                "Envy Bonuses",
                "contributed",
                "hits",
                "hit amount",
            ],
            [
                [
                    day,
                    f"{d.rounds_settled:,}",
                    f"{d.rounds_voided:,}",
                    f"{d.wagers:,}",
                    dollars(d.wagered_cents),
                    dollars(d.returned_cents),
                    dollars(d.paid_cents),
                    f"{dollars(d.envy_cents)} ({d.envy_bonuses:,})",
                    exact_dollars(d.contributed),
                    f"{d.hits:,}",
                    dollars(d.hit_cents),
                ]
                for day, d in sorted(summary.days.items())
            ],
            [10, 6, 6, 6, 9, 9, 9, 11, 9, 5, 9],
            right=range(1, 11),
        ),
    )
    story += _section(
        "Wagers by outcome",
        "Each table-system wager's result (wagers.csv): what was staked and what the "
        "players received.",
        _table(
            ["outcome", "wagers", "staked", "paid"],
            [
                [outcome, f"{t.wagers:,}", dollars(t.staked_cents), dollars(t.paid_cents)]
                for outcome, t in sorted(summary.outcomes.items())
            ],
            [20, 10, 15, 15],
            right=(1, 2, 3),
            total=WIDTH * 0.6,
        ),
    )
    story += _section(
        "Envy Bonuses",
        "Paid to a player with a progressive wager for another player's qualifying hand "
        "(649a.12(e)(5), 653a.12(d)(5)); from the table inventory, not the meter.",
        _table(
            ["date", "time", "round", "seat", "for the hand at seat", "hand", "amount", "rule"],
            [
                [
                    e.local_date,
                    e.local_time,
                    str(e.round_id),
                    str(e.seat),
                    str(e.for_seat),
                    _words(e.hand),
                    dollars(e.amount_cents),
                    e.rule,
                ]
                for e in summary.envy_bonuses
            ],
            [9, 7, 6, 5, 9, 16, 9, 10],
            right=(2, 3, 4, 6),
        ),
    )
    story += _section(
        "Progressive hits",
        "Date, time, table, seat, hand and amount of each hit; who validated it and, for a "
        "share of the meter, who documented it.",
        _table(
            [
                "date",
                "time",
                "table",
                "hit",
                "seat",
                "hand",
                "cards",
                "amount",
                "basis",
                "meter before",
                "validated by",
                "documented by",
            ],
            [
                [
                    h.local_date,
                    h.local_time,
                    h.table,
                    h.hit_id,
                    str(h.seat),
                    _words(h.hand),
                    h.cards,
                    dollars(h.amount_cents),
                    _words(h.basis),
                    dollars(h.meter_before_cents),
                    f"{h.validated_by} {_local(h.validated_ts_utc, zone)}"
                    if h.validated_by
                    else "not in the period",
                    f"{h.documented_by} {_local(h.documented_ts_utc, zone)}"
                    if h.documented_by
                    else ("-" if h.paid_from_table_inventory else "not in the period"),
                ]
                for h in summary.hits
            ],
            [8, 6, 6, 5, 4, 11, 9, 8, 9, 8, 13, 13],
            right=(4, 7, 9),
        ),
    )
    story += _section(
        "Meter resets and shares paid",
        None,
        _table(
            ["date", "time", "meter", "hit", "kind", "paid", "reset to", "meter after"],
            [
                [
                    r.local_date,
                    r.local_time,
                    r.meter_id,
                    r.hit_id,
                    "reset (100%)" if r.kind == "reset" else f"share ({r.share_percent}%)",
                    dollars(r.paid_cents),
                    dollars(r.reset_cents) if r.reset_cents is not None else "-",
                    exact_dollars(r.meter_cents * CARRY_DENOMINATOR + r.meter_carry),
                ]
                for r in summary.resets
            ],
            [9, 7, 9, 7, 10, 9, 9, 10],
            right=(5, 6, 7),
        ),
    )
    story += _section(
        "Voided rounds",
        "Every wager of a voided round is returned and its contributions reversed; the "
        "section is the rule that voids it.",
        _table(
            [
                "date",
                "time",
                "round",
                "reason",
                "section",
                "seats returned",
                "returned",
                "reversed",
                "by",
            ],
            [
                [
                    v.local_date,
                    v.local_time,
                    str(v.round_id),
                    _words(v.reason),
                    v.rule,
                    v.wagers_returned.replace(" ", ", ") or "none",
                    "not known"
                    if v.wagers_returned_cents is None
                    else dollars(v.wagers_returned_cents),
                    exact_dollars(v.contribution_reversed_ten_thousandths_cent),
                    v.by,
                ]
                for v in summary.voided
            ],
            [9, 7, 6, 12, 9, 10, 8, 8, 13],
            right=(2, 6, 7),
        ),
    )
    if summary.link_levels or summary.link_claims:
        story += _link_sections(summary, zone)
    story += _section(
        "Device faults and swaps",
        None,
        _table(
            ["date", "time", "event", "device", "detail", "rule"],
            _events(summary.device_events, zone),
            [9, 7, 14, 8, 42, 9],
        ),
    )
    story += _section(
        "Deck events",
        None,
        _table(
            ["date", "time", "event", "device", "detail", "rule"],
            _events(summary.deck_events, zone),
            [9, 7, 14, 8, 42, 9],
        ),
    )
    story += _section(
        "Parameter changes",
        "The table's rules as journaled at each start-up that changed them (the first "
        "start-up on this journal sets them all).",
        _table(
            ["date", "time", "parameter", "from", "to"],
            [
                [p.local_date, p.local_time, p.parameter, p.previous or "-", p.value or "-"]
                for p in summary.parameter_changes
            ],
            [9, 7, 25, 20, 20],
        ),
    )
    if summary.parameters:
        story += _section(
            "Parameters at the end of the period",
            None,
            _table(
                ["parameter", "value"],
                sorted(([k, v] for k, v in summary.parameters.items()), key=lambda kv: kv[0]),
                [30, 50],
            ),
        )
    routine = sorted(summary.routine_actions.items())
    story += _section(
        "Control actions",
        "Who did what. Settling and dealing rounds are counted per person; every one is "
        "listed in control-actions.csv.",
        _table(
            ["person", "action", "times"],
            [[by, _label(event), f"{n:,}"] for (by, event), n in routine],
            [30, 30, 10],
            right=(2,),
            total=WIDTH * 0.5,
            empty="No round settled or dealt in this period.",
        ),
    )
    story.append(Spacer(1, 6))
    story.append(
        _table(
            ["date", "time", "action", "by", "detail", "rule"],
            _events(summary.control_actions, zone, who=True),
            [9, 7, 14, 12, 38, 9],
            empty="No other control action in this period.",
        )
    )
    if summary.other_events:
        story += _section(
            "Other events",
            "Rows of a type this version of tablectl does not know, as journaled (other-"
            "events.csv): read them with a newer version.",
            _table(
                ["date", "time", "type", "data"],
                [
                    [e.row.local_date, e.row.local_time, e.row.event, e.row.detail]
                    for e in summary.other_events
                ],
                [9, 7, 16, 60],
                alert_rows=range(len(summary.other_events)),
            ),
        )
    return story


def _link_sections(summary: Summary, zone: ZoneInfo) -> list[Flowable]:
    """A linked table's part of its link: what it sent each level, and its claims as the
    link controller answered them (the link's meters are in the controller's ledger)."""
    out = _section(
        "Linked progressive: contributions",
        "What this table sent each level of its link, and took back with voided rounds "
        "(link-contributions.csv); the link's meters are in its controller's ledger.",
        _table(
            ["link", "level", "rows", "contributed", "reversed"],
            [
                [
                    link,
                    level,
                    f"{t.rows:,}",
                    exact_dollars(t.contributed),
                    exact_dollars(t.reversed),
                ]
                for (link, level), t in sorted(summary.link_levels.items())
            ],
            [15, 15, 8, 12, 12],
            right=(2, 3, 4),
            total=WIDTH * 0.7,
        ),
    )
    out += _section(
        "Linked progressive: claims",
        "Each qualifying hand claimed on the link and the controller's answer: the amount "
        "paid is the link's (link-claims.csv).",
        _table(
            [
                "date",
                "time",
                "claim",
                "level",
                "seat",
                "hand",
                "share",
                "answer",
                "award",
                "answered",
                "validated by",
            ],
            [
                [
                    c.local_date,
                    c.local_time,
                    c.claim_id,
                    c.level_id or "before the period",
                    "-" if c.seat is None else str(c.seat),
                    _words(c.hand or "-"),
                    "-" if c.share_percent is None else f"{c.share_percent}%",
                    c.status or "not in the period",
                    "-" if c.award_cents is None else dollars(c.award_cents),
                    _local(c.answered_ts_utc, zone),
                    f"{c.validated_by} {_local(c.validated_ts_utc, zone)}"
                    if c.validated_by
                    else "not in the period",
                ]
                for c in summary.link_claims
            ],
            [8, 6, 6, 9, 4, 12, 5, 8, 8, 10, 13],
            right=(4, 6, 8),
        ),
    )
    return out


def _footer(manifest: Manifest, pages: int | None) -> Callable[[Canvas, Any], None]:
    """Draws "site / table · period · page N of M" at the foot of each page."""
    period = manifest.period
    text = (
        f"{manifest.site} / {manifest.table} \u00b7 records {_minute(period.start_local)} to "
        f"{_minute(period.end_local)} ({period.time_zone})"
    )

    def draw(canvas: Canvas, _doc: Any) -> None:
        canvas.saveState()
        canvas.setFont("Helvetica", 7.5)
        canvas.setFillColor(MUTED)
        canvas.drawString(MARGIN, 0.3 * inch, text)
        number = canvas.getPageNumber()
        canvas.drawRightString(
            PAGE[0] - MARGIN, 0.3 * inch, f"page {number} of {pages}" if pages else ""
        )
        canvas.restoreState()

    return draw


def write_report(path: Path, summary: Summary, manifest: Manifest, zone: ZoneInfo) -> None:
    """The report; laid out twice, the first time to count its pages ("page N of M")."""
    start = datetime.fromisoformat(manifest.period.start_utc)
    end = datetime.fromisoformat(manifest.period.end_utc)
    read = datetime.fromisoformat(manifest.generated_utc)
    chart = meter_chart(summary, zone, start, end, WIDTH, WIDTH * CHART_ASPECT, known_until=read)
    pages = None
    for target in (io.BytesIO(), str(path)):
        doc = SimpleDocTemplate(
            target,
            pagesize=PAGE,
            leftMargin=MARGIN,
            rightMargin=MARGIN,
            topMargin=MARGIN,
            bottomMargin=0.6 * inch,
            title=f"Table records: {manifest.table}",
            author=manifest.generator,
            subject=f"{manifest.period.start_utc} to {manifest.period.end_utc}",
            invariant=True,  # the same records give the same bytes (no timestamp, fixed id)
        )
        footer = _footer(manifest, pages)
        doc.build(_story(summary, manifest, zone, chart), onFirstPage=footer, onLaterPages=footer)
        pages = doc.page

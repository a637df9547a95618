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

from tablectl.records.build import Event, Summary
from tablectl.records.signing import Manifest
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
FIGURE = ParagraphStyle("figure", parent=_base["Normal"], fontSize=16, leading=19, textColor=INK)
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


def readable(data: dict[str, Any], skip: Sequence[str] = ("device", "by", "rule")) -> str:
    """A record's data for people: amounts in dollars, yes/no, the meter left out (the
    meter has its own sections)."""
    parts = []
    for key, value in data.items():
        if key in skip or key == "meter":
            continue
        name = key.replace("_", " ")
        if key.endswith("_cents") and type(value) is int:
            parts.append(f"{name.removesuffix(' cents')} {dollars(value)}")
        elif key.endswith("_ten_thousandths_cent") and type(value) is int:
            parts.append(f"{name.removesuffix(' ten thousandths cent')} {exact_dollars(value)}")
        elif isinstance(value, bool):
            parts.append(f"{name} {'yes' if value else 'no'}")
        elif isinstance(value, list):
            parts.append(f"{name} {', '.join(map(str, value)) or 'none'}")
        elif value is None:
            continue
        else:
            parts.append(f"{name} {value}")
    return "; ".join(parts) or "-"


def _table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    widths: Sequence[float],
    *,
    right: Sequence[int] = (),
    empty: str = "None in this period.",
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


def meter_chart(
    summary: Summary,
    zone: ZoneInfo,
    start: datetime,
    end: datetime,
    width: float,
    height: float,
    *,
    known_until: datetime,
) -> Drawing:
    """Each meter's amount over the period (a step at each change, drawn on to the period's
    end or known_until, when it was read), hits marked: a vector drawing (points)."""
    palette = [colors.HexColor(c) for c in ("#1f6feb", "#8250df", "#bf8700", "#1a7f37")]
    drawing = Drawing(width, height)
    left, right, bottom, top = 62.0, width - 8, 34.0, height - 8
    t0, t1 = start.timestamp(), max(end.timestamp(), start.timestamp() + 1)
    series: list[tuple[str, list[tuple[float, int]]]] = []
    for meter in summary.meters:
        # The meter as it stood from the period's start (its opening amount) to its end.
        points = [(start.timestamp(), meter.opening_cents)]
        points += [(t.timestamp(), c) for t, c in summary.meter_points.get(meter.meter_id, [])]
        points.append((max(points[-1][0], min(end, known_until).timestamp()), points[-1][1]))
        series.append((meter.meter_id, points))
    hits = [h for h in summary.hits if not h.paid_from_table_inventory]
    cents = [c for _, pts in series for _, c in pts] + [h.meter_before_cents for h in hits]
    low, high = (min(cents), max(cents)) if cents else (0, 100)
    pad = max((high - low) // 10, 100)
    low, high = max(low - pad, 0), high + pad

    def x(t: float) -> float:
        return left + (min(max(t, t0), t1) - t0) / (t1 - t0) * (right - left)

    def y(c: int) -> float:
        return bottom + (c - low) / (high - low) * (top - bottom)

    grid = colors.HexColor("#e3e8ee")

    def label(x_: float, y_: float, text: str, anchor: Literal["middle", "end"]) -> String:
        return String(x_, y_, text, textAnchor=anchor, fontSize=7, fillColor=MUTED)

    for i in range(5):  # amount gridlines, labelled in dollars
        c = low + (high - low) * i // 4
        drawing.add(Line(left, y(c), right, y(c), strokeColor=grid, strokeWidth=0.6))
        drawing.add(label(left - 4, y(c) - 2.5, dollars(c), "end"))
    for t, text in time_ticks(start, end, zone):
        drawing.add(Line(x(t), bottom, x(t), top, strokeColor=grid, strokeWidth=0.6))
        for n, part in enumerate(text.split("\n")):
            drawing.add(label(x(t), bottom - 10 - 8 * n, part, "middle"))
    drawing.add(Line(left, bottom, right, bottom, strokeColor=MUTED, strokeWidth=0.8))
    drawing.add(
        String(
            left, 2, f"local time ({zone.key}); amounts on the meter", fontSize=7, fillColor=MUTED
        )
    )
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
    if not series:
        drawing.add(
            String(
                width / 2,
                height / 2,
                "no meter in this period",
                textAnchor="middle",
                fontSize=9,
                fillColor=MUTED,
            )
        )
    return drawing


def _local(ts_utc: str | None, zone: ZoneInfo) -> str:
    if ts_utc is None:
        return "-"
    return datetime.fromisoformat(ts_utc).astimezone(zone).strftime("%Y-%m-%d %H:%M")


def _events(events: Sequence[Event], *, who: bool = False) -> list[list[str]]:
    out = []
    for e in events:
        r = e.row
        row = [r.local_date, r.local_time, _label(r.event)]
        row += [r.by or "-"] if who else [r.device or "-"]
        row += [readable(e.data), r.rule or "-"]
        out.append(row)
    return out


def _story(summary: Summary, manifest: Manifest, zone: ZoneInfo, chart: Drawing) -> list[Flowable]:
    period = manifest.period
    start = datetime.fromisoformat(period.start_local)
    end = datetime.fromisoformat(period.end_local)
    game = (manifest.game or "").replace("-", " ").title()
    span = manifest.journal
    seqs = f"seq {span.first_seq} to {span.last_seq}" if span.rows else "no rows"
    days = summary.days.values()
    story: list[Flowable] = [
        Paragraph(f"Table records: {_escape(manifest.table)}", TITLE),
        Paragraph(
            _escape(
                f"{manifest.site} \u00b7 {game} \u00b7 {start:%Y-%m-%d %H:%M} to "
                f"{end:%Y-%m-%d %H:%M} ({zone.key})"
            ),
            SUBTITLE,
        ),
        Spacer(1, 8),
        Paragraph(
            _escape(
                f"Period {period.start_utc} to {period.end_utc} UTC (from inclusive, to "
                f"exclusive); every time below is local time in {zone.key}. Journal {seqs} "
                f"({span.rows:,} rows; the journal held {span.journal_last_seq:,} rows when "
                f"read). Generated {manifest.generated_utc} by {manifest.generator}. "
                f"Signed by the table's key {manifest.key_fingerprint}: check the export "
                "with `tablectl records verify DIR --public-key TABLE.pub`."
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
                ("contributed", exact_dollars(sum(d.contributed for d in days))),
                ("hits", f"{len(summary.hits):,}"),
                ("paid on hits", dollars(sum(h.amount_cents for h in summary.hits))),
            ]
        ),
        Spacer(1, 4),
        _figures(
            [
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
        chart,
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
        "Per meter (the table's progressive level). Reconciled: every amount the journal "
        "shows the meter at equals opening + contributions - reversals - payouts + resets, "
        "to the ten-thousandth of a cent.",
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
        "Contributions per day",
        f"Local days in {zone.key}; each contribution is a row of contributions.csv.",
        _table(
            ["date", "rounds", "voided", "wagers", "wagered", "contributed", "hits", "paid"],
            [
                [
                    day,
                    f"{d.rounds_settled:,}",
                    f"{d.rounds_voided:,}",
                    f"{d.wagers:,}",
                    dollars(d.wagered_cents),
                    exact_dollars(d.contributed),
                    f"{d.hits:,}",
                    dollars(d.hit_cents),
                ]
                for day, d in sorted(summary.days.items())
            ],
            [10, 7, 7, 7, 10, 10, 6, 10],
            right=range(1, 8),
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
            ["date", "time", "round", "reason", "section", "wagers returned", "reversed", "by"],
            [
                [
                    v.local_date,
                    v.local_time,
                    str(v.round_id),
                    _words(v.reason),
                    v.rule,
                    v.wagers_returned.replace(" ", ", ") or "none",
                    exact_dollars(v.contribution_reversed_ten_thousandths_cent),
                    v.by,
                ]
                for v in summary.voided
            ],
            [9, 7, 6, 12, 9, 12, 9, 14],
            right=(2, 6),
        ),
    )
    story += _section(
        "Device faults and swaps",
        None,
        _table(
            ["date", "time", "event", "device", "detail", "rule"],
            _events(summary.device_events),
            [9, 7, 14, 8, 42, 9],
        ),
    )
    story += _section(
        "Deck events",
        None,
        _table(
            ["date", "time", "event", "device", "detail", "rule"],
            _events(summary.deck_events),
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
            _events(summary.control_actions, who=True),
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


def _footer(manifest: Manifest, pages: int | None) -> Callable[[Canvas, Any], None]:
    """Draws "site / table · period · page N of M" at the foot of each page."""
    period = manifest.period
    text = (
        f"{manifest.site} / {manifest.table} \u00b7 records {period.start_local[:16]} to "
        f"{period.end_local[:16]} ({period.time_zone})"
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

"""Draw docs/diagrams/lockout-rule.svg: the lock-out rule, each verdict decided by the code.

Every row is a seat sensor's true contact around one lock-out press, run through SeatInputs
and the round core exactly as a table runs it (kernel stamps, chip_present_ms 150,
chip_bounce_ms 5). The verdict printed on the right is what they decided, so the picture
cannot drift from the code; tests/test_lockout_rule.py checks the file is current.

Run: .venv/bin/python docs/diagrams/lockout_rule.py
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from tablectl.drivers.gpio.backend import Edge
from tablectl.drivers.gpio.table_io import SeatInputs
from tablectl.simulators.sensor_scripts import MS, TrueEdge, contacts, press

from tablectl.core.events import (
    Event,
    PowerUp,
    ShuffleCompleted,
    ShuffleStarted,
    TableRules,
)
from tablectl.core.table import TableState, step

OUT = Path(__file__).with_name("lockout-rule.svg")
EDGE = 10_000 * MS
SEAT = 1
RULES = TableRules.model_validate(
    {
        "seats": 1,
        "decks": 2,
        "game": {
            "name": "three-card-poker",
            "progressive": {
                "wager": "1.00",
                "paytable": "A",
                "rate_of_progression_percent": "14.5",
                "initial_amount": "1000.00",
                "reset_amount": "1000.00",
            },
        },
    }
)
FOREVER = 10**12
REST, BOUNCE = 150 * MS, 5 * MS

# (what happens, the seat's true edges): times relative to the press, in ms
ROWS: list[tuple[str, list[TrueEdge]]] = [
    ("on the sensor at the edge, rests after it", contacts(SEAT, EDGE - 30 * MS, [FOREVER])),
    ("rested before the edge", contacts(SEAT, EDGE - 220 * MS, [FOREVER])),
    (
        "a touch before the edge, a chip after it",
        contacts(SEAT, EDGE - 40 * MS, [8 * MS, 62 * MS, FOREVER]),
    ),
    (
        "bouncing across the edge, closed at it",
        contacts(
            SEAT,
            EDGE - 30 * MS,
            [24 * MS, 2 * MS, 5 * MS, 3 * MS, 6 * MS, 4 * MS, FOREVER],
        ),
    ),
    ("open at the edge, in a bounce", contacts(SEAT, EDGE - 30 * MS, [28 * MS, 4 * MS, FOREVER])),
    (
        "slides off after the edge, longer than a bounce",
        contacts(SEAT, EDGE - 30 * MS, [70 * MS, 20 * MS, FOREVER]),
    ),
    (
        "a wager lifted before the edge, put back after",
        contacts(SEAT, EDGE - 260 * MS, [240 * MS, 60 * MS, FOREVER]),
    ),
]

LEFT, RIGHT = -60 * MS, 190 * MS  # the time shown, around the press
X0, WIDTH = 300, 520  # the plot's left edge and width, px
ROW_H, TOP = 46, 100


def decide(edges: list[TrueEdge]) -> bool:
    """What the table decides: SeatInputs on exact stamps, then the round core."""
    inputs = SeatInputs(1, chip_present_ms=150, lockout_debounce_ms=50, chip_bounce_ms=5)
    script = sorted([*press(EDGE), *edges])
    events: list[Event] = []
    for t, line, level in script:
        events += inputs.take([Edge(line, level, t, None, 1)])
    events += inputs.settle(EDGE + 10_000 * MS)
    state = TableState.initial(RULES)
    opened: list[Event] = [PowerUp(rules=RULES), ShuffleStarted(), ShuffleCompleted(card_count=52)]
    for event in [*opened, *events]:
        state, _ = step(RULES, state, event)
    assert state.counted
    return SEAT in state.wagers


def x(t_ns: int) -> float:
    t = min(max(t_ns - EDGE, LEFT), RIGHT)
    return X0 + (t - LEFT) / (RIGHT - LEFT) * WIDTH


def waveform(edges: list[TrueEdge], y: float) -> str:
    high, low = y - 14, y + 6
    level, points = False, [(x(EDGE + LEFT), low)]
    for t, _, lvl in sorted(edges):
        if EDGE + LEFT < t < EDGE + RIGHT:
            points += [(x(t), high if level else low), (x(t), high if lvl else low)]
        level = lvl
        if t <= EDGE + LEFT:
            points = [(x(EDGE + LEFT), high if level else low)]
    points.append((x(EDGE + RIGHT), high if level else low))
    path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
    return f'<polyline points="{path}" fill="none" stroke="#1f3b73" stroke-width="2"/>'


def rest_bar(edges: list[TrueEdge], y: float) -> str:
    """Where a counted chip's contact rested: its last closing, chip_present_ms on."""
    closing = max(t for t, _, level in edges if level)
    start, end = x(closing), x(closing + REST)
    return (
        f'<rect x="{start:.1f}" y="{y + 10}" width="{end - start:.1f}" height="4" fill="#7bc47f"/>'
    )


def svg() -> str:
    height = TOP + ROW_H * len(ROWS) + 76
    edge_x = x(EDGE)
    bottom = TOP + ROW_H * len(ROWS) - 8
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="960" height="{height}" '
        f'viewBox="0 0 960 {height}" font-family="DejaVu Sans, Arial, sans-serif" '
        'font-size="13">',
        '<rect width="960" height="100%" fill="white"/>',
        '<text x="20" y="26" font-size="16" font-weight="bold">The lock-out rule: a chip '
        "counts only if its sensor was closed at the edge and its contact rested</text>",
        '<text x="20" y="46" fill="#444">A seat sensor, closed (up) or open, around one '
        "press of the lock-out button; each verdict is what SeatInputs and the round core</text>",
        '<text x="20" y="62" fill="#444">decided (kernel stamps: the tie window is a '
        "nanosecond). chip_present_ms 150, chip_bounce_ms 5.</text>",
        # chip_bounce_ms after the edge, and the edge itself
        f'<rect x="{edge_x:.1f}" y="{TOP - 12}" width="{x(EDGE + BOUNCE) - edge_x:.1f}" '
        f'height="{bottom - TOP + 12}" fill="#ffe7a8"/>',
        f'<line x1="{edge_x:.1f}" y1="{TOP - 16}" x2="{edge_x:.1f}" y2="{bottom}" '
        'stroke="#c0392b" stroke-width="2" stroke-dasharray="5,3"/>',
        f'<text x="{edge_x + 6:.1f}" y="{TOP - 18}" fill="#c0392b">'
        "lock-out edge: no more bets</text>",
    ]
    for i, (what, edges) in enumerate(ROWS):
        y = TOP + 20 + i * ROW_H
        counts = decide(edges)
        out += [
            f'<text x="20" y="{y}">{escape(what)}</text>',
            waveform(edges, y),
            *([rest_bar(edges, y)] if counts else []),
            f'<text x="{X0 + WIDTH + 20}" y="{y}" font-weight="bold" '
            f'fill="{"#1e7b34" if counts else "#c0392b"}">{"counts" if counts else "refused"}'
            "</text>",
        ]
    axis_y = bottom + 12
    out.append(f'<line x1="{X0}" y1="{axis_y}" x2="{X0 + WIDTH}" y2="{axis_y}" stroke="#888"/>')
    for ms in range(-50, 200, 50):
        tx = x(EDGE + ms * MS)
        out += [
            f'<line x1="{tx:.1f}" y1="{axis_y}" x2="{tx:.1f}" y2="{axis_y + 5}" stroke="#888"/>',
            f'<text x="{tx:.1f}" y="{axis_y + 18}" text-anchor="middle" fill="#444">'
            f"{ms:+d} ms</text>",
        ]
    legend_y = axis_y + 40
    out += [
        f'<rect x="20" y="{legend_y - 10}" width="14" height="12" fill="#ffe7a8"/>',
        f'<text x="40" y="{legend_y}" fill="#444">chip_bounce_ms after the edge: a chip '
        "still settling may open this long at a time</text>",
        f'<rect x="20" y="{legend_y + 14}" width="14" height="4" fill="#7bc47f"/>',
        f'<text x="40" y="{legend_y + 20}" fill="#444">chip_present_ms: the contact that '
        "was on the sensor at the edge rests (closed, no edge)</text>",
        "</svg>",
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    OUT.write_text(svg())
    print(f"wrote {OUT}")

"""Logging: a flood of the same trouble is one line and then summaries, not a line each."""

from __future__ import annotations

from typing import Any

from tablectl.util.logs import Throttled, with_priority


class Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))


def test_throttled_warns_once_then_summarises_per_interval() -> None:
    now = [0.0]
    log = Recorder()
    warn = Throttled(log, "dropped", every_s=10, clock=lambda: now[0])
    for _ in range(1000):
        warn(peer="x")
    assert log.lines == [("dropped", {"total": 1, "peer": "x"})]
    now[0] = 10.0
    warn(peer="y")
    assert log.lines[-1] == ("dropped", {"total": 1001, "peer": "y", "suppressed_since_last": 999})
    assert len(log.lines) == 2


def test_every_line_of_a_multi_line_message_carries_the_priority() -> None:
    assert with_priority(3, "boom\n  at line 2") == "<3>boom\n<3>  at line 2"

"""structlog set-up: journald priorities under systemd, JSON lines for files, columns on a tty.

Under systemd, stderr is a stream into the journal ($JOURNAL_STREAM names it); each line then
starts with its sd-daemon(3) priority, `<3>` for errors through `<7>` for debug, so
`journalctl -p warning` shows what needs a technician. Python's own logging (asyncio, psycopg)
goes the same way.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog

# sd-daemon(3) / syslog(3) priorities.
PRIORITY = {
    "critical": 2,
    "exception": 3,
    "error": 3,
    "warning": 4,
    "warn": 4,
    "info": 6,
    "debug": 7,
}


class _CurrentStderr:
    """Writes to whatever sys.stderr is now (tests and daemons may swap it after set-up)."""

    def write(self, text: str) -> None:
        sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def stderr_is_journal() -> bool:
    """True when systemd connected stderr to the journal (systemd.exec(5), $JOURNAL_STREAM)."""
    stream = os.environ.get("JOURNAL_STREAM", "")
    dev, sep, ino = stream.partition(":")
    if not sep:
        return False
    try:
        st = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return f"{st.st_dev}:{st.st_ino}" == f"{dev}:{ino}"


def with_priority(priority: int, text: str) -> str:
    """Every line prefixed: journald makes each line its own entry."""
    return "\n".join(f"<{priority}>{line}" for line in text.splitlines() or [""])


class JournaldRenderer:
    """`<N>event key=value ...`; journald adds the time, the unit and the pid itself."""

    def __init__(self) -> None:
        self._kv = structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True)

    def __call__(self, logger: Any, method: str, event_dict: structlog.typing.EventDict) -> str:
        level = str(event_dict.pop("level", method))
        event_dict.pop("timestamp", None)
        return with_priority(PRIORITY.get(level, 6), self._kv(logger, method, event_dict))


class _StdlibJournaldFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = PRIORITY.get(record.levelname.lower(), 6)
        return with_priority(priority, f"{record.name}: {super().format(record)}")


_stdlib_handler: logging.Handler | None = None


def configure(level: str = "INFO", json: bool | None = None) -> None:
    journald = json is None and stderr_is_journal()
    as_json = not sys.stderr.isatty() if json is None else json
    renderer: structlog.typing.Processor
    if journald:
        renderer = JournaldRenderer()
    elif as_json:
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    # Libraries' stdlib logging (asyncio, psycopg): WARNING and up, with the same priorities.
    global _stdlib_handler
    root = logging.getLogger()
    if _stdlib_handler is not None:
        root.removeHandler(_stdlib_handler)
    _stdlib_handler = logging.StreamHandler(_CurrentStderr())
    if journald:
        _stdlib_handler.setFormatter(_StdlibJournaldFormatter())
    root.addHandler(_stdlib_handler)
    root.setLevel(max(logging.WARNING, getattr(logging, level.upper())))


class Throttled:
    """One warning, then at most one summary per `every_s`: a flood of the same trouble
    (a thousand idle clients, a chattering line) must not fill the journal."""

    def __init__(
        self,
        log: Any,
        event: str,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = log
        self._event = event
        self._every_s = every_s
        self._clock = clock
        self._next_at: float | None = None
        self.suppressed = 0
        self.total = 0

    def __call__(self, **fields: Any) -> None:
        self.total += 1
        now = self._clock()
        if self._next_at is not None and now < self._next_at:
            self.suppressed += 1
            return
        if self.suppressed:
            fields["suppressed_since_last"] = self.suppressed
        self._log.warning(self._event, total=self.total, **fields)
        self.suppressed = 0
        self._next_at = now + self._every_s

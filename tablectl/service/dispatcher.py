"""Between the core and the store: a step's input and records, as the journal keeps them."""

from __future__ import annotations

from typing import Any

from tablectl.core.effects import Effect, Record
from tablectl.core.events import Event
from tablectl.store.journal import StepInput


def journal_entries(effects: list[Effect]) -> list[tuple[str, dict[str, Any]]]:
    """The typed records of a step, as the journal stores (and the relay publishes) them."""
    return [(e.TYPE, e.model_dump(mode="json")) for e in effects if isinstance(e, Record)]


def journal_input(event: Event) -> StepInput:
    return StepInput(event.TYPE, event.model_dump(mode="json"))

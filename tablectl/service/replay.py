"""Replay: rebuild a table's state from its journaled inputs with the current code.

Every step the daemon took is in the journal: the input, the hash of the state it left and the
rows it produced. Replaying the inputs through the pure core from the initial state must give
the same rows (by type and data) and the same state at every step, and end on the stored
snapshot. The first difference is reported by the input's number and the journal seq.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from tablectl.core.events import PowerUp, TableRules, input_from_journal
from tablectl.core.table import Rejected, TableState, step
from tablectl.service.dispatcher import journal_entries
from tablectl.store.journal import InputRow, JournalRow, canonical_json, state_hash


class JournalSource(Protocol):
    """What replay reads: the daemon's Store, or a read-only JournalReader (the CLI)."""

    @property
    def last_seq(self) -> int: ...

    def inputs(self) -> Iterator[InputRow]: ...

    def rows_between(self, first_seq: int, last_seq: int) -> list[JournalRow]: ...

    def get(self, key: str) -> str | None: ...


STORED_STATE_DIFFERS = "the stored state differs from the replayed one"


@dataclass(frozen=True, slots=True)
class ReplayResult:
    inputs: int
    rows: int
    difference: str | None = None  # what differs first, or None: identical
    input_seq: int | None = None
    seq: int | None = None  # the first journal seq that differs, where one does
    state_json: str | None = None  # the state the inputs rebuilt (journal recover --accept state)

    @property
    def identical(self) -> bool:
        return self.difference is None


def replay(store: JournalSource) -> ReplayResult:
    rules: TableRules | None = None
    state: TableState | None = None
    inputs = rows = 0
    for row in store.inputs():
        inputs += 1
        try:
            event = input_from_journal(row.type, row.data)
        except ValueError as exc:
            return ReplayResult(inputs, rows, f"input {row.input_seq}: {exc}", row.input_seq)
        if isinstance(event, PowerUp):
            rules = event.rules
        if rules is None:
            return ReplayResult(
                inputs, rows, f"input {row.input_seq} comes before any power-up", row.input_seq
            )
        if state is None:
            state = TableState.initial(rules)
        try:
            state, effects = step(rules, state, event)
        except Rejected as exc:
            return ReplayResult(
                inputs,
                rows,
                f"input {row.input_seq} is now refused: {exc}",
                row.input_seq,
                row.first_seq,
            )
        produced = journal_entries(effects)
        stored = (
            []
            if row.first_seq is None or row.last_seq is None
            else store.rows_between(row.first_seq, row.last_seq)
        )
        for i in range(max(len(produced), len(stored))):
            mine = produced[i] if i < len(produced) else None
            theirs = (stored[i].type, stored[i].data) if i < len(stored) else None
            if mine is None or theirs is None or canonical_json(mine) != canonical_json(theirs):
                seq = stored[i].seq if i < len(stored) else (row.last_seq or 0) + 1
                return ReplayResult(
                    inputs,
                    rows,
                    f"seq {seq} (input {row.input_seq}, {row.type}): journal has "
                    f"{_brief(theirs)}, replay gives {_brief(mine)}",
                    row.input_seq,
                    seq,
                )
            rows += 1
        if state_hash(state.model_dump_json()) != row.state_hash:
            return ReplayResult(
                inputs,
                rows,
                f"input {row.input_seq} ({row.type}): the state differs",
                row.input_seq,
                row.last_seq,
            )
    rebuilt = None if state is None else state.model_dump_json()
    if rows != store.last_seq:
        return ReplayResult(
            inputs,
            rows,
            f"the journal holds {store.last_seq} rows; the inputs explain {rows}",
            state_json=rebuilt,
        )
    saved = store.get("table_state")
    if rebuilt is not None and saved is not None and rebuilt != saved:
        return ReplayResult(inputs, rows, STORED_STATE_DIFFERS, state_json=rebuilt)
    return ReplayResult(inputs, rows, state_json=rebuilt)


def _brief(entry: tuple[str, object] | None) -> str:
    return "nothing" if entry is None else f"{entry[0]} {canonical_json(entry[1])}"

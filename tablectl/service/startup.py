"""What a start opens before the table runs -- the journal, the GPIO lines -- and how far
the journal may be published.

Nothing is built on a journal that does not prove it is whole (store/integrity.py): a short
one has both hash chains walked before the daemon starts, a long one in the background with
its rounds held. A backend that acknowledged past the journal's end shows it was rolled back:
from then on nothing past a bound is handed to the relay (core/journal_checks.py).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import structlog
from tablectl.drivers.gpio.backend import GpioBackend, GpioUnavailable, Levels
from tablectl.drivers.gpio.registry import open_backend
from tablectl.drivers.gpio.table_io import TableGpio

from tablectl.config import TableConfig
from tablectl.core.events import AckPastJournal, Event, JournalChainChecked, TableRules
from tablectl.core.table import TableState
from tablectl.store.integrity import chain_problems, check_integrity
from tablectl.store.integrity import refusal as integrity_refusal
from tablectl.store.journal import JournalReader, Store, unreadable

log = structlog.get_logger(__name__)


class StartupError(Exception):
    """The daemon cannot start on this machine; the message says what to change."""


@dataclass
class OpenedJournal:
    store: Store
    reader: JournalReader
    state: TableState  # as the journal left it, or the initial state of a new table
    walk_later: bool  # too long to walk before the start: walked in the background


def open_journal(
    cfg: TableConfig,
    rules: TableRules,
    game_name: str,
    *,
    boot_id: str,
    clock: Callable[[], datetime],
    verify_before_start_rows: int,
) -> OpenedJournal:
    """The journal opened, proven whole (or to be walked later), and the state it holds;
    raises StartupError saying what to change."""
    database = cfg.storage.database
    try:
        store = Store(database, boot_id=boot_id, clock=clock)
    except sqlite3.Error as exc:
        raise StartupError(unreadable(database, exc)) from exc
    except OSError as exc:
        raise StartupError(f"cannot open the journal {database}: {exc}") from exc
    try:
        return _check_journal(store, cfg, rules, game_name, verify_before_start_rows)
    except sqlite3.Error as exc:  # damage SQLite finds only as the checks read the pages
        store.close()
        raise StartupError(unreadable(database, exc)) from exc
    except StartupError:
        store.close()
        raise


def _check_journal(
    store: Store,
    cfg: TableConfig,
    rules: TableRules,
    game_name: str,
    verify_before_start_rows: int,
) -> OpenedJournal:
    database = cfg.storage.database
    if problems := check_integrity(store, cfg.mqtt.backends):
        raise StartupError(f"{database}: {integrity_refusal(problems)}")
    walk_later = store.last_seq + store.head.input_seq > verify_before_start_rows
    if not walk_later and (broken := chain_problems(store._db)):
        raise StartupError(f"{database}: {integrity_refusal(broken)}")
    saved = store.get("table_state")
    state = TableState.model_validate_json(saved) if saved else TableState.initial(rules)
    if state.game != game_name:
        raise StartupError(
            f"the journal {database} belongs to a {state.game} table; "
            f"this config runs {game_name}: use another data_dir"
        )
    return OpenedJournal(store, store.reader(), state, walk_later)


async def open_gpio(
    cfg: TableConfig, injected: GpioBackend | None, emit: Callable[[Event], None]
) -> tuple[TableGpio, Levels]:
    """The table's lines claimed and read now; injected: a backend the demo or a test hands
    in (None: from config, gpio.backend). Raises StartupError."""
    try:
        if injected is not None:
            backend, levels = injected, await injected.open()
        else:
            backend, levels = await open_backend(
                cfg.gpio.driver_settings(),
                seats=cfg.table.seats,
                simulator_socket=cfg.simulator_socket,
            )
    except GpioUnavailable as exc:
        raise StartupError(f"GPIO unavailable: {exc}") from None
    gpio = TableGpio(cfg.gpio.driver_settings(), backend, seats=cfg.table.seats, emit=emit)
    if backend.info.polled:
        log.warning(
            "GPIO is polled: edges are stamped at each read",
            resolution_ns=backend.info.resolution_ns,
            chip=backend.info.where,
        )
    return gpio, levels


class PublishBound:
    """How far the relay may read the journal: its last durable commit, or where a rollback
    was found."""

    def __init__(self, store: Store, state: TableState, post: Callable[[Event], None]) -> None:
        self._store = store
        self._post = post
        self._started_at_seq = store.last_seq  # the journal's end when this start opened it
        # A rollback found (a backend acknowledged past the journal's end): nothing past this
        # seq is handed to the relay (core/journal_checks.py).
        self.publish_through: int | None = None
        if state.rolled_back is not None:  # found before; the start refused it otherwise
            self.publish_through = state.rolled_back.last_seq

    def publishing(self) -> bool:
        """Whether newly committed rows may leave at all."""
        return self.publish_through is None

    def publishable(self) -> int:
        """The last seq the relay may read: the last durable commit, or where a rollback was
        found (core/journal_checks.py)."""
        last = self._store.last_seq
        return last if self.publish_through is None else min(last, self.publish_through)

    def ack_past_end(self, backend: str, seq: int, last_seq: int) -> None:
        """A registered backend acknowledged past the journal's end: nothing more leaves from
        now on, and the core journals the fault (it holds the table)."""
        if self.publish_through is not None:
            return  # found already: nothing more leaves
        # The rows this start journaled have seqs that backend holds with other content:
        # not even those leave again.
        self.publish_through = min(last_seq, self._started_at_seq)
        log.error(
            "a backend acknowledged rows past the journal's end: the journal was rolled back; "
            "nothing more is published",
            backend=backend,
            acked_through_seq=seq,
            last_seq=last_seq,
        )
        self._post(AckPastJournal(backend_id=backend, acked_through_seq=seq, last_seq=last_seq))


async def walk_chains(
    store: Store, through_seq: int, through_input: int, post: Callable[[Event], None]
) -> None:
    """Both hash chains walked whole on a reader of its own, in a thread (the rounds are
    held meanwhile); the core hears the outcome."""
    reader = JournalReader(store.path)
    try:
        broken = await asyncio.to_thread(chain_problems, reader._db)
    finally:
        reader.close()
    log.info("journal chains walked", through_seq=through_seq, broken=len(broken))
    post(
        JournalChainChecked(
            through_seq=through_seq,
            through_input=through_input,
            broken=broken[0].text() if broken else None,
        )
    )

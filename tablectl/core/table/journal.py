"""What the shell tells the core about the event stream's delivery and the journal's own
checks (docs/mqtt.md; core/journal_checks.py). Pure.

A broker refusing rows, a backend that acknowledged past the journal's end (a rollback), the
chains being walked or found broken: each is journaled once per change, and the last three
hold the table (step.py, `_table_ready`) until resolved.
"""

from __future__ import annotations

from tablectl.core import effects as rec
from tablectl.core.events import (
    AckPastJournal,
    DeliveryFault,
    DeliveryRestored,
    JournalChainChecked,
    JournalCheckPending,
    JournalRecovered,
)
from tablectl.core.journal_checks import BROKEN_ACTION, ROLLBACK_ACTION, RolledBack
from tablectl.core.table.state import Context, TableState
from tablectl.util.frozen import trusted


def delivery_fault(event: DeliveryFault, s: TableState, ctx: Context) -> TableState:
    """The broker refuses our rows: journaled once per reason; they wait (docs/mqtt.md)."""
    if event.reason == s.delivery_fault:
        return s  # journaled once per change, not per publish or reconnect
    ctx.fx.append(trusted(rec.DeliveryFaultRecord, reason=event.reason))
    return s.replace(delivery_fault=event.reason)


def delivery_restored(event: DeliveryRestored, s: TableState, ctx: Context) -> TableState:
    """The broker takes our rows again."""
    if s.delivery_fault is None:
        return s
    ctx.fx.append(trusted(rec.DeliveryFaultCleared, reason=s.delivery_fault))
    return s.replace(delivery_fault=None)


def journal_recovered(event: JournalRecovered, s: TableState, ctx: Context) -> TableState:
    # The journal says what was mended, and by whom; a rollback the table found stands until
    # a technician accepts the acknowledgement that showed it as wrong.
    """A technician mended the journal (`tablectl journal recover`): what, and by whom."""
    ctx.fx.append(
        trusted(
            rec.JournalRecoveredRecord,
            problems=list(event.problems),
            accepted=list(event.accepted),
            done=list(event.done),
            by=event.by,
        )
    )
    if s.rolled_back is not None and "acks" in event.accepted:
        return s.replace(rolled_back=None)
    return s


def ack_past_journal(event: AckPastJournal, s: TableState, ctx: Context) -> TableState:
    """A backend acknowledged past the journal's end: a rollback, found once; it holds the table."""
    if s.rolled_back is not None:
        return s  # found once: nothing more is published already
    ctx.fx.append(
        trusted(
            rec.JournalRolledBack,
            backend_id=event.backend_id,
            acked_through_seq=event.acked_through_seq,
            last_seq=event.last_seq,
            action=ROLLBACK_ACTION,
        )
    )
    return s.replace(rolled_back=RolledBack.of(event))


def chain_pending(event: JournalCheckPending, s: TableState, ctx: Context) -> TableState:
    """The journal's chains are being walked in full: no round until they are shown whole."""
    return s.replace(chain_pending=event.through_seq, chain_broken=None)


def chain_checked(event: JournalChainChecked, s: TableState, ctx: Context) -> TableState:
    """The walk of the chains ended: whole, or broken (which holds the table)."""
    if event.broken is None:
        ctx.fx.append(
            trusted(
                rec.JournalChainVerified,
                through_seq=event.through_seq,
                through_input=event.through_input,
            )
        )
        return s.replace(chain_pending=None)
    ctx.fx.append(
        trusted(
            rec.JournalChainBroken,
            through_seq=event.through_seq,
            through_input=event.through_input,
            problem=event.broken,
            action=BROKEN_ACTION,
        )
    )
    return s.replace(chain_pending=None, chain_broken=event.broken)

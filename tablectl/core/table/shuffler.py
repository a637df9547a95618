"""The shuffler (649a.5(b), 649a.13(e)): its shuffles and counts, faults, reboots, refusals,
the dealer's reshuffle and a shuffle the integrity monitor suspects (core/shuffle_fault.py).
Pure.

Only a shuffle started since the last power-up, fault or reboot, completing with a count of
52, makes a deck ready; everything that forgets the deck goes through `state.unverify`.
"""

from __future__ import annotations

from tablectl.core import effects as rec
from tablectl.core import shuffle_fault
from tablectl.core.events import (
    ReshuffleRequested,
    ShuffleAcknowledged,
    ShuffleCompleted,
    ShuffleRequestFailed,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
    ShuffleSuspected,
)
from tablectl.core.games.base import DECK_SIZE
from tablectl.core.table.state import (
    Context,
    Rejected,
    TableState,
    chapter,
    events_flow,
    refused_text,
    shuffler_unusable,
    unverify,
    without,
)
from tablectl.util.frozen import trusted


def shuffle_started(event: ShuffleStarted, s: TableState, ctx: Context) -> TableState:
    """A shuffle began: only its completion can make a deck ready."""
    ctx.fx.append(trusted(rec.ShuffleStartedRecord, stale=event.stale))
    if event.stale:
        return s
    return s.replace(shuffle_requested=True, shuffle_started=True, shuffle_refused=None)


def shuffle_completed(event: ShuffleCompleted, s: TableState, ctx: Context) -> TableState:
    """A shuffle's count: 52 makes a deck ready if nothing since explains otherwise (649a.5(b))."""
    fx = ctx.fx
    count = event.card_count
    ok = count == DECK_SIZE
    because = (
        "reported before this power-up"
        if event.stale
        else f"shuffler fault {s.shuffler_fault} (649a.13(e))"
        if s.shuffler_fault is not None
        else "the shuffler's events are refused"
        if "shuffler" in s.events_refused
        else f"the deck was removed ({s.blocked}): a new deck is counted by its own shuffle"
        if s.blocked is not None
        else "another shuffler is connected and not accepted"
        if "shuffler" in s.devices_pending
        else "no shuffle started since the last power-up, fault or reboot"
        if not s.shuffle_started
        else None
    )
    ready = ok and because is None
    fx.append(
        trusted(
            rec.ShuffleCompletedRecord,
            card_count=count,
            count_ok=ok,
            deck_ready=ready,
            not_ready_because=because if ok else f"counted {count}, not {DECK_SIZE}",
        )
    )
    if ok:
        counters = s.counters if because is None else s.counters.bump("completions_not_used")
        return s.replace(
            shuffle_requested=False, shuffle_started=False, deck_ready=ready, counters=counters
        )
    # 649a.5(b), 653a.5(b): an incorrect count removes the deck from the table (and unverify
    # ends the shuffle: no longer requested nor started).
    fx.append(
        trusted(
            rec.DeckMiscount,
            card_count=count,
            expected=DECK_SIZE,
            rule="649a.5(b)",
            action="deck removed; register a new deck",
        )
    )
    return unverify(s).replace(
        blocked=f"deck-miscount:{count}", counters=s.counters.bump("deck_miscounts")
    )


def shuffler_fault(event: ShufflerFault, s: TableState, ctx: Context) -> TableState:
    """A jam, stop or incomplete cycle (649a.13(e)): the deck is forgotten until a reshuffle."""
    if (event.at_connect or event.from_status) and s.shuffler_fault == event.code:
        return s  # the fault already journaled, still showing in STATUS
    # 649a.13(e): jam, stop or incomplete cycle -> the cards shall be reshuffled.
    ctx.fx.append(trusted(rec.ShufflerFaultRecord, code=event.code, rule="649a.13(e)"))
    return shuffler_unusable(s, event.code)


def shuffler_rebooted(event: ShufflerRebooted, s: TableState, ctx: Context) -> TableState:
    """The shuffler rebooted: its event ids start over and its deck is forgotten."""
    ctx.fx.append(trusted(rec.ShufflerRebootedRecord))
    # Its event ids start over: a refusal of its old stream no longer stands.
    return unverify(events_flow(s, "shuffler"))


def shuffle_request_failed(event: ShuffleRequestFailed, s: TableState, ctx: Context) -> TableState:
    """The shuffler did not take SHUFFLE: journaled once per reason."""
    if not event.retrying:  # journals before the shell retried by itself: ask again now
        ctx.fx.append(trusted(rec.ShuffleRequestFailedRecord, reason=event.reason))
        return s.replace(shuffle_requested=False)
    if event.reason == s.shuffle_refused:
        return s  # nothing new: journaled once per reason, not once per attempt
    ctx.fx.append(trusted(rec.ShuffleRequestFailedRecord, reason=event.reason))
    return s.replace(shuffle_refused=event.reason)


def reshuffle(event: ReshuffleRequested, s: TableState, ctx: Context) -> TableState:
    """The dealer clears a shuffler fault by reshuffling (649a.13(e))."""
    refused = s.events_refused.get("shuffler")
    if refused is not None:
        raise Rejected(
            f"the shuffler's events are refused ({refused_text(refused)}): a reshuffle "
            "cannot fix that; reboot the shuffler, or "
            "`tablectl devices reset-link shuffler --by ID`, then reshuffle"
        )
    if s.shuffler_fault is None:
        raise Rejected("the shuffler reports no fault to recover from")
    ctx.fx.append(trusted(rec.ShufflerFaultCleared, code=s.shuffler_fault, by=event.by))
    # 649a.13(e): the cards are reshuffled; nothing reported before counts.
    return unverify(s.replace(shuffler_fault=None, stalls=without(s.stalls, "shuffler")))


def shuffle_suspected(event: ShuffleSuspected, s: TableState, ctx: Context) -> TableState:
    """The integrity monitor alarmed on a shuffle (core/shuffle_fault.py): SHUFFLE SUSPECT."""
    fault, records = shuffle_fault.suspected(s.shuffle, event, chapter(ctx.game))
    ctx.fx.extend(records)
    return s.replace(shuffle=fault)


def shuffle_acknowledged(event: ShuffleAcknowledged, s: TableState, ctx: Context) -> TableState:
    """A person acknowledged the suspect shuffle, or took the shuffler out of service."""
    try:
        fault, records = shuffle_fault.acknowledged(s.shuffle, event)
    except shuffle_fault.NotNow as exc:
        raise Rejected(str(exc)) from None
    ctx.fx.extend(records)
    return s.replace(shuffle=fault)

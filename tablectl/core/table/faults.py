"""Device faults the table itself decides (649a.13(e)-(f)): a device's identity, an event
stream refused or contradicting itself, a link reset, and a command that never completed
(core/stalls.py). Pure.

A device with another serial number than the accepted one blocks play until a technician
accepts it; a stream out of sequence or with two reports under one id cannot be believed: the
shuffler is faulted, the shoe's deal voided. `waits` says what the table awaits of its
devices, for the shell to time.
"""

from __future__ import annotations

from tablectl.core import effects as rec
from tablectl.core import stalls
from tablectl.core.events import (
    CommandStalled,
    DeviceAccepted,
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceLinkReset,
    DeviceReportConflict,
)
from tablectl.core.games.base import DECK_SIZE
from tablectl.core.stalls import Awaited, Stall, Wait
from tablectl.core.table.deal import shoe_fault
from tablectl.core.table.deck_rules import deck_irregular
from tablectl.core.table.state import (
    Context,
    RefusedEvent,
    Rejected,
    TableState,
    chapter,
    dealing,
    events_flow,
    shuffler_unusable,
    shuffler_usable,
    unverify,
)
from tablectl.util.frozen import trusted


def identified(event: DeviceIdentified, s: TableState, ctx: Context) -> TableState:
    """A device read on connect. Another serial number than the accepted one blocks play."""
    game, fx = ctx.game, ctx.fx
    device, serial = event.device, event.serial_number
    accepted = s.devices.get(device)
    pending = s.devices_pending.get(device)
    in_use = pending or accepted
    if device == "shuffler" and in_use is not None and serial != in_use:
        # Another shuffler (or the accepted one back): what was shuffled is not its deck.
        s = unverify(s)

    def record(ok: bool) -> None:
        fx.append(
            trusted(
                rec.DeviceIdentifiedRecord,
                device=device,
                model=event.model,
                serial_number=serial,
                firmware=event.firmware,
                accepted=ok,
                previous_serial_number=accepted,
            )
        )

    if accepted is None:
        record(True)  # the first device of its kind at this table
        return s.replace(devices={**s.devices, device: serial})
    if serial == accepted:
        if pending is None:
            return s  # the same device again (a reconnect): nothing to journal
        record(True)  # the accepted device is back
        return s.replace(
            devices_pending={k: v for k, v in s.devices_pending.items() if k != device}
        )
    if serial == pending:
        return s
    record(False)
    s = s.replace(
        devices_pending={**s.devices_pending, device: serial},
        counters=s.counters.bump("devices_changed"),
    )
    if device == "shoe" and dealing(s):
        # Another shoe mid-deal: the one that dealt stopped dealing (649a.13(f)).
        return shoe_fault(game, s, "replaced", fx)
    return s


def device_accepted(event: DeviceAccepted, s: TableState, ctx: Context) -> TableState:
    """A technician accepts the device waiting, by its serial number; a shuffler counts anew."""
    fx = ctx.fx
    pending = s.devices_pending.get(event.device)
    if pending is None:
        raise Rejected(f"no {event.device} is waiting to be accepted")
    if pending != event.serial_number:
        raise Rejected(
            f"the {event.device} waiting to be accepted is {pending}, not {event.serial_number}"
        )
    fx.append(
        trusted(
            rec.DeviceAcceptedRecord,
            device=event.device,
            serial_number=pending,
            replaces=s.devices.get(event.device),
            by=event.by,
        )
    )
    if event.device == "shuffler":
        s = unverify(s)  # the accepted shuffler counts its own deck before a round opens
    return s.replace(
        devices={**s.devices, event.device: pending},
        devices_pending={k: v for k, v in s.devices_pending.items() if k != event.device},
    )


def events_refused(event: DeviceEventsRefused, s: TableState, ctx: Context) -> TableState:
    """A device out of sequence cannot be believed: it counts as a device fault, and its
    stream stays stopped (a reshuffle cannot restart it) until it reboots or a technician
    resets the link."""
    game, fx = ctx.game, ctx.fx
    refused = RefusedEvent(
        boot_id=event.boot_id,
        event_id=event.event_id,
        expected_event_id=event.expected_event_id,
        kind=event.kind,
    )
    if s.events_refused.get(event.device) == refused:
        return s  # the same refusal, heard again after a restart: nothing new
    fx.append(
        trusted(
            rec.DeviceEventsRefusedRecord,
            device=event.device,
            boot_id=event.boot_id,
            event_id=event.event_id,
            expected_event_id=event.expected_event_id,
            kind=event.kind,
        )
    )
    s = s.replace(
        counters=s.counters.bump("device_events_refused"),
        events_refused={**s.events_refused, event.device: refused},
    )
    if event.device == "shuffler":
        fx.append(trusted(rec.ShufflerFaultRecord, code="event-sequence", rule="649a.13(e)"))
        return shuffler_unusable(s, "event-sequence")
    if event.device == "shoe":
        return shoe_fault(game, s, "event-sequence", fx)
    return s


def report_conflict(event: DeviceReportConflict, s: TableState, ctx: Context) -> TableState:
    """One event id, two reports: never a replay. A shuffler that says 52 and then 51 of one
    deck has not shown that 52 cards are present: the deck leaves the table (649a.5(b)) and
    a round on it is void (649a.10(f)); the shuffler is faulted until a reshuffle."""
    game, fx = ctx.game, ctx.fx
    fx.append(
        trusted(
            rec.DeviceReportConflictRecord,
            device=event.device,
            boot_id=event.boot_id,
            event_id=event.event_id,
            kind=event.kind,
        )
    )
    s = s.replace(counters=s.counters.bump("device_report_conflicts"))
    if event.device == "shuffler":
        fx.append(trusted(rec.ShufflerFaultRecord, code="event-conflict", rule="649a.13(e)"))
        s = shuffler_unusable(s, "event-conflict")
        return deck_irregular(game, s, "conflicting-count", fx, by="shuffler")
    if event.device == "shoe":
        return shoe_fault(game, s, "event-conflict", fx)
    return s


def link_reset(event: DeviceLinkReset, s: TableState, ctx: Context) -> TableState:
    """A technician skips a refused stretch of a device's events (`tablectl devices reset-link`)."""
    fx = ctx.fx
    refused = s.events_refused.get(event.device)
    if refused is None:
        raise Rejected(f"the {event.device}'s events are not refused: there is no link to reset")
    if refused.boot_id != event.boot_id:
        raise Rejected(
            f"the refusal was in the {event.device}'s boot {refused.boot_id}, "
            f"not {event.boot_id}: ask again"
        )
    fx.append(
        trusted(
            rec.DeviceLinkResetRecord,
            device=event.device,
            boot_id=event.boot_id,
            skipped_from_event_id=event.from_event_id + 1,
            skipped_to_event_id=event.to_event_id,
            by=event.by,
        )
    )
    s = events_flow(s, event.device)
    # Whatever the skipped events said is unknown: the shuffler's deck is counted again.
    return unverify(s) if event.device == "shuffler" else s


def waits(s: TableState) -> tuple[Wait, ...]:
    """What the table waits for from its devices now (core/stalls.py): a shuffle's completion
    while it wants a deck and nothing else explains the wait, the shoe's deal of the round."""
    found: list[Wait] = []
    if s.shuffle_requested and not s.deck_ready and shuffler_usable(s):
        found.append(Wait("shuffler", Awaited.SHUFFLE, (int(s.shuffle_started),)))
    deal = s.deal
    if (
        deal is not None
        and dealing(s)
        and s.shoe_fault is None
        and not s.shoe_out_of_order
        and "shoe" not in s.events_refused
    ):
        progress = (len(deal.cards), len(deal.stacks_done), deal.face_up, len(deal.discarded))
        found.append(Wait("shoe", Awaited.DEAL, progress))
    return tuple(found)


def command_stalled(event: CommandStalled, s: TableState, ctx: Context) -> TableState:
    """A wait the shell found too long: a fault, if the table still waits for it (a
    completion journaled meanwhile makes the decision moot: nothing is journaled)."""
    game, fx = ctx.game, ctx.fx
    awaited = Awaited(event.awaited)
    if not any(w.device == event.device and w.awaited is awaited for w in waits(s)):
        return s
    stall = Stall.of(event)
    cites = chapter(game)
    dealt = awaited is Awaited.DEAL
    fx.append(
        trusted(
            rec.CommandStalledRecord,
            device=event.device,
            awaited=awaited.value,
            waited_ms=event.waited_ms,
            reported=event.reported,
            card_count=event.card_count,
            replayed=event.replayed,
            round_id=s.round_id if dealt else None,
            rule=stalls.rule(cites, awaited),
            action=stalls.action(awaited),
        )
    )
    s = s.replace(
        stalls={**s.stalls, event.device: stall},
        counters=s.counters.bump("commands_stalled"),
    )
    if dealt:
        # 649a.13(f): the shoe stopped dealing: the round is void, its cards reshuffled.
        return shoe_fault(game, s, "stalled", fx)
    # 649a.13(e): the shuffle cycle did not complete; the cards are reshuffled.
    fx.append(trusted(rec.ShufflerFaultRecord, code="stalled", rule=stalls.rule(cites, awaited)))
    s = shuffler_unusable(s, "stalled")
    counted = stalls.miscount(stall)
    if counted is None:
        return s
    # 649a.5(b): the shuffler showed the count in its STATUS, if not in an event.
    fx.append(
        trusted(
            rec.DeckMiscount,
            card_count=counted,
            expected=DECK_SIZE,
            rule="649a.5(b)",
            action="deck removed; register a new deck",
        )
    )
    return s.replace(blocked=f"deck-miscount:{counted}", counters=s.counters.bump("deck_miscounts"))

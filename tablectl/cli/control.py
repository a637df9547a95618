"""Verbs that talk to the running daemon: status, the dealer's and the floorperson's commands."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from tablectl.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    SEAT,
    SEAT_LIMIT,
    WholeNumber,
    call,
    cents,
    describe,
    fail,
    matching,
    person,
    printable,
    read_reply,
    socket_args,
    text,
    yes_no,
)
from tablectl.control.protocol import STUB_COUNT_MOST
from tablectl.status import DecksView, FaultView, PaceStatus, Status, Stops, schema_json
from tablectl.util.bounds import Limit

# As the core spells them (core/events.py DeckId, Back): refused here, naming the option.
DECK_ID = matching("a deck id", r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
BACK = matching("a back colour in lower case, e.g. red", r"[a-z][a-z-]{0,23}")
STUB_COUNT = WholeNumber(
    "the cards the count shows in the deck",
    Limit(
        0,
        STUB_COUNT_MOST,
        "52 a whole deck, 649a.8(g); a wrong count up to both of the table's decks, 649a.3(b)",
    ),
)


@text
def cards(text: str) -> str:
    """Cards as the dealer reads them, e.g. AhKh9c2d3s (checked here: a malformed card is
    bad input, exit 2, not a refusal by the daemon)."""
    from tablectl.rules.cards import parse_cards

    try:
        parse_cards(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return text


@dataclass(frozen=True)
class SeatHand:
    """SEAT=CARDS, e.g. 3=AsKsQs: a seat's cards as the dealer reads them."""

    limit: Limit = SEAT_LIMIT
    per_table: bool = True

    def __call__(self, text: str) -> tuple[int, str]:
        seat, sep, shown = text.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"{text!r}: write SEAT=CARDS, e.g. 3=AsKsQs")
        try:
            return SEAT(seat), cards(shown)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{text}: {exc}") from None

    def seats_in(self, value: tuple[int, str]) -> list[int]:
        return [value[0]]


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = sub.add_parser("status", help="what the running daemon is doing")
    socket_args(status, sends=("status",))
    status.add_argument(
        "--schema",
        action="store_true",
        help="print the JSON Schema of what --json prints (docs/status.schema.json); "
        "no daemon is asked",
    )
    status.set_defaults(handler=_status)

    dealer = sub.add_parser("dealer", help="the dealer's commands to the running daemon")
    dealer_sub = dealer.add_subparsers(dest="dealer_verb", required=True)
    settle = dealer_sub.add_parser(
        "settle", help="the cards shown (when no shoe reads them) and the folds: settle"
    )
    settle.add_argument(
        "--hand",
        action="append",
        type=SeatHand(),
        default=[],
        metavar="SEAT=CARDS",
        help="a seat's cards, e.g. 3=AsKsQs (repeat per seat)",
    )
    settle.add_argument(
        "--community", type=cards, default="", help="community cards, e.g. AhKh9c2d3s"
    )
    settle.add_argument("--dealer", type=cards, default="", help="the dealer's cards (optional)")
    settle.add_argument("--fold", action="append", type=SEAT, default=[], metavar="SEAT")
    deal = dealer_sub.add_parser(
        "deal", help="the shoe deals the round (649a.10(b)); its cards form the hands"
    )
    deal.add_argument(
        "--seat",
        action="append",
        type=SEAT,
        default=[],
        metavar="SEAT",
        help="a player in the round without a table-system wager (repeat per seat)",
    )
    out_of_order = dealer_sub.add_parser(
        "shoe-out-of-order",
        help="the shoe is covered or signed out of order (649a.13(g)): enter hands by hand",
    )
    in_service = dealer_sub.add_parser("shoe-in-service", help="the shoe deals again")
    clear_shoe = dealer_sub.add_parser(
        "clear-shoe",
        help="after a shoe fault: every card is out of the shoe (649a.13(f)); it deals again",
    )
    void = dealer_sub.add_parser("void", help="void the round; every wager is returned")
    void.add_argument(
        "reason",
        type=printable("a reason", 200),
        help="e.g. shoe-jam, cards-face-up, wrong-card-count",
    )
    new_deck = dealer_sub.add_parser(
        "new-deck",
        help="a new deck comes to the table (649a.3): with --id and --back the table keeps "
        "its age and alternation; without, it replaces one that miscounted (649a.5(b))",
    )
    new_deck.add_argument(
        "--id", dest="deck_id", metavar="ID", type=DECK_ID, help="the deck's id, e.g. D17"
    )
    new_deck.add_argument("--back", metavar="COLOUR", type=BACK, help="its backs' colour, e.g. red")
    new_deck.add_argument(
        "--replaces",
        metavar="ID",
        type=DECK_ID,
        help="the deck it replaces (when the table has its decks)",
    )
    stub_count = dealer_sub.add_parser(
        "stub-count",
        help="the stub was counted (649a.8(f)-(h), 649a.9(d)-(f), 649a.10(d)-(f)): the cards "
        "the count shows in the deck; none: confirm the count the shoe's reads give",
    )
    stub_count.add_argument(
        "cards", nargs="?", type=STUB_COUNT, metavar="N", help="0 to 104; 52 when whole"
    )
    stub_count.add_argument(
        "--misdealt",
        action="store_true",
        help="a hand (or the community area) has more or fewer cards than dealt: void only",
    )
    stub_count.add_argument(
        "--confirm",
        action="store_true",
        help="your count stands, though the shoe's reads contradict it (it was questioned)",
    )
    idle = dealer_sub.add_parser(
        "idle-procedure",
        help="after no round for the idle time (649a.5(f)): the cards were spread for "
        "inspection, then the deck from the table went into the shuffler in place of its own",
    )
    deck_in_play = dealer_sub.add_parser(
        "deck-in-play",
        help="the deck this round is dealt from (649a.3(b)(3): the decks alternate)",
    )
    deck_in_play.add_argument("deck_id", metavar="ID", type=DECK_ID)
    reshuffle = dealer_sub.add_parser(
        "reshuffle", help="the shuffler fault is cleared: reshuffle (649a.13(e))"
    )
    clear_fault = dealer_sub.add_parser(
        "clear-fault",
        help="the sensors were checked after a GPIO fault (or a stuck input was freed): "
        "reopen betting",
    )
    stuck = clear_fault.add_mutually_exclusive_group()
    stuck.add_argument(
        "--seat",
        type=SEAT,
        metavar="SEAT",
        help="a stuck seat sensor (its chip lifted, repaired)",
    )
    stuck.add_argument("--lockout", action="store_true", help="a stuck lock-out button (freed)")
    for sp in (
        settle,
        deal,
        out_of_order,
        in_service,
        clear_shoe,
        void,
        new_deck,
        stub_count,
        idle,
        deck_in_play,
        reshuffle,
        clear_fault,
    ):
        socket_args(sp, sends=(sp.prog.split()[-1],))  # the verb is the command it sends
        sp.add_argument(
            "--by", type=person, help="who you are (an employee id), journaled with the command"
        )
        sp.set_defaults(handler=send_command)

    floor = sub.add_parser("floor", help="the floorperson's commands (jackpot workflow)")
    floor_sub = floor.add_subparsers(dest="floor_verb", required=True)
    validate = floor_sub.add_parser(
        "validate", help="validate a progressive payout (649a.11(c)(5)(iii))"
    )
    document = floor_sub.add_parser(
        "document", help="a payout not paid from the table inventory is documented"
    )
    for sp in (validate, document):
        sp.add_argument(
            "hit_id", type=printable("a hit id", 32), help="the hit, as status shows it (e.g. 12-5)"
        )
        sp.add_argument("--by", required=True, type=person, help="the floorperson (an employee id)")
        socket_args(sp, sends=(sp.prog.split()[-1],))
        sp.set_defaults(handler=send_command)


def _request(args: argparse.Namespace) -> dict[str, Any]:
    by = {"by": args.by} if getattr(args, "by", None) else {}
    if args.verb == "shuffle":
        action = (
            "out-of-service"
            if args.out_of_service
            else "in-service"
            if args.in_service
            else "acknowledge"
        )
        return {"cmd": "shuffle-acknowledge", "action": action, **by}
    if args.verb == "floor":
        return {"cmd": args.floor_verb, "hit_id": args.hit_id, **by}
    if args.verb == "devices" and args.devices_verb == "reset-link":
        return {"cmd": "reset-link", "device": args.device, **by}
    if args.verb == "devices":
        return {
            "cmd": "accept-device",
            "device": args.device,
            "serial_number": args.serial_number,
            **by,
        }
    if args.dealer_verb == "deal":
        return {"cmd": "deal", "seats": args.seat, **by}
    if args.dealer_verb == "settle":
        hands: dict[str, str] = {}
        for seat, shown in args.hand:
            if str(seat) in hands:
                raise ValueError(f"--hand: seat {seat} is given twice")
            hands[str(seat)] = shown
        return {
            "cmd": "settle",
            "hands": hands,
            "community": args.community,
            "dealer": args.dealer,
            "folded": args.fold,
            **by,
        }
    if args.dealer_verb == "new-deck" and (args.deck_id or args.back or args.replaces):
        deck = {"deck_id": args.deck_id, "back": args.back, "replaces": args.replaces}
        return {"cmd": "new-deck", **{k: v for k, v in deck.items() if v}, **by}
    if args.dealer_verb == "stub-count":
        return {
            "cmd": "stub-count",
            "cards": args.cards,
            "misdealt": args.misdealt,
            "confirmed": args.confirm,
            **by,
        }
    if args.dealer_verb == "deck-in-play":
        return {"cmd": "deck-in-play", "deck_id": args.deck_id, **by}
    if args.dealer_verb == "void":
        return {"cmd": "void", "reason": args.reason, **by}
    if args.dealer_verb == "clear-fault" and (args.seat is not None or args.lockout):
        return {"cmd": "clear-fault", "seat": args.seat, "lockout": args.lockout, **by}
    return {"cmd": args.dealer_verb, **by}


def _print_waits(status: Status) -> None:
    """What the table waits for from each device, against what the device says."""
    for wait in status.waits:
        waited = "not taken yet" if wait.waited_s is None else f"{wait.waited_s:g} s"
        says = (
            "its link is down"
            if wait.device_reports is None
            else f"it reports {wait.device_reports}"
            + ("" if wait.card_count is None else f", {wait.card_count} cards")
        )
        verdict = (
            ": it says it is done and the table has not heard so (a stall, shown below)"
            if wait.disagrees
            else ""
        )
        print(
            f"  waiting for the {wait.device}'s {wait.awaited}: {waited} (a stall at "
            f"{wait.stall_after_s:g} s); {says}{verdict}"
        )


def _hours(ms: int) -> str:
    from tablectl.core.decks import duration_text

    return duration_text(ms)


def _print_decks(decks: DecksView | None) -> None:
    """The decks at the table (core/decks.py): age, time to the limit, the stub count due."""
    if decks is None:
        return
    for deck in decks.decks:
        role = "in play" if deck.in_play else "next" if deck.next else "at the table"
        print(
            f"  deck {deck.deck_id} ({deck.back} backs, {role}): age {_hours(deck.age_ms)}"
            f", {_hours(deck.to_limit_ms)} to its limit of {_hours(decks.max_age_ms)}"
        )
    if not decks.decks:
        print("  decks: none introduced (`tablectl dealer new-deck --id ID --back COLOUR`)")
    if decks.stub_count_every_rounds is not None:
        due = (
            "DUE now"
            if decks.stub_count_due
            else f"due within {decks.rounds_to_stub_count} round(s)"
        )
        expected = decks.stub_expected
        shoe = f"; the shoe's reads give a stub of {expected}" if expected is not None else ""
        print(f"  stub count: {due} (every {decks.stub_count_every_rounds} rounds){shoe}")
    if decks.stub_questioned is not None:
        print(f"  stub count QUESTIONED: you counted {decks.stub_questioned} (see below)")
    if decks.idle_procedure_due_utc is not None:
        print(f"  IDLE PROCEDURE due since {decks.idle_procedure_due_utc} (see below)")
    elif decks.idle_minutes is not None:
        print(f"  idle procedure after {_hours(decks.idle_minutes * 60_000)} without a round")
    if decks.blocked_by:
        print(f"  the next round waits: {decks.blocked_by} (see below)")


def send_command(args: argparse.Namespace) -> int:
    """Send the command the arguments name; print the rows it journaled."""
    try:
        request = _request(args)
    except ValueError as exc:
        return fail(args, str(exc), EXIT_BAD_INPUT)
    data = call(args, request)
    if isinstance(data, int):
        return data
    if args.json:  # what was done; `tablectl status` shows the rest
        print(json.dumps({"ok": True, "journaled": data.get("journaled", [])}, sort_keys=True))
        return EXIT_OK
    rows = data.get("journaled", [])
    if not rows:
        print("done; nothing to journal")
    for row in rows:
        brief = describe({k: v for k, v in row["data"].items() if k != "meter"})
        print(f"{row['seq']:>8} {row['type']:<22} {brief}")
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    if args.schema:  # what --json prints, as a JSON Schema (docs/status.schema.json)
        print(schema_json(), end="")
        return EXIT_OK
    data = call(args, {"cmd": "status"})
    if isinstance(data, int):
        return data
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=True))
        return EXIT_OK
    status = read_reply(args, data, Status)
    if isinstance(status, int):
        return status
    print_status(status)
    return EXIT_OK


def print_status(status: Status) -> None:
    print(
        f"table {status.table} ({status.site}), {status.game}  round {status.round_id}  "
        f"phase {status.phase.value}  accepting wagers: {yes_no(status.accepting_wagers)}"
    )
    link, meter = status.link, status.meter
    if link is not None:  # a linked progressive: the link's meter, as its controllers broadcast it
        amount = "-" if link.amount_cents is None else cents(link.amount_cents)
        down = f"  LINK DOWN: {link.reason} (5321.18(c))" if link.reason else "  link up"
        print(f"  progressive on link {link.link_id}: {amount}{down}")
        if link.reason:  # what the table knows while it is off its link
            broker = "connected" if link.broker_connected else "not connected"
            heard = (
                "nothing heard since power-up"
                if link.last_heard_ms_ago is None
                else f"last heard {link.last_heard_ms_ago / 1000:.1f} s ago"
            )
            said = (
                f"; the controllers last said: {link.controllers_say}"
                if link.controllers_say
                else ""
            )
            print(f"    broker {broker}, {heard}{said}")
            if link.amounts_as_of:
                print(f"    the amount is the last broadcast's ({link.amounts_as_of})")
        for pending in link.jackpot_pending:
            print(
                f"  JACKPOT PENDING at {pending.table} seat {pending.seat}: "
                f"{cents(pending.amount_cents)}"
            )
    elif meter is not None:
        print(f"  meter {meter.meter_id}: {cents(meter.cents)}")
    wagers = ", ".join(f"seat {s}" for s in status.wagers) or "none"
    print(f"  {status.table_wager} wagers: {wagers}")
    if status.undecided_seats:
        print(f"  still resting since before the lock-out: seats {status.undecided_seats}")
    if status.hit_history:
        count = len(status.hit_history)
        print(f"  last {count} hit{'' if count == 1 else 's'}, newest first:")
        for hit in status.hit_history:
            validated = (
                f"validated by {hit.validated_by}"
                if hit.validated_by
                else "JACKPOT PENDING: awaiting the link's answer"
                if hit.link_claim and not hit.answered
                else "not validated"
            )
            print(
                f"    {hit.hit_id:>8} seat {hit.seat} {hit.hand} "
                f"{cents(hit.amount_cents)} {validated}"
            )
    print(
        f"  deck ready: {yes_no(status.deck_ready)}  blocked: {status.blocked or 'no'}  "
        f"shuffler fault: {status.shuffler_fault or 'none'}"
        + (f"  shoe fault: {status.shoe_fault or 'none'}" if status.shoe else "")
    )
    _print_waits(status)
    _print_decks(status.decks)
    gpio = status.gpio
    how = "polled" if gpio.polled else "edges"
    print(
        f"  gpio: {gpio.backend} ({how}, resolution {gpio.resolution_ns} ns) on "
        f"{gpio.where}  edges {gpio.edges}  faults {gpio.faults}"
    )
    if status.sensor_test:
        print(f"  {status.sensor_test} test running: no round opens")
    for name, dev in status.serial_devices().items():
        counted = dev.counters
        print(
            f"  {name}: link {dev.link} on {dev.port}  state {dev.state}  "
            f"serial {dev.serial_number or '-'}  "
            f"bad frames {counted.get('bad_crc', 0) + counted.get('bad_header', 0)}  "
            f"retransmits {counted.get('retransmits', 0)}  "
            f"bytes dropped {counted.get('bytes_dropped', 0)}  "
            f"events refused {counted.get('events_refused', 0)}"
        )
    if status.shoe_out_of_order:
        print("  shoe OUT OF ORDER (649a.13(g)): hands are entered by hand")
    print_faults(status.faults)
    mq = status.mqtt
    print(
        f"  mqtt: {'connected' if mq.connected else 'disconnected'} {mq.broker}  "
        f"journal seq {status.journal.last_seq}  published {mq.published_through_seq}  "
        "acked " + (", ".join(f"{b} {q}" for b, q in sorted(mq.acked.items())) or "-")
    )
    why = "the delivery fault above" if mq.delivery_fault else "docs/mqtt.md, retention"
    for alarm in mq.backlog_alarms:
        print(
            f"  ALARM backend {alarm.backend_id} is {alarm.behind_rows} rows behind "
            f"(oldest unacknowledged {alarm.oldest_unacked_ts}): see {why}"
        )
    if status.pace is not None:
        print("  " + pace_line(status.pace))
    if status.counters:
        print("  counters: " + ", ".join(f"{k}={v}" for k, v in sorted(status.counters.items())))


def pace_line(pace: PaceStatus) -> str:
    """Game pace as status shows it: the rolling period, the shift now running, and the time
    the table stood blocked in the rolling period (`tablectl pace` has the whole picture)."""

    def rate(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    rolling = pace.rolling
    minutes = round(rolling.hours * 60)
    line = (
        f"pace (last {minutes} min): {rate(rolling.rounds_per_hour)} rounds/h, "
        f"{rate(rolling.hands_per_hour)} hands/h, blocked {rolling.blocked_ms // 1000} s"
    )
    if pace.shift_figures is not None:
        shift = pace.shift_figures
        line += (
            f"; shift from {pace.shift}: {shift.rounds} rounds, "
            f"{rate(shift.rounds_per_hour)} rounds/h, {rate(shift.hands_per_hour)} hands/h"
        )
    return line + f" (as of {pace.ts})"


def print_faults(found: list[FaultView], indent: str = "  ") -> None:
    """Each fault: what, since when, why and what it stops; then what clears it."""
    if not found:
        print(f"{indent}nothing stands in the way")
        return
    for fault in found:
        when = f" since {fault.since}" if fault.since else ""
        row = f" (seq {fault.seq})" if fault.seq is not None else ""
        rule = f" ({fault.rule})" if fault.rule else ""
        stops = "" if fault.stops is Stops.NOTHING else f"; stops {fault.stops.value}"
        print(f"{indent}{fault.title} [{fault.device}]{when}{row}: {fault.cause}{rule}{stops}")
        clear = f"{fault.remedy}: `{fault.command}`" if fault.command else fault.remedy
        print(f"{indent}    to clear: {clear}")

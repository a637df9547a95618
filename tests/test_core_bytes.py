"""The core's output, byte for byte: every state's JSON and every record's, as journaled.

A journal keeps each step's state hash and records; replay compares records as canonical JSON
(tests/test_replay.py), so a change of key order or of a value's spelling could slip past it.
These digests fix the exact bytes: each scenario's inputs are stepped from the initial state,
and every step's state JSON (`model_dump_json`, hashed for the journal), every record's
`model_dump(mode="json")` as the journal writes it and its `model_dump_json`, every other
effect, every refusal and each input as journaled go into one SHA-256. The digests were taken
on the code before the core's CPU work (issue 15); a change that alters them changes what the
table journals.

The scenarios: the journals in tests/journals (written by earlier versions), the long
random session of each game from test_replay, and random sessions through the paths those
do not reach: a reading shoe, decks, a linked progressive, devices replaced and refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import sqlite3
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel

from tablectl.core.effects import Effect, Record
from tablectl.core.events import (
    CardRead,
    ChipSensed,
    ClearGpioFault,
    ClearStuckInput,
    CommandStalled,
    ConfirmDocumentation,
    DealRequested,
    DealRequestFailed,
    DeckClock,
    DeckInPlay,
    DeckIntroduced,
    DeckRules,
    DeliveryFault,
    DeliveryRestored,
    DeviceAccepted,
    DeviceEventsRefused,
    DeviceIdentified,
    DeviceLinkReset,
    DeviceReportConflict,
    DeviceResumed,
    Event,
    GpioFault,
    IdleProcedureDone,
    JournalRecovered,
    LinkClaimAnswer,
    LinkLevelTerms,
    LinkLost,
    LinkParametersHeard,
    LinkRestored,
    LinkRules,
    LockoutHeld,
    LockoutPressed,
    LockoutReleased,
    NewDeckRegistered,
    PowerUp,
    ReshuffleRequested,
    SensorTestEnded,
    SensorTestStarted,
    Settle,
    ShoeCard,
    ShoeCleared,
    ShoeDealCompleted,
    ShoeFault,
    ShoeOutOfOrder,
    ShoeRebooted,
    ShoeStackDealt,
    ShuffleCompleted,
    ShuffleRequestFailed,
    ShufflerFault,
    ShufflerRebooted,
    ShuffleStarted,
    StubCounted,
    TableIdle,
    TableRules,
    ValidateHit,
    VoidRound,
    input_from_journal,
)
from tablectl.core.table import Phase, Rejected, TableState, step
from tablectl.rules.cards import Card, shuffled_deck
from tablectl.store.journal import Store

from .test_replay import session
from .test_table_core import lir, tcp, uth

JOURNALS = Path(__file__).parent / "journals"
MIN = 60_000
T0 = 1_780_000_000_000  # UTC milliseconds
REF = "pa-demo-casino/tcp-07"


def _fact(effect: Effect) -> str:
    """What a step's effect says, as bytes: a record as the journal writes it, and its JSON."""
    if isinstance(effect, Record):
        return (
            f"{effect.TYPE} {json.dumps(effect.model_dump(mode='json'))} {effect.model_dump_json()}"
        )
    if isinstance(effect, BaseModel):
        fields = effect.model_dump(mode="json")
    else:
        assert dataclasses.is_dataclass(effect)
        fields = json.loads(json.dumps(dataclasses.asdict(effect)))
    return f"{type(effect).__name__} {json.dumps(fields, sort_keys=True)}"


def digest(rules: TableRules, events: list[Event]) -> tuple[int, str]:
    """Steps and the SHA-256 of every step's state JSON, records and refusals."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pydantic's serializer warns of a value of another type
        return _digest(rules, events)


def _digest(rules: TableRules, events: list[Event]) -> tuple[int, str]:
    h = hashlib.sha256()
    state = TableState.initial(rules)
    for event in events:
        if isinstance(event, PowerUp):
            rules = event.rules
        h.update(f"{event.TYPE} {json.dumps(event.model_dump(mode='json'))}\n".encode())
        h.update(event.model_dump_json().encode() + b"\n")
        try:
            state, effects = step(rules, state, event)
        except Rejected as exc:
            h.update(f"refused {exc}\n".encode())
            continue
        h.update(state.model_dump_json().encode() + b"\n")
        for effect in effects:
            h.update(_fact(effect).encode() + b"\n")
    return len(events), h.hexdigest()


def journal_inputs(name: str, tmp_path: Path) -> tuple[TableRules, list[Event]]:
    path = tmp_path / "tablectl.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript((JOURNALS / name).read_text())
    store = Store(path, boot_id="check")
    try:
        events = [input_from_journal(row.type, row.data) for row in store.inputs()]
    finally:
        store.close()
    first = events[0]
    assert isinstance(first, PowerUp)
    return first.rules, events


# --- random sessions through the paths the journals and test_replay's sessions miss -------


def _link_parameters(version: int, wager_cents: int, game: str) -> LinkParametersHeard:
    return LinkParametersHeard(
        link_id="bank",
        parameters_version=version,
        parameters_sha256=f"sha-{version}",
        game=game,
        paytable="A",
        wager_cents=wager_cents,
        tables=(REF, "pa-demo-casino/tcp-08"),
        levels=(
            LinkLevelTerms(
                level_id="progressive",
                contribution_rate_bp=1400 + version,
                initial_cents=100_000,
                reset_cents=100_000,
            ),
            LinkLevelTerms(
                level_id="reserve", contribution_rate_bp=100, initial_cents=0, reset_cents=0
            ),
        ),
    )


def chaos(rules: TableRules, rounds: int, seed: int) -> list[Event]:
    """A table's random life: rounds with chips and edges, dealt by the shoe (when the rules
    have one) or shown by hand, decks introduced, aged, alternated and counted, the link lost
    and restored, devices replaced, refused, rebooted, faults and their clearing. Every input
    the core refused is kept too: a refusal's message is part of what the digest fixes."""
    rng = random.Random(seed)
    game = rules.game.table_game()
    state = TableState.initial(rules)
    events: list[Event] = []
    clock_ns, now_ms, deck_no, version = 0, T0, 0, 0

    def feed(event: Event) -> bool:
        nonlocal state
        events.append(event)
        try:
            state, _ = step(rules, state, event)
        except Rejected:
            return False
        return True

    def new_deck(replaces: str | None = None) -> None:
        nonlocal deck_no
        deck_no += 1
        back = rng.choice(("red", "blue", "green", "black", "grey"))
        feed(
            DeckIntroduced(
                deck_id=f"D{deck_no}", back=back, at_ms=now_ms, replaces=replaces, by="dealer"
            )
        )

    def link_event() -> Event:
        nonlocal version
        roll = rng.random()
        if roll < 0.3:
            version += rng.random() < 0.7
            return _link_parameters(max(1, version), game.wager_cents, game.name)
        if roll < 0.55:
            return LinkLost(reason="no broadcast heard", silent_ms=6000)
        if roll < 0.8:
            return LinkRestored(heard=rng.choice(("state", "ack")))
        pending = [h.hit_id for h in state.hits_pending] or ["9-9"]
        return LinkClaimAnswer(
            claim_id=rng.choice(pending),
            status=rng.choice(("awarded", "refused")),
            amount_cents=rng.randint(100_000, 300_000),
            award_version=rng.randint(1, 5),
            reason=rng.choice((None, "already paid")),
        )

    def device_event() -> Event:
        device = rng.choice(("shuffler", "shoe"))
        roll = rng.random()
        if roll < 0.25:
            serial = rng.choice(("S-1", "S-1", "S-2"))
            return DeviceIdentified(device=device, model="m", serial_number=serial, firmware="1")
        if roll < 0.35:
            return DeviceAccepted(device=device, serial_number="S-2", by="tech")
        if roll < 0.45:
            return DeviceEventsRefused(
                device=device, boot_id=7, event_id=40, expected_event_id=12, kind=3
            )
        if roll < 0.55:
            return DeviceLinkReset(
                device=device, boot_id=7, from_event_id=11, to_event_id=40, by="tech"
            )
        if roll < 0.6:
            return DeviceReportConflict(device=device, boot_id=7, event_id=9, kind=2)
        if roll < 0.7:
            return ShufflerRebooted() if device == "shuffler" else ShoeRebooted()
        if roll < 0.8:
            return DeviceResumed(
                device=device,
                boot_id=rng.choice((7, 8)),
                cursor_boot_id=rng.choice((None, 7)),
                state=rng.choice(("idle", "dealing")),
                acting=rng.random() < 0.5,
                events_held=rng.randint(0, 3),
            )
        if roll < 0.9:
            return DeliveryFault(reason=rng.choice(("acl", "no puback")))
        return DeliveryRestored()

    def deal() -> None:
        """The shoe deals the plan, now and then with a fault, a face-up or a foreign card."""
        seats = tuple(rng.sample(range(1, 4), 1))
        if not feed(DealRequested(seats=seats, by="dealer", shoe_boot_id=7)):
            return
        if rng.random() < 0.05:
            feed(DealRequestFailed(reason="busy"))
            if not feed(DealRequested(seats=seats, by="dealer")):
                return
        if state.deal is None:
            return  # not dealt: the round's deck passed its age (revision 4)
        deck = shuffled_deck(rng)
        backs = [d.back for d in state.deck.decks]
        in_play = state.deck.find(state.deck.round_deck)
        for n in state.deal.stacks:
            for _ in range(n):
                roll = rng.random()
                card: Card | None = deck.pop()
                read = CardRead.READ
                if roll < 0.01:
                    read = CardRead.FACE_UP
                elif roll < 0.012:
                    read, card = CardRead.FOREIGN, None
                elif roll < 0.014:
                    card = state.deal.cards[0] if state.deal.cards else card  # read twice
                back = None
                if backs and rng.random() < 0.5:
                    ok = in_play.back if in_play is not None else backs[0]
                    back = rng.choice(backs) if rng.random() < 0.02 else ok
                if not feed(ShoeCard(card=card, read=read, back=back)) or _dealt_out():
                    return
                if rng.random() < 0.01:  # a power-up mid-deal: the shoe's first STATUS
                    feed(PowerUp(rules=rules))
                    feed(
                        DeviceResumed(
                            device="shoe",
                            boot_id=rng.choice((7, 8)),
                            cursor_boot_id=7,
                            state=rng.choice(("idle", "dealing")),
                            acting=rng.random() < 0.5,
                            events_held=rng.randint(0, 2),
                        )
                    )
                    if _dealt_out():
                        return
                if rng.random() < 0.005:
                    feed(ShoeFault(code="jam"))
                    return
            if not feed(ShoeStackDealt(cards=n - (rng.random() < 0.01))) or _dealt_out():
                return
        feed(ShoeDealCompleted(cards=len(state.deal.cards)))

    def _dealt_out() -> bool:
        return state.deal is None or state.phase is not Phase.LOCKED

    def settle() -> None:
        cards = deck_cards = shuffled_deck(rng)
        plan = game.deal_plan(sorted(state.wagers) or [1])
        hands: dict[int, tuple[Card, ...]] = {}
        dealer: tuple[Card, ...] = ()
        community: tuple[Card, ...] = ()
        for s in plan.steps:
            taken = tuple(deck_cards.pop() for _ in range(s.cards))
            if s.seat is not None:
                hands[s.seat] = hands.get(s.seat, ()) + taken
            elif s.to.value == "dealer":
                dealer += taken
            elif s.to.value == "community":
                community += taken
        if rng.random() < 0.1 and hands:  # a royal at the first seat, now and then
            first = min(hands)
            royal = tuple(c for c in cards if c.suit == "s" and c.rank >= 15 - len(hands[first]))
            if len(royal) == len(hands[first]):
                hands[first] = royal
        by_shoe = rules.shoe and not state.shoe_out_of_order
        folded = frozenset(rng.sample(sorted(hands), min(len(hands), rng.randint(0, 1))))
        if by_shoe:
            ok = feed(Settle(community=community, folded=folded, by="dealer"))
            if not ok:
                feed(Settle(by="dealer", folded=folded))
        else:
            feed(
                Settle(
                    hands={k: v for k, v in hands.items() if k not in folded},
                    dealer=dealer,
                    community=community,
                    folded=folded,
                    by="dealer",
                )
            )

    def revision_4(closed: bool) -> None:
        """What revision 4 adds (issue 27): stalls, an idle table, a questioned stub count,
        a round whose deck passed its age before the deal (only in its scenarios, so the
        others draw the same random numbers as before)."""
        if state.deck.stub_questioned is not None:
            feed(StubCounted(cards=rng.choice((None, state.deck.stub_questioned)), by="d"))
            feed(StubCounted(cards=state.deck.stub_questioned, confirmed=True, by="d"))
        if state.deck.idle_due_ms is not None:
            feed(IdleProcedureDone(by="dealer"))
        if state.deck.age_held_round == state.round_id and state.phase is Phase.LOCKED:
            feed(VoidRound(reason="deck-age", by="dealer"))
        roll = rng.random()
        if roll < 0.04:
            feed(TableIdle(since_ms=now_ms - rng.choice((10, 45)) * MIN, at_ms=now_ms))
        elif roll < 0.08:
            shuffler = rng.choice(("shuffler", "shoe")) == "shuffler"
            feed(
                CommandStalled(
                    device="shuffler" if shuffler else "shoe",
                    awaited="shuffle" if shuffler else "deal",
                    waited_ms=rng.randint(1, 200_000),
                    reported=rng.choice((None, "ready", "idle", "shuffling", "dealing")),
                    card_count=rng.choice((None, 51, 52)),
                    replayed=rng.randint(0, 2),
                )
            )
        elif roll < 0.1 and not closed:
            feed(DeckClock(at_ms=now_ms + 8 * 60 * MIN))  # the decks pass their age mid-round

    feed(PowerUp(rules=rules))
    if rules.deck is not None:
        new_deck()
        if rules.deck.alternate:
            new_deck()
    guard = 0
    while state.round_id < rounds and guard < rounds * 60:
        guard += 1
        clock_ns += rng.randint(1, 10) * 1_000_000
        now_ms += rng.randint(1, 4) * MIN
        if rng.random() < 0.05:
            feed(DeckClock(at_ms=now_ms))
        if rng.random() < 0.05:
            feed(device_event())
        if rules.link is not None and rng.random() < 0.15:
            feed(link_event())
        if state.blocked:
            if rules.deck is not None:
                new_deck(replaces=rng.choice((None, state.deck.round_deck)))
            else:
                feed(NewDeckRegistered(by="dealer"))
        if state.shuffler_fault:
            feed(ReshuffleRequested(by="dealer"))
        if state.shoe_fault:
            feed(ShoeCleared(by="dealer"))
        for refused in list(state.events_refused):
            feed(DeviceLinkReset(device=refused, boot_id=7, from_event_id=11, to_event_id=40))
        for device, serial in list(state.devices_pending.items()):
            feed(DeviceAccepted(device=device, serial_number=serial, by="tech"))
        if state.gpio_fault:
            feed(ClearGpioFault(by="tech"))
        if state.sensor_test:
            ended = {"test": state.sensor_test, "passed": (1, 2), "failed": (3,), "by": "tech"}
            feed(SensorTestEnded.model_validate(ended))
        if rules.deck is not None:
            for d in state.deck.decks:
                if d.expired:
                    new_deck(replaces=d.deck_id)
        if state.deck.stub_count_asked:
            feed(StubCounted(cards=rng.choice((None, 52, 52, 51)), by="dealer"))
        if rules.revision >= 4:
            revision_4(state.phase is Phase.CLOSED)
        for hit in state.hits_pending:
            if hit.link_claim and not hit.answered:
                feed(LinkClaimAnswer(claim_id=hit.hit_id, status="awarded", amount_cents=123456))
            feed(ValidateHit(hit_id=hit.hit_id, by="floor"))
            feed(ConfirmDocumentation(hit_id=hit.hit_id, by="floor"))
        for stuck in state.stuck_inputs:
            if stuck.seat is not None:
                feed(ChipSensed(seat=stuck.seat, present=False, since_ns=clock_ns))
            else:
                feed(LockoutReleased(at_ns=clock_ns))
            feed(ClearStuckInput(seat=stuck.seat, by="tech"))
        if rules.link is not None and state.link_down is not None and rng.random() < 0.5:
            feed(_link_parameters(max(1, version), game.wager_cents, game.name))
            feed(LinkRestored(heard="state"))
        if state.phase is Phase.CLOSED:
            roll = rng.random()
            if roll < 0.03:
                feed(SensorTestStarted(test=rng.choice(("sensors", "lockout", "shoe")), by="t"))
                continue
            if roll < 0.06:
                feed(ShufflerFault(code="jam", from_status=rng.random() < 0.5))
            if roll < 0.08:
                feed(ShuffleRequestFailed(reason="busy", retrying=rng.random() < 0.5))
            if roll < 0.09 and rules.shoe:
                feed(ShoeOutOfOrder(out_of_order=not state.shoe_out_of_order, by="dealer"))
            if roll < 0.1:
                feed(ChipSensed(seat=rng.randint(1, rules.seats), present=True, since_ns=clock_ns))
            feed(ShuffleStarted(stale=rng.random() < 0.02))
            feed(ShuffleCompleted(card_count=51 if roll > 0.97 else 52))
            continue
        if state.phase is Phase.BETTING:
            if rules.deck is not None and rng.random() < 0.3 and state.deck.decks:
                pick = rng.choice(state.deck.decks).deck_id
                feed(DeckInPlay(deck_id=pick, source=rng.choice(("dealer", "shuffler"))))
            for seat in rng.sample(range(1, rules.seats + 1), rng.randint(0, 3)):
                feed(ChipSensed(seat=seat, present=True, since_ns=clock_ns))
            if rng.random() < 0.2 and state.wagers:
                feed(ChipSensed(seat=max(state.wagers), present=False, since_ns=clock_ns))
            if rng.random() < 0.03:
                feed(GpioFault(reason="edges lost", at_ns=clock_ns))
                continue
            if rng.random() < 0.02:
                feed(PowerUp(rules=rules))
                continue
            free = [s for s in range(1, rules.seats + 1) if s not in state.wagers]
            undecided = tuple(rng.sample(free, min(len(free), rng.randint(0, 2))))
            resting = tuple(s for s in state.wagers if rng.random() < 0.9)
            feed(
                LockoutPressed(
                    at_ns=clock_ns,
                    undecided_seats=undecided,
                    resting_seats=resting if rng.random() < 0.7 else None,
                    resolution_ns=rng.choice((1, 1_000)),
                )
            )
            for seat in undecided:
                since = clock_ns + rng.choice((-1, 0, 1)) * rng.randint(1, 2_000)
                feed(ChipSensed(seat=seat, present=rng.random() < 0.8, since_ns=since))
            if rng.random() < 0.03:
                feed(LockoutHeld(since_ns=clock_ns, at_ns=clock_ns + 5_000_000_000))
            else:
                feed(LockoutReleased(at_ns=clock_ns + 1))
            continue
        # LOCKED: the chips collected, then the shoe's deal or none, settle or void
        if not state.counted:
            feed(ChipSensed(seat=state.undecided[0], present=True, since_ns=clock_ns - 5))
            continue
        for seat in sorted(state.occupied):
            if rng.random() < 0.97:
                feed(ChipSensed(seat=seat, present=False, since_ns=clock_ns))
        if rng.random() < 0.05:
            feed(ChipSensed(seat=rng.randint(1, rules.seats), present=True, since_ns=clock_ns))
        if rules.shoe and not state.shoe_out_of_order:
            deal()
            if state.phase is not Phase.LOCKED:
                continue
            if rules.revision >= 4 and state.deck.shoe_read is not None and rng.random() < 0.2:
                feed(StubCounted(cards=50, by="d"))  # the shoe's reads contradict it
                feed(StubCounted(cards=rng.choice((None, 50)), confirmed=True, by="d"))
                if state.phase is not Phase.LOCKED:
                    continue
        roll = rng.random()
        if roll < 0.05:
            feed(VoidRound(reason=rng.choice(("shoe-jam", "not-a-reason")), by="dealer"))
            continue
        if roll < 0.08 and rules.deck is not None and rules.deck.stub_count_every_rounds:
            feed(StubCounted(cards=rng.choice((None, 52, 50)), misdealt=rng.random() < 0.5))
            if state.phase is not Phase.LOCKED:
                continue
        settle()
        if state.phase is Phase.LOCKED:
            feed(VoidRound(reason="shoe-jam", by="dealer"))
    feed(JournalRecovered(accepted=("a",), problems=("gap at 4",), done=("re-hashed",), by="t"))
    return events


def _with(
    rules: TableRules, *, shoe: bool = False, deck: DeckRules | None = None, link: bool = False
) -> TableRules:
    return rules.model_copy(
        update={
            "shoe": shoe,
            "deck": deck,
            "link": LinkRules(link_id="bank", table_ref=REF, link_timeout_ms=5000)
            if link
            else None,
        }
    )


DECKS = DeckRules(max_age_ms=8 * 60 * MIN, stub_count_every_rounds=5, alternate=True)
DECKS_IDLE = DECKS.model_copy(update={"idle_ms": 30 * MIN, "stub_count_every_rounds": 1})
ONE_DECK = DeckRules(max_age_ms=4 * 60 * MIN, warn_before_ms=30 * MIN)

SESSIONS = {"tcp": tcp(), "uth-2019": uth("2019"), "uth-2012": uth("2012"), "lir": lir()}
CHAOS = {
    "tcp-shoe-decks": (_with(tcp(), shoe=True, deck=DECKS), 1),
    "tcp-linked-shoe": (_with(tcp(wager="5.00"), shoe=True, link=True), 2),
    "tcp-linked-decks": (_with(tcp(wager="5.00"), deck=ONE_DECK, link=True), 3),
    "uth-shoe-decks": (_with(uth("2019"), shoe=True, deck=DECKS), 4),
    "uth-linked": (_with(uth("2012"), link=True), 5),
    "lir-shoe-decks": (_with(lir(), shoe=True, deck=DECKS), 6),
    "lir-by-hand": (_with(lir(), deck=ONE_DECK), 7),
    "tcp-by-hand": (_with(tcp(), shoe=False), 8),
    "tcp-one-deck": (_with(tcp().model_copy(update={"decks": 1}), deck=ONE_DECK), 9),
}
# Revision 4 (issue 27): what it adds, on a reading shoe and by hand.
CHAOS_4 = {
    "tcp-shoe-decks-4": (_with(tcp(), shoe=True, deck=DECKS_IDLE), 10),
    "uth-by-hand-4": (_with(uth("2019"), deck=DECKS_IDLE), 11),
}
SCENARIOS = [
    *(f"journal:{path.name}" for path in sorted(JOURNALS.glob("*.sql"))),
    *(f"session:{name}" for name in SESSIONS),
    *(f"chaos:{name}" for name in CHAOS),
    *(f"chaos:{name}" for name in CHAOS_4),
]


def scenario(name: str, tmp_path: Path) -> tuple[TableRules, list[Event]]:
    """A scenario's rules and inputs, by its name."""
    kind, _, which = name.partition(":")
    if kind == "journal":
        return journal_inputs(which, tmp_path)
    if which in CHAOS_4:
        rules, seed = CHAOS_4[which]
        return rules, chaos(rules, rounds=60, seed=seed)
    # Taken under the core's rules revision 3: each journal keeps the revision it was written
    # under, and these fix that revision's bytes (revision 4 only adds to its power-up).
    if kind == "session":
        rules = SESSIONS[which].model_copy(update={"revision": 3})
        return rules, session(rules, rounds=60, seed=11)
    rules, seed = CHAOS[which]
    rules = rules.model_copy(update={"revision": 3})
    return rules, chaos(rules, rounds=60, seed=seed)


# The digests of the code before issue 15's CPU work: (inputs, SHA-256).
GOLDEN: dict[str, tuple[int, str]] = {
    "journal:before-issue-14-demo.sql": (
        141,
        "8ad4ea8de4cbd29ad9c26c05c37db4b325aef11d31fc08a6057f299e75750215",
    ),
    "journal:before-issue-14-scripted.sql": (
        33,
        "9af79fa5d94accb8a7b01201868fc07b043c8f01b007f50a038e5a8e0ae4135d",
    ),
    "journal:before-issue-18-demo.sql": (
        146,
        "d076940d221ed93081d3d2d846622ac497af3f70706fa5dbe513e4b1bb812c03",
    ),
    "session:tcp": (945, "24ffa2090380f782c5bad529e43779ebc6b0c4884cd3cc5c542aefecda78f2f1"),
    "session:uth-2019": (880, "b1ec5483e2ff091a1c1f7d0dec79aea86bb2521062dabfffe1a1a5184a3f9fe2"),
    "session:uth-2012": (902, "da61cf274565d8536d88bea99dd4b73f0650e1bc31cb02af9d56782e48ae798f"),
    "session:lir": (921, "28857df82777fe7af7117014b4458a48ca2b0f74a2076d37bfcf080cf2800c63"),
    "chaos:tcp-shoe-decks": (
        1286,
        "3f0dba82a7e7c92ef0050b80f6fc70141955c991efb16b9b247ddca5b0f11186",
    ),
    "chaos:tcp-linked-shoe": (
        1093,
        "ca8ed007ced167ab79e46028a32524eccb6127417e52ccab9aacd7b87ba072ac",
    ),
    "chaos:tcp-linked-decks": (
        743,
        "b13cae80bff6620f65e31bd5da426a33e01bffadbb464548f137ff6bb717fea3",
    ),
    "chaos:uth-shoe-decks": (
        1043,
        "529d83a7c5a2777c9dd93a7fc96f0aa2f21e4355162f38aff6a287c414c6d807",
    ),
    "chaos:uth-linked": (674, "fc554e5711cb931f44c8d717c782a0646e85c320941b61bffc29b07f8ca00ab7"),
    "chaos:lir-shoe-decks": (
        1218,
        "3641be3ebbc91f7ae8f030a7df2da3b8d5c5f931322ad75eebc3909164ed2417",
    ),
    "chaos:lir-by-hand": (711, "2aaf5d2ee65360c97bf2bcb953d8cf6cd21e5fc0dc8edd1fb7fdd987462a975f"),
    "chaos:tcp-by-hand": (634, "edf117c662c1ef40a186cf50c445ac8d1e657c2d536693311946500cbdc89f7d"),
    "chaos:tcp-one-deck": (
        677,
        "9d5c0b38bb1e2af786caa5e1e4c916877cff873a4f1034e2a0d5f64289ad7054",
    ),
    # Taken on issue 27's code (revision 4).
    "chaos:tcp-shoe-decks-4": (
        1526,
        "f803e704e47691e9208a3ba0653afa4e3766a18ff82ea14c3da35a755e3983a9",
    ),
    "chaos:uth-by-hand-4": (
        977,
        "ee88fa1b95c64776703a7b95415c301efcedb06bcdb29cdf02c9411a1e5746ba",
    ),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_state_and_record_is_the_same_bytes(name: str, tmp_path: Path) -> None:
    rules, events = scenario(name, tmp_path)
    assert digest(rules, events) == GOLDEN[name]

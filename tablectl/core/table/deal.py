"""The automated dealing shoe (649a.10, 649a.13(f)-(g)): the deal plan asked of it, the cards
it reads, its faults and a deal settled after a power-up. Pure.

The cards stay in the state (`Deal`); no record carries their order. A shoe that jams,
stops or fails to deal all cards voids the round (`shoe_fault`) and stands until the dealer
empties it (`tablectl dealer clear-shoe`).
"""

from __future__ import annotations

from tablectl.core import decks
from tablectl.core import effects as rec
from tablectl.core.effects import DealCards, Effect
from tablectl.core.events import (
    CardRead,
    DealRequested,
    DealRequestFailed,
    DeviceResumed,
    Settle,
    ShoeCard,
    ShoeCleared,
    ShoeDealCompleted,
    ShoeFault,
    ShoeOutOfOrder,
    ShoeRebooted,
    ShoeStackDealt,
    TableRules,
)
from tablectl.core.games.base import DealPlan, RoundCards, TableGame, form_hands
from tablectl.core.recovery import Resolution, resolve_deal
from tablectl.core.table.deck_rules import (
    deck_age_at_deal,
    deck_irregular,
    deck_too_old,
    shoe_back,
    shoe_read,
)
from tablectl.core.table.state import (
    Context,
    Deal,
    Phase,
    Rejected,
    StuckCause,
    TableState,
    chapter,
    dealing,
    events_flow,
    refused_text,
    shoe_rule,
    without,
)
from tablectl.core.table.void import void_round
from tablectl.core.table.wagering import stuck
from tablectl.util.frozen import trusted


def deal_requested(event: DealRequested, s: TableState, ctx: Context) -> TableState:
    """The dealer asks the shoe for the round's deal plan; a chip still on a sensor is stuck."""
    s = _deal(ctx.rules, ctx.game, s, event, ctx.fx)
    # 649a.10(a)(2), 653a.10(a)(2): the wagers were collected before the shoe deals.
    for seat in sorted(s.occupied):
        s = stuck(ctx.game, s, seat, StuckCause.OCCUPIED_DURING_DEAL, ctx.fx)
    return s


def _deal(
    rules: TableRules, game: TableGame, s: TableState, event: DealRequested, fx: list[Effect]
) -> TableState:
    """649a.10(a)(2), (b): after "no more bets" the shoe dispenses the plan's stacks."""
    if not rules.shoe:
        raise Rejected("this table has no automated dealing shoe")
    if s.shoe_out_of_order:
        raise Rejected("the shoe is out of order (649a.13(g)): deal by hand and enter the hands")
    if s.phase is not Phase.LOCKED:
        raise Rejected(f"no round to deal: the table is {s.phase.value}")
    if not s.counted:
        raise Rejected(f"the count is not final: seats {list(s.undecided)} are still resting")
    if s.devices_pending.get("shoe"):
        raise Rejected("another shoe is connected: a technician must accept it first")
    refused = s.events_refused.get("shoe")
    if refused is not None:
        raise Rejected(
            f"the shoe's events are refused ({refused_text(refused)}): reboot the shoe, or "
            "`tablectl devices reset-link shoe --by ID`, then `tablectl dealer clear-shoe`"
        )
    if s.shoe_fault is not None:
        raise Rejected(
            f"the shoe is in fault ({s.shoe_fault}, {chapter(game)}.13(f)): remove the cards "
            "from the shoe, then `tablectl dealer clear-shoe --by ID`; or "
            "`tablectl dealer shoe-out-of-order` and deal by hand"
        )
    if s.deal is not None and (s.deal.cards or s.deal.face_up or s.deal.complete):
        raise Rejected("the shoe is already dealing this round")
    if (old := deck_too_old(rules, s)) is not None:
        # 649a.3(c): not dealt from a deck past its age; journaled once, then refused.
        if s.deck.age_held_round == s.round_id:
            raise Rejected(
                f"deck {old.deck_id} reached its age limit ({decks.age_rule(game)}): introduce "
                f"the deck that replaces it (`tablectl dealer new-deck --id ID --back COLOUR "
                f"--replaces {old.deck_id}`) and deal, or `tablectl dealer void deck-age`"
            )
        return deck_age_at_deal(rules, game, s, fx)
    seats = tuple(sorted({*s.wagers, *event.seats}))
    for seat in seats:
        if not 1 <= seat <= rules.seats:
            raise Rejected(f"seat {seat} does not exist (1..{rules.seats})")
    if not seats:
        raise Rejected("no player to deal to: name the seats in play")
    plan = game.deal_plan(seats)
    stacks = tuple(step.cards for step in plan.steps if step.by_shoe)
    if not stacks:
        raise Rejected(f"{plan.procedure.value} deals no card from the shoe")
    fx.append(
        trusted(
            rec.DealStarted,
            round_id=s.round_id,
            seats=list(seats),
            stacks=list(stacks),
            procedure=plan.procedure.value,
            rule=plan.rule,
            by=event.by,
        )
    )
    fx.append(DealCards(stacks=stacks))
    deal = Deal(seats=seats, stacks=stacks, shoe_boot_id=event.shoe_boot_id)
    return s.replace(deal=deal, deal_refused=None)


def deal_request_failed(event: DealRequestFailed, s: TableState, ctx: Context) -> TableState:
    """The shoe did not take DEAL: journaled; a deal not begun may be asked again."""
    ctx.fx.append(trusted(rec.DealRequestFailedRecord, round_id=s.round_id, reason=event.reason))
    s = s.replace(deal_refused=event.reason)
    if s.deal is not None and not s.deal.cards and not s.deal.face_up:
        s = s.replace(deal=None)  # the dealer may ask again
    return s


def resumed(event: DeviceResumed, s: TableState, ctx: Context) -> TableState:
    """What the shoe said first after a power-up settles a deal the journal had asked of it
    and nothing confirmed (core/recovery.py): dealt again, left to its cards, or void."""
    game, fx = ctx.game, ctx.fx
    deal = s.deal
    if event.device != "shoe" or deal is None or not dealing(s):
        return s  # nothing in flight to it (the events it held may have finished the deal)
    if s.shoe_out_of_order:
        return s  # covered or signed (649a.13(g)): the dealer deals by hand and enters hands
    progressed = bool(deal.cards or deal.discarded or deal.face_up or deal.stacks_done)
    decision = resolve_deal(issued_to_boot=deal.shoe_boot_id, progressed=progressed, shoe=event)
    void = decision.resolution is Resolution.VOID
    fx.append(
        trusted(
            rec.DealResolved,
            round_id=s.round_id,
            outcome=decision.resolution.value,
            why=decision.why,
            boot_id=event.boot_id,
            state=event.state,
            events_held=event.events_held,
            # 649a.13(f), 653a.13(f), 643a.13(f): a shoe that fails to deal voids the round.
            rule=game.void_reasons()["shoe-jam"] if void else game.deal_plan(deal.seats).rule,
        )
    )
    if decision.resolution is Resolution.REISSUE:
        fx.append(DealCards(stacks=deal.stacks))  # the same plan, to the same boot
        return s
    if void:
        return shoe_fault(game, s, "deal-unconfirmed", fx)
    return s


def shoe_reported(
    event: ShoeCard | ShoeStackDealt | ShoeDealCompleted, s: TableState, ctx: Context
) -> TableState:
    """What the shoe dealt: a card's back checked against the deck in play, then the deal."""
    checked = shoe_back(ctx.rules, ctx.game, s, event, ctx.fx)
    if checked is not None:
        return checked
    return shoe_read(ctx.rules, _shoe_dealt(ctx.game, s, event, ctx.fx))


def _shoe_dealt(
    game: TableGame,
    s: TableState,
    event: ShoeCard | ShoeStackDealt | ShoeDealCompleted,
    fx: list[Effect],
) -> TableState:
    deal = s.deal
    if deal is None or deal.complete or s.phase is not Phase.LOCKED:
        # Nothing was asked of the shoe (or the round is over): never part of a hand.
        return s.replace(counters=s.counters.bump("shoe_events_outside_a_deal"))
    match event:
        case ShoeCard():
            return _shoe_card(game, s, deal, event, fx)
        case ShoeStackDealt():
            return _shoe_stack_dealt(game, s, deal, event.cards, fx)
        case ShoeDealCompleted():
            return _shoe_deal_completed(game, s, deal, event.cards, fx)


def _shoe_card(
    game: TableGame, s: TableState, deal: Deal, event: ShoeCard, fx: list[Effect]
) -> TableState:
    reasons = game.void_reasons()
    card = event.card
    match event.read:
        case CardRead.FACE_UP:
            if card is not None and deal.seen(card):
                # A card already dealt (or discarded) this round, seen again: not one deck
                # of 52 distinct cards, whatever the count said (649a.10(f)).
                return deck_irregular(game, s, "duplicate-card", fx)
            deal = deal.replace(
                face_up=deal.face_up + 1,
                discarded=(*deal.discarded, card) if card else deal.discarded,
            )
            s = s.replace(deal=deal)
            if deal.face_up > 1:
                # 649a.13(a): more than one face up: all hands void, the cards reshuffled.
                return void_round(s, "cards-face-up", reasons["cards-face-up"], "shoe", fx)
            # 649a.13(a): one card face up is not used; it goes to the discard rack.
            rule = reasons["cards-face-up"]
            fx.append(trusted(rec.CardFaceUp, round_id=s.round_id, action="discarded", rule=rule))
            return s
        case CardRead.UNREAD:
            return shoe_fault(game, s, "unread-card", fx)
        case CardRead.FOREIGN:
            return deck_irregular(game, s, "foreign-card", fx)
    if card is None:
        return s
    if deal.seen(card):
        return deck_irregular(game, s, "duplicate-card", fx)
    deal = deal.replace(cards=(*deal.cards, card))
    s = s.replace(deal=deal)
    if len(deal.cards) > sum(deal.stacks):
        # 649a.13(c): a hand dealt an incorrect number of cards voids all hands.
        return void_round(s, "wrong-card-count", reasons["wrong-card-count"], "shoe", fx)
    return s


def _shoe_stack_dealt(
    game: TableGame, s: TableState, deal: Deal, n: int, fx: list[Effect]
) -> TableState:
    done = (*deal.stacks_done, n)
    i = len(done) - 1
    if i >= len(deal.stacks) or n > deal.stacks[i] or len(deal.cards) > sum(done):
        # 649a.13(c): a hand was dealt more cards than the plan gives it.
        rule = game.void_reasons()["wrong-card-count"]
        return void_round(s, "wrong-card-count", rule, "shoe", fx)
    if n < deal.stacks[i] or len(deal.cards) < sum(deal.stacks[: i + 1]):
        # 649a.13(f): the shoe stopped short of the plan -- it failed to deal all cards,
        # which voids the round and sends the cards back to be reshuffled.
        return shoe_fault(game, s, "incomplete", fx)
    return s.replace(deal=deal.replace(stacks_done=done))


def _shoe_deal_completed(
    game: TableGame, s: TableState, deal: Deal, n: int, fx: list[Effect]
) -> TableState:
    if deal.stacks_done != deal.stacks or n != len(deal.cards):
        # 649a.13(f): the shoe failed to deal all cards.
        return shoe_fault(game, s, "incomplete", fx)
    hands = _shoe_plan(game, deal).steps
    seats = {step.seat for step in hands if step.seat is not None}
    fx.append(trusted(rec.DealCompleted, round_id=s.round_id, cards_read=n, hands_read=len(seats)))
    return s.replace(deal=deal.replace(complete=True))


def shoe_fault_reported(event: ShoeFault, s: TableState, ctx: Context) -> TableState:
    """The shoe reports a fault: journaled once while it stands; a deal in play is void."""
    if (event.at_connect or event.from_status) and s.shoe_fault == event.code:
        return s  # the fault already journaled, still showing in STATUS
    return shoe_fault(ctx.game, s, event.code, ctx.fx, at_connect=event.at_connect)


def shoe_fault(
    game: TableGame,
    s: TableState,
    code: str,
    fx: list[Effect],
    *,
    at_connect: bool = False,
    record: bool = True,
) -> TableState:
    """649a.13(f), 653a.13(f), 643a.13(f): a shoe that jams, stops or fails to deal all cards
    during a round voids it; every wager is returned."""
    rule = game.void_reasons()["shoe-jam"]
    in_play = s.phase is Phase.LOCKED
    if record:
        fx.append(
            trusted(
                rec.ShoeFaultRecord,
                code=code,
                round_id=s.round_id if in_play else None,
                round_voided=in_play,
                rule=rule,
                at_connect=at_connect,
            )
        )
    # The fault stands until the dealer has emptied the shoe (`tablectl dealer clear-shoe`).
    s = s.replace(counters=s.counters.bump("shoe_faults"), shoe_fault=code)
    if not in_play:
        return s
    return void_round(s, "shoe-jam", rule, "shoe", fx)


def shoe_rebooted(event: ShoeRebooted, s: TableState, ctx: Context) -> TableState:
    """The shoe rebooted: its event ids start over; a deal in play stopped (649a.13(f))."""
    ctx.fx.append(trusted(rec.ShoeRebootedRecord))
    s = events_flow(s, "shoe")
    if dealing(s):
        return shoe_fault(ctx.game, s, "rebooted", ctx.fx, record=False)
    return s


def shoe_cleared(event: ShoeCleared, s: TableState, ctx: Context) -> TableState:
    """The dealer emptied the faulted shoe (`tablectl dealer clear-shoe`): it may deal again."""
    refused = s.events_refused.get("shoe")
    if refused is not None:
        raise Rejected(
            f"the shoe's events are refused ({refused_text(refused)}): clearing the shoe "
            "cannot fix that; reboot the shoe, or `tablectl devices reset-link shoe --by ID`"
        )
    if s.shoe_fault is None:
        raise Rejected("the shoe reports no fault to clear")
    ctx.fx.append(trusted(rec.ShoeFaultCleared, code=s.shoe_fault, by=event.by))
    return s.replace(shoe_fault=None, stalls=without(s.stalls, "shoe"))


def shoe_out_of_order(event: ShoeOutOfOrder, s: TableState, ctx: Context) -> TableState:
    """The shoe covered or signed (649a.13(g)), or back in use: hands entered by hand meanwhile."""
    out = event.out_of_order
    if not ctx.rules.shoe:
        raise Rejected("this table has no automated dealing shoe")
    if out == s.shoe_out_of_order:
        raise Rejected(f"the shoe is {'already' if out else 'not'} out of order")
    ctx.fx.append(
        trusted(
            rec.ShoeOutOfOrderRecord,
            out_of_order=out,
            rule=shoe_rule(ctx.game, "device-unusable"),
            by=event.by,
        )
    )
    return s.replace(shoe_out_of_order=out)


def _shoe_plan(game: TableGame, deal: Deal) -> DealPlan:
    plan = game.deal_plan(deal.seats)
    return DealPlan(plan.procedure, plan.rule, tuple(s for s in plan.steps if s.by_shoe))


def cards_read(game: TableGame, s: TableState, event: Settle) -> RoundCards:
    """The round's cards as the shoe read them, given out by the deal plan; the community
    cards the dealer deals from the hand (653a.10(c)) come with the settle."""
    if event.hands or event.dealer:
        raise Rejected(
            "the shoe read the hands: enter them only for a shoe marked out of order "
            f"({shoe_rule(game, 'device-unusable')})"
        )
    deal = s.deal
    if deal is None or not deal.complete:
        raise Rejected("the shoe has not dealt this round: `tablectl dealer deal`")
    read = form_hands(_shoe_plan(game, deal), deal.cards)
    by_hand = [step for step in game.deal_plan(deal.seats).steps if not step.by_shoe and step.cards]
    if event.community and not by_hand:
        raise Rejected("the shoe dealt the community cards: they cannot be entered")
    return RoundCards(
        dict(read.hands), read.dealer, (*read.community, *event.community), read.burned
    )

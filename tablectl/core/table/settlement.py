"""A round's settlement on the cards shown: each wager's outcome, progressive hits (paid at
odds or as a share of the meter), Envy Bonuses, and the floor's jackpot workflow
(649a.11(c)(5), 653a.11(j)-(k)). Pure.

What a hand pays is the game's (core/games, rules/settlement); this room journals it, keeps
the hits pending until a floorperson validates (and documents) them, and claims a share of a
linked meter from the link controller.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

from tablectl.core import decks
from tablectl.core import effects as rec
from tablectl.core.effects import Effect, Lamp, SeatLamp
from tablectl.core.events import ConfirmDocumentation, Settle, ValidateHit
from tablectl.core.games.base import Hit, Outcome, RoundCards
from tablectl.core.table.deal import cards_read
from tablectl.core.table.deck_rules import deck_too_old
from tablectl.core.table.state import (
    HIT_HISTORY,
    Context,
    HitEntry,
    Phase,
    Rejected,
    TableState,
    reading,
    reading_of,
)
from tablectl.rules.meters import LinkedMeter, LocalMeter
from tablectl.util.frozen import trusted


def settle(event: Settle, s: TableState, ctx: Context) -> TableState:
    """The round settled on the cards the shoe read (or the dealer entered): payouts, hits, Envy."""
    rules, game, fx = ctx.rules, ctx.game, ctx.fx
    if s.phase is not Phase.LOCKED:
        raise Rejected(f"no round to settle: the table is {s.phase.value}")
    if not s.counted:
        raise Rejected(f"the count is not final: seats {list(s.undecided)} are still resting")
    if (old := deck_too_old(rules, s)) is not None and s.deck.age_held_round == s.round_id:
        raise Rejected(
            f"deck {old.deck_id} reached its age limit before this round was dealt "
            f"({decks.age_rule(game)}): void the round (`tablectl dealer void deck-age`)"
        )
    for seat in {*event.hands, *event.folded}:
        if not 1 <= seat <= rules.seats:
            raise Rejected(f"seat {seat} does not exist (1..{rules.seats})")
    by_shoe = rules.shoe and not s.shoe_out_of_order
    try:
        if by_shoe:
            cards = cards_read(game, s, event)
            try:
                game.check_cards(cards, s.wagers, event.folded)
            except ValueError:
                # A game whose folded hands are never shown (649a.11(c)): leave them out.
                cards = RoundCards(
                    {k: v for k, v in cards.hands.items() if k not in event.folded},
                    cards.dealer,
                    cards.community,
                    cards.burned,
                )
                game.check_cards(cards, s.wagers, event.folded)
        else:
            # The game's settle checks the cards shown before anything else it could refuse
            # (the seats and the wagers are the table's own, checked above).
            cards = RoundCards(event.hands, event.dealer, event.community)
        settled = game.settle(s.meter, s.wagers, cards, event.folded, rules.seats)
    except ValueError as exc:
        raise Rejected(str(exc)) from None
    paid = 0
    pending: list[HitEntry] = []
    wager = game.table_wager.name
    hits = {h.seat: h for h in settled.hits}
    linked = s.meter if isinstance(s.meter, LinkedMeter) else None
    for result in settled.results:  # in settlement order, from the dealer's right
        seat = result.seat
        hit = hits.get(seat)
        if linked is not None and hit is not None and hit.share is not None:
            # A claim on the link: what it pays is the controller's answer, not ours.
            result = dataclasses.replace(result, paid_cents=0)
        paid += result.paid_cents
        fx.append(
            trusted(
                rec.WagerSettled,
                round_id=s.round_id,
                seat=seat,
                wager=wager,
                wager_cents=s.wagers[seat],
                outcome=_OUTCOMES[result.outcome],
                paid_cents=result.paid_cents,
                hand=result.hand,
                rule=result.rule,
            )
        )
        if hit is not None and linked is not None and hit.share is not None:
            entry = HitEntry(
                hit_id=f"{s.round_id}-{seat}",
                round_id=s.round_id,
                seat=seat,
                hand=hit.hand,
                amount_cents=0,
                basis=_basis(hit),
                paid_from_table_inventory=False,
                link_claim=True,
            )
            pending.append(entry)
            fx.append(_link_claim(linked, s.round_id, entry, hit))
        elif hit is not None:
            entry = HitEntry(
                hit_id=f"{s.round_id}-{seat}",
                round_id=s.round_id,
                seat=seat,
                hand=hit.hand,
                amount_cents=hit.amount_cents,
                basis=_basis(hit),
                paid_from_table_inventory=hit.paid_from_table_inventory,
            )
            pending.append(entry)
            fx.extend(_hit_records(s, entry, hit))
        for envy in (e for e in settled.envy if e.seat == seat):
            paid += envy.amount_cents
            fx.append(
                trusted(
                    rec.EnvyBonusPaid,
                    round_id=s.round_id,
                    seat=envy.seat,
                    for_seat=envy.for_seat,
                    hand=envy.hand,
                    amount_cents=envy.amount_cents,
                    rule=envy.rule,
                )
            )
    meter = settled.meter
    assert meter is None or isinstance(meter, LocalMeter | LinkedMeter)
    fx.append(
        trusted(
            rec.RoundSettled,
            round_id=s.round_id,
            paid_cents=paid,
            folded=sorted(event.folded),
            hits_pending=[h.hit_id for h in pending],
            by=event.by,
            meter=reading_of(meter),
            hands_read_by_shoe=len(cards.hands) if by_shoe else 0,
            hands_entered=0 if by_shoe else len(cards.hands),
        )
    )
    winners = {h.seat for h in pending}
    # 649a.11(c)(5)(ii): the winning seat's light shows the win until it is validated.
    fx.extend(
        SeatLamp(seat=seat, lamp=Lamp.WIN if seat in winners else Lamp.OFF)
        for seat in sorted(s.wagers)
    )
    return s.replace(
        phase=Phase.CLOSED,
        meter=meter,
        wagers={},
        round_contribution_units=0,
        round_link_contributions=(),
        deal=None,
        hits_pending=(*s.hits_pending, *pending),
        hit_history=(*reversed(pending), *s.hit_history)[:HIT_HISTORY],
        counters=s.counters.bump("rounds_settled"),
    )


def _basis(hit: Hit) -> str:
    if hit.share is None:
        return "odds-for-1"
    return f"{hit.share * 100}%-of-meter"


# Each game's outcome as journaled, looked up rather than called (an enum call is two Python
# frames in the enum module, per wager settled).
_OUTCOMES = MappingProxyType({outcome: rec.WagerOutcome(outcome.value) for outcome in Outcome})


def _hit_records(s: TableState, entry: HitEntry, hit: Hit) -> list[Effect]:
    out: list[Effect] = [
        trusted(
            rec.JackpotHit,
            hit_id=entry.hit_id,
            round_id=s.round_id,
            seat=hit.seat,
            hand=hit.hand,
            cards="".join(map(str, hit.cards)),
            amount_cents=hit.amount_cents,
            basis=entry.basis,
            meter_before_cents=hit.meter_before_cents,
            paid_from_table_inventory=hit.paid_from_table_inventory,
            rule=hit.rule,
        )
    ]
    if hit.share is None or s.meter is None:
        return out
    left = reading(s.meter, hit.meter_after_cents)
    # The meter this hit leaves: a reset only for 100 %, never for a smaller share.
    if hit.share == 1:
        out.append(
            trusted(
                rec.MeterReset,
                round_id=s.round_id,
                hit_id=entry.hit_id,
                paid_cents=hit.amount_cents,
                reset_cents=hit.meter_after_cents,
                meter=left,
            )
        )
    else:
        out.append(
            trusted(
                rec.MeterSharePaid,
                round_id=s.round_id,
                hit_id=entry.hit_id,
                share_percent=str(hit.share * 100),
                paid_cents=hit.amount_cents,
                meter=left,
            )
        )
    return out


def _link_claim(meter: LinkedMeter, round_id: int, entry: HitEntry, hit: Hit) -> rec.LinkClaim:
    level = meter.claim_level
    assert level is not None and hit.share is not None  # contributions needed parameters
    return rec.LinkClaim(
        link_id=meter.link_id,
        level_id=level.level_id,
        parameters_version=meter.parameters_version,
        claim_id=entry.hit_id,
        round_id=round_id,
        seat=hit.seat,
        hand=hit.hand,
        cards="".join(map(str, hit.cards)),
        share_percent=int(hit.share * 100),
        rule=hit.rule,
    )


def floor(event: ValidateHit | ConfirmDocumentation, s: TableState, ctx: Context) -> TableState:
    """649a.11(c)(5)(iii)-(iv): a floorperson validates; a share of the meter is documented."""
    fx = ctx.fx
    by_id = {h.hit_id: h for h in s.hits_pending}
    hit = by_id.get(event.hit_id)
    if hit is None:
        waiting = ", ".join(by_id) or "none"
        raise Rejected(f"no pending hit {event.hit_id!r}; pending: {waiting}")
    if hit.link_claim and not hit.answered:
        raise Rejected(
            f"hit {hit.hit_id} is JACKPOT PENDING: the link controller has not answered its "
            "claim yet (it stays pending, with its evidence, until it does)"
        )
    if isinstance(event, ValidateHit):
        if hit.validated_by is not None:
            raise Rejected(f"hit {hit.hit_id} was validated by {hit.validated_by}")
        hit = hit.replace(validated_by=event.by)
        fx.append(trusted(rec.JackpotValidated, hit_id=hit.hit_id, by=event.by))
    else:
        if hit.paid_from_table_inventory:
            raise Rejected(
                f"hit {hit.hit_id} is paid from the table inventory: nothing to document"
            )
        if hit.validated_by is None:
            raise Rejected(f"hit {hit.hit_id} must be validated before its documentation")
        hit = hit.replace(documented_by=event.by)
        fx.append(trusted(rec.JackpotDocumented, hit_id=hit.hit_id, by=event.by))
    pending = tuple(hit if h.hit_id == hit.hit_id else h for h in s.hits_pending)
    history = tuple(hit if h.hit_id == hit.hit_id else h for h in s.hit_history)
    if hit.done:
        pending = tuple(h for h in pending if h.hit_id != hit.hit_id)
        fx.append(SeatLamp(seat=hit.seat, lamp=Lamp.OFF))  # the hand may leave the table
        if not pending:
            fx.append(trusted(rec.JackpotReleased, round_id=hit.round_id))
    return s.replace(hits_pending=pending, hit_history=history)

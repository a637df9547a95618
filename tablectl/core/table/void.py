"""A round voided: every wager returned, its meter contribution taken back (649a.13). Pure.

The dealer's void names a reason of the game's text; the rooms that find an irregularity (a
shoe fault, a deck not of 52 distinct cards, cards face up, a deck past its age) void the
round through `void_round` with the rule they cite.
"""

from __future__ import annotations

from tablectl.core import decks
from tablectl.core import effects as rec
from tablectl.core.effects import Effect, Lamp, SeatLamp
from tablectl.core.events import VoidRound
from tablectl.core.table.state import (
    Context,
    Phase,
    Rejected,
    TableState,
    decks_kept_since_4,
    reading_of,
)
from tablectl.util.frozen import trusted


def void(event: VoidRound, s: TableState, ctx: Context) -> TableState:
    """The dealer voids the round in play for one of the game's reasons."""
    game = ctx.game
    if s.phase is Phase.CLOSED:
        raise Rejected("no round in play to void")
    reasons = game.void_reasons()
    if decks_kept_since_4(ctx.rules) is not None:
        # 649a.3(c): a round opened on a deck that passed its age before the deal.
        reasons = {**reasons, "deck-age": decks.age_rule(game)}
    if event.reason not in reasons:
        raise Rejected(f"unknown void reason {event.reason!r}; one of {sorted(reasons)}")
    return void_round(s, event.reason, reasons[event.reason], event.by, ctx.fx)


def void_round(s: TableState, reason: str, rule: str, by: str, fx: list[Effect]) -> TableState:
    """Void the round: every wager is returned, so its meter contribution is taken back.

    Before the count is final (a fault right at power-up) there is nothing to reverse yet:
    the contributions are booked only at the final count."""
    meter = s.meter.reverse(s.round_contribution_units) if s.meter is not None else None
    # A linked meter: the controller takes back each contribution it applied, once.
    fx.extend(_link_reversal(c, reason, rule) for c in s.round_link_contributions)
    fx.append(
        trusted(
            rec.RoundVoided,
            round_id=s.round_id,
            reason=reason,
            rule=rule,
            wagers_returned=sorted(s.wagers),
            contribution_reversed_ten_thousandths_cent=s.round_contribution_units,
            by=by,
            meter=reading_of(meter),
        )
    )
    fx.extend(SeatLamp(seat=seat, lamp=Lamp.OFF) for seat in sorted(s.wagers))
    return s.replace(
        phase=Phase.CLOSED,
        meter=meter,
        wagers={},
        undecided=(),
        round_contribution_units=0,
        round_link_contributions=(),
        deal=None,
        counters=s.counters.bump("rounds_voided"),
    )


def _link_reversal(
    contribution: rec.LinkContribution, reason: str, rule: str
) -> rec.LinkContributionReversed:
    return rec.LinkContributionReversed(
        link_id=contribution.link_id,
        level_id=contribution.level_id,
        parameters_version=contribution.parameters_version,
        round_id=contribution.round_id,
        seat=contribution.seat,
        wager_cents=contribution.wager_cents,
        rate_bp=contribution.rate_bp,
        contribution_ten_thousandths_cent=contribution.contribution_ten_thousandths_cent,
        reason=reason,
        rule=rule,
    )

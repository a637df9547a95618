"""A linked progressive (docs/linked-progressives.md; NY 9 NYCRR 5321.18): the meter on the
link, its parameters taken or refused, the link lost and heard again, a claim answered.
Pure.

The records a round sends the link controller are built where their money moves: each
wager's contribution at the count (wagering.py), its reversal at a void (void.py), a claim
at the settlement (settlement.py).
"""

from __future__ import annotations

from tablectl.core import effects as rec
from tablectl.core.events import (
    LinkClaimAnswer,
    LinkLost,
    LinkParametersHeard,
    LinkRestored,
    TableRules,
)
from tablectl.core.games.base import TableGame
from tablectl.core.table.state import Context, Phase, Rejected, TableState, meter_for
from tablectl.core.table.wagering import withdraw
from tablectl.rules.meters import LinkedMeter, LinkLevel
from tablectl.util.frozen import trusted


def link_at_power_up(rules: TableRules, game: TableGame, s: TableState) -> TableState:
    """The meter the config says: on a link (not heard yet: LINK DOWN until it is), or local."""
    meter_rules = game.meter
    if meter_rules is None or s.meter is None:
        return s
    if rules.link is None:
        if isinstance(s.meter, LinkedMeter):  # taken off the link: a local meter again
            return s.replace(
                meter=meter_for(rules, meter_rules.meter_id, meter_rules.initial_cents),
                link_silent=None,
                link_refused=None,
            )
        return s
    meter = s.meter
    if not isinstance(meter, LinkedMeter) or meter.link_id != rules.link.link_id:
        meter = meter_for(rules, meter_rules.meter_id, meter_rules.initial_cents)
    return s.replace(meter=meter, link_silent="not heard since power-up")


def link_parameters(event: LinkParametersHeard, s: TableState, ctx: Context) -> TableState:
    """Take the link's parameters, or refuse them naming the rule (5321.18(b)(4))."""
    rules, game, fx = ctx.rules, ctx.game, ctx.fx
    meter = s.meter
    if rules.link is None or not isinstance(meter, LinkedMeter):
        raise Rejected("this table's progressive is not on a link")
    if (event.parameters_version, event.parameters_sha256) == (
        meter.parameters_version,
        meter.parameters_sha256,
    ):
        return s
    if s.phase is Phase.LOCKED and meter.parameters_version:
        # The round's contributions were made under the parameters it holds: it is settled
        # (or voided) under them; the shell offers the new ones again after it.
        raise Rejected("the link's parameters cannot change in the middle of a round")
    problem = _parameters_problem(rules, game, meter, s, event)
    if problem is not None:
        reason, rule = problem
        fx.append(
            trusted(
                rec.LinkParametersRefused,
                link_id=rules.link.link_id,
                parameters_version=event.parameters_version,
                reason=reason,
                rule=rule,
            )
        )
        return s.replace(link_refused=f"link parameters refused: {reason}")
    levels = tuple(
        LinkLevel(
            level_id=lv.level_id,
            contribution_rate_bp=lv.contribution_rate_bp,
            initial_cents=lv.initial_cents,
            reset_cents=lv.reset_cents,
        )
        for lv in event.levels
    )
    fx.append(
        trusted(
            rec.LinkParametersAccepted,
            link_id=meter.link_id,
            parameters_version=event.parameters_version,
            parameters_sha256=event.parameters_sha256,
            levels=[f"{lv.level_id}:{lv.contribution_rate_bp}" for lv in levels],
        )
    )
    cents = meter.cents if meter.parameters_version else levels[0].initial_cents
    meter = meter.replace(
        parameters_version=event.parameters_version,
        parameters_sha256=event.parameters_sha256,
        wager_cents=event.wager_cents,
        levels=levels,
        cents=cents,
    )
    return s.replace(meter=meter, link_refused=None)


def _parameters_problem(
    rules: TableRules,
    game: TableGame,
    meter: LinkedMeter,
    s: TableState,
    p: LinkParametersHeard,
) -> tuple[str, str] | None:
    """What is wrong with a link's parameters for this table: (reason, rule), or None."""
    assert rules.link is not None
    if p.link_id != rules.link.link_id:
        return (
            f"they are link {p.link_id}'s; this table is on {rules.link.link_id}",
            "5321.18(b)(1)",
        )
    if rules.link.table_ref not in p.tables:
        return (
            f"the link does not list this table ({rules.link.table_ref})",
            "5321.18(b)(1)",  # the controller identifies each linked table
        )
    if p.game != game.name:
        return f"the link plays {p.game}; this table plays {game.name}", "5321.18(b)(4)"
    if p.wager_cents != game.wager_cents:
        return (
            f"the link's wager is {p.wager_cents} cents; this table takes {game.wager_cents}",
            "5321.18(b)(4)",
        )
    if not p.levels:
        return "the link has no level", "5321.18(b)(4)"
    if any(not 0 <= lv.contribution_rate_bp <= 10_000 for lv in p.levels):
        return "a level's contribution rate is not 0 to 100 %", "5321.18(b)(4)"
    if meter.parameters_version and s.link_silent is None and s.link_refused is None:
        # NY 9 NYCRR 5321.18(b)(4): no parameter change while the link is in operation.
        return (
            f"version {p.parameters_version} arrived while version "
            f"{meter.parameters_version} is in operation",
            "5321.18(b)(4)",
        )
    return None


def link_lost(event: LinkLost, s: TableState, ctx: Context) -> TableState:
    """5321.18(c), NJ 13:69E-1.39B(c): the progressive becomes unplayable; the game goes on.
    Wagers recognised this round and not yet counted are withdrawn (their lamps go out);
    counted ones stand: their contributions wait in the outbox for the link's return."""
    fx, reason = ctx.fx, event.reason
    if not isinstance(s.meter, LinkedMeter) or s.link_silent is not None:
        return s if s.link_silent is None else s.replace(link_silent=reason)
    withdrawn: list[int] = []
    if s.phase is Phase.BETTING:
        withdrawn = sorted(s.wagers)
    fx.append(
        trusted(
            rec.LinkDown,
            link_id=s.meter.link_id,
            reason=reason,
            round_id=s.round_id,
            wagers_withdrawn=withdrawn,
            rule="5321.18(c)",
        )
    )
    for seat in withdrawn:
        s = withdraw(s, seat, fx)
    return s.replace(link_silent=reason, counters=s.counters.bump("link_losses"))


def link_restored(event: LinkRestored, s: TableState, ctx: Context) -> TableState:
    """The link heard again: the progressive is playable (LINK UP)."""
    if s.link_silent is None or not isinstance(s.meter, LinkedMeter):
        return s
    ctx.fx.append(trusted(rec.LinkUp, link_id=s.meter.link_id))
    return s.replace(link_silent=None)


def link_answer(event: LinkClaimAnswer, s: TableState, ctx: Context) -> TableState:
    """The controller answered a claim: the amount paid is its amount."""
    fx = ctx.fx
    hit = next((h for h in s.hits_pending if h.hit_id == event.claim_id), None)
    if hit is None or not hit.link_claim or hit.answered or not isinstance(s.meter, LinkedMeter):
        raise Rejected(f"no claim {event.claim_id!r} awaits the link controller's answer")
    amount = event.amount_cents if event.status == "awarded" else 0
    fx.append(
        trusted(
            rec.LinkClaimAnswered,
            link_id=s.meter.link_id,
            claim_id=event.claim_id,
            status=event.status,
            amount_cents=amount,
            award_version=event.award_version,
            reason=event.reason,
        )
    )
    hit = hit.replace(answered=True, amount_cents=amount)
    return s.replace(
        hits_pending=tuple(hit if h.hit_id == hit.hit_id else h for h in s.hits_pending),
        hit_history=tuple(hit if h.hit_id == hit.hit_id else h for h in s.hit_history),
    )

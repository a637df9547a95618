"""Wagering: the seat sensors, the lock-out and the count (649a.2(c), 649a.8(b)). Pure.

A chip is a wager while betting is open, decided by the edge once the lock-out comes
(docs/gpio.md, the lock-out rule); the count is final once the last chip resting at the edge
is decided, and books each wager's meter contribution (649a.12(e)(3)). Stuck inputs (a
button held, a sensor occupied too long), lost edges and the technician's walk test are
here too: each keeps betting closed or refuses a seat.
"""

from __future__ import annotations

from typing import Unpack

from tablectl.core import effects as rec
from tablectl.core.effects import Effect, Lamp, SeatLamp
from tablectl.core.events import (
    ChipSensed,
    ClearGpioFault,
    ClearStuckInput,
    GpioFault,
    LockoutHeld,
    LockoutPressed,
    LockoutReleased,
    SensorTestEnded,
    SensorTestStarted,
    TableRules,
    placed_before_lockout,
)
from tablectl.core.games.base import TableGame
from tablectl.core.table.deck_rules import deck_age_at_deal
from tablectl.core.table.state import (
    Context,
    Phase,
    Rejected,
    StuckCause,
    StuckInput,
    TableState,
    TableStateUpdate,
    dealing,
    reading,
)
from tablectl.rules.meters import LinkedMeter, LinkLevel
from tablectl.util.frozen import trusted


def chip(event: ChipSensed, s: TableState, ctx: Context) -> TableState:
    """A seat sensor's decision: a wager accepted, refused, withdrawn or decided from the edge."""
    rules, game, fx = ctx.rules, ctx.game, ctx.fx
    seat, present = event.seat, event.present
    if not 1 <= seat <= rules.seats:
        return s.replace(counters=s.counters.bump("unknown_seat_events"))
    if rules.sensors is None:
        return _chip_as_journaled_before(game, s, event, fx)
    s = _sensed(s, seat, present)
    if s.sensor_test is not None:
        return s  # a walk test's chip: never a wager, nothing to refuse
    if present and dealing(s):
        # 649a.10(a)(2), 653a.10(a)(2): the wagers were collected before the shoe deals.
        s = stuck(game, s, seat, StuckCause.OCCUPIED_DURING_DEAL, fx)
    if s.phase is Phase.BETTING:
        if present and seat not in s.wagers:
            if _seat_stuck(s, seat):
                return _reject(game, s, seat, "sensor-stuck", fx)
            return _accept(game, s, seat, fx, late=False)
        if not present and seat in s.wagers:
            return withdraw(s, seat, fx)
        return s
    if s.phase is Phase.CLOSED:
        # A chip resting before the round opens is decided once: it is a wager when the round
        # opens (chips_resting_at_open), or refused if it is lifted first.
        if present:
            return s.replace(waiting=tuple(sorted({*s.waiting, seat})))
        if seat in s.waiting:
            s = s.replace(waiting=tuple(x for x in s.waiting if x != seat))
            return _reject(game, s, seat, "table-closed", fx)
        return s
    if seat in s.undecided:
        return _decide_after_edge(game, s, event, fx)
    if present and seat not in s.wagers:
        return _reject(game, s, seat, "after-lockout", fx)
    return s


def _chip_as_journaled_before(
    game: TableGame, s: TableState, chip: ChipSensed, fx: list[Effect]
) -> TableState:
    """A chip as decided before the core kept the sensors' levels (rules.sensors is None):
    journals written then replay as they were written."""
    seat, present = chip.seat, chip.present
    if s.phase is Phase.BETTING:
        if present and seat not in s.wagers:
            return _accept(game, s, seat, fx, late=False)
        if not present and seat in s.wagers:
            return withdraw(s, seat, fx)
        return s
    if s.phase is Phase.LOCKED and seat in s.undecided:
        return _decide_after_edge(game, s, chip, fx)
    if present and seat not in s.wagers:
        reason = "after-lockout" if s.phase is Phase.LOCKED else "table-closed"
        return _reject(game, s, seat, reason, fx)
    return s


def _sensed(s: TableState, seat: int, present: bool) -> TableState:
    """The seat's sensor as decided: a chip that arrives while bets are taken has been there
    for this round's betting; one that arrives otherwise, for none yet."""
    if present == (seat in s.occupied):
        return s
    if present:
        occupied = {**s.occupied, seat: 1 if s.phase is Phase.BETTING else 0}
    else:
        occupied = {k: v for k, v in s.occupied.items() if k != seat}
    return s.replace(occupied=occupied)


def _decide_after_edge(
    game: TableGame, s: TableState, chip: ChipSensed, fx: list[Effect]
) -> TableState:
    """A chip that was on its sensor at the edge but had not rested: decided now, once its
    contact has rested or broken (docs/gpio.md, the lock-out rule)."""
    seat = chip.seat
    s = s.replace(undecided=tuple(x for x in s.undecided if x != seat))
    assert s.lockout_at_ns is not None
    counts = chip.present and placed_before_lockout(
        chip.since_ns, s.lockout_at_ns, s.lockout_resolution_ns
    )
    if counts and seat in s.wagers:
        pass  # the wager it already was stands: it rested
    elif counts and not _seat_stuck(s, seat):
        s = _accept(game, s, seat, fx, late=True)
        s = s.replace(decided_after_lockout=tuple(sorted({*s.decided_after_lockout, seat})))
    elif seat in s.wagers:
        s = withdraw(s, seat, fx)  # it left its sensor before resting
    elif chip.present:
        s = _reject(game, s, seat, "sensor-stuck" if counts else "after-lockout", fx)
    return s if s.undecided else finish_count(game, s, fx)


def _accept(game: TableGame, s: TableState, seat: int, fx: list[Effect], late: bool) -> TableState:
    if s.link_down is not None:
        # 5321.18(c), NJ 13:69E-1.39B(c): a progressive off its link is unplayable.
        return _reject(game, s, seat, "link-down", fx, rule="5321.18(c)")
    fx.append(
        trusted(
            rec.WagerAccepted,
            round_id=s.round_id,
            seat=seat,
            wager_cents=game.wager_cents,
            decided_after_lockout=late,
        )
    )
    fx.append(SeatLamp(seat=seat, lamp=Lamp.ON))  # 649a.2(c)(1): the device acknowledges it
    return s.replace(wagers={**s.wagers, seat: game.wager_cents})


def _reject(
    game: TableGame,
    s: TableState,
    seat: int,
    reason: str,
    fx: list[Effect],
    rule: str | None = None,
) -> TableState:
    # 649a.2(c)(2), 653a.2(c)(2), 643a.8(b): no wager is recognised after "no more bets".
    fx.append(
        trusted(
            rec.WagerRejected,
            round_id=s.round_id,
            seat=seat,
            reason=reason,
            rule=rule or game.table_wager.lockout_rule,
        )
    )
    return s.replace(counters=s.counters.bump("wagers_rejected"))


def withdraw(s: TableState, seat: int, fx: list[Effect]) -> TableState:
    """A wager withdrawn (its chip left, or the link went down): journaled, its lamp put out."""
    fx.append(trusted(rec.WagerWithdrawn, round_id=s.round_id, seat=seat))
    fx.append(SeatLamp(seat=seat, lamp=Lamp.OFF))
    return s.replace(wagers={k: v for k, v in s.wagers.items() if k != seat})


def chips_resting_at_open(
    rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]
) -> TableState:
    """Betting opened: each chip already resting on its sensor is a wager now, decided once
    (649a.2(c)(2): placed before "no more bets"), unless its sensor has been occupied for the
    betting of more rounds than gpio.sensor_stuck_rounds allows."""
    if rules.sensors is None or not (s.occupied or s.waiting):
        return s
    occupied: dict[int, int] = {}
    for seat, rounds in sorted(s.occupied.items()):
        occupied[seat] = rounds + 1
        if rounds + 1 > rules.sensors.stuck_rounds:
            s = stuck(game, s, seat, StuckCause.OCCUPIED_ROUNDS, fx)
        if not _seat_stuck(s, seat):
            s = _accept(game, s, seat, fx, late=False)
        elif seat in s.waiting:
            s = _reject(game, s, seat, "sensor-stuck", fx)
    return s.replace(occupied=occupied, waiting=())


def drop_undecided(s: TableState, fx: list[Effect]) -> TableState:
    """Chips still to be decided from the edge cannot be confirmed any more (a fault, a
    restart): none counts."""
    for seat in s.undecided:
        if seat in s.wagers:
            s = withdraw(s, seat, fx)
    return s.replace(undecided=())


def lockout_pressed(event: LockoutPressed, s: TableState, ctx: Context) -> TableState:
    """The dealer's "no more bets": the round locks at the edge (649a.8(b))."""
    # The core keeps the button's level (rules.sensors); journals from before it did not.
    held = ctx.rules.sensors is not None or s.lockout_held
    if s.phase is not Phase.BETTING:
        if held != s.lockout_held:
            s = s.replace(lockout_held=held)
        if s.sensor_test is not None:
            return s  # the technician's test press (service/walk_test.py), not play
        return s.replace(counters=s.counters.bump("lockout_presses_ignored"))
    s = lock(
        ctx.game,
        s,
        ctx.fx,
        cause="lockout-button",
        at_ns=event.at_ns,
        undecided=event.undecided_seats,
        resting=event.resting_seats,
        # One copy of the state on the lock-out's path: the button's level and the edge's
        # resolution go with the lock and the count.
        also={"lockout_held": held, "lockout_resolution_ns": event.resolution_ns},
    )
    if not ctx.rules.shoe or s.shoe_out_of_order:
        # "No more bets": the dealer deals now (649a.8(c), 649a.9(b)); not from a deck past
        # its age (649a.3(c)).
        s = deck_age_at_deal(ctx.rules, ctx.game, s, ctx.fx)
    return s


def lockout_released(event: LockoutReleased, s: TableState, ctx: Context) -> TableState:
    """The button's level, as the core keeps it: no round opens while it is down."""
    return s.replace(lockout_held=False)


def lockout_held(event: LockoutHeld, s: TableState, ctx: Context) -> TableState:
    """The button held past gpio.lockout_hold_max_ms: a stuck input that keeps betting closed."""
    # Between rounds, the round waiting to open would have no working lock-out.
    cause = StuckCause.NOT_RELEASED if s.phase is Phase.CLOSED else StuckCause.HELD
    return stuck(ctx.game, s, None, cause, ctx.fx)


def lock(
    game: TableGame,
    s: TableState,
    fx: list[Effect],
    *,
    cause: str,
    at_ns: int | None,
    undecided: tuple[int, ...],
    resting: tuple[int, ...] | None = None,
    also: TableStateUpdate | None = None,
) -> TableState:
    """No more bets (649a.8(b), 653a.8(b), 643a.8(b)): nothing placed after the edge counts.

    resting: the seats whose chip was on its sensor at the edge and had rested. Given, the
    edge decides (docs/gpio.md, the lock-out rule): a wager whose chip was not on its sensor
    at the edge is withdrawn, and one that had not rested is decided again from the edge.
    None (a lock without an edge, journals from before): the wagers recognised so far count.
    also: what the caller changes with the lock (fields nothing here reads), in its copy.
    """
    if resting is None:
        pending = tuple(sorted(set(undecided) - set(s.wagers)))
    else:
        pending = tuple(sorted(set(undecided)))
        for seat in sorted(s.wagers):
            if seat not in resting and seat not in pending:
                s = withdraw(s, seat, fx)
    seats = sorted(set(s.wagers) - set(pending))
    fx.append(
        trusted(
            rec.RoundLocked,
            round_id=s.round_id,
            cause=cause,
            accepted_wagers=len(seats),
            seats=seats,
            undecided_seats=list(pending),
            rule=game.table_wager.lockout_rule,
        )
    )
    locked: TableStateUpdate = {
        **(also or {}),
        "phase": Phase.LOCKED,
        "lockout_at_ns": at_ns,
        "undecided": pending,
    }
    return s.replace(**locked) if pending else finish_count(game, s, fx, **locked)


def finish_count(
    game: TableGame, s: TableState, fx: list[Effect], /, **also: Unpack[TableStateUpdate]
) -> TableState:
    """The count is final: book each wager's meter contribution (649a.12(e)(3)). `also`:
    what the caller changes with it (a lock-out's phase), in the same copy of the state."""
    seats = sorted(s.wagers)
    meter, booked = s.meter, 0
    meter_rules = game.meter
    linked: list[rec.LinkContribution] = []
    if isinstance(meter, LinkedMeter):
        # The contribution cut-off: this round's wagers count toward the link's meter as of
        # "no more bets" (NM 15.1.24.19(A)); the controller applies each row once.
        for seat in seats:
            for level in meter.levels:
                linked.append(_link_contribution(meter, level, s.round_id, seat, s.wagers[seat]))
        fx.extend(linked)
        booked = sum(c.contribution_ten_thousandths_cent for c in linked)
    elif meter is not None and meter_rules is not None:
        for seat in seats:
            meter, units = meter.contribute(s.wagers[seat], meter_rules.rate_bp)
            booked += units
            fx.append(
                trusted(
                    rec.MeterContribution,
                    round_id=s.round_id,
                    seat=seat,
                    wager_cents=s.wagers[seat],
                    rate_bp=meter_rules.rate_bp,
                    contribution_ten_thousandths_cent=units,
                    meter=reading(meter),
                )
            )
    fx.append(
        trusted(
            rec.WagersCounted,
            round_id=s.round_id,
            accepted_wagers=len(seats),
            seats=seats,
            total_wager_cents=sum(s.wagers.values()),
            decided_after_lockout=list(s.decided_after_lockout),
            rule=game.table_wager.count_rule,
        )
    )
    counted: TableStateUpdate = {
        **also,
        "counted": True,
        "meter": meter,
        "round_contribution_units": booked,
        "round_link_contributions": tuple(linked),
    }
    return s.replace(**counted)


def _link_contribution(
    meter: LinkedMeter, level: LinkLevel, round_id: int, seat: int, wager_cents: int
) -> rec.LinkContribution:
    return rec.LinkContribution(
        link_id=meter.link_id,
        level_id=level.level_id,
        parameters_version=meter.parameters_version,
        round_id=round_id,
        seat=seat,
        wager_cents=wager_cents,
        rate_bp=level.contribution_rate_bp,
        contribution_ten_thousandths_cent=wager_cents * level.contribution_rate_bp,
    )


def _seat_stuck(s: TableState, seat: int) -> bool:
    return any(f.seat == seat for f in s.stuck_inputs)


def stuck(
    game: TableGame, s: TableState, seat: int | None, cause: StuckCause, fx: list[Effect]
) -> TableState:
    """A stuck input, journaled once. A stuck lock-out cannot prevent the recognition of a
    late wager (649a.2(c)(2)): betting stays closed. A stuck sensor cannot tell a wager from
    none: its seat's wagers are refused (649a.2(c)(1), and the dealer collects the wagers
    before the deal, 649a.8(b))."""
    if any(f.seat == seat for f in s.stuck_inputs):
        return s
    fault = StuckInput(seat=seat, cause=cause, round_id=s.round_id)
    betting = seat is None and s.phase is Phase.BETTING
    rule = game.table_wager.lockout_rule if seat is None else game.table_wager.count_rule
    fx.append(
        trusted(
            rec.InputStuck,
            input=fault.input,
            seat=seat,
            cause=cause.value,
            round_id=s.round_id,
            round_locked=betting,
            rule=rule,
        )
    )
    s = s.replace(stuck_inputs=(*s.stuck_inputs, fault), counters=s.counters.bump("inputs_stuck"))
    if betting:
        s = lock(game, s, fx, cause="lockout-stuck", at_ns=None, undecided=())
    return s


def clear_stuck(event: ClearStuckInput, s: TableState, ctx: Context) -> TableState:
    """A person freed a stuck input and clears it: refused while it still reads stuck."""
    seat = event.seat
    what = "the lock-out button" if seat is None else f"seat {seat}'s sensor"
    fault = next((f for f in s.stuck_inputs if f.seat == seat), None)
    if fault is None:
        stuck = ", ".join(
            "the lock-out button" if f.seat is None else f"seat {f.seat}" for f in s.stuck_inputs
        )
        raise Rejected(f"{what} is not stuck; stuck inputs: {stuck or 'none'}")
    if seat is None and s.lockout_held:
        raise Rejected("the lock-out button still reads pressed: free it, then clear")
    if seat is not None and seat in s.occupied:
        raise Rejected(
            f"seat {seat}'s sensor still reads occupied: lift the chip or repair the sensor, "
            "then clear"
        )
    ctx.fx.append(
        trusted(
            rec.InputStuckCleared,
            input=fault.input,
            seat=seat,
            cause=fault.cause.value,
            by=event.by,
        )
    )
    return s.replace(stuck_inputs=tuple(f for f in s.stuck_inputs if f != fault))


def gpio_fault(event: GpioFault, s: TableState, ctx: Context) -> TableState:
    """Lost edges: the lock-out can no longer prevent a late wager's recognition (649a.2(c)(2))."""
    game, fx, reason = ctx.game, ctx.fx, event.reason
    betting = s.phase is Phase.BETTING
    fx.append(
        trusted(
            rec.GpioFaultRecord,
            reason=reason,
            round_id=s.round_id,
            round_locked=betting,
            rule=game.table_wager.lockout_rule,
        )
    )
    if betting:
        s = lock(game, s, fx, cause="gpio-fault", at_ns=None, undecided=())
    elif s.phase is Phase.LOCKED and not s.counted:
        # The chips still resting cannot be confirmed from edges that may be lost.
        s = finish_count(game, drop_undecided(s, fx), fx)
    return s.replace(gpio_fault=reason, counters=s.counters.bump("gpio_faults"))


def clear_gpio_fault(event: ClearGpioFault, s: TableState, ctx: Context) -> TableState:
    """A person clears lost edges (`tablectl dealer clear-fault`)."""
    if s.gpio_fault is None:
        raise Rejected("no GPIO fault to clear")
    ctx.fx.append(trusted(rec.GpioFaultCleared, reason=s.gpio_fault, by=event.by))
    return s.replace(gpio_fault=None)


def sensor_test_started(event: SensorTestStarted, s: TableState, ctx: Context) -> TableState:
    """A technician's walk test takes the sensors, between rounds only."""
    if s.sensor_test is not None:
        raise Rejected(f"a {s.sensor_test} test is already running")
    if s.phase is Phase.BETTING:
        raise Rejected(
            f"round {s.round_id} is taking bets: press the lock-out and settle or void it first"
        )
    if s.phase is Phase.LOCKED and not s.counted:
        raise Rejected(f"round {s.round_id}: chips are still resting; wait for the count")
    ctx.fx.append(trusted(rec.SensorTestStartedRecord, test=event.test, by=event.by))
    return s.replace(sensor_test=event.test)


def sensor_test_ended(event: SensorTestEnded, s: TableState, ctx: Context) -> TableState:
    """The walk test ends, with the seats that passed and failed."""
    if s.sensor_test != event.test:
        raise Rejected(f"no {event.test} test is running")
    ctx.fx.append(
        trusted(
            rec.SensorTestEndedRecord,
            test=event.test,
            passed=list(event.passed),
            failed=list(event.failed),
            resolution_ns=event.resolution_ns,
            by=event.by,
        )
    )
    return s.replace(sensor_test=None)

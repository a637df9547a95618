"""The round machine's step: (rules, state, input) -> (state, effects), and its dispatch
table, input type -> the handler of the room that owns it. Pure.

A round opens when a verified deck is ready and nothing holds the table (`_advance`), takes
the table game system's wagers until the dealer's lock-out edge, counts them, and is settled
on the cards shown or voided. The game module (core/games) supplies every rule that differs
between games; no room names a game.

The records a step journals are built from the state and from inputs validated when they came
in, so they are built `trusted` (util/frozen.py: typed by mypy, not validated a second time at
every step); the link contract's records, strict and constrained for the link controller, are
validated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from tablectl.core import effects as rec
from tablectl.core import events as ev
from tablectl.core.effects import Effect, RequestShuffle
from tablectl.core.events import Event, PowerUp, TableRules
from tablectl.core.games.base import TableGame
from tablectl.core.table import (
    deal,
    deck_rules,
    faults,
    journal,
    link,
    settlement,
    shuffler,
    void,
    wagering,
)
from tablectl.core.table.deck_rules import deck_asks, deck_block, deck_round_opened
from tablectl.core.table.link import link_at_power_up
from tablectl.core.table.state import (
    Context,
    Phase,
    Rejected,
    TableState,
    shuffler_usable,
    unverify,
)
from tablectl.core.table.wagering import chips_resting_at_open, drop_undecided, finish_count, lock
from tablectl.util.frozen import trusted

E = TypeVar("E")
Handler = Callable[[Any, TableState, Context], TableState]


def step(rules: TableRules, state: TableState, event: Event) -> tuple[TableState, list[Effect]]:
    """Apply one input. Commands that are not allowed now raise Rejected."""
    game = rules.table_game  # built once per rules object (core/events.py, TableRules)
    if game.name != state.game:
        raise Rejected(f"this table's journal is a {state.game} table, not {game.name}")
    try:
        handler = HANDLERS[type(event)]  # subscripted: the view's .get is a slower call
    except KeyError:
        raise AssertionError(f"unhandled input {event!r}") from None
    fx: list[Effect] = []
    state = handler(event, state, Context(rules, game, fx))
    if rules.revision < 2 and state.shoe_fault is not None:
        # The first revision kept no standing shoe fault: its journals replay as written.
        state = state.replace(shoe_fault=None)
    state = _advance(rules, game, state, fx)
    return state, fx


# --- power, and a round's opening ------------------------------------------------------------


def power_up(event: PowerUp, s: TableState, ctx: Context) -> TableState:
    """The daemon started: lock-out is the safe state; the deck and the inputs are read anew."""
    game, fx = ctx.game, ctx.fx
    # Lock-out is the safe state: a round that was taking bets is closed at once, and chips
    # that were still resting cannot be confirmed any more.
    if s.phase is Phase.BETTING:
        s = lock(game, s, fx, cause="power-up", at_ns=None, undecided=())
    if s.phase is Phase.LOCKED and not s.counted:
        s = finish_count(game, drop_undecided(s, fx), fx)
    s = link_at_power_up(ctx.rules, game, s)
    # Whatever the shuffler held before is unknown now: reshuffle. A walk test that was
    # running ended with the daemon; a GPIO fault stays until a person clears it, and so does
    # a stuck input. The inputs' levels are read again from the lines.
    # The journal's chains are walked again at this start (a pending walk or a break found
    # by the last start's is decided anew).
    return unverify(s).replace(
        sensor_test=None,
        deal_refused=None,
        occupied={},
        waiting=(),
        lockout_held=False,
        chain_pending=None,
        chain_broken=None,
    )


def _advance(rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]) -> TableState:
    """Open the next round when a verified deck is ready, and keep a deck being shuffled."""
    if s.phase is Phase.CLOSED:
        s = deck_asks(rules, game, s, fx)
        if s.deck_ready and shuffler_usable(s) and _table_ready(rules, s):
            s = _open_round(rules, game, s, fx)
    free = _decks_free(rules, s.phase)
    if not s.deck_ready and not s.shuffle_requested and free > 0 and shuffler_usable(s):
        fx.append(RequestShuffle())
        s = s.replace(shuffle_requested=True)
    return s


def _decks_free(rules: TableRules, phase: Phase) -> int:
    """Decks not in play: 649a.3(b)(2), with two decks one is shuffled while the other is."""
    return rules.decks - (0 if phase is Phase.CLOSED else 1)


def _table_ready(rules: TableRules, s: TableState) -> bool:
    """Nothing but the deck holds the next round: the shoe, the sensors, hits, the decks."""
    # A faulted shoe holds a void round's cards (649a.13(f)); out of order, it deals nothing.
    shoe_ok = (
        not rules.shoe
        or s.shoe_out_of_order
        or (s.shoe_fault is None and "shoe" not in s.events_refused)
    )
    # No round opens while the lock-out button is down: it could not lock that round out.
    lockout_free = not s.lockout_held and all(f.seat is not None for f in s.stuck_inputs)
    sensors_ok = s.gpio_fault is None and s.sensor_test is None and lockout_free
    # A journal rolled back, or not yet (or not) shown whole: no round is played on it.
    journal_ok = s.rolled_back is None and s.chain_pending is None and s.chain_broken is None
    shuffle_ok = not s.shuffle.holds_rounds  # [shuffle_integrity] on_alarm = "block"
    return (
        shoe_ok
        and sensors_ok
        and journal_ok
        and shuffle_ok
        and not s.hits_pending
        and deck_block(rules, s) is None
    )


def _open_round(rules: TableRules, game: TableGame, s: TableState, fx: list[Effect]) -> TableState:
    """A round opens on the deck shuffled for it; the other deck, if any, is asked for in the
    same copy of the state (the shuffler is usable, or the round would not open)."""
    shuffle = not s.shuffle_requested and _decks_free(rules, Phase.BETTING) > 0
    s = s.replace(
        phase=Phase.BETTING,
        round_id=s.round_id + 1,
        deck_ready=False,
        wagers={},
        lockout_at_ns=None,
        lockout_resolution_ns=1,
        undecided=(),
        decided_after_lockout=(),
        counted=False,
        round_contribution_units=0,
        round_link_contributions=(),
        deal=None,
        deal_refused=None,
        shuffle_requested=s.shuffle_requested or shuffle,
    )
    fx.append(trusted(rec.RoundOpened, round_id=s.round_id))
    s = deck_round_opened(rules, s)
    s = chips_resting_at_open(rules, game, s, fx)
    if shuffle:
        fx.append(RequestShuffle())
    return s


# --- the dispatch table -------------------------------------------------------------------


def _handles(
    kind: type[E], handler: Callable[[E, TableState, Context], TableState]
) -> tuple[type, Handler]:
    """One entry of the table: mypy checks the handler takes the input type it is given."""
    return kind, handler


# Each input type -> its handler, in the room that owns it. Read-only: nothing registers a
# handler at run time. tests/test_typed_updates.py checks every input type has one.
HANDLERS: Mapping[type, Handler] = MappingProxyType(
    dict(
        [
            # power, the round's life (here)
            _handles(ev.PowerUp, power_up),
            # wagering: sensors, the lock-out button, stuck inputs, GPIO, walk tests
            _handles(ev.ChipSensed, wagering.chip),
            _handles(ev.LockoutPressed, wagering.lockout_pressed),
            _handles(ev.LockoutReleased, wagering.lockout_released),
            _handles(ev.LockoutHeld, wagering.lockout_held),
            _handles(ev.ClearStuckInput, wagering.clear_stuck),
            _handles(ev.GpioFault, wagering.gpio_fault),
            _handles(ev.ClearGpioFault, wagering.clear_gpio_fault),
            _handles(ev.SensorTestStarted, wagering.sensor_test_started),
            _handles(ev.SensorTestEnded, wagering.sensor_test_ended),
            # the shuffler
            _handles(ev.ShuffleStarted, shuffler.shuffle_started),
            _handles(ev.ShuffleCompleted, shuffler.shuffle_completed),
            _handles(ev.ShufflerFault, shuffler.shuffler_fault),
            _handles(ev.ShufflerRebooted, shuffler.shuffler_rebooted),
            _handles(ev.ShuffleRequestFailed, shuffler.shuffle_request_failed),
            _handles(ev.ReshuffleRequested, shuffler.reshuffle),
            _handles(ev.ShuffleSuspected, shuffler.shuffle_suspected),
            _handles(ev.ShuffleAcknowledged, shuffler.shuffle_acknowledged),
            # the decks
            _handles(ev.NewDeckRegistered, deck_rules.new_deck),
            _handles(ev.DeckIntroduced, deck_rules.deck_input),
            _handles(ev.DeckClock, deck_rules.deck_input),
            _handles(ev.DeckInPlay, deck_rules.deck_input),
            _handles(ev.StubCounted, deck_rules.deck_input),
            _handles(ev.TableIdle, deck_rules.deck_input),
            _handles(ev.IdleProcedureDone, deck_rules.deck_input),
            # the shoe and the deal
            _handles(ev.DealRequested, deal.deal_requested),
            _handles(ev.DealRequestFailed, deal.deal_request_failed),
            _handles(ev.ShoeCard, deal.shoe_reported),
            _handles(ev.ShoeStackDealt, deal.shoe_reported),
            _handles(ev.ShoeDealCompleted, deal.shoe_reported),
            _handles(ev.ShoeFault, deal.shoe_fault_reported),
            _handles(ev.ShoeRebooted, deal.shoe_rebooted),
            _handles(ev.ShoeCleared, deal.shoe_cleared),
            _handles(ev.ShoeOutOfOrder, deal.shoe_out_of_order),
            _handles(ev.DeviceResumed, deal.resumed),
            # settlement, hits, the void
            _handles(ev.Settle, settlement.settle),
            _handles(ev.ValidateHit, settlement.floor),
            _handles(ev.ConfirmDocumentation, settlement.floor),
            _handles(ev.VoidRound, void.void),
            # devices: identity, refused events, conflicts, stalls
            _handles(ev.DeviceIdentified, faults.identified),
            _handles(ev.DeviceAccepted, faults.device_accepted),
            _handles(ev.DeviceEventsRefused, faults.events_refused),
            _handles(ev.DeviceReportConflict, faults.report_conflict),
            _handles(ev.DeviceLinkReset, faults.link_reset),
            _handles(ev.CommandStalled, faults.command_stalled),
            # the event stream's delivery and the journal's checks
            _handles(ev.DeliveryFault, journal.delivery_fault),
            _handles(ev.DeliveryRestored, journal.delivery_restored),
            _handles(ev.JournalRecovered, journal.journal_recovered),
            _handles(ev.AckPastJournal, journal.ack_past_journal),
            _handles(ev.JournalCheckPending, journal.chain_pending),
            _handles(ev.JournalChainChecked, journal.chain_checked),
            # a linked progressive
            _handles(ev.LinkParametersHeard, link.link_parameters),
            _handles(ev.LinkLost, link.link_lost),
            _handles(ev.LinkRestored, link.link_restored),
            _handles(ev.LinkClaimAnswer, link.link_answer),
        ]
    )
)

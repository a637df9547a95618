"""The demo: the daemon on simulated devices, a scripted dealer, players and floorperson.

Everything real but the hardware: the shuffler simulator on a pseudo-terminal, the simulated
table's chips, lamps and lock-out button (the mock GPIO backend), a private Mosquitto,
SQLite, and the control socket the dealer's and floorperson's commands go through. It plays
any game: the hands come from the game's own deal plan. It prints what the backend receives
and a summary, then replays the journal, and exits 0 only when the backend's view matches
the table's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.simulators.backend import ReferenceBackend
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.card_flow import CardFlow
from tablectl.simulators.dealer import Wanted, as_request, deal_round, stacked_deal
from tablectl.simulators.shoe import PRODUCT_ID, VENDOR_ID, ShoeSimulator, VirtualUsbBackend
from tablectl.simulators.shuffler import Mixing, ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import DeckSection, ShoeSection, TableConfig
from tablectl.control import client
from tablectl.core.games.base import DealPlan, TableGame, form_hands
from tablectl.core.table import Phase, TableState
from tablectl.service.api import Daemon, replay
from tablectl.status import Status
from tablectl.store.journal import Store

SHOE_PORT = f"usb:{VENDOR_ID:04x}:{PRODUCT_ID:04x}"


def simulated_config(
    base: TableConfig,
    *,
    port: str,
    broker: PrivateBroker,
    data_dir: Path,
    shoe_port: str | None = None,
) -> TableConfig:
    """The table's config with the simulated devices, private broker and a scratch data dir.

    shoe_port: the simulated shoe's address (on the virtual USB bus: SHOE_PORT)."""
    shoe = None if shoe_port is None else ShoeSection.model_validate({"port": shoe_port})
    return base.model_copy(
        update={
            "shuffler": base.shuffler.with_port(port),
            "shoe": shoe if shoe is not None else base.shoe,
            "gpio": base.gpio.model_copy(update={"backend": "mock"}),
            "mqtt": base.mqtt.model_copy(update={"host": broker.host, "port": broker.port}),
            "storage": base.storage.model_copy(
                update={"data_dir": data_dir, "control_socket": data_dir / "control.sock"}
            ),
        }
    )


# Cards the scripted dealer arranges in given rounds (seat or "community" -> cards); the rest
# of each round is dealt at random through the game's deal plan.
SCRIPTS: dict[str, dict[int, Wanted]] = {
    "three-card-poker": {
        2: {2: "AsKsQs"},  # 100 % of the meter (649a.12(e)(1)); Envy Bonuses to the others
        4: {1: "AhKhQh", 3: "9c8c7c"},  # 500 for 1 with Envy Bonuses; a straight flush
    },
    "ultimate-texas-holdem": {
        2: {2: "AsKs", "community": "QsJsTs2d3c"},  # a royal flush: 100 % of the meter
        4: {1: "9h8h", "community": "7h6h5h2c3d"},  # a straight flush: 10 %, not a reset
    },
    "let-it-ride": {
        2: {2: "AsKsQs", "community": "JsTs"},  # a royal flush: $25,000 on paytable A
        4: {1: "9h8h2h", "community": "5h3h", 3: "7c7d7s"},  # a flush; three of a kind
    },
}
DECKS = {"D1": "red", "D2": "blue"}  # the demo's decks: id -> back colour (649a.3(b)(1))
EDGE_ROUND = 1  # a chip lands just before the lock-out and finishes resting after it
VOID_ROUND = 3  # the shoe jams mid-deal: the round is void, every wager returned (649a.13(f))
MISCOUNT_ROUND = 3  # a card goes missing before the next shuffle (649a.5(b))
# The shuffle for the last round gives the order of the shuffle before it again: the
# shuffle-integrity monitor raises SHUFFLE SUSPECT (649a.5(a)) and a floorperson acknowledges
# it (docs/shuffle-integrity.md). Demos of at least 4 rounds.
# `--mixing HOW` chooses the bad shuffler instead: it shuffles the deck that replaces the
# miscounted one, the first dealt after the scripted hands, and each alarm it raises is
# acknowledged as it comes.
BAD_FROM_ROUND = MISCOUNT_ROUND + 2  # the new deck's first round (SCRIPTS: rounds 1 to 4)
FLOORPERSON = "floor-0042"
DEALER = "dealer-0117"


class ShufflerFailed(RuntimeError):
    """The shuffle chosen with --mixing failed (simulators/shuffler.py, MixingError)."""


@dataclass
class Tally:
    game: str
    rounds: int = 0
    late_chips_placed: int = 0
    chips_placed_at_the_edge: int = 0
    voided_rounds_expected: int = 0
    shoe_jams: int = 0
    hits_validated: int = 0
    shuffle_alarms_expected: int = 0
    first_shuffle_alarm_round: int | None = None


def _print_event(evt: dict[str, Any]) -> None:
    data = evt["data"]
    brief = " ".join(f"{k}={v}" for k, v in data.items() if k not in ("meter", "rule", "by"))
    if data.get("meter"):
        brief += f" meter={data['meter']['meter_cents']}"
    print(f"  backend <- seq {evt['seq']:>3} {evt['type']:<24} {brief}", flush=True)


class DemoTable:
    """The scripted people at a simulated table, through the same paths as real ones."""

    def __init__(
        self,
        daemon: Daemon,
        players: SimulatedTableInputs,
        rng: random.Random,
        shuffler: ShufflerSimulator,
    ) -> None:
        self.daemon = daemon
        self.shuffler = shuffler
        self.uses_judged = 0  # the monitor's reports looked at (judged)
        self.players = players
        self.rng = rng
        self.config = daemon.config
        self.rest_s = daemon.config.gpio.chip_present_ms / 1000 + 0.05

    @property
    def state(self) -> TableState:
        assert self.daemon.state is not None
        return self.daemon.state

    async def until(self, predicate: Callable[[TableState], bool], timeout_s: float = 20) -> None:
        """Wait for the table; a plugged-in shuffle that failed ends the wait, said."""
        shuffler = self.shuffler
        await self.daemon.wait_until(
            lambda s: predicate(s) or shuffler.mixing_failed is not None, timeout_s
        )
        if shuffler.mixing_failed is not None:
            raise ShufflerFailed(f"the shuffler's mixing failed: {shuffler.mixing_failed}")

    async def command(self, request: dict[str, Any]) -> dict[str, Any]:
        sock = self.config.storage.socket_path
        reply = await asyncio.to_thread(client.call, sock, request)
        if not reply["ok"]:
            raise RuntimeError(f"{request['cmd']} refused: {reply['error']}")
        return reply["data"]  # type: ignore[no-any-return]

    async def introduce_decks(self) -> None:
        """`tablectl dealer new-deck --id D1 --back red` (and D2, blue, for two decks)."""
        deck_rules = self.daemon.rules.deck
        if deck_rules is None:
            return
        for deck_id, back in list(DECKS.items())[: 2 if deck_rules.alternate else 1]:
            await self.command({"cmd": "new-deck", "deck_id": deck_id, "back": back, "by": DEALER})

    async def replace_deck(self) -> None:
        """A deck left the table: the dealer brings another of the same back colour."""
        deck_rules = self.daemon.rules.deck
        if deck_rules is None:
            await self.command({"cmd": "new-deck", "by": DEALER})
            return
        life = self.state.deck
        due = life.next_deck(deck_rules)
        back = "red" if due is None else due.back
        deck_id = f"D{len(DECKS) + 1 + self.state.counters.deck_miscounts}"
        await self.command({"cmd": "new-deck", "deck_id": deck_id, "back": back, "by": DEALER})

    async def clear_shoe(self) -> None:
        """`tablectl dealer clear-shoe`, as a dealer would: again, a moment later, while the
        daemon has not yet seen the emptied shoe leave its fault."""
        async with asyncio.timeout(10):
            while True:
                try:
                    await self.command({"cmd": "clear-shoe", "by": DEALER})
                    return
                except RuntimeError as exc:
                    if "still reports" not in str(exc):
                        raise
                await asyncio.sleep(0.1)

    def free_seat(self, taken: set[int]) -> int:
        return next(s for s in range(self.config.table.seats, 0, -1) if s not in taken)

    async def late_chip(self, taken: set[int]) -> None:
        """A chip placed after "no more bets": it rests, and is never recognised."""
        seat = self.free_seat(taken)
        refused = self.state.counters.wagers_rejected
        self.players.place_chip(seat)
        await self.until(lambda s: s.counters.wagers_rejected > refused)
        self.players.remove_chip(seat)
        await asyncio.sleep(self.rest_s)  # lifted for good before the next round

    async def shuffle_alarm(self, tally: Tally) -> None:
        """The monitor's alarm comes after the deal it judged (off the hot path): the floor
        supervisor looks, then acknowledges it (`tablectl shuffle acknowledge --by ID`)."""
        await self.until(lambda s: s.shuffle.suspect is not None, timeout_s=60)
        await self.command({"cmd": "shuffle-acknowledge", "by": FLOORPERSON})
        tally.shuffle_alarms_expected += 1

    async def judged(self, tally: Tally) -> None:
        """Wait for the monitor's verdict on every deal so far; an alarm is looked at and
        acknowledged (`--mixing`: whether and when it comes is the shuffler's doing)."""
        watch = self.daemon.shuffle_watch
        async with asyncio.timeout(30):
            report = await watch.caught_up()
        new, self.uses_judged = watch.observed > self.uses_judged, watch.observed
        if report is not None and new and report.alarms:
            await self.shuffle_alarm(tally)
            if tally.first_shuffle_alarm_round is None:
                tally.first_shuffle_alarm_round = report.round_id

    async def floor_workflow(self, tally: Tally) -> None:
        """649a.11(c)(5)(iii)-(iv): validate every hit; document meter-share payouts."""
        for hit in self.state.hits_pending:
            await self.command({"cmd": "validate", "hit_id": hit.hit_id, "by": FLOORPERSON})
            if not hit.paid_from_table_inventory:
                await self.command({"cmd": "document", "hit_id": hit.hit_id, "by": FLOORPERSON})
            tally.hits_validated += 1


async def _deal(
    table: DemoTable, shoe: ShoeSimulator, seats: list[int], wanted: Wanted
) -> dict[str, Any]:
    """The shoe deals the round's plan from the deck the shuffler sent (a scripted round's
    cards arranged on top); the dealer deals any community cards from the hand: the cards
    that follow in the deck. Returns the dealer's settle request."""
    game = table.daemon.game
    plan = game.deal_plan(seats)
    if wanted:
        shoe.stack(stacked_deal(plan, wanted, table.rng))
    extra = [seat for seat in seats if seat not in table.state.wagers]
    await table.command({"cmd": "deal", "seats": extra, "by": DEALER})
    await table.until(
        lambda s: s.phase is not Phase.LOCKED or (s.deal is not None and s.deal.complete)
    )
    hand_plan = DealPlan(plan.procedure, plan.rule, tuple(s for s in plan.steps if not s.by_shoe))
    by_hand = form_hands(hand_plan, shoe.shoe[: hand_plan.cards])
    return {"cmd": "settle", "community": "".join(map(str, by_hand.community))}


async def _play_rounds(
    table: DemoTable,
    sim: ShufflerSimulator,
    shoe: ShoeSimulator | None,
    rounds: int,
    tally: Tally,
    mixing: Mixing | None,
) -> None:
    game = table.daemon.game
    script = SCRIPTS.get(game.name, {})
    seats_total = table.config.table.seats
    for round_no in range(1, rounds + 1):
        await table.until(lambda s: s.phase is Phase.BETTING)
        wanted = script.get(round_no, {})
        seats = set(table.rng.sample(range(1, seats_total), table.rng.randint(2, 3)))
        seats |= {w for w in wanted if isinstance(w, int)}
        for seat in sorted(seats):
            table.players.place_chip(seat)
        await asyncio.sleep(table.rest_s)
        if round_no == EDGE_ROUND:
            # Placed a moment before "no more bets", resting after it: it counts (649a.2(c)).
            edge_seat = table.free_seat(seats)
            table.players.place_chip(edge_seat)
            seats.add(edge_seat)
            tally.chips_placed_at_the_edge += 1
        table.players.press_lockout()  # "no more bets" (649a.8(b))
        await table.until(lambda s: s.phase is Phase.LOCKED and s.counted)
        for seat in table.state.wagers:
            table.players.remove_chip(seat)  # the dealer collects the wagers
        await table.late_chip(seats)
        tally.late_chips_placed += 1
        if round_no == MISCOUNT_ROUND:
            sim.remove_card()
        if shoe is not None and mixing is None and rounds >= 4 and round_no == rounds - 2:
            # The shuffle for the next round is done; the one after (for the last round,
            # asked when the next opens) gives the order of its last shuffle again.
            await table.until(lambda s: s.deck_ready or not s.shuffle_requested)
            sim.mixing = Mixing("repeat", last=sim.mixing.last)
        in_play = sorted(seats | {table.free_seat(seats)})  # a player without the wager
        if shoe is None:
            if round_no == VOID_ROUND:
                await table.command({"cmd": "void", "reason": "shoe-jam", "by": DEALER})
                tally.voided_rounds_expected += 1
            else:
                cards = deal_round(game.deal_plan(in_play), wanted, table.rng)
                await table.command({**as_request(cards), "by": DEALER})
                await table.floor_workflow(tally)
        else:
            if round_no == VOID_ROUND:
                shoe.knobs.jam_at = 2  # the shoe jams on the third card (649a.13(f))
                tally.shoe_jams += 1
                tally.voided_rounds_expected += 1
            request = await _deal(table, shoe, in_play, wanted)
            if table.state.phase is Phase.LOCKED:
                await table.command({**request, "by": DEALER})
                await table.floor_workflow(tally)
            else:
                # 649a.13(f): the dealer takes the cards out of the shoe (they go back to be
                # reshuffled) and says so: the documented recovery (docs/protocols/shoe.md).
                shoe.clear()
                await table.clear_shoe()
        tally.rounds += 1
        if shoe is not None and mixing is not None and round_no >= BAD_FROM_ROUND:
            await table.judged(tally)
        elif shoe is not None and mixing is None and rounds >= 4 and round_no == rounds:
            await table.shuffle_alarm(tally)
        if round_no == MISCOUNT_ROUND:
            # 649a.5(b): the shuffler counts 51; the deck leaves and a new one comes.
            await table.until(lambda s: s.blocked is not None)
            sim.load_full_deck()
            if mixing is not None:
                sim.mixing = mixing  # from the new deck's shuffle on: whole decks only
            await table.replace_deck()


def _plan_for(game: TableGame, stacks: tuple[int, ...]) -> DealPlan | None:
    """The round's plan from the shoe's stacks (the pickup needs only the players' order)."""
    for players in range(1, 8):
        plan = game.deal_plan(list(range(1, players + 1)))
        if tuple(s.cards for s in plan.steps if s.by_shoe) == stacks:
            return plan
    return None


@contextlib.contextmanager
def _data_dir(keep: Path | None) -> Iterator[Path]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        if any(keep.iterdir()):
            raise SystemExit(f"tablectl demo: --keep {keep} is not empty")
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix="tablectl-demo-") as tmp:
        yield Path(tmp)


@dataclass
class DemoRun:
    summary: dict[str, Any]
    difference: str | None  # the first replay difference, if any
    backend: ReferenceBackend  # what the backend received


async def play(
    config: TableConfig,
    *,
    rounds: int,
    keep: Path | None,
    as_json: bool,
    seed: int = 7,
    mixing: Mixing | None = None,
) -> int:
    run = await run_demo(
        config, rounds=rounds, keep=keep, as_json=as_json, seed=seed, mixing=mixing
    )
    if as_json:
        print(json.dumps(run.summary, sort_keys=True))
    else:
        _print_summary(run.summary, run.difference)
    return 0 if run.summary["ok"] else 1


async def run_demo(
    config: TableConfig,
    *,
    rounds: int,
    keep: Path | None,
    as_json: bool,
    seed: int = 7,
    spy: Callable[[str, int], Coroutine[Any, Any, None]] | None = None,
    mixing: Mixing | None = None,
) -> DemoRun:
    """Play the rounds; what happened, and what the backend received. spy(host, port): a
    task of the caller's on the private broker for the whole run (a test's subscriber).
    mixing: the bad shuffler from round BAD_FROM_ROUND on (None: the last round's repeat)."""
    rng = random.Random(seed)
    tally = Tally(config.game.name)
    say: Callable[..., None] = (lambda *a, **k: None) if as_json else print
    with PrivateBroker() as broker, _data_dir(keep) as data_dir:
        # The cards go round: the shuffler mixes the deck the dealer collected, the shoe
        # deals what it produced (card_flow.py).
        game = config.game.table_game()
        flow = CardFlow(config.shuffler.decks, plan_for=lambda stacks: _plan_for(game, stacks))
        sim = ShufflerSimulator(shuffle_ms=100, rng=random.Random(seed), flow=flow)
        # The shoe on a virtual USB bus: the daemon runs pyusb's real code path.
        shoe = ShoeSimulator(card_ms=2, rng=random.Random(seed), flow=flow)
        usb_bus = VirtualUsbBackend()
        usb_bus.plug(shoe, asyncio.get_running_loop())
        cfg = simulated_config(
            config,
            port=sim.open_pty(),
            broker=broker,
            data_dir=data_dir,
            shoe_port=f"{SHOE_PORT}:{shoe.identity.serial_number}",
        )
        cfg = cfg.model_copy(update={"gpio": cfg.gpio.model_copy(update={"chip_present_ms": 80})})
        # The demo's table keeps its decks (docs/decks.md): they are introduced before play.
        cfg = cfg.model_copy(update={"deck": cfg.deck or DeckSection()})
        players = SimulatedTableInputs(cfg.table.seats)
        daemon = Daemon(cfg, gpio_backend=players.backend(), usb_backend=usb_bus)
        backend = ReferenceBackend(
            broker.host,
            broker.port,
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            backend_id=cfg.mqtt.backends[0],
            on_event=None if as_json else _print_event,
        )
        table = DemoTable(daemon, players, rng, sim)
        say(
            f"tablectl demo: {cfg.game.name}, table {cfg.table.table_id}, {cfg.table.seats} "
            f"seats, shuffler on {cfg.shuffler.port}, broker {broker.host}:{broker.port}",
            flush=True,
        )
        try:
            async with asyncio.TaskGroup() as tasks:
                spying = None if spy is None else tasks.create_task(spy(broker.host, broker.port))
                daemon_task = tasks.create_task(daemon.run(), name="daemon")
                backend_task = tasks.create_task(backend.run(), name="backend")
                await daemon.ready.wait()
                await table.introduce_decks()
                await _play_rounds(table, sim, shoe, rounds, tally, mixing)
                store = daemon.store
                assert store is not None
                while True:  # devices may still report (a shuffle completing) while we wait
                    last_seq = store.last_seq
                    await backend.wait_for(
                        lambda seq=last_seq: backend.caught_up(seq),  # type: ignore[misc]
                        timeout_s=15,
                    )
                    status = daemon.status()
                    if status.journal.last_seq == last_seq:
                        break
                daemon_task.cancel()
                backend_task.cancel()
                if spying is not None:
                    spying.cancel()
        except* ShufflerFailed as failed:
            raise failed.exceptions[0] from None  # said as it is, not as a group
        finally:
            sim.close()
            shoe.close()
        with contextlib.closing(Store(cfg.storage.database, boot_id="demo")) as store:
            replayed = replay(store)
        summary = _summary(tally, status, backend, replayed.identical)
        if mixing is not None:
            summary["mixing"] = str(mixing)
            summary["first_shuffle_alarm_round"] = tally.first_shuffle_alarm_round
    return DemoRun(summary, replayed.difference, backend)


def _summary(
    tally: Tally, status: Status, backend: ReferenceBackend, replay_identical: bool
) -> dict[str, Any]:
    events = list(backend.events.values())

    def of(type_: str) -> list[dict[str, Any]]:
        return [e["data"] for e in events if e["type"] == type_]

    retained = backend.meters.get("progressive")
    meter = status.meter
    published = status.journal.last_seq
    out = {
        "game": tally.game,
        "rounds": tally.rounds,
        "wagers_accepted": sum(d["accepted_wagers"] for d in of("wagers.counted")),
        "decided_after_lockout": sum(len(d["decided_after_lockout"]) for d in of("wagers.counted")),
        "chips_placed_at_the_edge": tally.chips_placed_at_the_edge,
        "late_chips_placed": tally.late_chips_placed,
        "late_chips_refused": sum(
            1 for d in of("wager.rejected") if d["reason"] == "after-lockout"
        ),
        "hits": sum(1 for d in of("wager.settled") if d["outcome"] == "won"),
        "jackpot_hits": len(of("jackpot.hit")),
        "hits_validated": len(of("jackpot.validated")),
        "envy_bonuses": len(of("envy.bonus")),
        "voided_rounds": len(of("round.voided")),
        "shuffle_alarms": len(of("shuffle.suspect")),
        "shuffle_alarms_acknowledged": len(of("shuffle.acknowledged")),
        "decks_introduced": len(of("deck.introduced")),
        "hands_read_by_shoe": sum(d["hands_read_by_shoe"] for d in of("round.settled")),
        "hands_settled": sum(
            d["hands_read_by_shoe"] + d["hands_entered"] for d in of("round.settled")
        ),
        "shoe_faults": {
            "jams": sum(1 for d in of("shoe.fault") if d["code"] == "jam"),
            "voided_rounds": sum(1 for d in of("shoe.fault") if d["round_voided"]),
        },
        "meter_cents": None if meter is None else meter.cents,
        "retained_meter_cents": None if retained is None else retained["amount_cents"],
        "events_published": published,
        "events_received": len(backend.events),
        "duplicates": backend.duplicates,
        "replay_identical": replay_identical,
    }
    out["ok"] = (
        backend.last_contiguous_seq == out["events_received"] == published
        and out["meter_cents"] == out["retained_meter_cents"]
        and out["late_chips_refused"] == out["late_chips_placed"]
        and out["decided_after_lockout"] == tally.chips_placed_at_the_edge
        and out["voided_rounds"] == tally.voided_rounds_expected
        and out["shoe_faults"]["voided_rounds"] == tally.shoe_jams
        and 0 < out["hands_read_by_shoe"] == out["hands_settled"]
        and out["hits_validated"] == out["jackpot_hits"]
        and out["shuffle_alarms"] == out["shuffle_alarms_acknowledged"]
        and out["shuffle_alarms"] == tally.shuffle_alarms_expected
        and replay_identical
    )
    return out


# What a reader of the summary may otherwise take for a fault.
NOTES = {
    "duplicates": "  (rows sent again, e.g. for the backend's cmd/replay on connecting, marked "
    "replay: true: delivery is at-least-once, backends deduplicate on seq; docs/mqtt.md)",
}


def _print_summary(summary: dict[str, Any], difference: str | None) -> None:
    print("\nsummary")
    for key, value in summary.items():
        if key != "ok":
            print(f"  {key.replace('_', ' '):<26} {value}{NOTES.get(key, '')}")
    if difference:
        print(f"  replay difference          {difference}")
    print(
        "demo " + ("ok" if summary["ok"] else "FAILED: the backend's view disagrees with the table")
    )


def main(
    config: TableConfig,
    *,
    rounds: int = 6,
    keep: Path | None = None,
    as_json: bool = False,
    mixing: Mixing | None = None,
) -> int:
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(play(config, rounds=rounds, keep=keep, as_json=as_json, mixing=mixing))
    return 130

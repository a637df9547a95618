"""The demo: the daemon on simulated devices, a scripted dealer and players, a backend.

Everything real but the hardware: the shuffler simulator on a pseudo-terminal, gpiozero's
mock pins for chips, lights and the lock-out button, a private Mosquitto, SQLite, the control
socket the dealer's commands go through. Prints what the backend receives and a summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tablectl.simulators.backend import ReferenceBackend
from tablectl.simulators.broker import PrivateBroker
from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import MockTableInputs

from tablectl.config import TableConfig, load_config
from tablectl.control import client as control
from tablectl.core.round import Phase
from tablectl.service.daemon import Daemon

DEFAULT_CONFIG = Path("config/demo.toml")  # the repository's demo table


def simulated_config(
    base: TableConfig, *, port: str, broker: PrivateBroker, data_dir: Path
) -> TableConfig:
    """The table's config with the simulated devices, private broker and a scratch data dir."""
    return base.model_copy(
        update={
            "shuffler": base.shuffler.model_copy(update={"port": port}),
            "gpio": base.gpio.model_copy(update={"backend": "mock"}),
            "mqtt": base.mqtt.model_copy(update={"host": broker.host, "port": broker.port}),
            "storage": base.storage.model_copy(
                update={"data_dir": data_dir, "control_socket": data_dir / "control.sock"}
            ),
        }
    )


# Hands the scripted dealer shows in given rounds (seat -> cards); other rounds are random.
SCRIPTED_HANDS: dict[int, dict[int, str]] = {
    2: {2: "AsKsQs"},  # the 100% jackpot (649a.12(e)(1)); Envy Bonuses to the others
    4: {1: "AhKhQh", 3: "9c8c7c"},  # 500 for 1 and an Envy Bonus; a straight flush
}
MISCOUNT_ROUND = 3  # a card goes missing before the shuffle that follows this round


@dataclass
class Tally:
    rounds: int = 0
    late_chips: int = 0


def _fmt_cents(cents: int) -> str:
    return f"${cents // 100:,}.{cents % 100:02d}"


def _print_event(evt: dict[str, Any]) -> None:
    data = evt["data"]
    brief = " ".join(f"{k}={v}" for k, v in data.items() if k not in ("meter_carry", "rate_bp"))
    print(f"  backend <- seq {evt['seq']:>3} {evt['type']:<20} {brief}", flush=True)


async def _dealer(sock: Path, request: dict[str, Any]) -> dict[str, Any]:
    reply = await asyncio.to_thread(control.call, sock, request)
    if not reply["ok"]:
        raise RuntimeError(f"dealer command refused: {reply['error']}")
    return reply["data"]  # type: ignore[no-any-return]


async def _wait_phase(daemon: Daemon, phase: Phase, timeout_s: float = 20) -> None:
    await daemon.wait_until(lambda state: state.phase is phase, timeout_s)


def _deal(rng: random.Random, seats: list[int], scripted: dict[int, str]) -> dict[int, str]:
    from tablectl.rules.cards import full_deck, parse_cards

    used = {c for cards in scripted.values() for c in parse_cards(cards)}
    deck = [c for c in full_deck() if c not in used]
    rng.shuffle(deck)
    hands = dict(scripted)
    for seat in seats:
        if seat not in hands:
            hands[seat] = "".join(str(deck.pop()) for _ in range(3))
    return hands


async def play(rounds: int, config_path: Path, seed: int = 7) -> int:
    rng = random.Random(seed)
    tally = Tally()
    with PrivateBroker() as broker, tempfile.TemporaryDirectory(prefix="tablectl-demo-") as tmp:
        sim = ShufflerSimulator(shuffle_ms=150, rng=random.Random(seed))
        cfg = simulated_config(
            load_config(config_path), port=sim.open_pty(), broker=broker, data_dir=Path(tmp)
        )
        daemon = Daemon(cfg)
        backend = ReferenceBackend(
            broker.host,
            broker.port,
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            on_event=_print_event,
        )
        players = MockTableInputs(daemon.pin_factory, cfg.gpio)
        sock = cfg.storage.socket_path
        print(
            f"tablectl demo: table {cfg.table.table_id}, {cfg.table.seats} seats, "
            f"shuffler on {cfg.shuffler.port}, broker {broker.host}:{broker.port}",
            flush=True,
        )
        async with asyncio.TaskGroup() as tasks:
            daemon_task = tasks.create_task(daemon.run(), name="daemon")
            backend_task = tasks.create_task(backend.run(), name="backend")
            await daemon.ready.wait()
            for round_no in range(1, rounds + 1):
                await _wait_phase(daemon, Phase.BETTING)
                seats = sorted(rng.sample(range(1, cfg.table.seats + 1), rng.randint(2, 4)))
                seats = sorted(set(seats) | set(SCRIPTED_HANDS.get(round_no, {})))
                for seat in seats:
                    players.place_chip(seat)
                await asyncio.sleep(cfg.gpio.chip_present_ms / 1000 + 0.1)
                players.press_lockout()  # "no more bets" (649a.8(b))
                await _wait_phase(daemon, Phase.LOCKED)
                for seat in seats:
                    players.remove_chip(seat)  # 649a.8(b): the dealer collects the wagers
                late = next(s for s in range(1, cfg.table.seats + 1) if s not in seats)
                players.place_chip(late)  # too late: never recognised (649a.2(c)(2))
                await asyncio.sleep(cfg.gpio.chip_present_ms / 1000 + 0.05)
                players.remove_chip(late)
                await asyncio.sleep(cfg.gpio.chip_present_ms / 1000 + 0.05)  # lifted for good
                tally.late_chips += 1
                if round_no == MISCOUNT_ROUND:
                    sim.remove_card()
                hands = _deal(rng, seats, SCRIPTED_HANDS.get(round_no, {}))
                await _dealer(sock, {"cmd": "settle", "hands": hands})
                tally.rounds += 1
                if round_no == MISCOUNT_ROUND:
                    # 649a.5(b): the shuffler counts 51; the deck leaves, a new one comes.
                    await daemon.wait_until(lambda state: state.blocked is not None, 10)
                    print(
                        f"  dealer: shuffler counted {sim.last_count} cards; deck removed, "
                        "new deck registered",
                        flush=True,
                    )
                    sim.load_full_deck()
                    await _dealer(sock, {"cmd": "new-deck"})
            assert daemon.store is not None
            await backend.wait_for(
                lambda: (
                    backend.last_contiguous_seq >= daemon.store.last_seq  # type: ignore[union-attr]
                    and bool(backend.meters)
                    and backend.meters["progressive"]["seq"]
                    >= max(
                        (s for s, e in backend.events.items() if "meter_id" in e["data"]), default=0
                    )
                ),
                timeout_s=15,
            )
            status = daemon.status()
            daemon_task.cancel()
            backend_task.cancel()
        hits = [e for e in backend.events.values() if e["type"] == "jackpot.hit"]
        envies = [e for e in backend.events.values() if e["type"] == "envy.bonus"]
        print("\nsummary", flush=True)
        print(f"  rounds played        {tally.rounds}")
        booked = sum(
            e["data"]["accepted_wagers"]
            for e in backend.events.values()
            if e["type"] == "round.locked"
        )
        print(f"  wagers at lock-out   {booked}")
        print(
            f"  late chips refused   {status['counters'].get('wagers_rejected', 0)} "
            f"of {tally.late_chips} placed after lock-out"
        )
        print(
            f"  progressive hits     {len(hits)} "
            + ", ".join(
                f"seat {h['data']['seat']} {h['data']['hand']} "
                f"{_fmt_cents(h['data']['amount_cents'])}"
                for h in hits
            )
        )
        print(f"  envy bonuses         {len(envies)}")
        print(f"  meter                {_fmt_cents(status['meter']['cents'])}")
        print(f"  retained meter       {_fmt_cents(backend.meters['progressive']['amount_cents'])}")
        print(
            f"  events at backend    {len(backend.events)} (seq 1..{backend.last_contiguous_seq}, "
            f"{backend.duplicates} duplicates dropped)"
        )
        ok = (
            backend.last_contiguous_seq == len(backend.events) == status["journal"]["last_seq"]
            and backend.meters["progressive"]["amount_cents"] == status["meter"]["cents"]
            and any(h["data"]["basis"] == "100%-of-meter" for h in hits)
        )
        print("demo " + ("ok" if ok else "FAILED: the backend's view disagrees with the table"))
        return 0 if ok else 1


def main(rounds: int = 6, config_path: Path = DEFAULT_CONFIG) -> int:
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(play(rounds, config_path))
    return 130

"""A whole simulated table for a daemon in another process: `tablectl simulate table`.

Every device simulator of the table runs here, where the table's config says the daemon
will look for it: the seat sensors, lamps and lock-out button on the mock backend's Unix
socket (`gpio.simulator_socket`), the shuffler on `shuffler.port` and the dealing shoe on
`shoe.port` (socket://HOST:PORT, or a pseudo-terminal linked at that path: the shoe's
CDC-ACM variant). A technician or trainer drives it by typing commands (`place 3`,
`press`, `jam`, `shoe jam 2`, `swap shoe SHOE-0002`, `unplug shuffler`, ...): every fault
docs/protocols/ and docs/gpio.md list can be caused here; the daemon runs as in production
with `gpio.backend = "mock"`.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tablectl.drivers.reference.messages import Identity
from tablectl.drivers.reference.shoe_codec import MAX_STACKS, ShoeFaultCode
from tablectl.drivers.reference.shuffler_codec import FaultCode
from tablectl.simulators.card_flow import CardFlow
from tablectl.simulators.device import SimulatedDevice
from tablectl.simulators.shoe import ShoeSimulator
from tablectl.simulators.shuffler import MIXINGS, Mixing, ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import DeviceSection, TableConfig
from tablectl.core.games.base import DealPlan
from tablectl.rules.cards import parse_cards
from tablectl.util.bounds import Limit
from tablectl.util.instance_lock import OwnedPath

UNPLUGGED_REPLIES = 1 << 30  # a device whose cable is pulled answers nothing
# The numbers typed here, bounded as the CLI's arguments are (util/bounds.py). A gap of any
# size is the same sequence fault to the daemon: a thousand edges is plenty to cause it.
DROPPED_EDGES = Limit(0, 1000, "0 cancels; a gap of any size is the same fault")
DECK_CARD = Limit(0, 51, "the 52 cards of a deck, from 0")
CARDS_SHORT = Limit(1, 51, "fewer than a deck's 52")
STACK = Limit(0, MAX_STACKS - 1, f"the reference DEAL's {MAX_STACKS} stacks, from 0")
SHOE_NUMBERED = dict.fromkeys(
    ("jam", "stop", "face-up", "unread", "duplicate", "foreign"), DECK_CARD
)
SHOE_NUMBERED |= {"short": CARDS_SHORT, "extra": STACK}
SHOE_PLAIN = ("empty", "gap", "clear")  # these take no number
SHOE_FAULTS = (
    "jam [N]: it jams at card N of the next deal (from 0)",
    "stop [N]: it stops dealing at card N",
    "short [N]: it reports the next deal complete N cards early (failed to deal all)",
    "face-up [N]: card N is found face up (twice in a deal: the round is void)",
    "unread [N] | duplicate [N] | foreign [N]: card N is unreadable, read again, or no card",
    "extra [STACK]: that stack of the next deal gets one card too many",
    "empty: it is out of cards now",
    "gap: it skips an event id (events out of sequence)",
    "deck CARDS...: the next cards it deals, in order (deck AsKsQs 9c8c7c)",
    "clear: the dealer cleared it (idle, a new deck inside)",
)


@dataclass
class SimulatedTable:
    config: TableConfig
    shuffle_ms: int = 1500  # about what a real shuffler takes, so people see it happen
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.inputs = SimulatedTableInputs(self.config.table.seats)
        # With a shoe, the cards go round: the shuffler mixes the deck the dealer collected,
        # the shoe deals the order it produced (card_flow.py).
        self.flow = (
            None
            if self.config.shoe is None
            else CardFlow(self.config.shuffler.decks, plan_for=self.plan_for)
        )
        self.shuffler = ShufflerSimulator(shuffle_ms=self.shuffle_ms, rng=self.rng, flow=self.flow)
        self.shoe: ShoeSimulator | None = None
        if self.config.shoe is not None:
            if self.config.shoe.port.startswith("usb:"):
                raise ValueError(
                    f'shoe.port "{self.config.shoe.port}": a USB shoe cannot be simulated '
                    'for a daemon in another process; write shoe.port = "socket://HOST:PORT" '
                    "or a path for a pseudo-terminal (the CDC-ACM variant)"
                )
            self.shoe = ShoeSimulator(card_ms=40, rng=self.rng, flow=self.flow)
            self.shoe.refill = True  # the shuffler feeds it: it never runs empty by itself
        self._servers: list[asyncio.Server] = []
        self._made: list[OwnedPath] = []  # removed on close, unless another has replaced them

    def plan_for(self, stacks: tuple[int, ...]) -> DealPlan | None:
        """The round's whole plan from the stacks the shoe was asked for: the players are
        seats 1 to N (the pickup needs only their order), N the one whose stacks match."""
        game = self.config.game.table_game()
        for players in range(1, self.config.table.seats + 1):
            plan = game.deal_plan(list(range(1, players + 1)))
            if tuple(s.cards for s in plan.steps if s.by_shoe) == stacks:
                return plan
        return None

    def _devices(self) -> dict[str, tuple[SimulatedDevice, DeviceSection]]:
        found: dict[str, tuple[SimulatedDevice, DeviceSection]] = {
            "shuffler": (self.shuffler, self.config.shuffler)
        }
        if self.shoe is not None and self.config.shoe is not None:
            found["shoe"] = (self.shoe, self.config.shoe)
        return found

    async def start(self) -> list[str]:
        """Start every device; one line per device saying where the daemon finds it."""
        socket = self.config.simulator_socket
        self._servers.append(await self.inputs.serve(socket))
        self._made.append(OwnedPath.created(socket))
        where = [f'seat sensors, lamps, lock-out: {socket} (gpio.backend = "mock")']
        for name, (device, section) in self._devices().items():
            port = section.port
            serial = device.identity.serial_number
            if port.startswith("socket://"):
                host, _, tcp_port = port.removeprefix("socket://").rpartition(":")
                server = await device.serve_tcp(host or "127.0.0.1", int(tcp_port))
                self._servers.append(server)
                where.append(f"{name}: {port} (serial {serial})")
            else:
                pty = device.open_pty()
                self._made.append(OwnedPath.created(_link(name, Path(port), pty)))
                where.append(f"{name}: {port} -> {pty} (serial {serial})")
        return where

    def close(self) -> None:
        for server in self._servers:
            server.close()
        for device, _ in self._devices().values():
            device.close()
        for made in self._made:
            made.remove()

    # --- what a person does, typed on the simulator's terminal --------------------------

    def command(self, line: str) -> str:
        """Carry out one typed command; the reply says what happened (ValueError: bad input)."""
        words = line.split()
        if not words:
            return ""
        verb, args = words[0].lower(), words[1:]
        action = self._verbs().get(verb)
        if action is None:
            raise ValueError(f"unknown command {verb!r}; type help")
        usage, run = action
        try:
            return run(*args)
        except TypeError:
            raise ValueError(f"usage: {usage}") from None

    def _verbs(self) -> dict[str, tuple[str, Callable[..., str]]]:
        return {
            "help": ("help", self._help),
            "place": ("place SEAT [SEAT...]", self._place),
            "remove": ("remove SEAT [SEAT...]", self._remove),
            "bounce": ("bounce SEAT", self._bounce),
            "press": ("press", self._press),
            "hold": ("hold", self._hold),
            "release": ("release", self._release),
            "lamps": ("lamps", self._lamps),
            "jam": ("jam", self._jam),
            "incomplete": ("incomplete", self._incomplete),
            "stop": ("stop", self._stop),
            "door": ("door", self._door),
            "miscount": ("miscount", self._miscount),
            "mixing": (
                "mixing HOW, HOW one of:\n    " + "\n    ".join(MIXINGS),
                self._mixing,
            ),
            "full-deck": ("full-deck", self._full_deck),
            "drop-edges": ("drop-edges N", self._drop_edges),
            "shoe": (
                "shoe FAULT [N], FAULT one of:\n    " + "\n    ".join(SHOE_FAULTS),
                self._shoe_fault,
            ),
            "reboot": ("reboot shuffler|shoe", self._reboot),
            "swap": ("swap shuffler|shoe SERIAL (another device is connected)", self._swap),
            "unplug": ("unplug gpio|shuffler|shoe", self._unplug),
            "plug": ("plug gpio|shuffler|shoe", self._plug),
        }

    def _help(self) -> str:
        return "commands:\n  " + "\n  ".join(usage for usage, _ in self._verbs().values())

    def _seats(self, args: tuple[str, ...]) -> list[int]:
        """Every seat named, each once and within the table's, before any chip moves."""
        if not args:
            raise TypeError
        limit = Limit(1, self.inputs.seats, "table.seats in the config")
        seats = [limit.whole(a, "a seat") for a in args]
        for seat in seats:
            if seats.count(seat) > 1:
                raise ValueError(f"seat {seat} is named twice (one chip per seat)")
        return seats

    def _place(self, *args: str) -> str:
        seats = self._seats(args)
        for seat in seats:
            self.inputs.place_chip(seat)
        return f"chip on seat {', '.join(map(str, seats))}"

    def _remove(self, *args: str) -> str:
        seats = self._seats(args)
        for seat in seats:
            self.inputs.remove_chip(seat)
        return f"chip off seat {', '.join(map(str, seats))}"

    def _bounce(self, seat: str) -> str:
        (number,) = self._seats((seat,))
        self.inputs.bounce_chip(number)
        return f"a chip bounced on seat {number} and rolled off"

    def _press(self) -> str:
        self.inputs.press_lockout()
        return "lock-out button pressed: no more bets"

    def _hold(self) -> str:
        self.inputs.hold_lockout()
        return "lock-out button held down (stuck): release to let it go"

    def _release(self) -> str:
        self.inputs.release_lockout()
        return "lock-out button released"

    def _lamps(self) -> str:
        lit = [str(seat) for seat, on in self.inputs.lamps.items() if on]
        return "lamps lit: " + (", ".join(lit) or "none")

    def _jam(self) -> str:
        self.shuffler.knobs.jam_next_shuffle = True
        return "the shuffler jams on its next shuffle"

    def _incomplete(self) -> str:
        self.shuffler.knobs.incomplete_next_shuffle = True
        return "the shuffler stops its next shuffle half-way"

    def _stop(self) -> str:
        self.shuffler.knobs.stop_next_shuffle = True
        return "the shuffler stops in the middle of its next shuffle"

    def _door(self) -> str:
        self.shuffler.fail(FaultCode.DOOR_OPEN)
        return "the shuffler's door is open: it faults now"

    def _miscount(self) -> str:
        card = self.shuffler.remove_card()
        left = len(self.shuffler.deck) - (self.shuffler.lost is not None)
        return f"{card} fell on the floor: the next count is {left}"

    def _mixing(self, *words: str) -> str:
        self.shuffler.mixing = Mixing.parse(list(words))
        return f"the shuffler mixes from its next shuffle: {self.shuffler.mixing}"

    def _full_deck(self) -> str:
        self.shuffler.load_full_deck()
        return "a new 52-card deck is in the shuffler"

    def _drop_edges(self, count: str) -> str:
        self.inputs.drop_edges = DROPPED_EDGES.whole(count, "drop-edges N")
        if not self.inputs.drop_edges:
            return "no sensor edge will be lost"
        return (
            f"the next {self.inputs.drop_edges} sensor edges are lost "
            "(the daemon sees a sequence gap)"
        )

    def set_serial(self, device: str, serial: str) -> None:
        """Start with another unit of the model (`simulate table --shoe-serial X`)."""
        sim = self._device(device)[0]
        sim.identity = Identity(sim.identity.model, serial, sim.identity.firmware)

    def _device(self, name: str) -> tuple[SimulatedDevice, DeviceSection]:
        found = self._devices().get(name)
        if found is None:
            if name == "shoe":
                raise ValueError("this table has no shoe ([shoe] in the config)")
            raise TypeError
        return found

    def _unplug(self, device: str) -> str:
        if device == "gpio":
            self.inputs.unplug()
        else:
            self._device(device)[0].line.drop = UNPLUGGED_REPLIES
        return f"{device} cable pulled"

    def _plug(self, device: str) -> str:
        if device == "gpio":
            self.inputs.plug()
        else:
            self._device(device)[0].line.drop = 0
        return f"{device} cable plugged in"

    def _reboot(self, device: str) -> str:
        self._device(device)[0].reboot()
        return f"the {device} rebooted (a power cycle: a new boot id, its events lost)"

    def _swap(self, device: str, serial: str) -> str:
        """Another unit of the same model is connected in its place: the old one's cable is
        pulled (the daemon's connection ends) and the new one, freshly booted, is plugged in
        where the config says (a new pseudo-terminal behind the same link, or the same TCP
        port); the daemon reads its identity when it reconnects."""
        sim, section = self._device(device)
        old = sim.identity
        if serial == old.serial_number:
            raise ValueError(f"the {device} connected already has serial {serial}")
        if not 1 <= len(serial) <= 32 or not serial.isprintable() or " " in serial:
            raise ValueError("a serial number is 1 to 32 printable characters, no spaces")
        sim.identity = Identity(old.model, serial, old.firmware)
        sim.reboot()
        if section.port.startswith("socket://"):
            sim.hang_up()
        else:
            sim.close()
            self._made.append(OwnedPath.created(_link(device, Path(section.port), sim.open_pty())))
        return (
            f"{device} {old.serial_number} unplugged, {device} {serial} connected in its place; "
            f"play is blocked until: tablectl devices accept {device} {serial} --by ID"
        )

    def _shoe_fault(self, fault: str, arg: str | None = None, *more: str) -> str:
        shoe = self._device("shoe")[0]
        assert isinstance(shoe, ShoeSimulator)
        if fault == "deck":
            return self._stack_deck(shoe, [c for c in (arg, *more) if c])
        if fault not in SHOE_NUMBERED and fault not in SHOE_PLAIN:
            raise ValueError(f"unknown shoe fault {fault!r}; type help")
        if more or (arg is not None and fault in SHOE_PLAIN):
            raise TypeError
        limit = SHOE_NUMBERED.get(fault, DECK_CARD)
        n = limit.whole(str(limit.low) if arg is None else arg, f"shoe {fault} N")
        k = shoe.knobs
        at = f"at card {n} of the next deal"
        match fault:
            case "jam":
                k.jam_at = n
                return f"the shoe jams {at}"
            case "stop":
                k.stop_at = n
                return f"the shoe stops dealing {at}"
            case "short":
                k.short_by = n
                return f"the shoe reports the next deal complete {n} card(s) early"
            case "face-up":
                k.face_up_at.add(n)
                return f"a card is found face up {at}"
            case "unread" | "duplicate" | "foreign":
                getattr(k, f"{fault}_at").add(n)
                return f"the shoe reads a {fault} card {at}"
            case "extra":
                k.extra_card_in_stack = n
                return f"stack {n} of the next deal gets one card too many"
            case "empty":
                shoe.fail(ShoeFaultCode.EMPTY)
                return "the shoe is out of cards: it faults now"
            case "gap":
                shoe.lies.gap_next_event = True
                return "the shoe skips an event id (an event the daemon can never get)"
            case "clear":
                shoe.clear()
                return "the dealer cleared the shoe: idle, a new deck inside"
        raise AssertionError(fault)  # every name in SHOE_NUMBERED and SHOE_PLAIN has its case

    def _stack_deck(self, shoe: ShoeSimulator, groups: list[str]) -> str:
        if not groups:
            raise TypeError
        try:
            top = [card for group in groups for card in parse_cards(group)]
        except ValueError as exc:
            raise ValueError(f"deck: {exc}") from None
        if len(set(top)) != len(top):
            raise ValueError("deck: a card is named twice")
        shoe.stack(top)
        return f"the shoe deals next: {' '.join(str(c) for c in top)}, then a shuffled rest"


def _link(name: str, path: Path, target: str) -> Path:
    """Make the configured serial port path lead to the simulator's pseudo-terminal."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        raise ValueError(f"{name}.port {path} exists and is not a link: is a {name} there?")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    return path

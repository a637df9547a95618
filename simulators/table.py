"""A whole simulated table for a daemon in another process: `tablectl simulate table`.

Every device simulator of the table runs here, where the table's config says the daemon
will look for it: the seat sensors, lamps and lock-out button on the mock backend's Unix
socket (`gpio.simulator_socket`), the shuffler on `shuffler.port` (socket://HOST:PORT, or
a pseudo-terminal linked at that path). A technician or trainer drives it by typing
commands (`place 3`, `press`, `jam`, `unplug shuffler`, ...); the daemon runs as in
production with `gpio.backend = "mock"`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tablectl.simulators.shuffler import ShufflerSimulator
from tablectl.simulators.table_inputs import SimulatedTableInputs

from tablectl.config import TableConfig

UNPLUGGED_REPLIES = 1 << 30  # a shuffler whose cable is pulled answers nothing


@dataclass
class SimulatedTable:
    config: TableConfig
    shuffle_ms: int = 1500  # about what a real shuffler takes, so people see it happen
    rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self.inputs = SimulatedTableInputs(self.config.table.seats)
        self.shuffler = ShufflerSimulator(shuffle_ms=self.shuffle_ms, rng=self.rng)
        self._servers: list[asyncio.Server] = []
        self._link: Path | None = None

    async def start(self) -> list[str]:
        """Start every device; one line per device saying where the daemon finds it."""
        socket = self.config.simulator_socket
        self._servers.append(await self.inputs.serve(socket))
        where = [f'seat sensors, lamps, lock-out: {socket} (gpio.backend = "mock")']
        port = self.config.shuffler.port
        if port.startswith("socket://"):
            host, _, tcp_port = port.removeprefix("socket://").rpartition(":")
            self._servers.append(await self.shuffler.serve_tcp(host or "127.0.0.1", int(tcp_port)))
            where.append(f"shuffler: {port}")
        else:
            pty = self.shuffler.open_pty()
            self._link = _link(Path(port), pty)
            where.append(f"shuffler: {port} -> {pty}")
        # The dealing shoe's simulator (issue 7, `tablectl simulate shoe`) starts here too,
        # at the place the table's config names for the shoe, once that simulator exists.
        return where

    def close(self) -> None:
        for server in self._servers:
            server.close()
        self.shuffler.close()
        for path in (self._link, self.config.simulator_socket):
            if path is not None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

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
            "miscount": ("miscount", self._miscount),
            "full-deck": ("full-deck", self._full_deck),
            "drop-edges": ("drop-edges N", self._drop_edges),
            "unplug": ("unplug gpio|shuffler", self._unplug),
            "plug": ("plug gpio|shuffler", self._plug),
        }

    def _help(self) -> str:
        return "commands: " + "; ".join(usage for usage, _ in self._verbs().values())

    def _seats(self, args: tuple[str, ...]) -> list[int]:
        if not args:
            raise TypeError
        try:
            return [int(a) for a in args]
        except ValueError:
            raise ValueError(f"seats are numbers 1 to {self.inputs.seats}") from None

    def _place(self, *args: str) -> str:
        for seat in self._seats(args):
            self.inputs.place_chip(seat)
        return f"chip on seat {', '.join(args)}"

    def _remove(self, *args: str) -> str:
        for seat in self._seats(args):
            self.inputs.remove_chip(seat)
        return f"chip off seat {', '.join(args)}"

    def _bounce(self, seat: str) -> str:
        self.inputs.bounce_chip(self._seats((seat,))[0])
        return f"a chip bounced on seat {seat} and rolled off"

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

    def _miscount(self) -> str:
        card = self.shuffler.remove_card()
        return f"{card} fell on the floor: the next count is {len(self.shuffler.deck)}"

    def _full_deck(self) -> str:
        self.shuffler.load_full_deck()
        return "a new 52-card deck is in the shuffler"

    def _drop_edges(self, count: str) -> str:
        self.inputs.drop_edges = int(count)
        return f"the next {count} sensor edges are lost (the daemon sees a sequence gap)"

    def _unplug(self, device: str) -> str:
        if device == "gpio":
            self.inputs.unplug()
        elif device == "shuffler":
            self.shuffler.line.drop = UNPLUGGED_REPLIES
        else:
            raise TypeError
        return f"{device} cable pulled"

    def _plug(self, device: str) -> str:
        if device == "gpio":
            self.inputs.plug()
        elif device == "shuffler":
            self.shuffler.line.drop = 0
        else:
            raise TypeError
        return f"{device} cable plugged in"


def _link(path: Path, target: str) -> Path:
    """Make the configured serial port path lead to the simulator's pseudo-terminal."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        raise ValueError(f"shuffler.port {path} exists and is not a link: is a shuffler there?")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    return path

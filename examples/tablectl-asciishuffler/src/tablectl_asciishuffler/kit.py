"""The simulator as tablectl's conformance kit drives it (tablectl.drivers.api.ShufflerSimulator):
`Driver.simulator` names `shuffler` here."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from tablectl.drivers.api import ShufflerDriver

from tablectl_asciishuffler import protocol as p
from tablectl_asciishuffler.driver import AsciiShuffler
from tablectl_asciishuffler.simulator import AsciiShufflerSimulator

VERBS = {"identify": "HI", "status": "ST", "shuffle": "SH", "count": "CT"}


class KitSimulator:
    def __init__(self) -> None:
        self.sim = AsciiShufflerSimulator(shuffle_ms=30, rng=random.Random(28))

    async def start(self) -> dict[str, Any]:
        return {"port": await self.sim.start(), "poll_interval_ms": 100}

    def close(self) -> None:
        self.sim.close()

    def idle(self) -> bool:
        return self.sim.state != "busy" and not self.sim.events

    def next_counts(self, counts: Sequence[int]) -> None:
        self.sim.counts = list(counts)

    def jam_next(self, *, by_event: bool) -> None:
        if by_event:
            self.sim.jam_next = True
        else:
            self.sim.jam_status_only = True

    def restate_last(self) -> None:
        self.sim.conflict()

    def reboot(self, *, keep_boot_id: bool = False) -> None:
        self.sim.reboot(keep_boot=keep_boot_id)

    def silent(self, on: bool) -> None:
        self.sim.silent = on

    def garbage(self, on: bool) -> None:
        self.sim.garbage = on

    def close_on(self, command: str) -> None:
        self.sim.close_on = VERBS[command]

    def swap(self, serial: str) -> None:
        self.sim.serial = serial
        self.sim.reboot()
        self.sim.drop_connections()

    def wind_seq(self, driver: ShufflerDriver) -> None:
        assert isinstance(driver, AsciiShuffler)
        driver.wind_seq(p.SEQ_MAX - 5)


def shuffler() -> KitSimulator:
    return KitSimulator()

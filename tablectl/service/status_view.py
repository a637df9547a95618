"""What the outside sees of a running table: the birth message's snapshot, the faults, the
headline (systemd's STATUS=, the links `watch` hears of) and the whole `status` that
`tablectl status` and `devices` print.

The daemon builds one `StatusView` over itself; this module reads the parts it wired and
changes none of them.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Protocol

from tablectl.core.effects import Lamp
from tablectl.core.table import Phase, TableState
from tablectl.mqtt.contract import MeterValue, ProgressiveLinkState, TableSnapshot, TableWager
from tablectl.service import deck_status
from tablectl.service.faults import message_too_large, table_faults
from tablectl.service.shuffle_monitor import faults as shuffle_faults
from tablectl.status import (
    KNOWN_DEVICES,
    Dealing,
    DeviceAcceptance,
    DeviceStatus,
    FaultView,
    GpioStatus,
    Headline,
    Hit,
    JournalStats,
    MeterStatus,
    PaceStatus,
    Status,
)
from tablectl.util import sdnotify

if TYPE_CHECKING:
    from tablectl.drivers.gpio.table_io import TableGpio

    from tablectl.config import TableConfig
    from tablectl.core.events import TableRules
    from tablectl.core.games.base import TableGame
    from tablectl.mqtt.relay import Relay
    from tablectl.service.devices import DeviceSupervisor
    from tablectl.service.link import TableLink
    from tablectl.service.pace import PaceReporter
    from tablectl.service.watch import Hub
    from tablectl.store.journal import JournalReader, Store


LINK_CHECK_S = 1.0  # how soon systemd's STATUS= and watchers hear of a change


class ViewedTable(Protocol):
    """The parts of a running table the view reads (the daemon is one)."""

    @property
    def config(self) -> TableConfig: ...
    @property
    def rules(self) -> TableRules: ...
    @property
    def game(self) -> TableGame: ...
    @property
    def boot_id(self) -> str: ...
    @property
    def started_at(self) -> float: ...
    @property
    def state(self) -> TableState | None: ...
    @property
    def store(self) -> Store | None: ...
    @property
    def reader(self) -> JournalReader | None: ...
    @property
    def gpio(self) -> TableGpio | None: ...
    @property
    def relay(self) -> Relay: ...
    @property
    def link(self) -> TableLink | None: ...
    @property
    def pace(self) -> PaceReporter | None: ...
    @property
    def supervisor(self) -> DeviceSupervisor: ...
    def wall_clock_ms(self) -> int: ...


class StatusView:
    """Assembles, on demand, what a running table shows; holds nothing of its own."""

    def __init__(self, table: ViewedTable) -> None:
        self._table = table

    def snapshot(self) -> TableSnapshot:
        """The table as a birth message tells it (the relay adds the delivery fields)."""
        t = self._table
        assert t.state is not None and t.reader is not None
        cfg = t.config
        meters = []
        # A linked meter is the link's: its amount is on the link's state topic, not here.
        if t.state.meter is not None and t.state.meter.kind == "local":
            meter_id = t.state.meter.meter_id
            last = t.reader.last_meter_row(meter_id)
            if last is not None:  # the journal's reading, with the row that set it
                seq, ts, cents = last
                meters.append(MeterValue(meter_id=meter_id, amount_cents=cents, seq=seq, ts=ts))
            else:  # no row has changed it yet: the initial amount
                meters.append(
                    MeterValue(meter_id=meter_id, amount_cents=t.state.meter.cents, seq=0, ts=None)
                )
        return TableSnapshot(
            site=cfg.table.site_id,
            table=cfg.table.table_id,
            game=cfg.game,
            boot_id=t.boot_id,
            seats=cfg.table.seats,
            table_wager=TableWager(
                name=t.game.table_wager.name,
                title=t.game.table_wager.title,
                wager_cents=t.game.wager_cents,
            ),
            meters=meters,
            hits_pending=list(t.state.hits_pending),
            hit_history=list(t.state.hit_history),
        )

    def progressive_link(self) -> ProgressiveLinkState | None:
        """A linked table's LINK DOWN (or up), as health and status say it."""
        t = self._table
        if t.link is None or t.state is None:
            return None
        down = t.state.link_down
        return ProgressiveLinkState(
            link_id=t.link.link_id, link="up" if down is None else "down", reason=down
        )

    def faults(self) -> list[FaultView]:
        """What stands in the way, each with since when and what clears it."""
        t = self._table
        assert t.state is not None and t.reader is not None
        found = table_faults(
            t.state,
            shoe=t.rules.shoe,
            devices={name: DeviceStatus.of(h) for name, h in t.supervisor.health().items()},
            broker=t.relay.link(),
            journal=t.reader.last_row,
            awaited=t.supervisor.recovery.awaited(),
            event_id_max=t.supervisor.event_id_max,
        )
        found += shuffle_faults(t.state, t.reader.last_row)
        found += [
            message_too_large(m.message, m.size, m.limit)
            for m in t.relay.publishing.too_large.values()
        ]
        if t.rules.deck is None:
            return found
        deck_rules, now = t.rules.deck, t.wall_clock_ms()
        held = deck_status.deck_faults(deck_rules, t.game, t.state, now)
        return [*deck_status.with_deck_ids(found), *held]

    def headline(self) -> Headline:
        """status().headline() without the rest of a status: each second, on the loop."""
        t = self._table
        assert t.state is not None
        health = t.supervisor.health()
        links: dict[str, str] = {
            name: DeviceStatus.of(health[name]).link for name in KNOWN_DEVICES if name in health
        }
        links["gpio"] = "fault" if t.state.gpio_fault else "up"
        links["broker"] = "connected" if t.relay.connected else "disconnected"
        return Headline(
            phase=t.state.phase,
            round_id=t.state.round_id,
            links=links,
            link_down=None if t.link is None else t.state.link_down,
            faults=self.faults(),
        )

    async def report_links(self, hub: Hub) -> None:
        """STATUS= for systemd whenever its line changes (phase, a link, a block), and a
        line for watchers whenever a device or the broker link changes."""
        headline = self.headline()
        line, links = headline.status_line(), headline.links
        while True:
            await asyncio.sleep(LINK_CHECK_S)
            headline = self.headline()
            if (now := headline.status_line()) != line:
                line = now
                sdnotify.notify("STATUS=" + line)
            if headline.links != links:
                links = headline.links
                hub.publish({"event": "links", "links": links})

    def _device_status(self, name: str, standing: str | None) -> DeviceStatus | None:
        """A device's link and its last fault: the one standing, else the last journaled."""
        t = self._table
        device = t.supervisor.drivers.get(name)
        if device is None:
            return None
        assert t.reader is not None
        last = standing
        if last is None:
            row = t.reader.last_row((f"{name}.fault",), {})
            last = None if row is None else f"{row[2].get('code')} (cleared; seq {row[0]})"
        return DeviceStatus.of(device.health(), last)

    def status(self) -> Status:
        t = self._table
        assert t.state is not None and t.store is not None and t.gpio is not None
        s = t.state
        return Status(
            table=t.config.table.table_id,
            site=t.config.table.site_id,
            game=t.game.name,
            boot_id=t.boot_id,
            uptime_s=round(time.time() - t.started_at, 1),
            phase=s.phase,
            accepting_wagers=s.accepting_wagers,
            round_id=s.round_id,
            table_wager=t.game.table_wager.name,
            wagers={str(k): v for k, v in sorted(s.wagers.items())},
            undecided_seats=list(s.undecided),
            count_final=s.counted or s.phase is not Phase.LOCKED,
            seat_lamps=[Lamp(lamp) for lamp in t.gpio.lamps()],
            meter=None
            if s.meter is None
            else MeterStatus(meter_id=s.meter.meter_id, cents=s.meter.cents, carry=s.meter.carry),
            hits_pending=[Hit.of(h) for h in s.hits_pending],
            hit_history=[Hit.of(h) for h in s.hit_history],
            deck_ready=s.deck_ready,
            shuffle_requested=s.shuffle_requested,
            shuffler_fault=s.shuffler_fault,
            shoe_fault=s.shoe_fault,
            gpio_fault=s.gpio_fault,
            lockout_held=s.lockout_held,
            sensor_test=s.sensor_test,
            gpio=GpioStatus.model_validate(t.gpio.status()),
            blocked=s.blocked,
            dealing=None
            if s.deal is None
            else Dealing(
                seats=list(s.deal.seats),
                stacks=list(s.deal.stacks),
                cards_read=len(s.deal.cards),
                complete=s.deal.complete,
            ),
            shoe_out_of_order=s.shoe_out_of_order,
            device_acceptance={
                name: DeviceAcceptance(accepted=serial, waiting=s.devices_pending.get(name))
                for name, serial in sorted(s.devices.items())
            },
            counters=s.counters.model_dump(),
            journal=JournalStats(
                last_seq=t.store.last_seq,
                commits=t.store.commits,
                steps_committed=t.store.steps_committed,
            ),
            shuffler=self._device_status("shuffler", s.shuffler_fault or self._shuffle_suspect()),
            shoe=self._device_status("shoe", s.shoe_fault),
            mqtt=t.relay.stats(),
            faults=self.faults(),
            waits=t.supervisor.waits.views(s, t.supervisor.health()),
            decks=None
            if t.rules.deck is None
            else deck_status.view(t.rules.deck, s, t.wall_clock_ms()),
            pace=self._pace_status(),
            link=None if t.link is None else t.link.view(s),
        )

    def _shuffle_suspect(self) -> str | None:
        """The SHUFFLE SUSPECT standing, as the shuffler's last fault in `devices`."""
        state = self._table.state
        suspect = None if state is None else state.shuffle.suspect
        if suspect is None:
            return None
        return f"shuffle-suspect ({suspect.test}, p = {suspect.p_value:.2g})"

    def _pace_status(self) -> PaceStatus | None:
        """The rolling period and the shift now running, as last computed (service/pace.py)."""
        reporter = self._table.pace
        pace = None if reporter is None else reporter.latest
        if pace is None:
            return None
        shift = pace.shifts[-1] if pace.shifts else None
        return PaceStatus(
            ts=pace.ts,
            rolling=pace.rolling,
            shift=None if shift is None else shift.shift,
            shift_figures=None if shift is None else shift.figures,
        )

"""Journal rows larger than the broker accepts: a placeholder goes out in their place.

A broker closes the connection on a publish past the Maximum Packet Size of its CONNACK
(MQTT 5.0, 3.2.2.3.6); sending the row anyway would reconnect and send it again for ever,
and every row behind it would wait. The client refuses such a publish before anything is
sent (`PacketTooLarge`); the relay then sends, under the row's own seq, event_id, ts and
boot_id, a small `delivery.row_withheld` event naming the row's type and size
(`contract.RowWithheldEvent`), so a backend's ack moves past the seq knowing exactly what it
lacks, and the rows behind it flow. The row stays in the journal, and the relay reports a
delivery fault naming its seq (the core journals it, status shows it) that stands while the
row has not gone out whole. On every connect, rows withheld by this run that the broker
now takes (its limit raised) go out whole, with the same seq: a backend replaces its
placeholder with them (docs/mqtt.md, Delivery).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tablectl.core.effects import RECORD_TYPES
from tablectl.mqtt.client import PacketTooLarge, publish_size
from tablectl.mqtt.contract import ROW_WITHHELD, RowWithheld, envelope_json

# The widest values a placeholder can carry: a UUIDv7 event id, a journal timestamp to the
# millisecond, a seq and a row size of 19 digits.
_WIDEST_ID = "0" * 36
_WIDEST_TS = "2026-01-01T00:00:00.000+00:00"
_WIDEST_NUMBER = 10**18


@dataclass(frozen=True)
class Withheld:
    seq: int
    type: str
    packet_bytes: int
    broker_max_bytes: int

    @property
    def fault(self) -> str:
        """The delivery fault it is, the same text each time (journaled once)."""
        return (
            f"journal row {self.seq} ({self.type}, {self.packet_bytes} bytes) is larger than "
            f"the broker accepts ({self.broker_max_bytes} bytes): the backends were sent a "
            f"{ROW_WITHHELD} placeholder for seq {self.seq}; it goes out whole once the "
            "broker's limit allows"
        )


class WithheldRows:
    """The rows this run of the daemon sent as placeholders, until each goes out whole."""

    def __init__(self) -> None:
        self.rows: dict[int, Withheld] = {}
        self.placeholders = 0  # placeholders sent (a row sent again is withheld again)

    def add(self, seq: int, type_: str, refused: PacketTooLarge) -> Withheld:
        withheld = Withheld(seq, type_, refused.size, refused.limit)
        self.rows[seq] = withheld
        self.placeholders += 1
        return withheld

    def delivered(self, seq: int) -> None:
        """The broker acknowledged the row whole."""
        self.rows.pop(seq, None)

    def fitting(self, limit: int | None) -> list[int]:
        """The seqs the broker now takes whole (its Maximum Packet Size is `limit`)."""
        return sorted(s for s, w in self.rows.items() if limit is None or w.packet_bytes <= limit)

    def fault(self) -> str | None:
        """The delivery fault while a row is withheld: the latest one's (each new one is a
        new fault, journaled with its seq)."""
        return self.rows[max(self.rows)].fault if self.rows else None


@dataclass(frozen=True)
class _Identity:
    event_id: str
    boot_id: str
    ts: str


def largest_placeholder(topic: str, *, site: str, table: str, boot_id: str, limit: int) -> int:
    """The bytes of the largest placeholder this table can have to send on `topic` to a
    broker whose limit is `limit`: the longest record type's, with the widest ids, time,
    seq and size. A broker that cannot take it cannot be given every row (relay.py)."""
    widest = max(RECORD_TYPES, key=len)
    withheld = Withheld(_WIDEST_NUMBER, widest, _WIDEST_NUMBER, limit)
    row = _Identity(event_id=_WIDEST_ID, boot_id=boot_id, ts=_WIDEST_TS)
    payload = placeholder_json(withheld, row, site=site, table=table, replay=False)
    return publish_size(topic, payload)


class RowIdentity(Protocol):
    @property
    def event_id(self) -> str: ...
    @property
    def boot_id(self) -> str: ...
    @property
    def ts(self) -> str: ...


def placeholder_json(
    withheld: Withheld, row: RowIdentity, *, site: str, table: str, replay: bool
) -> bytes:
    """The `evt` payload sent in the row's place: its envelope, with what was withheld."""
    data = RowWithheld(
        withheld_type=withheld.type,
        packet_bytes=withheld.packet_bytes,
        broker_max_bytes=withheld.broker_max_bytes,
    )
    return envelope_json(
        type_=ROW_WITHHELD,
        event_id=row.event_id,
        site=site,
        table=table,
        boot_id=row.boot_id,
        seq=withheld.seq,
        ts=row.ts,
        replay=replay,
        data_json=data.model_dump_json(),
    )

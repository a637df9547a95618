"""The MQTT contract as code: topics, every message as a typed model, and its AsyncAPI document.

What the table publishes and what it accepts are the models below; the event payloads are the
core's journal records (`core/effects.py`). `asyncapi_document()` builds the AsyncAPI 3
document committed as docs/asyncapi.json (`tablectl mqtt schema`), and a test fails when the
two drift apart. Inbound messages are parsed with these models only, so a payload that is
not what the contract says is refused before anything acts on it.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, create_model
from pydantic.json_schema import models_json_schema

from tablectl.core.effects import RECORD_TYPES, Record
from tablectl.core.games import GameConfig
from tablectl.core.table import HitEntry
from tablectl.mqtt.client import MAX_PACKET_BYTES
from tablectl.mqtt.message import ID_PATTERN as ID_PATTERN
from tablectl.mqtt.message import Message as Message
from tablectl.records.pace import Pace

VERSION = 1
TOPIC_PREFIX = f"tablectl/v{VERSION}"
MAX_INBOUND_BYTES = 4096  # every inbound message is a few dozen bytes; more is refused unread
CommandName = Literal["replay", "resync"]
COMMANDS: tuple[str, ...] = ("replay", "resync")


def topic_root(site: str, table: str) -> str:
    return f"{TOPIC_PREFIX}/{site}/{table}"


# --- table -> backend ----------------------------------------------------------------------


class Status(Message):
    """Retained; the broker publishes the last-will (offline) if the table goes silently."""

    status: Literal["online", "offline"]
    boot_id: str


class MeterValue(Message):
    """Retained per meter, for signs and late joiners; money is never derived from it."""

    meter_id: str
    amount_cents: int
    seq: int = Field(description="the journal row that left the meter at this amount (0: none)")
    ts: str | None = Field(description="that row's time (UTC, ISO 8601, milliseconds)")


class TableWager(Message):
    name: str
    title: str
    wager_cents: int


class TableSnapshot(Message):
    """What the daemon knows of its table for a birth message."""

    site: str
    table: str
    game: GameConfig
    boot_id: str
    seats: int
    table_wager: TableWager
    meters: list[MeterValue]
    hits_pending: list[HitEntry]
    hit_history: list[HitEntry] = Field(description="the last 25 hits, newest first")


class Birth(TableSnapshot):
    """Retained; sent on every connect before `online`: all a late-joining backend needs."""

    v: Literal[1] = 1
    last_seq: int = Field(description="the last durable journal row")
    acked: dict[str, int] = Field(description="each registered backend's acknowledged seq")


class BacklogAlarm(Message):
    backend_id: str
    behind_rows: int
    oldest_unacked_ts: str | None


class ShufflerState(Message):
    link: Literal["up", "down"]
    state: str | None


class ProgressiveLinkState(Message):
    """A linked table's progressive link: down locks the progressive out, not the game
    (5321.18(c), NJ 13:69E-1.39B(c); docs/linked-progressives.md)."""

    link_id: str
    link: Literal["up", "down"]
    reason: str | None = Field(default=None, description="why LINK DOWN")


class Health(Message):
    """Retained. Published when `shuffler` or `alarms` change, and every counters interval."""

    v: Literal[1] = 1
    boot_id: str
    ts: str
    shuffler: ShufflerState
    alarms: list[BacklogAlarm] = Field(
        description="backends whose unacknowledged rows passed the retention bound"
    )
    counters: dict[str, dict[str, int]]
    progressive_link: ProgressiveLinkState | None = Field(
        default=None, description="a linked table's progressive link; null: not linked"
    )


class ReplyData(Message):
    last_seq: int
    from_seq: int | None = None


class Reply(Message):
    """On res/{command}, for every command message (an error reply needs a correlation id)."""

    correlation_id: str | None
    status: Literal["ok", "error"]
    data: ReplyData | None
    error: str | None


# --- backend -> table ------------------------------------------------------------------------

CorrelationId = Annotated[str, Field(min_length=1, max_length=128)]


class Ack(Message):
    """Retained on ack/{backend_id}: every row through this seq is safely stored."""

    acked_through_seq: StrictInt = Field(ge=0)


class ReplayCommand(Message):
    from_seq: StrictInt = Field(ge=1)
    correlation_id: CorrelationId
    backend_id: Annotated[str, Field(pattern=ID_PATTERN)] | None = Field(
        default=None,
        description="the requesting backend (registered in the table's mqtt.backends): its "
        "replay is paced by its acknowledgements; without it, rows go out as fast as they can",
    )


class ResyncCommand(Message):
    correlation_id: CorrelationId


class Correlated(BaseModel):
    """Just the correlation id of a command that is otherwise malformed."""

    model_config = ConfigDict(extra="ignore")
    correlation_id: CorrelationId


COMMAND_MODELS: dict[str, type[ReplayCommand] | type[ResyncCommand]] = {
    "replay": ReplayCommand,
    "resync": ResyncCommand,
}


# --- the event envelope ---------------------------------------------------------------------


class Envelope(Message):
    v: Literal[1] = 1
    type: str
    event_id: str = Field(description="UUIDv7, the same on every delivery")
    site: str
    table: str
    boot_id: str = Field(description="the daemon run that journaled the row")
    seq: int = Field(ge=1, description="per table, from 1, never reused: deduplicate on it")
    ts: str
    replay: bool = Field(description="true when the row had been handed to a broker before")


def _event_model(record: type[Record]) -> type[Envelope]:
    name = record.__name__.removesuffix("Record") + "Event"
    model: type[Envelope] = create_model(
        name,
        __base__=Envelope,
        __doc__=f"An `evt` message of type {record.TYPE}.",
        type=(Literal[record.TYPE], ...),  # type: ignore[arg-type]
        data=(record, ...),
    )
    return model


@functools.cache
def event_models() -> dict[str, type[Envelope]]:
    """The `evt` message of each journal record type, by type. Made on first use, not at
    import: the relay sends the journal's own JSON (`envelope_json`) and never needs them, and
    building a model a record type is most of what importing this module costs the daemon's
    start (bench/startup.py); the AsyncAPI document and the tests use them."""
    return {name: _event_model(cls) for name, cls in sorted(RECORD_TYPES.items())}


ROW_WITHHELD = "delivery.row_withheld"
# The table's last-will waits this long for the connection to come back (MQTT 5 Will Delay
# Interval, and the session kept as long): a reconnect within it does not flap `status`.
WILL_DELAY_S = 5


class RowWithheld(Message):
    """In place of a journal row larger than the broker accepts (docs/mqtt.md, Delivery)."""

    withheld_type: str = Field(description="the type of the row withheld")
    packet_bytes: int = Field(ge=1, description="the size of its publish packet")
    broker_max_bytes: int = Field(
        ge=1, description="the broker's Maximum Packet Size (its CONNACK) when it was withheld"
    )


class RowWithheldEvent(Envelope):
    """An `evt` message in place of a journal row larger than the broker accepts: the row's
    own seq, event_id, ts and boot_id, and what was withheld. Not a journal record: the row
    stays in the table's journal, the table journals a `delivery.fault` naming its seq, and
    sends the row whole, with the same seq, once a broker takes it."""

    type: Literal["delivery.row_withheld"]
    data: RowWithheld


# A JSON string literal, escaped as pydantic's JSON escapes it (non-ASCII kept as UTF-8).
_json_string = json.JSONEncoder(ensure_ascii=False).encode


def envelope_json(
    *,
    type_: str,
    event_id: str,
    site: str,
    table: str,
    boot_id: str,
    seq: int,
    ts: str,
    replay: bool,
    data_json: str,
) -> bytes:
    """An `evt` payload, built from the journal's stored JSON without decoding it again.

    Field for field, byte for byte, what `Envelope` dumps with `data` after it (a test holds
    the two equal, and one validates the demo's stream against `event_models()[type_]`): put
    together as text, as the relay does for every row, rather than validated and dumped
    again by a model, since every value comes from the journal."""
    return (
        f'{{"v":1,"type":{_json_string(type_)},"event_id":{_json_string(event_id)},'
        f'"site":{_json_string(site)},"table":{_json_string(table)},'
        f'"boot_id":{_json_string(boot_id)},"seq":{int(seq)},"ts":{_json_string(ts)},'
        f'"replay":{"true" if replay else "false"},"data":{data_json}}}'
    ).encode()


# --- the AsyncAPI document ------------------------------------------------------------------

_PARAMS = {
    "site": {"description": "the site's id (table.site_id)"},
    "table": {"description": "the table's id (table.table_id)"},
}


def _channel(
    address: str, messages: dict[str, str], description: str, **params: str
) -> dict[str, Any]:
    return {
        "address": f"{TOPIC_PREFIX}/{{site}}/{{table}}/{address}",
        "description": description,
        "parameters": {**_PARAMS, **{k: {"description": v} for k, v in params.items()}},
        "messages": {k: {"$ref": f"#/components/messages/{ref}"} for k, ref in messages.items()},
    }


def _asyncapi_schema(schema: Any) -> Any:
    """pydantic's JSON Schema as AsyncAPI's schema dialect: `discriminator` is a property name."""
    if isinstance(schema, dict):
        out = {k: _asyncapi_schema(v) for k, v in schema.items()}
        if isinstance(out.get("discriminator"), dict):
            out["discriminator"] = out["discriminator"]["propertyName"]
        return out
    if isinstance(schema, list):
        return [_asyncapi_schema(v) for v in schema]
    return schema


def _evt_models() -> list[type[Envelope]]:
    """Every message of `evt`: one per journal record type, and the placeholder."""
    return [*event_models().values(), RowWithheldEvent]


def asyncapi_document() -> dict[str, Any]:
    """The contract as an AsyncAPI 3.0 document, every schema generated from the models."""
    plain: dict[str, type[BaseModel]] = {
        "Status": Status,
        "Birth": Birth,
        "MeterValue": MeterValue,
        "Health": Health,
        "Pace": Pace,
        "Reply": Reply,
        "Ack": Ack,
        "ReplayCommand": ReplayCommand,
        "ResyncCommand": ResyncCommand,
    }
    inbound = (Ack, ReplayCommand, ResyncCommand)
    # What the table sends is described as it serialises; what it accepts, as it validates.
    _, defs = models_json_schema(
        [(m, "validation" if m in inbound else "serialization") for m in plain.values()]
        + [(m, "serialization") for m in _evt_models()],
        ref_template="#/components/schemas/{model}",
    )
    schemas = _asyncapi_schema(defs["$defs"])
    messages: dict[str, Any] = {}
    for name, model in plain.items():
        messages[name] = {
            "name": name,
            "contentType": "application/json",
            "summary": (model.__doc__ or name).strip().splitlines()[0],
            "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
        }
    for type_, model in event_models().items():
        record = RECORD_TYPES[type_]
        messages[model.__name__] = {
            "name": type_,
            "contentType": "application/json",
            "summary": (record.__doc__ or f"The {type_} event.").strip().splitlines()[0],
            "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
        }
    messages[RowWithheldEvent.__name__] = {
        "name": ROW_WITHHELD,
        "contentType": "application/json",
        "summary": (RowWithheldEvent.__doc__ or "").strip().splitlines()[0],
        "payload": {"$ref": f"#/components/schemas/{RowWithheldEvent.__name__}"},
    }
    events = {m.__name__: m.__name__ for m in _evt_models()}
    channels = {
        name: _channel(
            spec.address,
            events if spec.messages == "events" else dict(spec.messages),
            spec.description + ("; retained" if spec.retain else "") + f"; QoS {spec.qos}",
            **dict(spec.params),
        )
        for name, spec in CHANNELS.items()
    }
    operations = {
        name: {
            "action": op.action,
            "channel": {"$ref": f"#/channels/{op.channel}"},
            "summary": op.summary,
            "bindings": {"mqtt": _mqtt_binding(CHANNELS[op.channel])},
        }
        for name, op in OPERATIONS.items()
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "tablectl table-game progressive contract",
            "version": f"{VERSION}.0.0",
            "description": (
                "What a tablectl table daemon publishes to progressive-system backends and "
                "what it accepts from them. Generated from tablectl/mqtt/contract.py and "
                "tablectl/core/effects.py by `tablectl mqtt schema`; see docs/mqtt.md."
            ),
        },
        "defaultContentType": "application/json",
        "servers": _servers(),
        "channels": channels,
        "operations": operations,
        "components": {
            "messages": messages,
            "schemas": schemas,
            "securitySchemes": {
                "tableCertificate": {
                    "type": "X509",
                    "description": "the table's client certificate (mqtt.cert_file, key_file), "
                    "its common name the table id: the shipped broker takes that name as the "
                    "username its ACL keys on (config/mosquitto/)",
                },
                "tablePassword": {
                    "type": "userPassword",
                    "description": "a username (the table id) and password (mqtt.username, "
                    "password), for a broker that checks passwords; the shipped one takes the "
                    "identity from the certificate instead",
                },
            },
        },
    }


MQTT_BINDING_VERSION = "0.2.0"


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """A topic below tablectl/v1/{site}/{table}/, and how it is published: the QoS and
    retain flag the relay uses and the AsyncAPI bindings state (docs/mqtt.md)."""

    address: str
    messages: tuple[tuple[str, str], ...] | Literal["events"]
    description: str
    qos: Literal[0, 1, 2]
    retain: bool
    params: tuple[tuple[str, str], ...] = ()


CHANNELS: dict[str, ChannelSpec] = {
    "status": ChannelSpec("status", (("status", "Status"),), "online/offline", 1, True),
    "birth": ChannelSpec("birth", (("birth", "Birth"),), "the full snapshot", 1, True),
    "evt": ChannelSpec("evt", "events", "the ordered, durable event stream", 1, False),
    "meter": ChannelSpec(
        "meter/{meter_id}",
        (("meter", "MeterValue"),),
        "each meter's latest value",
        1,
        True,
        (("meter_id", "the meter's id"),),
    ),
    "health": ChannelSpec("health", (("health", "Health"),), "device and delivery health", 1, True),
    "pace": ChannelSpec("pace", (("pace", "Pace"),), "game pace (docs/records.md)", 1, True),
    "cmdReplay": ChannelSpec(
        "cmd/replay",
        (("replay", "ReplayCommand"),),
        "send the stream again from a seq",
        1,
        False,
    ),
    "cmdResync": ChannelSpec(
        "cmd/resync", (("resync", "ResyncCommand"),), "publish the birth message again", 1, False
    ),
    "res": ChannelSpec(
        "res/{command}",
        (("reply", "Reply"),),
        "the reply to a command",
        1,
        False,
        (("command", "the command's name (replay, resync, or the unknown name)"),),
    ),
    "ack": ChannelSpec(
        "ack/{backend_id}",
        (("ack", "Ack"),),
        "a backend's end-to-end acknowledgement",
        1,
        True,
        (("backend_id", "the backend's id, registered in the table's mqtt.backends"),),
    ),
}


@dataclass(frozen=True, slots=True)
class OperationSpec:
    action: Literal["send", "receive"]
    channel: str
    summary: str


OPERATIONS: dict[str, OperationSpec] = {
    "sendStatus": OperationSpec("send", "status", "the table says online (offline: last-will)"),
    "sendBirth": OperationSpec("send", "birth", "on every connect, before online"),
    "sendEvents": OperationSpec("send", "evt", "journal rows in seq order, after their commit"),
    "sendMeter": OperationSpec("send", "meter", "after the rows that changed the meter"),
    "sendHealth": OperationSpec("send", "health", "on change, and every counters interval"),
    "sendPace": OperationSpec("send", "pace", "at most once a minute, from the journal"),
    "sendReply": OperationSpec("send", "res", "one reply per command"),
    "receiveReplay": OperationSpec("receive", "cmdReplay", "a backend asks for rows again"),
    "receiveResync": OperationSpec("receive", "cmdResync", "a backend asks for the birth"),
    "receiveAck": OperationSpec("receive", "ack", "a backend has every row through a seq"),
}


def _mqtt_binding(spec: ChannelSpec) -> dict[str, Any]:
    """What the publisher of this channel sets: QoS and retain (a receive: the backend)."""
    return {"qos": spec.qos, "retain": spec.retain, "bindingVersion": MQTT_BINDING_VERSION}


def _servers() -> dict[str, Any]:
    """Where a table connects: the site's broker (TLS, a certificate per table that is its
    identity), or a plain local broker for `make demo` and simulated tables."""
    from tablectl.config import MqttSection

    defaults = MqttSection()
    will = CHANNELS["status"]
    binding = {
        "mqtt": {
            "clientId": "tablectl-{site}-{table} (mqtt.client_id)",
            "keepAlive": defaults.keepalive_s,
            "lastWill": {
                "topic": f"{TOPIC_PREFIX}/{{site}}/{{table}}/{will.address}",
                "qos": will.qos,
                "retain": will.retain,
                "message": "a Status with status offline, sent once the connection has been "
                f"gone {WILL_DELAY_S} s (its Will Delay Interval: a brief reconnect sends none)",
            },
            "sessionExpiryInterval": WILL_DELAY_S,
            "maximumPacketSize": MAX_PACKET_BYTES,
            "bindingVersion": MQTT_BINDING_VERSION,
        }
    }
    return {
        "site": {
            "host": "{broker}:8883",
            "protocol": "secure-mqtt",
            "protocolVersion": "5.0",
            "description": "the site's broker (mqtt.host, mqtt.port; mqtt.tls = true)",
            "variables": {"broker": {"description": "the broker's host name (mqtt.host)"}},
            "security": [
                {"$ref": "#/components/securitySchemes/tableCertificate"},
                {"$ref": "#/components/securitySchemes/tablePassword"},
            ],
            "bindings": binding,
        },
        "local": {
            "host": f"{defaults.host}:{defaults.port}",
            "protocol": "mqtt",
            "protocolVersion": "5.0",
            "description": "a broker on the table PC itself: make demo, simulated tables",
            "bindings": binding,
        },
    }

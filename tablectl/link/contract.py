"""The link contract as code: what linked tables and link controllers say to each other.

Both sides import these models (the table side in phase 2 of issue 17). Tables keep speaking
the table contract (docs/mqtt.md): what a linked table adds are journal records of its own in
its ordinary `evt` stream -- `link.contribution` and `link.claim` -- so they are durable,
ordered by `seq` and sent again until the controller acknowledges them on `ack/{backend_id}`
after PostgreSQL commits. The controllers publish, per link, under `tablectl/link/v1/`:

- `{link_id}/parameters` (retained): the link's parameters and their version;
- `{link_id}/state` (retained, at least once a second): the amounts, the link's
  state, and the awards pending a floorperson's validation ("JACKPOT PENDING");
- `{link_id}/answers/{site}/{table}` (retained): each of that table's claims, answered.

`link_asyncapi_document()` builds docs/asyncapi-link.json (`tablectl link schema`). Money is
integer cents; meter amounts are also given exactly in ten-thousandths of a cent (`units`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from tablectl.core.effects import JackpotValidated, Record

# The records a linked table journals live with the table's other records (core/effects.py).
from tablectl.core.effects import LinkClaim as LinkClaim
from tablectl.core.effects import LinkContribution as LinkContribution
from tablectl.core.effects import LinkContributionReversed as LinkContributionReversed
from tablectl.core.effects import LinkRecord as LinkRecord
from tablectl.link.terms import UNITS_PER_CENT as UNITS_PER_CENT
from tablectl.link.terms import Award as Award
from tablectl.link.terms import ClaimId as ClaimId
from tablectl.link.terms import HitPolicy as HitPolicy
from tablectl.link.terms import LevelId as LevelId
from tablectl.link.terms import LevelParameters as LevelParameters
from tablectl.link.terms import LinkDefinition as LinkDefinition
from tablectl.link.terms import LinkId as LinkId
from tablectl.link.terms import TableRef as TableRef
from tablectl.mqtt.contract import TOPIC_PREFIX, Envelope, Message

LINK_CONTRACT_VERSION = 1
LINK_PREFIX = f"tablectl/link/v{LINK_CONTRACT_VERSION}"
# An evt row is small; a claim carries its cards. Anything larger is refused unread.
MAX_EVT_BYTES = 64 * 1024

LinkStateName = Literal["up", "down", "closed"]


def split_table(ref: str) -> tuple[str, str]:
    site, _, table = ref.partition("/")
    return site, table


def parameters_topic(link_id: str) -> str:
    return f"{LINK_PREFIX}/{link_id}/parameters"


def state_topic(link_id: str) -> str:
    return f"{LINK_PREFIX}/{link_id}/state"


def answers_topic(link_id: str, site: str, table: str) -> str:
    return f"{LINK_PREFIX}/{link_id}/answers/{site}/{table}"


def table_topic(site: str, table: str, leaf: str) -> str:
    """A topic of the table contract (docs/mqtt.md): evt, status, ack/{id}, cmd/replay."""
    return f"{TOPIC_PREFIX}/{site}/{table}/{leaf}"


_TABLE_TOPIC = re.compile(rf"^{re.escape(TOPIC_PREFIX)}/([^/]+)/([^/]+)/(evt|status)$")


def parse_table_topic(topic: str) -> tuple[str, str, str] | None:
    """(site, table, leaf) of a table's evt or status topic; None for anything else."""
    match = _TABLE_TOPIC.match(topic)
    return (match[1], match[2], match[3]) if match else None


# --- what a linked table journals (and so publishes on its evt topic) -----------------------


LINK_RECORD_TYPES: dict[str, type[Record]] = {
    LinkContribution.TYPE: LinkContribution,
    LinkContributionReversed.TYPE: LinkContributionReversed,
    LinkClaim.TYPE: LinkClaim,
}


class EnvelopeHeader(Envelope):
    """An evt message's envelope, its data left unread (rows of every type are acknowledged)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class LinkContributionEvent(Envelope):
    type: Literal["link.contribution"]
    data: LinkContribution


class LinkContributionReversedEvent(Envelope):
    type: Literal["link.contribution_reversed"]
    data: LinkContributionReversed


class LinkClaimEvent(Envelope):
    type: Literal["link.claim"]
    data: LinkClaim


class JackpotValidatedEvent(Envelope):
    """The table's floorperson validated a hit: for a link claim, `hit_id` is its claim_id."""

    type: Literal["jackpot.validated"]
    data: JackpotValidated


# The evt types a controller reads the data of; every other row only moves the cursor.
INBOUND_EVENT_MODELS: dict[
    str,
    type[LinkContributionEvent]
    | type[LinkContributionReversedEvent]
    | type[LinkClaimEvent]
    | type[JackpotValidatedEvent],
] = {
    "link.contribution": LinkContributionEvent,
    "link.contribution_reversed": LinkContributionReversedEvent,
    "link.claim": LinkClaimEvent,
    "jackpot.validated": JackpotValidatedEvent,
}


# --- the link's parameters ------------------------------------------------------------------


class LinkParameters(LinkDefinition):
    """Retained on `{link_id}/parameters`: what a linked table contributes with."""

    v: Literal[1] = 1
    parameters_version: int = Field(ge=1, description="1 at creation, one more per change")
    parameters_sha256: str = Field(description="of the parameters' canonical JSON")


# --- what the controllers publish --------------------------------------------------------------


class LevelState(Message):
    level_id: str
    title: str
    amount_cents: int = Field(description="the amount shown and paid from")
    amount_units: int = Field(description="exactly, in ten-thousandths of a cent")
    reset_cents: int


class PendingAward(Message):
    """An award awaiting the floorperson's validation: JACKPOT PENDING on every table."""

    award_version: int = Field(description="the link version that locked the amount")
    level_id: str
    site: str
    table: str
    seat: int
    claim_id: str
    amount_cents: int
    order_in_window: int
    at: str = Field(description="when it was committed (the ledger's clock, UTC)")


class LinkState(Message):
    """Retained on `{link_id}/state`, at least every `broadcast_interval_ms`, by every
    controller, and at once after a commit that changes the link.

    A table (and a sign) is on the link while it hears a live `up` (from any controller)
    within `link_timeout_ms`, or an ack; the retained copy handed over at subscription (its
    retain flag set) shows amounts but does not put the link up. `closed` is the ledger's
    word and takes effect at once; `down` means this controller cannot reach the ledger (the
    others may). The broadcast with the highest `version` carries the amounts.
    """

    v: Literal[1] = 1
    link_id: str
    version: int = Field(description="the link's total order: its last contribution or hit")
    state: LinkStateName
    reason: str | None = None
    parameters_version: int
    amount_cents: int = Field(description="the first level's amount (the headline meter)")
    levels: list[LevelState]
    pending: list[PendingAward]
    controller_id: str
    ts: str = Field(description="when the controller read the ledger (UTC, milliseconds)")


class ClaimAnswer(Message):
    claim_id: str
    seq: int = Field(description="the claim's row in the table's journal")
    status: Literal["awarded", "validated", "refused"]
    award: Award | None = None
    reason: str | None = None


class ClaimAnswers(Message):
    """Retained on `{link_id}/answers/{site}/{table}`: the table's last 25 claims, newest
    first (NY 5320.8(b) keeps a history of the last 25 hits)."""

    v: Literal[1] = 1
    link_id: str
    site: str
    table: str
    version: int = Field(description="the link version these answers were read at")
    answers: list[ClaimAnswer]


# --- the AsyncAPI document ------------------------------------------------------------------


def _asyncapi_schema(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _asyncapi_schema(v) for k, v in schema.items()}
        if isinstance(out.get("discriminator"), dict):
            out["discriminator"] = out["discriminator"]["propertyName"]
        return out
    if isinstance(schema, list):
        return [_asyncapi_schema(v) for v in schema]
    return schema


def link_asyncapi_document() -> dict[str, Any]:
    """The link contract as an AsyncAPI 3.0 document, every schema from the models above."""
    sent: dict[str, type[BaseModel]] = {
        "LinkParameters": LinkParameters,
        "LinkState": LinkState,
        "ClaimAnswers": ClaimAnswers,
    }
    received: dict[str, type[BaseModel]] = {
        "LinkContributionEvent": LinkContributionEvent,
        "LinkContributionReversedEvent": LinkContributionReversedEvent,
        "LinkClaimEvent": LinkClaimEvent,
        "JackpotValidatedEvent": JackpotValidatedEvent,
    }
    _, defs = models_json_schema(
        [(m, "serialization") for m in sent.values()]
        + [(m, "validation") for m in received.values()],
        ref_template="#/components/schemas/{model}",
    )
    messages = {
        name: {
            "name": name,
            "contentType": "application/json",
            "summary": (model.__doc__ or name).strip().splitlines()[0],
            "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
        }
        for name, model in {**sent, **received}.items()
    }
    link_param = {"link_id": {"description": "the link's id"}}
    table_params = {
        "site": {"description": "the table's site (table.site_id)"},
        "table": {"description": "the table's id (table.table_id)"},
    }

    def channel(address: str, refs: list[str], description: str, params: Any) -> Any:
        return {
            "address": address,
            "description": description,
            "parameters": params,
            "messages": {r: {"$ref": f"#/components/messages/{r}"} for r in refs},
        }

    channels = {
        "parameters": channel(
            f"{LINK_PREFIX}/{{link_id}}/parameters",
            ["LinkParameters"],
            "the link's parameters, retained; QoS 1",
            link_param,
        ),
        "state": channel(
            f"{LINK_PREFIX}/{{link_id}}/state",
            ["LinkState"],
            "amounts, state and pending awards; retained, at least every "
            "broadcast_interval_ms; only a live copy (retain flag clear) says up; QoS 1",
            link_param,
        ),
        "answers": channel(
            f"{LINK_PREFIX}/{{link_id}}/answers/{{site}}/{{table}}",
            ["ClaimAnswers"],
            "each claim of this table, answered; retained; QoS 1",
            {**link_param, **table_params},
        ),
        "evt": channel(
            f"{TOPIC_PREFIX}/{{site}}/{{table}}/evt",
            list(received),
            "the table's event stream (docs/mqtt.md): the rows a controller reads the data "
            "of; it acknowledges every row on ack/{backend_id} after PostgreSQL commits",
            table_params,
        ),
    }

    def operation(action: str, ch: str, summary: str) -> dict[str, Any]:
        return {"action": action, "channel": {"$ref": f"#/channels/{ch}"}, "summary": summary}

    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "tablectl linked progressive contract",
            "version": f"{LINK_CONTRACT_VERSION}.0.0",
            "description": (
                "What tablectl's link controllers publish to linked tables and signs, and the "
                "rows of a table's event stream they apply. Generated from "
                "tablectl/link/contract.py by `tablectl link schema`; see "
                "docs/linked-progressives.md. Acknowledgements and replays are the table "
                "contract's (docs/asyncapi.json: ack/{backend_id}, cmd/replay)."
            ),
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": {
            "sendParameters": operation("send", "parameters", "on start and on every change"),
            "sendState": operation("send", "state", "every interval and after each change"),
            "sendAnswers": operation("send", "answers", "after a claim or validation commits"),
            "receiveEvents": operation("receive", "evt", "every linked table's rows"),
        },
        "components": {"messages": messages, "schemas": _asyncapi_schema(defs["$defs"])},
    }

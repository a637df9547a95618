"""The contract as a product: docs/asyncapi.json is what the code says, and what the demo
publishes validates against it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from tablectl.simulators.demo import run_demo

from tablectl import cli
from tablectl.config import load_config
from tablectl.core.effects import RECORD_TYPES
from tablectl.mqtt.contract import Envelope, asyncapi_document, envelope_json, event_models

from .conftest import REPO

DOCUMENT = REPO / "docs" / "asyncapi.json"


def test_the_committed_asyncapi_document_is_what_the_code_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert json.loads(DOCUMENT.read_text()) == asyncapi_document(), (
        "docs/asyncapi.json drifted from the code: .venv/bin/tablectl mqtt schema --write "
        "docs/asyncapi.json"
    )
    assert cli.main(["mqtt", "schema", "--check", str(DOCUMENT)]) == 0


def test_schema_check_fails_on_a_stale_document(tmp_path: Path) -> None:
    stale = json.loads(DOCUMENT.read_text())
    del stale["components"]["schemas"]["JackpotHit"]["properties"]["amount_cents"]
    path = tmp_path / "asyncapi.json"
    path.write_text(json.dumps(stale, indent=2) + "\n")
    assert cli.main(["mqtt", "schema", "--check", str(path)]) == 1


def test_every_record_type_has_an_event_message() -> None:
    messages = asyncapi_document()["components"]["messages"]
    assert {m["name"] for m in messages.values()} >= set(RECORD_TYPES)
    assert set(event_models()) == set(RECORD_TYPES)


def validator(message: str) -> jsonschema.Draft7Validator:
    """The message's payload schema, its $refs resolved inside the document."""
    doc = json.loads(DOCUMENT.read_text())
    payload = doc["components"]["messages"][message]["payload"]
    root = {"components": {"schemas": doc["components"]["schemas"]}, **payload}
    return jsonschema.Draft7Validator(root)


def message_of(sub: str, body: dict[str, Any]) -> str:
    if sub == "evt":
        return event_models()[body["type"]].__name__
    if sub.startswith("meter/"):
        return "MeterValue"
    if sub.startswith("res/"):
        return "Reply"
    return {"birth": "Birth", "status": "Status", "health": "Health"}[sub]


@pytest.mark.parametrize("game", ["three-card-poker", "ultimate-texas-holdem", "let-it-ride"])
async def test_everything_the_demo_publishes_validates(game: str, tmp_path: Path) -> None:
    run = await run_demo(
        load_config(REPO / "config" / f"{game}.toml"), rounds=6, keep=tmp_path, as_json=True
    )
    assert run.summary["ok"], run.summary
    received = run.backend.received
    kinds = {message_of(sub, body) for sub, body in received}
    assert {"Birth", "Status", "Health", "RoundOpenedEvent", "WagerSettledEvent"} <= kinds
    if game != "let-it-ride":  # its Bonus pays fixed odds: no meter, no jackpot workflow
        assert {"MeterValue", "JackpotHitEvent", "MeterContributionEvent"} <= kinds
    validators: dict[str, jsonschema.Draft7Validator] = {}
    for sub, body in received:
        name = message_of(sub, body)
        check = validators.setdefault(name, validator(name))
        errors = [e.message for e in check.iter_errors(body)]
        assert not errors, (sub, body, errors)
    # And a payload that breaks the contract does not pass.
    settled = next(b for sub, b in received if sub == "evt" and b["type"] == "wager.settled")
    broken = {**settled, "data": {**settled["data"], "paid_cents": "lots"}}
    assert list(validator("WagerSettledEvent").iter_errors(broken))


@pytest.mark.parametrize(
    "text",
    ["tcp-07", "t\u00e4ble \u2660", 'quote " and \\ backslash', "line\nbreak\ttab\x01\x7f/slash"],
)
@pytest.mark.parametrize("replay", [False, True])
def test_the_envelope_is_byte_for_byte_what_the_model_dumps(text: str, replay: bool) -> None:
    """The relay puts each `evt` together as text: the bytes must be the model's own."""
    fields: dict[str, Any] = {
        "type": "round.locked",
        "event_id": "0193a4f0-8c1e-7b3a-9f00-1234567890ab",
        "site": text,
        "table": text[::-1],
        "boot_id": text + "-boot",
        "seq": 12_345_678_901,
        "ts": "2026-12-05T02:18:47.123Z",
        "replay": replay,
    }
    data_json = '{"round_id":7,"seats":[1,2],"note":"\u00e9"}'
    model = Envelope(**fields).model_dump_json()
    built = envelope_json(type_=fields.pop("type"), data_json=data_json, **fields)
    assert built == f'{model[:-1]},"data":{data_json}}}'.encode()


def test_every_operation_states_its_qos_and_retain_and_the_servers_are_named() -> None:
    """Bindings are generated from the one table of channels (contract.CHANNELS), not
    written in prose: a backend's code generator reads QoS and retain from them."""
    from tablectl.mqtt.contract import CHANNELS, OPERATIONS

    doc = json.loads(DOCUMENT.read_text())
    assert set(doc["operations"]) == set(OPERATIONS)
    for name, op in doc["operations"].items():
        spec = CHANNELS[OPERATIONS[name].channel]
        mqtt = op["bindings"]["mqtt"]
        assert (mqtt["qos"], mqtt["retain"]) == (spec.qos, spec.retain), name
    assert doc["operations"]["sendEvents"]["bindings"]["mqtt"] == {
        "qos": 1,
        "retain": False,
        "bindingVersion": "0.2.0",
    }
    assert doc["operations"]["sendMeter"]["bindings"]["mqtt"]["retain"] is True
    servers = doc["servers"]
    assert servers["site"]["protocol"] == "secure-mqtt" and servers["local"]["protocol"] == "mqtt"
    will = servers["site"]["bindings"]["mqtt"]["lastWill"]
    assert will["topic"].endswith("/{site}/{table}/status") and will["retain"] is True
    schemes = doc["components"]["securitySchemes"]
    for server in servers.values():
        for ref in server.get("security", []):
            assert ref["$ref"].rsplit("/", 1)[1] in schemes

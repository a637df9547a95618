"""The typed status: docs/status.schema.json is what the model says, what the control socket
sends validates against it and reads back unchanged, and the shuffler's diagnostics are typed
requests refused by the field they get wrong."""

from __future__ import annotations

import argparse
import json

import jsonschema
import pytest
from pydantic import ValidationError

from tablectl import cli
from tablectl.cli.common import EXIT_REFUSED, read_reply
from tablectl.control.protocol import (
    RequestError,
    ShufflerCount,
    ShufflerCountRequest,
    ShufflerSelfTestRequest,
    parse_request,
)
from tablectl.core.table import Phase
from tablectl.status import Status, schema_json

from .conftest import REPO, SimulatedTable

SCHEMA = REPO / "docs" / "status.schema.json"


def test_the_committed_schema_is_what_the_model_says(capsys: pytest.CaptureFixture[str]) -> None:
    assert SCHEMA.read_text() == schema_json(), (
        "docs/status.schema.json drifted from tablectl/status.py: "
        ".venv/bin/tablectl status --schema > docs/status.schema.json"
    )
    assert cli.main(["status", "--schema"]) == 0  # no daemon is asked
    assert capsys.readouterr().out == schema_json()


async def test_status_from_the_socket_validates_against_the_schema_and_reads_back(
    table: SimulatedTable,
) -> None:
    await table.wait_phase(Phase.BETTING)
    reply = await table.dealer(cmd="status")
    assert reply["ok"] is True, reply
    data = reply["data"]
    jsonschema.validate(data, json.loads(SCHEMA.read_text()))
    status = Status.model_validate(data)
    assert status.model_dump(mode="json") == data  # nothing lost on the way
    assert status.phase is Phase.BETTING and status.shuffler is not None
    assert status.status_line().startswith("betting (round 1); shuffler link up")
    # A status with a key the model does not have is refused, not carried along.
    with pytest.raises(ValidationError, match="extra_forbidden"):
        Status.model_validate({**data, "phsae": "betting"})


def test_shuffler_diagnostics_are_typed_requests() -> None:
    assert isinstance(parse_request({"cmd": "shuffler-count"}), ShufflerCountRequest)
    assert isinstance(parse_request({"cmd": "shuffler-self-test"}), ShufflerSelfTestRequest)
    with pytest.raises(RequestError, match=r"^shuffler-count: deck: Extra inputs"):
        parse_request({"cmd": "shuffler-count", "deck": 1})
    with pytest.raises(RequestError, match=r"^shuffler-self-test: by: String should have"):
        parse_request({"cmd": "shuffler-self-test", "by": ""})


def test_a_reply_this_tablectl_cannot_read_is_refused_naming_the_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = argparse.Namespace(json=False)
    assert read_reply(args, {"counted": 52, "expected": 52}, ShufflerCount) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "the daemon's ShufflerCount reply is not what this tablectl reads" in err
    assert "matches: Field required" in err
    read = read_reply(args, {"counted": 51, "expected": 52, "matches": False}, ShufflerCount)
    assert read == ShufflerCount(counted=51, expected=52, matches=False)

"""The control socket's requests: strict types, a clear error for everything malformed."""

from __future__ import annotations

from typing import Any

import pytest

from tablectl.control.protocol import RequestError, parse_request, to_input
from tablectl.core.events import ConfirmDocumentation, Settle, ValidateHit, VoidRound
from tablectl.rules.cards import parse_cards


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([1, 2], "one JSON object"),
        ({"cmd": "launch"}, "unknown command 'launch'"),
        ({"cmd": "settle", "folded": [1.7]}, "folded.0: Input should be a valid integer"),
        ({"cmd": "settle", "folded": ["1"]}, "folded.0: Input should be a valid integer"),
        ({"cmd": "settle", "folded": [True]}, "folded.0: Input should be a valid integer"),
        ({"cmd": "settle", "folded": [9]}, "less than or equal to 7"),
        ({"cmd": "settle", "hands": {"x": "AsKsQs"}}, "hands.x"),
        ({"cmd": "settle", "hands": {"1": "AsKsQz"}}, "not a card"),
        ({"cmd": "settle", "hands": {"1": 5}}, "hands.1: Input should be a valid string"),
        ({"cmd": "void"}, "reason: Field required"),
        ({"cmd": "validate", "hit_id": "3-1"}, "by: Field required"),
        ({"cmd": "new-deck", "extra": 1}, "extra: Extra inputs are not permitted"),
    ],
)
def test_malformed_requests_get_an_error_naming_the_field(raw: Any, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        to_input(parse_request(raw), "alice")


def test_commands_become_core_inputs_naming_who_gave_them() -> None:
    settle = to_input(
        parse_request(
            {"cmd": "settle", "hands": {"3": "AsKs"}, "community": "QsJsTs", "folded": [2]}
        ),
        "alice",
    )
    assert settle == Settle(
        hands={3: parse_cards("AsKs")},
        community=parse_cards("QsJsTs"),
        folded=frozenset({2}),
        by="alice",
    )
    void = to_input(parse_request({"cmd": "void", "reason": "shoe-jam", "by": "d-7"}), "bob")
    assert void == VoidRound(reason="shoe-jam", by="d-7 (bob)")
    assert to_input(parse_request({"cmd": "validate", "hit_id": "4-2", "by": "f-1"}), "carol") == (
        ValidateHit(hit_id="4-2", by="f-1 (carol)")
    )
    assert to_input(parse_request({"cmd": "document", "hit_id": "4-2", "by": "f-1"}), "c") == (
        ConfirmDocumentation(hit_id="4-2", by="f-1 (c)")
    )


def test_shoe_and_device_commands() -> None:
    from tablectl.core.events import DealRequested, DeviceAccepted, ShoeOutOfOrder

    deal = to_input(parse_request({"cmd": "deal", "seats": [4, 2, 4]}), "alice")
    assert deal == DealRequested(seats=(2, 4), by="alice")
    assert to_input(parse_request({"cmd": "shoe-in-service"}), "bob") == ShoeOutOfOrder(
        out_of_order=False, by="bob"
    )
    accept = {"cmd": "accept-device", "device": "shoe", "serial_number": "S-2", "by": "T9"}
    assert to_input(parse_request(accept), "tech") == DeviceAccepted(
        device="shoe", serial_number="S-2", by="T9 (tech)"
    )
    with pytest.raises(RequestError, match="by: Field required"):
        parse_request({"cmd": "accept-device", "device": "shoe", "serial_number": "S-2"})
    with pytest.raises(RequestError, match="device"):
        parse_request(
            {"cmd": "accept-device", "device": "toaster", "serial_number": "1", "by": "T"}
        )

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
        ({"cmd": "new-deck", "by": "\x00T1"}, "by: '\\\\x00T1': an employee id, printable"),
        ({"cmd": "validate", "hit_id": "3-1", "by": "T\x1b[2J"}, "an employee id, printable"),
        ({"cmd": "new-deck", "extra": 1}, "extra: Extra inputs are not permitted"),
        ({"cmd": "clear-fault", "seat": "3"}, "seat: Input should be a valid integer"),
        ({"cmd": "clear-fault", "lockout": 1}, "lockout: Input should be a valid boolean"),
        ({"cmd": "clear-fault", "seat": 3, "lockout": True}, "a seat or the lock-out, not both"),
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


def test_every_request_names_the_roles_that_may_send_it() -> None:
    from tablectl.control.protocol import COMMANDS, REQUEST_TYPES, Role, commands

    roles = {cmd: model.ROLES for model in REQUEST_TYPES for cmd in commands(model)}
    assert set(roles) == set(COMMANDS)
    assert roles["status"] == frozenset(Role)
    for cmd in ("settle", "void", "new-deck", "reshuffle"):
        assert roles[cmd] == {Role.DEALER}, cmd
    for cmd in ("validate", "document"):
        assert roles[cmd] == {Role.FLOORPERSON}, cmd
    for cmd in ("devices", "watch", "shuffler-count", "shuffler-self-test", "test-begin"):
        assert roles[cmd] == {Role.TECHNICIAN}, cmd
    for cmd in ("test-seat", "test-lockout", "test-end"):
        assert roles[cmd] == {Role.TECHNICIAN}, cmd
    assert roles["clear-fault"] == {Role.DEALER, Role.TECHNICIAN}


def test_roles_come_from_groups_and_root_holds_them_all() -> None:
    import grp

    from tablectl.config import AccessSection
    from tablectl.control.access import UNKNOWN_PEER, AccessPolicy, Peer
    from tablectl.control.protocol import Role

    staff, games = grp.getgrnam("staff").gr_gid, grp.getgrnam("games").gr_gid
    policy = AccessPolicy(
        AccessSection(technician=("staff",), dealer=("games", "no-such-group"), floorperson=()),
        own_uid=4242,
    )

    def peer(uid: int, *groups: int) -> Peer:
        return Peer(pid=1, uid=uid, gid=100, groups=frozenset({100, *groups}))

    assert policy.roles(peer(1000)) == frozenset()
    assert policy.roles(peer(1000, staff)) == {Role.TECHNICIAN}
    assert policy.roles(peer(1000, staff, games)) == {Role.TECHNICIAN, Role.DEALER}
    assert policy.roles(peer(0)) == frozenset(Role)  # root
    assert policy.roles(peer(4242)) == frozenset(Role)  # the daemon's own user
    assert policy.roles(UNKNOWN_PEER) == frozenset()


def test_clear_fault_clears_a_gpio_fault_or_names_the_stuck_input() -> None:
    from tablectl.core.events import ClearGpioFault, ClearStuckInput

    clear = parse_request({"cmd": "clear-fault", "by": "T4"})
    assert to_input(clear, "bob") == ClearGpioFault(by="T4 (bob)")
    seat = parse_request({"cmd": "clear-fault", "seat": 3, "by": "T4"})
    assert to_input(seat, "bob") == ClearStuckInput(seat=3, by="T4 (bob)")
    lockout = parse_request({"cmd": "clear-fault", "lockout": True})
    assert to_input(lockout, "bob") == ClearStuckInput(seat=None, by="bob")

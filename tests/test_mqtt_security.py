"""A real Mosquitto with the shipped config: TLS, client certificates, passwords, the ACL."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from tablectl.simulators.broker import Pki, PrivateBroker, Secure

from tablectl.config import MqttSection
from tablectl.core.round import Phase
from tablectl.mqtt.relay import Client, describe_connect_error, make_client, topic_root

from .conftest import simulated_table

SITE, TABLE = "pa-demo-casino", "tcp-07"
PASSWORDS = {TABLE: "table-secret", "tcp-08": "other-table-secret", "pgs": "backend-secret"}


@pytest.fixture
def secure_broker() -> Iterator[PrivateBroker]:
    """A fresh broker each test: retained acks of another test's journal would be refused."""
    with PrivateBroker(secure=Secure(SITE, PASSWORDS, backends=("pgs",))) as broker:
        yield broker


@pytest.fixture(scope="module")
def rogue(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Another CA: certificates that look right and are not."""
    return Pki(tmp_path_factory.mktemp("rogue"), name="rogue-ca")


def tls(broker: PrivateBroker, who: str, *, ca: Path | None = None) -> aiomqtt.TLSParameters:
    assert broker.pki is not None
    cert, key = broker.pki.issue(who)
    return aiomqtt.TLSParameters(
        ca_certs=str(ca or broker.pki.ca_cert), certfile=str(cert), keyfile=str(key)
    )


def client_as(broker: PrivateBroker, who: str) -> Client:
    """A client with who's own certificate and password."""
    return Client(
        broker.host,
        broker.port,
        username=who,
        password=PASSWORDS[who],
        tls_params=tls(broker, who),
    )


def table_mqtt(broker: PrivateBroker, **changes: Any) -> dict[str, Any]:
    assert broker.pki is not None
    cert, key = broker.pki.issue(TABLE)
    return {
        "tls": True,
        "ca_file": broker.pki.ca_cert,
        "cert_file": cert,
        "key_file": key,
        "username": TABLE,
        "password": PASSWORDS[TABLE],
        **changes,
    }


async def test_the_table_connects_with_its_certificate_and_reaches_its_backend(
    secure_broker: PrivateBroker, tmp_path: Path
) -> None:
    backend = {
        "username": "pgs",
        "password": PASSWORDS["pgs"],
        "tls": tls(secure_broker, "pgs"),
    }
    async with simulated_table(
        secure_broker, tmp_path / "data", mqtt=table_mqtt(secure_broker), backend=backend
    ) as table:
        await table.wait_phase(Phase.BETTING)
        await table.place_wagers(1)
        await table.lock()
        await table.wait_backend_caught_up()
        # The backend's acks got through the ACL and moved the table's books.
        await table.daemon.wait_until(lambda _: table.daemon.relay.acks.through > 0, 10)
        assert table.backend.status == {"status": "online", "boot_id": table.daemon.boot_id}


async def refusal(config: MqttSection) -> str:
    """Connect as the relay does; the line its log would carry."""
    with pytest.raises(aiomqtt.MqttError) as refused:
        async with make_client(config, site=SITE, table=TABLE, will=b"offline"):
            pass
    return describe_connect_error(refused.value, config)


def mqtt(broker: PrivateBroker, **changes: Any) -> MqttSection:
    return MqttSection(host=broker.host, port=broker.port, **table_mqtt(broker, **changes))


async def test_a_wrong_ca_is_refused_naming_ca_file(
    secure_broker: PrivateBroker, rogue: Pki
) -> None:
    line = await refusal(mqtt(secure_broker, ca_file=rogue.ca_cert))
    assert "the broker's certificate does not verify against mqtt.ca_file" in line
    assert str(rogue.ca_cert) in line


async def test_a_wrong_certificate_is_refused_naming_cert_file(
    secure_broker: PrivateBroker, rogue: Pki
) -> None:
    cert, key = rogue.issue(TABLE)
    line = await refusal(mqtt(secure_broker, cert_file=cert, key_file=key))
    assert "the broker refused this table's client certificate (mqtt.cert_file" in line
    # The broker's alert ("unknown ca") may or may not reach us before its socket closes
    # (TLS 1.3 refuses a client certificate after the handshake): the line names the field
    # and the file either way.
    assert str(cert) in line


async def test_a_wrong_password_is_refused_naming_the_username(
    secure_broker: PrivateBroker,
) -> None:
    line = await refusal(mqtt(secure_broker, password="guess"))  # noqa: S106
    assert "the broker refused the credentials of mqtt.username tcp-07" in line


async def test_a_client_without_rights_cannot_ack_or_command_a_table(
    secure_broker: PrivateBroker, tmp_path: Path
) -> None:
    root = topic_root(SITE, TABLE)
    backend = {"username": "pgs", "password": PASSWORDS["pgs"], "tls": tls(secure_broker, "pgs")}
    async with simulated_table(
        secure_broker, tmp_path / "data", mqtt=table_mqtt(secure_broker), backend=backend
    ) as table:
        await table.wait_phase(Phase.BETTING)
        await table.wait_backend_caught_up()
        relay = table.daemon.relay
        # The backend's own replay request at its connect may already have sent a row twice.
        duplicates_before = table.backend.duplicates
        inbound_before = relay.counters.inbound
        acked_before = dict(relay.acks.acked)
        # Another table, with a valid certificate and password of its own.
        async with client_as(secure_broker, "tcp-08") as other:
            ack = json.dumps({"acked_through_seq": 1})
            await other.publish(f"{root}/ack/pgs", ack, qos=1, retain=True)
            replay = json.dumps({"from_seq": 1, "correlation_id": "x"})
            await other.publish(f"{root}/cmd/replay", replay, qos=1)
            await other.publish(f"{root}/evt", b'{"v":1,"type":"jackpot.hit"}', qos=1)
        # The backend itself may not acknowledge under another backend's id.
        async with client_as(secure_broker, "pgs") as pgs:
            await pgs.publish(f"{root}/ack/audit", ack, qos=1)
            await pgs.subscribe(f"{root}/res/#", qos=1)
            # The broker handles one client's messages in order, and every denied publish
            # above was refused before its PUBACK: a reply to this one means they are gone.
            await pgs.publish(f"{root}/cmd/resync", json.dumps({"correlation_id": "pgs-1"}), qos=1)
            async with asyncio.timeout(10):
                async for message in pgs.messages:
                    if json.loads(message.payload)["correlation_id"] == "pgs-1":
                        break
        assert relay.counters.inbound >= inbound_before + 1
        assert relay.counters.acks_refused == 0 and relay.counters.malformed_inbound == 0
        assert relay.acks.acked["pgs"] >= acked_before["pgs"]
        assert table.backend.duplicates == duplicates_before  # no replay was forced
        assert all(e["type"] != "jackpot.hit" for e in table.backend.events.values())
        log = secure_broker.log.read_text().splitlines()
        denied = [line for line in log if "Denied PUBLISH" in line]
        for topic in ("ack/pgs", "cmd/replay", "evt", "ack/audit"):
            assert any(f"'{root}/{topic}'" in line for line in denied), topic


def test_config_check_names_missing_or_unreadable_tls_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tablectl import cli

    from .conftest import EXAMPLE_CONFIG

    key = tmp_path / "table.key"
    key.write_text("not really a key")
    key.chmod(0o000)
    config = tmp_path / "table.toml"
    config.write_text(
        EXAMPLE_CONFIG.read_text().replace(
            "port = 1883\n",
            f'port = 8883\ntls = true\nca_file = "{tmp_path}/missing-ca.crt"\n'
            f'cert_file = "{tmp_path}/table.crt"\nkey_file = "{key}"\n',
        )
    )
    assert cli.main(["config", "check", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"mqtt.ca_file: {tmp_path}/missing-ca.crt does not exist" in err
    assert f"mqtt.cert_file: {tmp_path}/table.crt does not exist" in err
    if os.geteuid() != 0:  # root reads any file
        assert f"mqtt.key_file: {key} is not readable" in err

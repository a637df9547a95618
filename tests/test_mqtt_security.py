"""A real Mosquitto with the shipped config: TLS, client certificates, passwords, the ACL."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from tablectl.simulators.broker import Pki, PrivateBroker, Secure

from tablectl.config import MqttSection
from tablectl.core.round import Phase
from tablectl.mqtt.client import MqttClient, MqttError, PublishRefused
from tablectl.mqtt.relay import describe_connect_error, make_client, topic_root

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


def tls(broker: PrivateBroker, who: str, *, ca: Path | None = None) -> ssl.SSLContext:
    assert broker.pki is not None
    cert, key = broker.pki.issue(who)
    context = ssl.create_default_context(cafile=str(ca or broker.pki.ca_cert))
    context.load_cert_chain(str(cert), str(key))
    return context


def client_as(broker: PrivateBroker, who: str) -> MqttClient:
    """A client with who's own certificate and password."""
    return MqttClient(
        broker.host, broker.port, username=who, password=PASSWORDS[who], tls=tls(broker, who)
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
    with pytest.raises(MqttError) as refused:
        await make_client(config, site=SITE, table=TABLE, will=b"offline").connect()
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
        ack = json.dumps({"acked_through_seq": 1}).encode()
        async with client_as(secure_broker, "tcp-08") as other:
            # MQTT 5: each is refused in its PUBACK (0x87), not silently dropped.
            for topic, payload in (
                ("ack/pgs", ack),
                ("cmd/replay", json.dumps({"from_seq": 1, "correlation_id": "x"}).encode()),
                ("evt", b'{"v":1,"type":"jackpot.hit"}'),
            ):
                with pytest.raises(PublishRefused, match="Not authorized"):
                    await other.publish(f"{root}/{topic}", payload, retain=topic == "ack/pgs")
        # The backend itself may not acknowledge under another backend's id.
        async with client_as(secure_broker, "pgs") as pgs:
            with pytest.raises(PublishRefused, match="Not authorized"):
                await pgs.publish(f"{root}/ack/audit", ack)
            await pgs.subscribe(f"{root}/res/#")
            await pgs.publish(
                f"{root}/cmd/resync", json.dumps({"correlation_id": "pgs-1"}).encode()
            )
            async with asyncio.timeout(10):
                async for message in pgs.messages():
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


async def until(condition: Any, timeout_s: float = 10) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 (the reconnector's counters have no event)
            await asyncio.sleep(0.02)


async def test_a_publish_the_acl_refuses_is_a_refusal_logged_once_never_a_delivery(
    secure_broker: PrivateBroker, tmp_path: Path
) -> None:
    # The table logs in as another table (a mistaken mqtt.username): the broker lets it in,
    # and its ACL refuses every publish under this table's prefix, in each PUBACK (MQTT 5).
    mqtt = table_mqtt(secure_broker, username="tcp-08", password=PASSWORDS["tcp-08"])
    backend = {"username": "pgs", "password": PASSWORDS["pgs"], "tls": tls(secure_broker, "pgs")}
    with capture_logs() as logs:
        async with simulated_table(
            secure_broker, tmp_path / "data", mqtt=mqtt, backend=backend
        ) as table:
            relay = table.daemon.relay
            await until(lambda: relay.reconnector.counters.refusals >= 1)
            assert relay.counters.publishes_refused >= 1
            error = relay.stats()["last_error"]
            assert f"publish to {topic_root(SITE, TABLE)}/birth refused: Not authorized" in error
            # Nothing reached the backend, and nothing counts as delivered.
            assert relay.acks.through == 0 and table.backend.events == {}
            # Refused, it waits the longest backoff: no second attempt within this test.
            assert relay.reconnector.counters.attempts == 1
    errors = [e for e in logs if e["log_level"] == "error" and e["event"].startswith("mqtt")]
    assert len(errors) == 1, errors


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

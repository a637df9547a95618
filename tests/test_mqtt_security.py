"""A real Mosquitto with the shipped config: TLS, client certificates whose common name is
the client's identity, the ACL; and what the table does when the broker will not deliver."""

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

from tablectl import cli
from tablectl.config import MqttSection
from tablectl.core.table import Phase
from tablectl.mqtt.client import ClosedBeforeAccepted, MqttClient, MqttError, PublishRefused
from tablectl.mqtt.relay import describe_connect_error, make_client, topic_root
from tablectl.status import Stops

from .conftest import SimulatedTable, simulated_table

SITE, TABLE = "pa-demo-casino", "tcp-07"


@pytest.fixture
def secure_broker() -> Iterator[PrivateBroker]:
    """A fresh broker each test: retained acks of another test's journal would be refused."""
    with PrivateBroker(secure=Secure(SITE, backends=("pgs",))) as broker:
        yield broker


@pytest.fixture(scope="module")
def rogue(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """Another CA: certificates that look right and are not."""
    return Pki(tmp_path_factory.mktemp("rogue"), name="rogue-ca")


def tls(
    broker: PrivateBroker, who: str, *, ca: Path | None = None, subject: str | None = None
) -> ssl.SSLContext:
    assert broker.pki is not None
    cert, key = broker.pki.issue(who, subject=subject)
    context = ssl.create_default_context(cafile=str(ca or broker.pki.ca_cert))
    context.load_cert_chain(str(cert), str(key))
    return context


def client_as(broker: PrivateBroker, who: str) -> MqttClient:
    """A client with who's own certificate (its common name: who)."""
    return MqttClient(broker.host, broker.port, username=who, tls=tls(broker, who))


def backend_as(broker: PrivateBroker, who: str = "pgs") -> dict[str, Any]:
    """The reference backend's arguments: its own certificate."""
    return {"username": who, "tls": tls(broker, who)}


def table_mqtt(broker: PrivateBroker, **changes: Any) -> dict[str, Any]:
    assert broker.pki is not None
    cert, key = broker.pki.issue(TABLE)
    return {
        "tls": True,
        "ca_file": broker.pki.ca_cert,
        "cert_file": cert,
        "key_file": key,
        "username": TABLE,
        **changes,
    }


async def test_the_table_connects_with_its_certificate_and_reaches_its_backend(
    secure_broker: PrivateBroker, tmp_path: Path
) -> None:
    backend = backend_as(secure_broker)
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


async def test_a_certificate_without_a_name_is_refused_naming_username_and_cert_file(
    secure_broker: PrivateBroker,
) -> None:
    assert secure_broker.pki is not None
    cert, key = secure_broker.pki.issue("nameless", subject="/O=tablectl")
    line = await refusal(mqtt(secure_broker, cert_file=cert, key_file=key))
    assert "the broker refused the credentials of mqtt.username tcp-07" in line
    assert f"mqtt.cert_file {cert}" in line


async def test_another_tables_certificate_cannot_log_in_as_this_table(
    secure_broker: PrivateBroker,
) -> None:
    # tcp-08's certificate with this table's username and a password: the broker takes the
    # name on the certificate, not the one in the CONNECT, so the client is tcp-08, and
    # nothing of tcp-07's is open to it.
    root = topic_root(SITE, TABLE)
    impostor = MqttClient(
        secure_broker.host,
        secure_broker.port,
        username=TABLE,
        password="tcp-07's password",  # noqa: S106
        tls=tls(secure_broker, "tcp-08"),
    )
    async with impostor:
        for topic in ("evt", "status", "birth", "meter/progressive"):
            with pytest.raises(PublishRefused, match="Not authorized"):
                await impostor.publish(f"{root}/{topic}", b"{}")
        await impostor.publish(f"{topic_root(SITE, 'tcp-08')}/status", b"{}")  # its own
        # Mosquitto grants the subscription and delivers only what the ACL lets it read: a
        # command to tcp-07, then one to tcp-08 from the same backend, in that order; only
        # tcp-08's arrives.
        await impostor.subscribe(f"{root}/cmd/+")
        await impostor.subscribe(f"{topic_root(SITE, 'tcp-08')}/cmd/+")
        async with client_as(secure_broker, "pgs") as pgs:
            for table in (TABLE, "tcp-08"):
                command = {"correlation_id": f"for-{table}"}
                topic = f"{topic_root(SITE, table)}/cmd/resync"
                await pgs.publish(topic, json.dumps(command).encode())
        async with asyncio.timeout(10):
            async for message in impostor.messages():
                assert json.loads(message.payload) == {"correlation_id": "for-tcp-08"}
                break
    # The broker's own account: the impostor (the first client) was tcp-08 throughout.
    connected = [line for line in secure_broker.log.read_text().splitlines() if " as " in line]
    assert "u'tcp-08'" in connected[0]
    assert not any("u'tcp-07'" in line for line in connected)


async def test_a_client_without_rights_cannot_ack_or_command_a_table(
    secure_broker: PrivateBroker, tmp_path: Path
) -> None:
    root = topic_root(SITE, TABLE)
    backend = backend_as(secure_broker)
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


def journaled(table: SimulatedTable, type_: str) -> list[tuple[int, dict[str, Any]]]:
    """Every durable row of this type in the table's journal: (seq, data)."""
    assert table.daemon.reader is not None
    rows = table.daemon.reader.outbox_after(0, limit=100_000)
    return [(r.seq, json.loads(r.data_json)) for r in rows if r.type == type_]


async def test_a_table_speaking_as_another_is_refused_and_shows_a_delivery_fault(
    secure_broker: PrivateBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A config copied from the next table: its username and its certificate are tcp-08's. The
    # broker knows this table as tcp-08, and its ACL refuses every publish under tcp-07's
    # topics, each in its PUBACK (MQTT 5, 0x87): never a delivery.
    assert secure_broker.pki is not None
    cert, key = secure_broker.pki.issue("tcp-08")
    wrong = table_mqtt(
        secure_broker, username="tcp-08", cert_file=cert, key_file=key, reconnect_max_s=1
    )
    backend = backend_as(secure_broker)
    data = tmp_path / "data"
    with capture_logs() as logs:
        async with simulated_table(secure_broker, data, mqtt=wrong, backend=backend) as table:
            relay = table.daemon.relay
            # Refused, retried (at mqtt.reconnect_max_s), and refused again.
            await until(lambda: relay.counters.publishes_refused >= 3)
            await table.daemon.wait_until(lambda s: s.delivery_fault is not None, 10)
            error = relay.stats().last_error
            assert error is not None
            assert f"publish to {topic_root(SITE, TABLE)}/birth refused: Not authorized" in error
            # Journaled once, not once per refusal.
            ((seq, fault),) = journaled(table, "delivery.fault")
            reason = "the broker refused a publish: Not authorized (reason code 0x87)"
            assert fault == {"reason": reason}
            status = await table.status()
            (shown,) = [f for f in status.faults if f.what == "delivery-fault"]
            assert shown.device == "broker" and shown.seq == seq
            assert reason in shown.cause and shown.stops is Stops.NOTHING
            # The backlog alarm is raised for the backend the rows do not reach.
            alarms = status.mqtt.backlog_alarms
            assert [a.backend_id for a in alarms] == ["pgs"] and alarms[0].behind_rows > 0
            sock = str(table.config.storage.socket_path)
            assert await asyncio.to_thread(cli.main, ["status", "--socket", sock]) == 0
            out = capsys.readouterr().out
            assert "DELIVERY FAULT [broker]" in out and "ALARM backend pgs" in out
            # Nothing reached the backend, and nothing counts as delivered.
            assert relay.acks.through == 0 and table.backend.events == {}
    refusals = [e for e in logs if e["log_level"] == "error" and e["event"].startswith("mqtt")]
    assert len(refusals) == 1, refusals  # the reconnector says it once

    # Its own certificate: the broker takes the rows, the fault clears (journaled), and
    # everything that waited arrives, the fault's rows with it.
    async with simulated_table(
        secure_broker, data, mqtt=table_mqtt(secure_broker), backend=backend
    ) as table:
        await table.daemon.wait_until(lambda s: s.delivery_fault is None, 10)
        await table.wait_backend_caught_up()
        ((_, cleared),) = journaled(table, "delivery.fault_cleared")
        assert cleared == {"reason": reason}
        types = [e["type"] for e in table.backend.events.values()]
        assert types.count("delivery.fault") == 1 and types.count("delivery.fault_cleared") == 1
        status = await table.status()
        assert all(f.what != "delivery-fault" for f in status.faults)
        assert status.mqtt.delivery_fault is None


def test_config_check_warns_of_a_username_that_is_not_the_table_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .conftest import EXAMPLE_CONFIG

    config = tmp_path / "table.toml"
    text = EXAMPLE_CONFIG.read_text()
    config.write_text(text.replace("port = 1883\n", 'port = 1883\nusername = "tcp-08"\n'))
    assert cli.main(["config", "check", str(config)]) == 0  # a warning, not a failure
    captured = capsys.readouterr()
    assert "warning: mqtt.username 'tcp-08' is not table.table_id" in captured.err
    # The table's own id says nothing.
    config.write_text(text.replace("port = 1883\n", 'port = 1883\nusername = "tcp-07"\n'))
    assert cli.main(["config", "check", str(config)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_config_check_names_missing_or_unreadable_tls_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_a_close_before_the_connack_blames_our_certificate_only_if_we_showed_one(
    tmp_path: Path,
) -> None:
    # Over TLS 1.3 a broker refusing our certificate may just hang up after the handshake;
    # without a certificate of ours, a hang-up is the broker's own (full, restarting) and is
    # retried as any outage, not taken for a refusal.
    cert, key = tmp_path / "table.crt", tmp_path / "table.key"
    cert.write_text("cert")
    key.write_text("key")
    closed = ClosedBeforeAccepted("the connection to the broker closed", tls=True)
    ours = MqttSection(tls=True, cert_file=cert, key_file=key)
    line = describe_connect_error(closed, ours)
    assert "the broker refused this table's client certificate (mqtt.cert_file" in line
    anonymous = describe_connect_error(closed, MqttSection(tls=True))
    assert "certificate" not in anonymous and "closed the connection before" in anonymous
    plain = describe_connect_error(ClosedBeforeAccepted("closed", tls=False), ours)
    assert "certificate" not in plain

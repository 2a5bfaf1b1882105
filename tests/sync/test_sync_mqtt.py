"""Policy sync end to end (issue 9) with Mosquitto as the cloud broker and the real broker as the
gateway: bundle v2 applied and reported; a v1 replay, a tampered bundle and a bundle for another
gateway refused with the reason on ``edge/<gw>/policy/status``; a restart with the cloud down
keeps v2 (the persisted bundle is applied before serving)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import cbor2
import nacl.signing
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.reasoncodes import ReasonCode

from edge_broker.keys import write_verify_key
from edge_broker.sync.bundle import create_bundle
from tests.conftest import BrokerFactory, RunningBroker, to_toml
from tests.sync.cloud import MOSQUITTO, CloudClient, Mosquitto, Pki
from tests.waiting import paho_subscribe, wait_for

pytestmark = pytest.mark.skipif(shutil.which(MOSQUITTO) is None, reason="mosquitto not installed")

GW = "gw-7"


def policy(denied: str) -> dict[str, Any]:
    return {
        "permissions": {
            "sets": {
                "all": {
                    "default_behaviour": "allow",
                    "rules": [{"id": f"no-{denied}", "topic": f"{denied}/#", "type": "DENY"}],
                }
            },
            "assign": [{"client_id": "*", "sets": ["all"]}],
        }
    }


def bundle(key: nacl.signing.SigningKey, version: int, denied: str, gateway: str = GW) -> bytes:
    return create_bundle(
        key,
        version=version,
        gateway=gateway,
        issued_at=1_800_000_000 + version,
        policy=policy(denied),
    )


def gateway_config(tmp_path: Path, cloud_port: int, pub: Path) -> str:
    return to_toml(
        {
            "listeners": [{"name": "tcp", "bind": "127.0.0.1", "port": 0}],
            "sync": {
                "source": "mqtt",
                "gateway_id": GW,
                "trusted_keys": [str(pub)],
                "host": "127.0.0.1",
                "port": cloud_port,
                "state_dir": str(tmp_path / "sync-state"),
                "reconnect_max": 0.3,
            },
        }
    )


def publish_rc(b: RunningBroker, topic: str) -> int:
    """The PUBACK reason code a v5 client gets for a QoS 1 publish to ``topic``."""
    codes: list[int] = []
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"probe-{time.monotonic_ns()}", protocol=mqtt.MQTTv5
    )

    def on_publish(c: Any, u: Any, mid: int, rc: ReasonCode, p: Any) -> None:
        codes.append(rc.value)

    client.on_publish = on_publish
    client.connect(b.host, b.port)
    client.loop_start()
    try:
        client.publish(topic, b"x", qos=1).wait_for_publish(5)
        wait_for(lambda: codes, 5, f"the PUBACK of {topic}")
    finally:
        client.loop_stop()
        client.disconnect()
    return codes[0]


def allowed(b: RunningBroker, topic: str) -> bool:
    rc = publish_rc(b, topic)
    assert rc in (0, 0x10, 0x87), rc  # Success, No matching subscribers, Not authorized
    return rc < 0x80


def test_bundles_applied_refused_and_kept_offline(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    key = nacl.signing.SigningKey.generate()
    pub = tmp_path / "cloud.pub"
    write_verify_key(pub, key.verify_key)
    cloud = Mosquitto(tmp_path / "cloud")
    cloud.start()
    status_topic = f"edge/{GW}/policy/status"
    operator = CloudClient(cloud.port, "operator", [status_topic])
    try:
        gateway = broker_factory(gateway_config(tmp_path, cloud.port, pub))
        assert allowed(gateway, "admin/x")  # no bundle yet: base config allows
        watcher = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id="watcher", protocol=mqtt.MQTTv5
        )
        watcher.connect(gateway.host, gateway.port)
        watcher.loop_start()
        paho_subscribe(watcher, "admin/#", qos=1)
        paho_subscribe(watcher, "other/#", qos=1)

        operator.publish(f"edge/{GW}/policy", bundle(key, 2, "admin"), retain=True)
        status = operator.wait_json(status_topic, lambda s: s["version"] == 2)
        assert status["ok"] is True and status["applied_version"] == 2
        # the live subscription the new policy denies is removed, the other one stays
        assert "2 subscription(s) checked, 1 removed" in status["reason"], status
        watcher.loop_stop()
        watcher.disconnect()
        assert not allowed(gateway, "admin/x")
        assert allowed(gateway, "other/x")

        operator.publish(
            f"edge/{GW}/policy", bundle(key, 1, "other"), retain=True
        )  # replay of an old one
        status = operator.wait_json(status_topic, lambda s: s["version"] == 1)
        assert status["ok"] is False and status["applied_version"] == 2
        assert "not newer than the applied v2" in status["reason"]

        envelope = cbor2.loads(bundle(key, 3, "other"))
        envelope["body"] = envelope["body"].replace(b"other", b"admin")  # altered after signing
        operator.publish(f"edge/{GW}/policy", cbor2.dumps(envelope), retain=True)
        status = operator.wait_json(status_topic, lambda s: s["version"] is None and not s["ok"])
        assert "signature does not verify" in status["reason"] and status["applied_version"] == 2

        operator.publish(f"edge/{GW}/policy", bundle(key, 4, "other", gateway="gw-8"), retain=True)
        status = operator.wait_json(status_topic, lambda s: s["version"] == 4)
        assert status["ok"] is False and "for gateway 'gw-8'" in status["reason"]

        other_key = nacl.signing.SigningKey.generate()
        operator.publish(f"edge/{GW}/policy", bundle(other_key, 5, "other"), retain=True)
        status = operator.wait_json(
            status_topic, lambda s: s["version"] is None and "does not trust" in s["reason"]
        )
        assert status["applied_version"] == 2
        # after all the refusals the v2 policy still decides
        assert not allowed(gateway, "admin/x") and allowed(gateway, "other/x")

        operator.publish(
            f"edge/{GW}/policy", bundle(key, 2, "admin"), retain=True
        )  # the same v2 again
        status = operator.wait_json(
            status_topic,
            lambda s: s["version"] == 2 and s["ok"] and "already applied" in s["reason"],
        )

        assert gateway.stop() == 0
        cloud.stop()  # the uplink is down for the restart
        restarted = broker_factory(gateway_config(tmp_path, cloud.port, pub))
        assert not allowed(restarted, "admin/x")  # v2 applied before serving
        assert allowed(restarted, "other/x")
        assert "bundle_restored" in restarted.log() or "restored" in restarted.log()
    finally:
        operator.close()
        cloud.stop()


def test_a_bundle_that_does_not_compile_keeps_the_running_policy(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    key = nacl.signing.SigningKey.generate()
    pub = tmp_path / "cloud.pub"
    write_verify_key(pub, key.verify_key)
    cloud = Mosquitto(tmp_path / "cloud")
    cloud.start()
    status_topic = f"edge/{GW}/policy/status"
    operator = CloudClient(cloud.port, "operator", [status_topic])
    try:
        gateway = broker_factory(gateway_config(tmp_path, cloud.port, pub))
        operator.publish(f"edge/{GW}/policy", bundle(key, 2, "admin"), retain=True)
        operator.wait_json(status_topic, lambda s: s["version"] == 2 and s["ok"])
        broken = create_bundle(
            key,
            version=3,
            gateway="*",
            issued_at=1_800_000_003,
            policy={
                "permissions": {
                    "sets": {"all": {"rules": [{"id": "bad", "topic": "a/#/b"}]}},
                    "assign": [{"client_id": "*", "sets": ["all"]}],
                }
            },
        )
        operator.publish(f"edge/{GW}/policy", broken, retain=True)
        status = operator.wait_json(status_topic, lambda s: s["version"] == 3)
        assert status["ok"] is False and status["applied_version"] == 2
        assert "does not make a valid config" in status["reason"], status
        assert not allowed(gateway, "admin/x")
        # the persisted bundle is still v2: a restart keeps v2, not the broken v3
        assert gateway.stop() == 0
        restarted = broker_factory(gateway_config(tmp_path, cloud.port, pub))
        assert not allowed(restarted, "admin/x")
        status = operator.wait_json(
            status_topic,
            lambda s: s["version"] == 3 and s["applied_version"] == 2 and s["at"] > time.time() - 5,
        )
        assert (
            status["ok"] is False
        )  # the retained broken bundle is offered again and refused again
    finally:
        operator.close()
        cloud.stop()


def test_bundle_over_mutual_tls(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    """The uplink with ``tls = true``, the cloud's CA and a client certificate (Mosquitto
    ``require_certificate true``)."""
    key = nacl.signing.SigningKey.generate()
    pub = tmp_path / "cloud.pub"
    write_verify_key(pub, key.verify_key)
    pki = Pki.create(tmp_path / "pki")
    cloud = Mosquitto(tmp_path / "cloud", tls=pki)
    cloud.start()
    status_topic = f"edge/{GW}/policy/status"
    operator = CloudClient(cloud.port, "operator", [status_topic], tls=pki)
    try:
        text = gateway_config(tmp_path, cloud.port, pub).replace(
            "[sync]\n",
            f'[sync]\ntls = true\nca = "{pki.ca}"\ncert = "{pki.client_cert}"\nkey = '
            f'"{pki.client_key}"\n',
        )
        gateway = broker_factory(text)
        operator.publish(f"edge/{GW}/policy", bundle(key, 1, "admin"), retain=True)
        status = operator.wait_json(status_topic, lambda s: s["version"] == 1)
        assert status["ok"] is True
        assert not allowed(gateway, "admin/x")
    finally:
        operator.close()
        cloud.stop()

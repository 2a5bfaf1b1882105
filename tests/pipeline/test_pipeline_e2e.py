"""End to end: generated fleet -> Spark compile, bundles published retained to a cloud broker (a
second real broker) -> the gateway (the real broker, [sync] source = "mqtt") applies its bundle ->
MQTT traffic -> the gateway's audit log -> the Spark audit job finds exactly the denials the
traffic caused."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge_broker.pipeline.audit import run_audit
from edge_broker.pipeline.compile import run_compile
from edge_broker.pipeline.fleet import make_fleet
from tests.conftest import BrokerFactory, to_toml
from tests.pipeline.conftest import ISSUED_AT, Keys
from tests.waiting import wait_for

GW = "gw-00000"


def _client(port: int, client_id: str) -> mqtt.Client:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    return client


def _publish(client: mqtt.Client, topic: str) -> int:
    codes: list[int] = []
    client.on_publish = lambda c, u, mid, rc, p: codes.append(rc.value)
    client.publish(topic, b"21.5", qos=1).wait_for_publish(5)
    return wait_for(lambda: codes, 5, f"the PUBACK of {topic}")[0]


def _subscribe(client: mqtt.Client, topic: str) -> int:
    codes: list[int] = []
    client.on_subscribe = lambda c, u, mid, rcs, p: codes.extend(rc.value for rc in rcs)
    client.subscribe(topic, qos=0)
    return wait_for(lambda: codes, 5, f"the SUBACK of {topic}")[0]


def _retained(port: int, topic: str, predicate: Any, timeout: float = 30.0) -> bytes:
    """The first message on ``topic`` (retained or live) that satisfies ``predicate``."""
    got: list[bytes] = []
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"watch-{time.monotonic_ns()}", protocol=mqtt.MQTTv5
    )
    client.on_message = lambda c, u, m: got.append(m.payload) if predicate(m.payload) else None
    client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        wait_for(lambda: got, timeout, f"a matching message on {topic}")
    finally:
        client.loop_stop()
        client.disconnect()
    return got[0]


def test_fleet_compile_apply_traffic_audit(
    spark: Any, keys: Keys, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    cloud = broker_factory()
    fleet = make_fleet(
        str(tmp_path / "fleet"), gateways=2, devices_per_gateway=12, tenants=1, seed=3
    )
    result = run_compile(
        spark,
        fleet.directory,
        str(tmp_path / "out"),
        key=keys.key,
        issued_at=ISSUED_AT,
        publish=f"127.0.0.1:{cloud.port}",
    )
    assert result.bundles == 2 and result.invalid == 0
    bundle = (tmp_path / "out" / "bundles" / f"{GW}.cbor").read_bytes()
    assert (
        _retained(cloud.port, f"edge/{GW}/policy", lambda p: True) == bundle
    )  # published retained
    with open(Path(fleet.directory) / "devices.csv", newline="") as fh:
        sensor = next(
            r
            for r in csv.DictReader(fh)
            if r["gateway"] == GW and r["sets"] == "sensor" and not r["smoker_id"]
        )
    cid = sensor["client_id"]

    audit_dir = tmp_path / "audit"
    broker = broker_factory(
        to_toml(
            {
                "listeners": [{"name": "tcp", "bind": "127.0.0.1", "port": 0}],
                "sync": {
                    "source": "mqtt",
                    "gateway_id": GW,
                    "trusted_keys": [str(keys.pub_path)],
                    "host": "127.0.0.1",
                    "port": cloud.port,
                    "state_dir": str(tmp_path / "sync-state"),
                    "reconnect_max": 0.3,
                    "audit_upload": False,
                },
                "audit": {"dir": str(audit_dir), "gateway_id": GW},
            }
        )
    )
    status = json.loads(
        _retained(
            cloud.port,
            f"edge/{GW}/policy/status",
            lambda p: json.loads(p).get("applied_version") == 1,
        )
    )
    assert status["ok"] is True, (status, broker.log()[-2000:])

    device = _client(broker.port, cid)
    try:
        assert _publish(device, f"sensors/{cid}/temp") in (0x00, 0x10)  # own-data: allowed
        assert _publish(device, "admin/reboot") == 0x87  # no-admin
        assert _publish(device, "admin/reset") == 0x87
        assert _subscribe(device, "admin/#") == 0x87
        assert _subscribe(device, f"commands/{cid}") == 0x00
    finally:
        device.loop_stop()
        device.disconnect()
    broker.stop()

    audit = run_audit(spark, [str(audit_dir)], str(tmp_path / "report"))
    by_client = {(r["gw"], r["client"]): r["denials"] for r in audit.tables["denials_by_client"]}
    assert by_client == {(GW, cid): 3}
    by_topic = {(r["action"], r["topic"]): r["denials"] for r in audit.tables["denials_by_topic"]}
    assert by_topic == {
        ("publish", "admin/reboot"): 1,
        ("publish", "admin/reset"): 1,
        ("subscribe", "admin/#"): 1,
    }
    assert {(r["gate"], r["rule"]): r["denials"] for r in audit.tables["denials_by_rule"]} == {
        ("permissions", "no-admin"): 3
    }
    assert audit.tables["denials_by_tenant"] == [{"tenant": "~", "denials": 3}]

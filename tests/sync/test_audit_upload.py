"""Audit upload end to end (issue 9): the gateway's audit log reaches Mosquitto on
``edge/<gw>/audit`` in QoS 1 batches with batch ids; during an uplink outage the records wait
in the audit log and after it every one arrives, once."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from edge_broker.keys import write_verify_key
from tests.conftest import BrokerFactory, RunningBroker, to_toml
from tests.sync.cloud import MOSQUITTO, CloudClient, Mosquitto

pytestmark = pytest.mark.skipif(shutil.which(MOSQUITTO) is None, reason="mosquitto not installed")

GW = "gw-audit"
TOPIC = f"edge/{GW}/audit"
PERMISSIONS = """
[permissions.sets.all]
default_behaviour = "allow"
rules = [ { id = "no-admin", topic = "admin/#", type = "DENY" } ]

[[permissions.assign]]
client_id = "*"
sets = ["all"]
"""


def config(tmp_path: Path, cloud_port: int, pub: Path) -> str:
    return (
        to_toml(
            {
                "listeners": [{"name": "tcp", "bind": "127.0.0.1", "port": 0}],
                "audit": {"dir": str(tmp_path / "audit"), "gateway_id": GW},
                "sync": {
                    "source": "mqtt",
                    "gateway_id": GW,
                    "trusted_keys": [str(pub)],
                    "host": "127.0.0.1",
                    "port": cloud_port,
                    "state_dir": str(tmp_path / "sync-state"),
                    "reconnect_max": 0.3,
                    "audit_batch": 7,
                },
            }
        )
        + PERMISSIONS
    )


def denied_publishes(b: RunningBroker, topics: list[str]) -> None:
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"dev-{time.monotonic_ns()}", protocol=mqtt.MQTTv5
    )
    client.connect(b.host, b.port)
    client.loop_start()
    try:
        for topic in topics:
            client.publish(topic, b"x", qos=1).wait_for_publish(5)
    finally:
        client.loop_stop()
        client.disconnect()


def batches(cloud: CloudClient) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    out = []
    for payload in cloud.received(TOPIC):
        lines = payload.decode().splitlines()
        out.append((json.loads(lines[0]), [json.loads(line) for line in lines[1:]]))
    return out


def denied_topics(cloud: CloudClient) -> list[str]:
    return [
        r["topic"]
        for _, records in batches(cloud)
        for r in records
        if r["type"] == "decision" and r.get("outcome") == "deny"
    ]


def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_outage_buffers_and_delivers_every_batch_once(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    pub = tmp_path / "cloud.pub"
    import nacl.signing

    write_verify_key(pub, nacl.signing.SigningKey.generate().verify_key)
    cloud_broker = Mosquitto(tmp_path / "cloud")
    cloud_broker.start()
    # a persistent session: what is published while this subscriber is away waits for it
    cloud = CloudClient(cloud_broker.port, "audit-sink", [TOPIC], clean=False)
    try:
        gateway = broker_factory(config(tmp_path, cloud_broker.port, pub))
        first = [f"admin/before/{i}" for i in range(10)]
        denied_publishes(gateway, first)
        wait_for(lambda: denied_topics(cloud) == first)

        cloud_broker.stop()  # uplink outage
        during = [f"admin/during/{i}" for i in range(25)]
        denied_publishes(gateway, during)
        time.sleep(1.5)  # the records are flushed to the audit log and wait there
        cloud_broker.start()
        wait_for(lambda: len(denied_topics(cloud)) >= 35)
        time.sleep(1.0)  # nothing more (no duplicate) arrives
        assert denied_topics(cloud) == first + during

        got = batches(cloud)
        ids = [header["batch"] for header, _ in got]
        assert len(ids) == len(set(ids)), ids  # each batch once
        assert all(
            header["gw"] == GW and header["count"] == len(records) <= 7 for header, records in got
        )
        # batch ids name consecutive line ranges of one segment each
        position: dict[int, int] = {}
        for header, _ in got:
            assert header["first"] == position.get(header["segment"], 0) + 1
            assert header["last"] - header["first"] + 1 == header["count"]
            position[header["segment"]] = header["last"]
        cursor = json.loads((tmp_path / "sync-state" / "audit-cursor.json").read_text())
        assert (cursor["seq"], cursor["line"]) == (got[-1][0]["segment"], got[-1][0]["last"])

        # a restart resumes from the cursor: nothing is sent again
        assert gateway.stop() == 0
        again = broker_factory(config(tmp_path, cloud_broker.port, pub))
        denied_publishes(again, ["admin/after"])
        wait_for(lambda: denied_topics(cloud)[-1:] == ["admin/after"])
        time.sleep(1.0)
        assert denied_topics(cloud) == first + during + ["admin/after"]
    finally:
        cloud.close()
        cloud_broker.stop()

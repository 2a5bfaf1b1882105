"""MQTT.js (npm ``mqtt``) against the real broker: MQTT 3.1.1 and 5 (tests/node/scenarios.js)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parent.parent / "node"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules" / "mqtt").is_dir(),
    reason="MQTT.js not installed: scripts/test runs npm install in tests/node",
)


def scenario(broker, version: int, name: str, url: str | None = None) -> dict:
    env = dict(os.environ, MQTT_URL=url) if url else None
    r = subprocess.run(
        ["node", str(NODE_DIR / "scenarios.js"), broker.host, str(broker.port), str(version), name],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.stdout, r.stderr
    result = json.loads(r.stdout.splitlines()[-1])
    assert result["ok"], result.get("error")
    return result


@pytest.mark.parametrize("version", [4, 5])
def test_qos_0_1_2(module_broker, version):
    r = scenario(module_broker, version, "qos")
    assert r["granted"] == [2]
    assert sorted(r["got"]) == [["0", "m0", 0], ["1", "m1", 1], ["2", "m2", 2]]


@pytest.mark.parametrize("version", [4, 5])
def test_retained(module_broker, version):
    assert scenario(module_broker, version, "retained")["got"] == [["kept", True]]


@pytest.mark.parametrize("version", [4, 5])
def test_will(module_broker, version):
    assert scenario(module_broker, version, "will")["got"] == ["gone"]


@pytest.mark.parametrize("version", [4, 5])
def test_wildcards(module_broker, version):
    assert scenario(module_broker, version, "wildcards")["topics"] == [
        "hall/light/on",
        "hall/temp",
        "kitchen/temp",
    ]


def test_v5_shared_subscription(module_broker):
    r = scenario(module_broker, 5, "shared")
    assert r["all"] == list(range(10)) and r["a"] == 5 and r["b"] == 5


def test_v5_subscription_identifier(module_broker):
    assert scenario(module_broker, 5, "subids")["ids"] in ([42], [[42]])


def test_v5_topic_aliases(module_broker):
    got = scenario(module_broker, 5, "aliases")["got"]
    assert [p for _, p in got] == ["0", "1", "2"]
    assert all(t.endswith("/alias") for t, _ in got)  # MQTT.js resolves the outbound alias


def test_v5_message_expiry(module_broker):
    ((payload, remaining),) = scenario(module_broker, 5, "expiry")["got"]
    assert payload == "long" and 57 <= remaining <= 60


def test_v5_flow_control(module_broker):
    r = scenario(module_broker, 5, "flow")
    assert r["count"] == 20 and r["inOrder"]


@pytest.mark.parametrize("version", [4, 5])
def test_over_websocket(broker_factory, version):
    b = broker_factory({"listeners": [{"name": "ws", "transport": "websocket"}]})
    r = scenario(b, version, "qos", url=f"ws://{b.host}:{b.port}/mqtt")
    assert sorted(r["got"]) == [["0", "m0", 0], ["1", "m1", 1], ["2", "m2", 2]]

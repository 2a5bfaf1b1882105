"""Audit upload end to end (issues 9 and 30): the gateway's audit log reaches collectors through
Mosquitto on ``edge/<gw>/audit`` in QoS 1 batches with batch ids; the gateway's cursor moves only
when a collector confirms a batch stored, so whatever starts first and through outages every
record is stored, once; collectors share the batches through an MQTT 5 shared subscription."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from edge_broker.keys import write_verify_key
from tests.conftest import BrokerFactory, RunningBroker, to_toml
from tests.sync.cloud import MOSQUITTO, CloudClient, Mosquitto
from tests.waiting import wait_for

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


def batch_files(folder: Path) -> list[Path]:
    """The stored batches in upload order: by segment, then first line (numerically)."""
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.jsonl"), key=lambda p: tuple(int(n) for n in p.stem.split("-")))


def stored_records(store: Path) -> list[dict[str, Any]]:
    """Every record a collector stored (header lines skipped), in batch order."""
    out = []
    files = batch_files(store / GW)
    for path in files:
        lines = path.read_text().splitlines()
        assert json.loads(lines[0])["gw"] == GW
        out.extend(json.loads(line) for line in lines[1:])
    return out


def stored_denials(store: Path) -> list[str]:
    return [
        r["topic"]
        for r in stored_records(store)
        if r["type"] == "decision" and r.get("outcome") == "deny"
    ]


class Collector:
    """``edge-broker-pipeline collect`` in a thread (its own client id, the shared group)."""

    def __init__(self, port: int, store: Path) -> None:
        from edge_broker.pipeline.batches import CollectStats, collect

        self.stop_event = threading.Event()
        self.stats = CollectStats()
        self.thread = threading.Thread(
            target=collect,
            args=(f"127.0.0.1:{port}", str(store)),
            kwargs={"stats": self.stats, "stop": self.stop_event},
            daemon=True,
        )
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(10)


def cursor(tmp_path: Path) -> tuple[int, int] | None:
    path = tmp_path / "sync-state" / "audit-cursor.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return data["seq"], data["line"]


def test_no_batch_is_lost_whatever_starts_first(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    """The issue's loss: a gateway uploading before any collector ever ran had its batches
    PUBACKed by the cloud broker, its cursor moved, and nobody stored them. Now the cursor
    waits for a collector's "stored": gateway first, then the collector, an uplink outage, a
    collector that goes away while the gateway restarts; every record is stored exactly once."""
    pub = tmp_path / "cloud.pub"
    import nacl.signing

    write_verify_key(pub, nacl.signing.SigningKey.generate().verify_key)
    store = tmp_path / "store"
    cloud_broker = Mosquitto(tmp_path / "cloud")
    cloud_broker.start()
    watcher = CloudClient(cloud_broker.port, "watcher", [TOPIC])  # sees what the gateway sends
    collector: Collector | None = None
    try:
        gateway = broker_factory(config(tmp_path, cloud_broker.port, pub))
        first = [f"admin/before/{i}" for i in range(10)]
        denied_publishes(gateway, first)
        wait_for(lambda: watcher.received(TOPIC), 20)  # uploaded, PUBACKed, stored by no one
        time.sleep(0.5)
        assert cursor(tmp_path) is None and not (store / GW).exists()

        collector = Collector(cloud_broker.port, store)  # its announcement: resent at once
        wait_for(lambda: stored_denials(store) == first, 20)

        cloud_broker.stop()  # uplink outage, for gateway and collector alike
        during = [f"admin/during/{i}" for i in range(25)]
        denied_publishes(gateway, during)
        time.sleep(1.0)  # the records are flushed to the audit log and wait there
        cloud_broker.start()
        wait_for(lambda: stored_denials(store) == first + during, 30)

        collector.stop()  # no collector, and the gateway restarts meanwhile
        collector = None
        denied_publishes(gateway, ["admin/unstored"])
        time.sleep(1.0)
        assert gateway.stop() == 0
        kept = cursor(tmp_path)
        again = broker_factory(config(tmp_path, cloud_broker.port, pub))
        denied_publishes(again, ["admin/after"])
        time.sleep(1.0)
        assert cursor(tmp_path) == kept  # nothing confirmed, nothing skipped
        collector = Collector(cloud_broker.port, store)
        wait_for(lambda: stored_denials(store)[-2:] == ["admin/unstored", "admin/after"], 30)
        time.sleep(0.5)
        assert stored_denials(store) == first + during + ["admin/unstored", "admin/after"]

        # batch ids name consecutive line ranges of one segment each, and no line is stored
        # under two ids
        position: dict[int, int] = {}
        for path in batch_files(store / GW):
            header = json.loads(path.read_text().splitlines()[0])
            assert header["first"] == position.get(header["segment"], 0) + 1
            assert header["last"] - header["first"] + 1 == header["count"] <= 7
            position[header["segment"]] = header["last"]
        last = sorted(position.items())[-1]
        wait_for(lambda: cursor(tmp_path) == last, 20)
    finally:
        if collector is not None:
            collector.stop()
        watcher.close()
        cloud_broker.stop()


def test_collectors_share_the_batches_and_store_each_once(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    """Three collectors in one MQTT 5 shared subscription group and two gateways: every batch
    stored once, the work spread (each batch went to one collector), nothing missing."""
    pub = tmp_path / "cloud.pub"
    import nacl.signing

    write_verify_key(pub, nacl.signing.SigningKey.generate().verify_key)
    store = tmp_path / "store"
    cloud_broker = Mosquitto(tmp_path / "cloud")
    cloud_broker.start()
    collectors = [Collector(cloud_broker.port, store) for _ in range(3)]
    try:
        gateways = []
        for name in ("gw-a", "gw-b"):
            text = config(tmp_path / name, cloud_broker.port, pub).replace(GW, name)
            gateways.append(broker_factory(text))
        sent = {b.port: [f"admin/{b.port}/{i}" for i in range(60)] for b in gateways}
        for b in gateways:
            denied_publishes(b, sent[b.port])

        def topics(name: str) -> list[str]:
            out = []
            for path in batch_files(store / name):
                out += [
                    json.loads(line)["topic"]
                    for line in path.read_text().splitlines()[1:]
                    if '"outcome":"deny"' in line
                ]
            return out

        # every record once, in order: no batch missing, none stored twice under two names
        wait_for(lambda: [topics("gw-a"), topics("gw-b")] == list(sent.values()), 90)
        files = list(store.rglob("*.jsonl"))
        assert not list(store.rglob("*.part"))
        received = sum(c.stats.stored + c.stats.repeats for c in collectors)
        assert received >= len(files)  # a resend may reach two collectors: one file still
        assert sum(1 for c in collectors if c.stats.stored) >= 2  # the group shares the work
    finally:
        for c in collectors:
            c.stop()
        cloud_broker.stop()

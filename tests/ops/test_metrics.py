"""The Prometheus endpoint (ops/metrics.py) of a real broker, scraped over HTTP and parsed with
``prometheus_client.parser.text_string_to_metric_families``."""

from __future__ import annotations

import re
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from prometheus_client.parser import text_string_to_metric_families

from edge_broker.broker.delivery import QUEUE_ENTRY_BYTES
from tests.conftest import BrokerFactory, RunningBroker
from tests.waiting import paho_subscribe, wait_for_log_match

METRICS_RE = re.compile(r"metrics on http://([\d.]+):(\d+)/metrics")

CONFIG = """
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0

[metrics]
enabled = true
port = 0

[audit]
dir = "{audit}"

[permissions.sets.everyone]
default_behaviour = "allow"
rules = [ {{ id = "no-admin", topic = "admin/#", type = "DENY" }} ]

[[permissions.assign]]
client_id = "*"
sets = ["everyone"]
"""


def _metrics_url(b: RunningBroker) -> str:
    match = wait_for_log_match(b, METRICS_RE)
    return f"http://{match.group(1)}:{match.group(2)}/metrics"


def _scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = response.read().decode()
    families: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            families.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return families


def _value(
    families: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str
) -> float:
    for sample_labels, value in families[name]:
        if all(sample_labels.get(k) == v for k, v in labels.items()):
            return value
    raise KeyError(f"{name}{labels} not in {families.get(name)}")


def test_scrape_counts_traffic_and_decisions(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    b = broker_factory(CONFIG.format(audit=tmp_path / "audit"))
    url = _metrics_url(b)
    before = _scrape(url)
    assert _value(before, "edge_broker_up") == 1
    assert _value(before, "edge_broker_clients_connected") == 0
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="m1", protocol=mqtt.MQTTv5)
    client.connect(b.host, b.port)
    client.loop_start()
    try:
        for _ in range(5):
            client.publish("sensors/a", b"x" * 10, qos=1).wait_for_publish(5)
        client.publish("admin/reboot", b"now", qos=1).wait_for_publish(5)  # denied: PUBACK 0x87
        after = _scrape(url)
    finally:
        client.loop_stop()
        client.disconnect()
    assert _value(after, "edge_broker_clients_connected") == 1
    assert _value(after, "edge_broker_connections_open") == 1
    assert _value(after, "edge_broker_messages_total", direction="received") == 6
    assert _value(after, "edge_broker_bytes_total", direction="received") > 60
    assert (
        _value(
            after,
            "edge_broker_authz_decisions_total",
            gate="permissions",
            rule="no-admin",
            outcome="deny",
        )
        == 1
    )
    assert _value(after, "edge_broker_denied_total", action="publish") == 1
    assert _value(after, "edge_broker_dropped_total", reason="queue") == 0
    assert "edge_broker_audit_records_written_total" in after


def test_other_paths_and_methods(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    b = broker_factory(CONFIG.format(audit=tmp_path / "audit"))
    url = _metrics_url(b)
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(url.replace("/metrics", "/"), timeout=5)
    assert missing.value.code == 404
    request = urllib.request.Request(url, data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as post:
        urllib.request.urlopen(request, timeout=5)
    assert post.value.code == 405
    host, port = url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"garbage\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")  # a malformed request line
    assert _scrape(url)  # still serving


def test_metrics_are_off_by_default(broker_factory: BrokerFactory) -> None:
    b = broker_factory()
    # a "nothing happens" check: the metrics line, when on, follows the listeners' within
    # milliseconds, and no later line marks that it would not come
    time.sleep(0.3)
    assert METRICS_RE.search(b.log()) is None


def test_sync_status_in_metrics(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    import nacl.signing

    from edge_broker.keys import write_verify_key
    from edge_broker.sync.bundle import create_bundle

    key = nacl.signing.SigningKey.generate()
    write_verify_key(tmp_path / "cloud.pub", key.verify_key)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    text = (
        CONFIG.format(audit=tmp_path / "audit")
        + f"""
[sync]
source = "directory"
gateway_id = "gw-m"
trusted_keys = ["{tmp_path / "cloud.pub"}"]
directory = "{inbox}"
poll_interval = 0.1
state_dir = "{tmp_path / "state"}"
"""
    )
    b = broker_factory(text)
    url = _metrics_url(b)
    assert _value(_scrape(url), "edge_broker_sync_policy_version") == 0
    (inbox / "a.cbor").write_bytes(
        create_bundle(
            key, version=3, gateway="gw-m", issued_at=1, policy={"acl": {"enabled": False}}
        )
    )
    (inbox / "b.cbor").write_bytes(
        create_bundle(
            key, version=2, gateway="gw-m", issued_at=1, policy={"acl": {"enabled": False}}
        )
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        families = _scrape(url)
        if _value(families, "edge_broker_sync_bundles_total", outcome="refused") >= 1:
            break
        time.sleep(0.1)
    assert _value(families, "edge_broker_sync_policy_version") == 3
    assert _value(families, "edge_broker_sync_bundles_total", outcome="applied") == 1
    assert _value(families, "edge_broker_sync_bundles_total", outcome="refused") == 1  # v2 after v3
    assert _value(families, "edge_broker_sync_last_success_timestamp_seconds") > time.time() - 60
    assert _value(families, "edge_broker_sync_connected") == 0


def test_claim_store_stats(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    text = (
        CONFIG.format(audit=tmp_path / "audit")
        + f"""
[claims]
enabled = true
store_dir = "{tmp_path / "claims"}"
"""
    )
    b = broker_factory(text)
    families = _scrape(_metrics_url(b))
    assert _value(families, "edge_broker_claims", state="indexed") == 0
    assert _value(families, "edge_broker_claims", state="quarantined") == 0
    assert _value(families, "edge_broker_claims_store_healthy") == 1
    assert _value(families, "edge_broker_claims_throttled_clients") == 0
    assert _value(families, "edge_broker_claims_pool_bytes") == 0
    assert _value(families, "edge_broker_claims_pool_limit_bytes") == 4 * 1024 * 1024
    assert "edge_broker_sync_policy_version" not in families  # no [sync]: no sync metrics


def test_state_metrics_and_health_endpoints(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    """Issue 20: what $SYS has (sessions, queued messages, subscriptions, retained count and
    bytes, store health) plus the process's memory; /healthz and /readyz beside /metrics."""
    b = broker_factory(
        CONFIG.format(audit=tmp_path / "audit")
        + f'\n[persistence]\nstate_dir = "{tmp_path / "state"}"\n'
    )
    url = _metrics_url(b)
    before = _scrape(url)
    retained_before = _value(before, "edge_broker_retained_messages")
    bytes_before = _value(before, "edge_broker_retained_bytes")
    sleeper = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id="sleeper",
        clean_session=False,
        protocol=mqtt.MQTTv311,
    )
    sleeper.connect(b.host, b.port)
    sleeper.loop_start()
    paho_subscribe(sleeper, "q/#", qos=1)
    sleeper.disconnect()
    sleeper.loop_stop()
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="m2", protocol=mqtt.MQTTv5)
    client.connect(b.host, b.port)
    client.loop_start()
    try:
        client.publish("r/one", b"x" * 100, qos=1, retain=True).wait_for_publish(5)
        client.publish("r/two", b"y" * 50, qos=1, retain=True).wait_for_publish(5)
        for i in range(3):
            client.publish(f"q/{i}", b"z" * 7, qos=1).wait_for_publish(5)
        after = _scrape(url)
    finally:
        client.loop_stop()
        client.disconnect()
    assert (
        _value(after, "edge_broker_retained_messages") == retained_before + 2
    )  # $ topics not counted
    assert _value(after, "edge_broker_retained_bytes") >= bytes_before + 150
    assert _value(after, "edge_broker_sessions") == 2  # the offline persistent one and m2
    assert _value(after, "edge_broker_queued_messages") == 3
    # one view of the queues' bytes, as max_queued_bytes_total counts them (issue 16): three
    # 7-byte messages and their entries, the same figure as $SYS/broker/limits/queued/bytes
    assert _value(after, "edge_broker_queued_bytes") >= 3 * (7 + QUEUE_ENTRY_BYTES)
    assert "edge_broker_queued_bytes_budget" not in after
    assert _value(after, "edge_broker_subscriptions") >= 1
    assert _value(after, "edge_broker_store_healthy") == 1
    assert _value(after, "edge_broker_store_refused_total") == 0
    assert 5e6 < _value(after, "process_resident_memory_bytes") < 1e9
    for path, body in (("/healthz", b"ok\n"), ("/readyz", b"ready\n")):
        with urllib.request.urlopen(url.replace("/metrics", path), timeout=5) as response:
            assert response.status == 200 and response.read() == body


def test_readyz_is_503_while_the_store_refuses_writes(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    """The broker store on a tiny tmpfs that fills up: /readyz says why, /healthz stays 200;
    space back, the store's probe succeeds and /readyz is 200 again."""
    import os
    import subprocess

    page = os.sysconf("SC_PAGE_SIZE")
    mount = tmp_path / "tiny"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={64 * page}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        b = broker_factory(
            CONFIG.format(audit=tmp_path / "audit")
            + f'\n[persistence]\nstate_dir = "{mount / "state"}"\n'
        )
        url = _metrics_url(b)
        ready = url.replace("/metrics", "/readyz")
        with urllib.request.urlopen(ready, timeout=5) as response:
            assert response.status == 200
        filler = mount / "filler"
        filler.write_bytes(b"\0" * (56 * page))
        client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="filler", protocol=mqtt.MQTTv5)
        client.connect(b.host, b.port)
        client.loop_start()
        try:
            status = None
            for i in range(200):
                client.publish(f"big/{i}", os.urandom(4096), qos=1, retain=True).wait_for_publish(5)
                try:
                    urllib.request.urlopen(ready, timeout=5).close()
                except urllib.error.HTTPError as exc:
                    status, body = exc.code, exc.read().decode()
                    break
            assert status == 503, "the store never filled up"
            assert body.startswith("the broker store refuses writes: ")
            with urllib.request.urlopen(url.replace("/metrics", "/healthz"), timeout=5) as response:
                assert response.status == 200
            assert _value(_scrape(url), "edge_broker_store_healthy") == 0
            filler.unlink()
            deadline = time.monotonic() + 20
            while True:
                try:
                    with urllib.request.urlopen(ready, timeout=5) as response:
                        assert response.read() == b"ready\n"
                        break
                except urllib.error.HTTPError:
                    assert time.monotonic() < deadline, "the store did not recover"
                    time.sleep(0.2)
        finally:
            client.loop_stop()
            client.disconnect()
        b.stop()
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)

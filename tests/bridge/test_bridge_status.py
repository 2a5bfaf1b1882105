"""Observability of a bridge (issue 19): $SYS/broker/bridge/<name>/…, the metrics endpoint and
``edge-broker bridge status``; the queue bound with its overflow counted and logged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bridge_support import (
    METRICS,
    Collector,
    bridge_status,
    free_port,
    gateway_toml,
    metrics_url,
    publish,
    sink_of,
    stopped_cloud_with_sink,
    sys_value,
    wait_log,
)

ROOT = Path(__file__).resolve().parents[2]


def test_queue_bound_status_and_cli(broker_factory, mosquitto_factory, tmp_path: Path):
    cloud = stopped_cloud_with_sink(mosquitto_factory, tmp_path, "s/#")  # the cloud is down
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "queue_max_messages": 5,
                    "overflow": "drop-oldest",
                    "topics": [{"direction": "out", "local": "s/#", "qos": 1}],
                }
            ],
            extra=METRICS,
        )
    )
    wait_log(gw, "bridge cloud cannot connect")
    publish(gw.port, [("s/x", str(i).encode(), 1) for i in range(8)])
    assert (
        sys_value(gw.port, "$SYS/broker/bridge/cloud/messages/dropped", until=lambda v: v == "3")
        == "3"
    )
    assert sys_value(gw.port, "$SYS/broker/bridge/cloud/queue/messages") == "5"
    assert sys_value(gw.port, "$SYS/broker/bridge/cloud/connected") == "0"
    assert "Connection refused" in sys_value(gw.port, "$SYS/broker/bridge/cloud/last_error")
    text = gw.log()
    assert text.count("outbound queue full") == 1  # logged once, counted always
    status = bridge_status(gw)
    assert (status["connected"], status["queue_messages"], status["dropped"]) == (0, 5, 3)
    # the exposition parses (Prometheus' own parser), the error label included
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url(gw), timeout=5) as response:
        families = {f.name: f for f in text_string_to_metric_families(response.read().decode())}
    error = families["edge_broker_bridge_last_error_info"].samples[0]
    assert error.labels["bridge"] == "cloud" and "Connection refused" in error.labels["error"]
    assert families["edge_broker_bridge_dropped"].samples[0].value == 3

    # the cloud comes up: the 5 newest arrive in order, the queue empties
    cloud.start()
    sink = sink_of(cloud)
    try:
        got = sink.wait_for(5, 20)
    finally:
        sink.close()
    assert [p for _, p, *_ in got] == [b"3", b"4", b"5", b"6", b"7"]
    status = bridge_status(
        gw, until=lambda s: s.get("queue_messages") == 0 and s.get("connected") == 1
    )
    assert (
        status["connected"],
        status["queue_messages"],
        status["acknowledged"],
        status["sent"],
    ) == (1, 0, 5, 5)
    assert status.get("last_error", "") == ""

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "edge_broker", "bridge", "status", "--url", metrics_url(gw)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("cloud: connected  queue 0 msgs")
    assert "dropped 3" in out.stdout


def test_status_cli_without_a_running_broker():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_broker",
            "bridge",
            "status",
            "--url",
            f"http://127.0.0.1:{free_port()}/metrics",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=30,
    )
    assert out.returncode == 1
    assert "is the broker running with [metrics]?" in out.stderr
    assert "Traceback" not in out.stderr


def test_reload_keeps_the_running_bridges(broker_factory, mosquitto_factory):
    import signal

    cloud = mosquitto_factory()
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "topics": [
                        {"direction": "out", "local": "s/#", "remote_prefix": "old/", "qos": 1}
                    ],
                }
            ]
        )
    )
    wait_log(gw, "bridge cloud connected")
    text = gw.config_path.read_text()
    gw.config_path.write_text(text.replace('remote_prefix = "old/"', 'remote_prefix = "new/"'))
    gw.process.send_signal(signal.SIGHUP)
    wait_log(gw, "bridge changes take effect after a restart")
    sink = Collector(cloud.port, [("#", 1)])
    try:
        publish(gw.port, [("s/x", b"after reload", 1)])
        got = sink.wait_for(1, 10)
    finally:
        sink.close()
    assert [t for t, *_ in got] == ["old/s/x"]

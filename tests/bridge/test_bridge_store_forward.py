"""Store-and-forward through real outages (issue 19 "Proof"): the cloud (Mosquitto) stopped
under steady traffic and started again; the gateway killed with -9 while 10,000 messages wait."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from bridge_support import (
    Collector,
    free_port,
    gateway_toml,
    publish,
    sink_of,
    stopped_cloud_with_sink,
    sys_value,
    wait_log,
)


def in_order_and_complete(
    got: list[tuple[str, bytes, int, bool]], topics: list[str], count: int
) -> None:
    """Every message 0..count-1 of every topic arrived, first copies in order (QoS 1 may
    repeat a message after a reconnect: at least once)."""
    for topic in topics:
        seqs = [int(p) for t, p, *_ in got if t == topic]
        first: list[int] = []
        seen: set[int] = set()
        for s in seqs:
            if s not in seen:
                seen.add(s)
                first.append(s)
        assert first == list(range(count)), f"{topic}: {first[:20]}... ({len(first)} of {count})"


@pytest.mark.parametrize("protocol", ["3.1.1", "5"])
def test_cloud_outage_under_steady_traffic(
    protocol, broker_factory, mosquitto_factory, tmp_path: Path
):
    # The cloud keeps the subscriber's session across its own restart (persistence), so what the
    # bridge delivers while the subscriber reconnects is queued for it there.
    cloud = mosquitto_factory(f"persistence true\npersistence_location {tmp_path}/\n")
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "protocol": protocol,
                    "topics": [
                        {"direction": "out", "local": "tele/#", "remote_prefix": "gw/", "qos": 1}
                    ],
                }
            ]
        )
    )
    wait_log(gw, "bridge cloud connected")
    sink = Collector(
        cloud.port, [("gw/#", 1)], protocol=paho.MQTTv311, client_id="cloud-sink", clean=False
    )
    sink.client.reconnect_delay_set(0.1, 0.5)
    topics = [f"tele/{i}" for i in range(3)]
    count = 300
    stop_at, start_at = 100, 200

    publisher = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    publisher.connect("127.0.0.1", gw.port)
    publisher.loop_start()
    try:
        for n in range(count):
            if n == stop_at:
                cloud.stop()
            if n == start_at:
                wait_log(gw, "bridge cloud disconnected")
                cloud.start()
            infos = [publisher.publish(t, str(n).encode(), 1) for t in topics]
            for info in infos:
                info.wait_for_publish(10)  # the gateway acknowledges while the cloud is down
            time.sleep(0.01)
        got = sink.wait_for(count * len(topics), 30)
    finally:
        publisher.loop_stop()
        publisher.disconnect()
        sink.close()
    in_order_and_complete(got, [f"gw/{t}" for t in topics], count)
    text = gw.log()
    # one line per state change, not per attempt
    assert text.count("bridge cloud disconnected") == 1
    assert text.count("bridge cloud connected") == 2


def test_kill_9_with_10000_queued_messages_loses_nothing_acknowledged(
    broker_factory, mosquitto_factory, tmp_path: Path
):
    cloud_port = free_port()  # nothing listens yet: the cloud is down
    config = gateway_toml(
        [
            {
                "name": "cloud",
                "address": "127.0.0.1",
                "port": cloud_port,
                "protocol": "5",
                "client_id": "gw-kill9",
                "topics": [{"direction": "out", "local": "q/#", "qos": 1}],
            }
        ],
        extra=f'[persistence]\nstate_dir = "{tmp_path}/state"\ndurability = "sync"\n',
    )
    gw = broker_factory(config)
    wait_log(gw, "bridge cloud cannot connect")
    topics = ["q/a", "q/b"]
    count = 5000
    publish(gw.port, [(t, str(n).encode(), 1) for n in range(count) for t in topics])
    assert sys_value(
        gw.port,
        "$SYS/broker/bridge/cloud/queue/messages",
        until=lambda v: v == str(count * len(topics)),
    ) == str(count * len(topics))
    gw.process.send_signal(signal.SIGKILL)
    gw.process.wait(10)

    cloud = mosquitto_factory(port=cloud_port)
    sink = Collector(cloud.port, [("q/#", 1)])
    try:
        gw2 = broker_factory(config)
        wait_log(gw2, "10000 queued messages recovered")
        got = sink.wait_for(count * len(topics), 60)
    finally:
        sink.close()
    in_order_and_complete(got, topics, count)
    assert (
        sys_value(gw2.port, "$SYS/broker/bridge/cloud/queue/messages", until=lambda v: v == "0")
        == "0"
    )


def test_backlog_drain_is_rate_limited(broker_factory, mosquitto_factory, tmp_path: Path):
    cloud = stopped_cloud_with_sink(mosquitto_factory, tmp_path, "slow/#")
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "drain_rate": 50,
                    "max_inflight": 10,
                    "topics": [{"direction": "out", "local": "slow/#", "qos": 1}],
                }
            ]
        )
    )
    wait_log(gw, "bridge cloud cannot connect")
    publish(gw.port, [("slow/t", str(n).encode(), 1) for n in range(100)])
    cloud.start()
    sink = sink_of(cloud)
    arrivals: list[float] = []
    try:
        deadline = time.monotonic() + 20
        while len(arrivals) < 100 and time.monotonic() < deadline:
            count = len(sink.messages)
            arrivals.extend([time.monotonic()] * (count - len(arrivals)))
            time.sleep(0.01)
    finally:
        sink.close()
    in_order_and_complete(sink.messages, ["slow/t"], 100)
    # burst of max(max_inflight, rate / 10) = 10, then 50/s: the other 90 take about 1.8 s
    assert arrivals[-1] - arrivals[0] >= 1.4

"""No loops (issue 19): ``both`` mappings between two brokers, MQTT 5 (No Local + origin
property) and 3.1.1 (the bridge protocol flag: the remote does not echo), and two brokers
bridging each other."""

from __future__ import annotations

import time

import paho.mqtt.client as paho
from bridge_support import METRICS, Collector, bridge_status, gateway_toml, publish, wait_log

BOTH = [{"direction": "both", "local": "x/#", "qos": 1}]


def settle(*collectors: Collector, quiet: float = 1.5) -> None:
    """Wait until no collector got anything for ``quiet`` seconds (a loop would never stop)."""
    deadline = time.monotonic() + 20
    counts = [len(c.messages) for c in collectors]
    last_change = time.monotonic()
    while time.monotonic() - last_change < quiet:
        assert time.monotonic() < deadline, "messages keep coming: a loop"
        time.sleep(0.1)
        now = [len(c.messages) for c in collectors]
        if now != counts:
            counts, last_change = now, time.monotonic()


def test_both_mapping_to_a_second_edge_broker_mqtt5(broker_factory):
    cloud = broker_factory()
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "protocol": "5",
                    "topics": BOTH,
                }
            ],
            extra=METRICS,
        )
    )
    wait_log(gw, "bridge cloud connected")
    on_gw = Collector(gw.port, [("x/#", 1)])
    on_cloud = Collector(cloud.port, [("x/#", 1)])
    try:
        publish(gw.port, [("x/from-gw", b"1", 1)])
        publish(cloud.port, [("x/from-cloud", b"2", 1)])
        settle(on_gw, on_cloud)
    finally:
        on_gw.close()
        on_cloud.close()
    assert sorted(t for t, *_ in on_gw.messages) == ["x/from-cloud", "x/from-gw"]
    assert sorted(t for t, *_ in on_cloud.messages) == ["x/from-cloud", "x/from-gw"]
    status = bridge_status(gw)
    assert (status["sent"], status["received"]) == (1, 1)


def test_both_mapping_to_mosquitto_mqtt311_gets_no_echo(broker_factory, mosquitto_factory):
    cloud = mosquitto_factory()
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "protocol": "3.1.1",
                    "topics": BOTH,
                }
            ],
            extra=METRICS,
        )
    )
    wait_log(gw, "bridge cloud connected")
    on_gw = Collector(gw.port, [("x/#", 1)])
    on_cloud = Collector(cloud.port, [("x/#", 1)], protocol=paho.MQTTv311)
    try:
        publish(gw.port, [("x/from-gw", b"1", 1)])
        publish(cloud.port, [("x/from-cloud", b"2", 1)], protocol=paho.MQTTv311)
        settle(on_gw, on_cloud)
    finally:
        on_gw.close()
        on_cloud.close()
    assert sorted(t for t, *_ in on_gw.messages) == ["x/from-cloud", "x/from-gw"]
    assert sorted(t for t, *_ in on_cloud.messages) == ["x/from-cloud", "x/from-gw"]
    status = bridge_status(gw)
    # 3.1.1 has no No Local, but the CONNECT said "bridge": Mosquitto sends nothing back
    assert (status["sent"], status["received"], status["echoes"]) == (1, 1, 0)


def test_a_ring_of_three_brokers_stops_after_one_turn(broker_factory):
    """c bridges to a and to b, b bridges to a, every mapping ``both``: a ring. The publisher's
    broker never gets its message back and the others get at most one copy per path."""
    protocol = "5"
    a = broker_factory()
    b = broker_factory(
        gateway_toml(
            [
                {
                    "name": "to-a",
                    "address": "127.0.0.1",
                    "port": a.port,
                    "protocol": protocol,
                    "client_id": "b-to-a",
                    "topics": BOTH,
                }
            ]
        )
    )
    c = broker_factory(
        gateway_toml(
            [
                {
                    "name": "to-b",
                    "address": "127.0.0.1",
                    "port": b.port,
                    "protocol": protocol,
                    "client_id": "c-to-b",
                    "topics": BOTH,
                },
                {
                    "name": "to-a",
                    "address": "127.0.0.1",
                    "port": a.port,
                    "protocol": protocol,
                    "client_id": "c-to-a",
                    "topics": BOTH,
                },
            ],
            extra=METRICS,
        )
    )
    wait_log(b, "bridge to-a connected")
    wait_log(c, "bridge to-b connected")
    wait_log(c, "bridge to-a connected")
    collectors = [Collector(x.port, [("x/#", 1)]) for x in (a, b, c)]
    try:
        publish(c.port, [("x/ring", b"once", 1)])
        settle(*collectors)
    finally:
        for col in collectors:
            col.close()
    counts = [len(col.messages) for col in collectors]
    # a gets it from c directly and via b, b from c directly and via a; c never again
    assert counts == [2, 2, 1]

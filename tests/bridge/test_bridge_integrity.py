"""Bridge integrity (issue 31 item 7): a local client can never change what a bridge forwards
or brings in. Real brokers: Debian's Mosquitto as the cloud (3.1.1), a second edge-broker
(MQTT 5), edge-broker gateways, paho clients on both sides (adversary and victim side by side).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from bridge_support import METRICS, Collector, bridge_status, gateway_toml, publish, wait_log
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge_broker.config.bridges import TopicMapping
from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import NO_PROPERTIES, Connect

ORIGIN_PROPERTY = "edge-bridge-origin"
CMD = [{"direction": "both", "local": "cmd/#", "qos": 1}]
ALARMS = [{"direction": "out", "local": "alarms/#", "qos": 1}]


def gateway(broker_factory: Any, port: int, protocol: str, topics: list[Any], **bridge: Any) -> Any:
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": port,
                    "protocol": protocol,
                    "client_id": "gw-cloud",
                    "topics": topics,
                    **bridge,
                }
            ],
            extra=METRICS,
        )
    )
    return gw


def test_3_1_1_bridge_brings_in_every_real_cloud_command(
    broker_factory: Any, mosquitto_factory: Any, tmp_path: Path
) -> None:
    """The issue's measurement: a local client publishes cmd/valve "close" three times, then
    the cloud's operator sends three real "close" commands: all three arrive locally. The cloud
    lets only the operator write commands (its ACL silently drops the gateway's copies, as a
    3.1.1 broker does), so nothing is echoed back; the old fingerprint filter still took the
    operator's three commands for the echoes it expected and dropped them."""
    acl = tmp_path / "cloud.acl"
    acl.write_text("topic read #\npattern write %c/#\n")  # "operator" writes operator/...
    # (a finite queue: Mosquitto 2.0.11 with max_queued_messages 0, as the other tests run it,
    # closes a bridge's connection after a PUBLISH its ACL denies; docs/bridge.md)
    cloud = mosquitto_factory(f"acl_file {acl}\nmax_queued_messages 1000\n")
    cmd = [{"direction": "both", "local": "cmd/#", "remote_prefix": "operator/", "qos": 1}]
    gw = gateway(broker_factory, cloud.port, "3.1.1", cmd)
    wait_log(gw, "bridge cloud connected")
    on_gw = Collector(gw.port, [("cmd/#", 1)])
    try:
        publish(gw.port, [("cmd/valve", b"close", 1)] * 3)  # the local adversary (or just a test)
        on_gw.wait_for(3)
        bridge_status(gw, until=lambda s: s.get("acknowledged", 0) >= 3)
        operator = paho.Client(
            paho.CallbackAPIVersion.VERSION2, client_id="operator", protocol=paho.MQTTv311
        )
        operator.connect("127.0.0.1", cloud.port)
        operator.loop_start()
        try:
            for _ in range(3):
                operator.publish("operator/cmd/valve", b"close", 1).wait_for_publish(10)
        finally:
            operator.loop_stop()
            operator.disconnect()
        got = on_gw.wait_for(6)
    finally:
        on_gw.close()
    assert [(t, p) for t, p, *_ in got] == [("cmd/valve", b"close")] * 6
    status = bridge_status(gw, until=lambda s: s.get("received", 0) >= 3)
    assert (status["received"], status["echoes"]) == (3, 0)


def test_3_1_1_bridge_tells_mosquitto_it_is_a_bridge_so_nothing_echoes(
    broker_factory: Any, mosquitto_factory: Any
) -> None:
    """A ``both`` mapping on a 3.1.1 Mosquitto remote: the CONNECT carries the bridge flag, so
    Mosquitto does not send the gateway's own messages back, and every cloud message arrives."""
    cloud = mosquitto_factory()
    gw = gateway(broker_factory, cloud.port, "3.1.1", CMD)
    wait_log(gw, "bridge cloud connected")
    on_gw = Collector(gw.port, [("cmd/#", 1)])
    on_cloud = Collector(cloud.port, [("cmd/#", 1)], protocol=paho.MQTTv311)
    try:
        publish(gw.port, [("cmd/valve", b"close", 1)] * 3)
        on_cloud.wait_for(3)
        publish(cloud.port, [("cmd/valve", b"close", 1)] * 3, protocol=paho.MQTTv311)
        on_gw.wait_for(6)
        status = bridge_status(gw, until=lambda s: s.get("received", 0) >= 3)
    finally:
        on_gw.close()
        on_cloud.close()
    assert len(on_gw.messages) == 6 and len(on_cloud.messages) == 6
    assert (status["sent"], status["received"], status["echoes"]) == (3, 3, 0)


def test_a_remote_refusing_the_bridge_flag_is_an_error_that_says_what_to_change(
    broker_factory: Any,
) -> None:
    """No silent fallback to a remote that echoes: the bridge does not connect and its
    last_error names bridge_mode and the two ways out."""
    remote = broker_factory()  # edge-broker refuses protocol level 0x84
    gw = gateway(broker_factory, remote.port, "3.1.1", CMD)
    status = bridge_status(gw, until=lambda s: "bridge_mode" in s.get("last_error", ""))
    error = status["last_error"].replace('\\"', '"')
    assert "bridge_mode" in error and 'protocol = "5"' in error and "disjoint" in error
    assert status["connected"] == 0


def test_bridge_mode_false_with_disjoint_remote_topics_connects(broker_factory: Any) -> None:
    remote = broker_factory()
    topics = [
        {"direction": "out", "local": "status/#", "qos": 1},
        {"direction": "in", "local": "cmd/#", "qos": 1},
    ]
    gw = gateway(broker_factory, remote.port, "3.1.1", topics, bridge_mode=False)
    wait_log(gw, "bridge cloud connected")
    on_gw = Collector(gw.port, [("cmd/#", 1)])
    try:
        publish(remote.port, [("cmd/valve", b"open", 1)], protocol=paho.MQTTv311)
        assert on_gw.wait_for(1) == [("cmd/valve", b"open", 1, False)]
    finally:
        on_gw.close()


def test_check_refuses_a_both_mapping_that_would_need_a_guess() -> None:
    from edge_broker.config.bridges import echo_problem

    both = TopicMapping("both", "cmd/#")
    problem = echo_problem((both,), 4, bridge_mode=False)
    assert problem is not None and "bridge_mode = true" in problem and "remote_prefix" in problem
    out, into = TopicMapping("out", "x/#"), TopicMapping("in", "x/a/+")
    assert echo_problem((out, into), 4, False) is not None  # overlapping out and in
    disjoint = (TopicMapping("out", "status/#"), TopicMapping("in", "cmd/#"))
    assert echo_problem(disjoint, 4, False) is None
    assert echo_problem((both,), 4, True) is None  # the remote is told not to echo
    assert echo_problem((both,), 5, False) is None  # No Local


def test_the_bridge_flag_is_on_the_protocol_level_byte() -> None:
    from edge_broker.bridge.topics import with_bridge_flag

    connect = encode(Connect(4, "gw", True, 60, None, None, None, NO_PROPERTIES), 4)
    flagged = with_bridge_flag(connect)
    assert flagged[8] == 0x84 and connect[8] == 0x04
    assert flagged[:8] == connect[:8] and flagged[9:] == connect[9:]


def forged(value: str) -> Properties:
    props = Properties(PacketTypes.PUBLISH)
    props.UserProperty = [(ORIGIN_PROPERTY, value), ("site", "a")]
    return props


def publish_v5(port: int, topic: str, payload: bytes, props: Properties) -> None:
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        client.publish(topic, payload, 1, properties=props).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


def test_a_forged_origin_does_not_hide_a_message_from_a_3_1_1_bridge(
    broker_factory: Any, mosquitto_factory: Any
) -> None:
    cloud = mosquitto_factory()
    gw = gateway(broker_factory, cloud.port, "3.1.1", ALARMS)
    wait_log(gw, "bridge cloud connected")
    on_cloud = Collector(cloud.port, [("alarms/#", 1)], protocol=paho.MQTTv311)
    try:
        publish_v5(gw.port, "alarms/fire", b"forged", forged("gw-cloud"))
        publish_v5(gw.port, "alarms/fire", b"tagged", forged("gw-cloud AAAAAAAAAAAAAAAA"))
        got = on_cloud.wait_for(2)
    finally:
        on_cloud.close()
    assert sorted(p for _, p, *_ in got) == [b"forged", b"tagged"]
    assert bridge_status(gw, until=lambda s: s.get("forged_origin", 0) >= 2)["forged_origin"] == 2


def test_a_forged_origin_does_not_hide_a_message_from_an_mqtt5_bridge(
    broker_factory: Any,
) -> None:
    """The cloud receives the local client's message; what it sees in the origin path is this
    bridge's own tagged entry (the forged one was stripped) and the client's other properties."""
    cloud = broker_factory()
    gw = gateway(broker_factory, cloud.port, "5", ALARMS)
    wait_log(gw, "bridge cloud connected")
    seen: list[list[tuple[str, str]]] = []
    on_cloud = Collector(cloud.port, [("alarms/#", 1)])
    on_cloud.client.on_message = lambda c, u, m: (
        seen.append(list(getattr(m.properties, "UserProperty", []))),
        on_cloud._on_message(c, u, m),
    )
    try:
        publish_v5(gw.port, "alarms/fire", b"forged", forged("gw-cloud"))
        got = on_cloud.wait_for(1)
    finally:
        on_cloud.close()
    assert [p for _, p, *_ in got] == [b"forged"]
    origins = [v for k, v in seen[0] if k == ORIGIN_PROPERTY]
    assert len(origins) == 1 and origins[0].startswith("gw-cloud ") and origins[0] != "gw-cloud"
    assert ("site", "a") in seen[0]


def test_origin_values_are_keyed() -> None:
    from edge_broker.bridge.topics import ORIGIN_PROPERTY as NAME
    from edge_broker.bridge.topics import origin_value

    assert NAME == ORIGIN_PROPERTY
    a, b = origin_value("gw", b"k" * 16), origin_value("gw", b"j" * 16)
    assert a != b and a.startswith("gw ") and origin_value("gw", b"k" * 16) == a


def test_a_forged_origin_in_a_will_does_not_hide_it_from_the_bridge(
    broker_factory: Any, mosquitto_factory: Any
) -> None:
    """The will is published by the broker, later, from what the client sent in CONNECT: its
    forged entry stops nothing either (only the tagged value of one of our bridges does)."""
    import socket

    from edge_broker.mqtt.packets import Properties as MqttProperties
    from edge_broker.mqtt.packets import Will

    cloud = mosquitto_factory()
    gw = gateway(broker_factory, cloud.port, "3.1.1", ALARMS)
    wait_log(gw, "bridge cloud connected")
    on_cloud = Collector(cloud.port, [("alarms/#", 1)], protocol=paho.MQTTv311)
    try:
        forged_props = MqttProperties(user_properties=((ORIGIN_PROPERTY, "gw-cloud"),))
        will = Will("alarms/gone", b"will", 1, False, forged_props)
        with socket.create_connection(("127.0.0.1", gw.port), timeout=10) as sock:
            sock.sendall(encode(Connect(5, "dying", True, 60, will), 5))
            assert sock.recv(64)[:1] == b"\x20"  # CONNACK; then the socket just closes
        got = on_cloud.wait_for(1)
    finally:
        on_cloud.close()
    assert [(t, p) for t, p, *_ in got] == [("alarms/gone", b"will")]

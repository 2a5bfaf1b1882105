"""AUTHZ.md §3: what a denied client sees, for MQTT 3.1, 3.1.1 and 5, in both deny_action modes,
over real sockets against the real broker (one broker, one listener per mode)."""

from __future__ import annotations

import threading
import time

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties

from edge_broker.mqtt.packets import (
    Disconnect,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Will,
)
from tests.broker.broker_raw import RawClient
from tests.conftest import start_broker
from tests.waiting import wait_for

CONFIG = """
[sys]
interval = 2

[[listeners]]
name = "reason"
port = 0
deny_action = "reason"

[[listeners]]
name = "disconnect"
port = 0
deny_action = "disconnect"

[permissions.sets.main]
rules = [
  { id = "no-admin", topic = "admin/#", type = "DENY" },
  { id = "everything", topic = "#" },
]

[[permissions.assign]]
sets = ["main"]
"""

LEVELS = [3, 4, 5]
REASON = '"no-admin"'


@pytest.fixture(scope="module")
def denying_broker(tmp_path_factory: pytest.TempPathFactory):
    b = start_broker(tmp_path_factory.mktemp("outcomes"), CONFIG)
    yield b
    b.stop()


def client(b, mode: str, level: int, name: str) -> RawClient:
    c = RawClient(b.host, b.ports[mode], level=level)
    ack = c.connect(f"{name}-{mode}-{level}"[:23])
    assert ack.reason_code == 0
    return c


def still_connected(c: RawClient) -> None:
    from edge_broker.mqtt.packets import Pingreq, Pingresp

    c.send(Pingreq())
    c.expect(Pingresp)


# -- deny_action = "disconnect" (the seed 003 tables) ------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_publish_denied_disconnect_mode(denying_broker, level: int, qos: int) -> None:
    with client(denying_broker, "disconnect", level, "pd") as c:
        c.send(Publish("admin/x", b"no", qos, packet_id=7 if qos else None))
        got = c.closed()
    if level < 5:
        assert got == []  # 3.1 and 3.1.1: the connection is closed, nothing sent
        return
    expected_ack = {0: [], 1: [Puback], 2: [Pubrec]}[qos]
    assert [type(p) for p in got] == [*expected_ack, Disconnect]
    if qos:
        assert got[0].reason_code == 0x87 and REASON in (got[0].properties.reason_string or "")
    assert got[-1].reason_code == 0x87


@pytest.mark.parametrize("mode", ["reason", "disconnect"])
@pytest.mark.parametrize("level", LEVELS)
def test_subscribe_denied_per_filter(denying_broker, mode: str, level: int) -> None:
    with client(denying_broker, mode, level, "sd") as c:
        c.send(Subscribe(3, (Subscription("ok/x", 1), Subscription("admin/#", 1))))
        if level == 3:
            assert c.closed() == []  # MQTT 3.1 has no failure code: close
            return
        ack = c.expect(Suback)
        assert ack.reason_codes == (1, 0x80 if level == 4 else 0x87)
        if level == 5:
            assert REASON in (ack.properties.reason_string or "")
        still_connected(c)


@pytest.mark.parametrize("mode", ["reason", "disconnect"])
@pytest.mark.parametrize("level", LEVELS)
def test_will_denied_refuses_the_connect(denying_broker, mode: str, level: int) -> None:
    watcher = client(denying_broker, "reason", 5, "ww")
    watcher.send(Subscribe(1, (Subscription("admin/#", 0),)))  # denied, so subscribe "#" instead
    watcher.expect(Suback)
    watcher.subscribe("#", 0, packet_id=2)
    with RawClient(denying_broker.host, denying_broker.ports[mode], level=level) as c:
        ack = c.connect(f"wd-{mode}-{level}"[:23], will=Will("admin/will", b"bye"))
        assert ack.reason_code == (0x87 if level == 5 else 0x05)
        if level == 5:
            assert REASON in (ack.properties.reason_string or "")
        assert c.closed() == []
    # the will is never published (nor are admin/ messages delivered through '#')
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        try:
            packet = watcher.recv(0.1)
        except TimeoutError:
            continue
        assert not (isinstance(packet, Publish) and packet.topic.startswith("admin/")), packet
    watcher.close()


# -- deny_action = "reason" (default: the connection stays) ------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_publish_denied_reason_mode_keeps_the_connection(denying_broker, level: int) -> None:
    with client(denying_broker, "reason", level, "pr") as c:
        c.send(Publish("admin/x", b"q0", 0))
        c.send(Publish("admin/x", b"q1", 1, packet_id=1))
        ack1 = c.expect(Puback)
        c.send(Publish("admin/x", b"q2", 2, packet_id=2))
        rec = c.expect(Pubrec)
        if level == 5:
            assert ack1.reason_code == 0x87 and rec.reason_code == 0x87
            assert REASON in (ack1.properties.reason_string or "")
        else:
            # 3.x has no reason codes: acknowledged and dropped (as Mosquitto does)
            c.send(Pubrel(2))
            c.expect(Pubcomp)
        still_connected(c)


def test_denied_messages_never_reach_a_wildcard_subscriber(denying_broker) -> None:
    with (
        client(denying_broker, "reason", 5, "sub") as sub,
        client(denying_broker, "reason", 5, "pub") as pub,
    ):
        sub.send(Subscribe(1, (Subscription("#", 1),)))
        assert sub.expect(Suback).reason_codes == (1,)
        pub.send(Publish("admin/secret", b"x", 1, packet_id=1))
        pub.expect(Puback)
        pub.send(Publish("open/t", b"y", 1, packet_id=2))
        pub.expect(Puback)
        got = sub.expect(Publish)
        assert got.topic == "open/t"


def test_paho_v5_sees_reason_codes(denying_broker) -> None:
    results: dict[str, object] = {}
    done = threading.Event()

    def on_subscribe(c, userdata, mid, reason_codes, properties):
        results["suback"] = [int(rc.value) for rc in reason_codes]
        c.publish("admin/x", b"1", qos=1)

    def on_publish(c, userdata, mid, reason_code, properties):
        results["puback"] = int(reason_code.value)
        done.set()

    c = paho.Client(CallbackAPIVersion.VERSION2, client_id="paho-outcomes", protocol=paho.MQTTv5)
    c.on_subscribe = on_subscribe
    c.on_publish = on_publish
    props = PahoProperties(PacketTypes.CONNECT)
    props.RequestProblemInformation = 1
    c.connect(denying_broker.host, denying_broker.ports["reason"], properties=props)
    c.loop_start()
    try:
        wait_for(c.is_connected, 5, "the CONNACK")
        c.subscribe([("ok/#", 1), ("admin/#", 1)])
        assert done.wait(5)
    finally:
        c.loop_stop()
        c.disconnect()
    assert results["suback"] == [1, 0x87]
    assert results["puback"] == 0x87


def test_reason_strings_only_when_problem_information_allowed(denying_broker) -> None:
    with RawClient(denying_broker.host, denying_broker.ports["reason"], level=5) as c:
        c.connect("no-problem-info", properties=Properties(request_problem_information=0))
        c.send(Publish("admin/x", b"x", 1, packet_id=1))
        ack = c.expect(Puback)
        assert ack.reason_code == 0x87 and ack.properties.reason_string is None

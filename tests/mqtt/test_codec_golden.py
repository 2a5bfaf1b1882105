"""What real clients put on the wire decodes as intended, and what we encode they understand.

paho-mqtt 2.x (3.1, 3.1.1, 5) and mosquitto_pub / mosquitto_sub (Debian) talk to a one-shot
peer on a raw socket (``mqtt_codec_capture.CapturePeer``) that decodes everything they send.
"""

from __future__ import annotations

import shutil
import subprocess
import threading

import paho.mqtt.client as paho
import pytest
from mqtt_codec_capture import CapturePeer
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties as PahoProperties
from paho.mqtt.subscribeoptions import SubscribeOptions

from edge_broker.mqtt.codec import PacketReader
from edge_broker.mqtt.packets import (
    Connect,
    Disconnect,
    Packet,
    Properties,
    Puback,
    Publish,
    Pubrel,
    Subscribe,
    Subscription,
    Unsubscribe,
    Will,
)

PAHO_VERSIONS = {3: paho.MQTTv31, 4: paho.MQTTv311, 5: paho.MQTTv5}


def _of(packets: list[Packet], cls: type) -> list[Packet]:
    return [p for p in packets if isinstance(p, cls)]


def _server_publish(level: int) -> Publish:
    props = Properties()
    if level == 5:
        props = Properties(
            content_type="text/plain", user_properties=(("k", "v"),), subscription_identifiers=(3,)
        )
    return Publish("a/x", b"from-server", 1, False, False, 9, props)


def _paho_session(level: int) -> tuple[CapturePeer, list[paho.MQTTMessage]]:
    """Run a full paho session against a capture peer; return the peer and what paho received."""
    peer = CapturePeer(after_subscribe=(_server_publish(level),))
    client = paho.Client(
        paho.CallbackAPIVersion.VERSION2,
        client_id=f"golden-{level}",
        protocol=PAHO_VERSIONS[level],
    )
    connected, subscribed, unsubscribed, got = (threading.Event() for _ in range(4))
    received: list[paho.MQTTMessage] = []
    client.on_connect = lambda *a: connected.set()
    client.on_subscribe = lambda *a: subscribed.set()
    client.on_unsubscribe = lambda *a: unsubscribed.set()

    def on_message(_c: object, _u: object, message: paho.MQTTMessage) -> None:
        received.append(message)
        got.set()

    client.on_message = on_message
    client.username_pw_set("user", "pw")
    will_props = None
    connect_kwargs: dict[str, object] = {}
    sub_options: object = 1
    pub_props = None
    if level == 5:
        will_props = PahoProperties(PacketTypes.WILLMESSAGE)
        will_props.WillDelayInterval = 10
        connect_props = PahoProperties(PacketTypes.CONNECT)
        connect_props.SessionExpiryInterval = 120
        connect_props.ReceiveMaximum = 20
        connect_kwargs = {"properties": connect_props, "clean_start": True}
        sub_options = SubscribeOptions(qos=1, noLocal=True, retainHandling=1)
        pub_props = PahoProperties(PacketTypes.PUBLISH)
        pub_props.UserProperty = ("unit", "C")
        pub_props.ContentType = "text/plain"
        pub_props.MessageExpiryInterval = 60
    client.will_set("will/t", b"gone", qos=1, retain=True, properties=will_props)
    client.connect("127.0.0.1", peer.port, keepalive=30, **connect_kwargs)  # type: ignore[arg-type]
    client.loop_start()
    try:
        assert connected.wait(10)
        if level == 5:
            client.subscribe("a/+", options=sub_options)  # type: ignore[arg-type]
        else:
            client.subscribe("a/+", qos=1)
        assert subscribed.wait(10) and got.wait(10)
        client.publish("a/b", b"q0", qos=0, properties=pub_props)
        client.publish("a/b", b"q1", qos=1, properties=pub_props).wait_for_publish(10)
        client.publish("a/b", b"q2", qos=2, retain=True).wait_for_publish(10)
        client.unsubscribe("a/+")
        assert unsubscribed.wait(10)
        client.disconnect()
    finally:
        client.loop_stop()
    peer.join()
    return peer, received


@pytest.mark.parametrize("level", [3, 4, 5])
def test_paho_session(level: int) -> None:
    peer, received = _paho_session(level)
    packets = peer.capture.packets
    [connect] = _of(packets, Connect)
    assert isinstance(connect, Connect)
    assert (connect.protocol_level, connect.client_id, connect.keep_alive) == (
        level,
        f"golden-{level}",
        30,
    )
    assert connect.protocol_name == ("MQIsdp" if level == 3 else "MQTT")
    assert (connect.username, connect.password) == ("user", b"pw")
    assert connect.will is not None
    assert (connect.will.topic, connect.will.payload, connect.will.qos, connect.will.retain) == (
        "will/t",
        b"gone",
        1,
        True,
    )
    [subscribe] = _of(packets, Subscribe)
    assert isinstance(subscribe, Subscribe)
    [unsubscribe] = _of(packets, Unsubscribe)
    assert isinstance(unsubscribe, Unsubscribe) and unsubscribe.topic_filters == ("a/+",)
    publishes = [p for p in _of(packets, Publish) if isinstance(p, Publish)]
    assert [(p.topic, p.payload, p.qos) for p in publishes] == [
        ("a/b", b"q0", 0),
        ("a/b", b"q1", 1),
        ("a/b", b"q2", 2),
    ]
    assert publishes[2].retain and publishes[2].packet_id is not None
    assert Pubrel(publishes[2].packet_id) in packets
    assert Puback(9) in packets  # paho acknowledged the QoS 1 message we encoded
    assert isinstance(packets[-1], Disconnect)
    [message] = received
    assert (message.topic, message.payload, message.qos) == ("a/x", b"from-server", 1)
    if level == 5:
        assert connect.properties.session_expiry_interval == 120
        assert connect.properties.receive_maximum == 20
        assert connect.will.properties.will_delay_interval == 10
        assert subscribe.subscriptions == (
            Subscription("a/+", 1, no_local=True, retain_handling=1),
        )
        assert publishes[1].properties == Properties(
            message_expiry_interval=60,
            content_type="text/plain",
            user_properties=(("unit", "C"),),
        )
        assert message.properties is not None
        assert message.properties.UserProperty == [("k", "v")]
        assert message.properties.ContentType == "text/plain"
        assert message.properties.SubscriptionIdentifier == [3]
    else:
        assert subscribe.subscriptions == (Subscription("a/+", 1),)
        assert connect.properties == Properties()


def test_paho_311_connect_bytes_decode_from_the_raw_capture() -> None:
    """Re-decoding the raw bytes, byte by byte, gives the same packets as the live decode."""
    peer, _ = _paho_session(4)
    raw = bytes(peer.capture.raw)
    assert raw.startswith(b"\x10") and b"\x00\x04MQTT\x04" in raw[:12]
    reader = PacketReader(side="server")
    again = [p for i in range(len(raw)) for p in reader.feed(raw[i : i + 1])]
    assert again == peer.capture.packets


needs_mosquitto = pytest.mark.skipif(
    shutil.which("mosquitto_pub") is None, reason="mosquitto clients not installed"
)
MOSQ_VERSIONS = {3: "mqttv31", 4: "mqttv311", 5: "mqttv5"}


@needs_mosquitto
@pytest.mark.parametrize("level", [3, 4, 5])
def test_mosquitto_pub(level: int) -> None:
    peer = CapturePeer()
    args = [
        "mosquitto_pub",
        "-h",
        "127.0.0.1",
        "-p",
        str(peer.port),
        "-i",
        f"mpub-{level}",
        "-V",
        MOSQ_VERSIONS[level],
        "-t",
        "sensors/t1",
        "-m",
        "21.5",
        "-q",
        "2",
        "-r",
        "-u",
        "dev",
        "-P",
        "secret",
    ]
    if level == 5:
        args += [
            "-D",
            "publish",
            "user-property",
            "unit",
            "C",
            "-D",
            "publish",
            "content-type",
            "text/plain",
            "-D",
            "publish",
            "message-expiry-interval",
            "60",
            "-D",
            "connect",
            "session-expiry-interval",
            "30",
        ]
    subprocess.run(args, check=True, timeout=20, capture_output=True)
    packets = peer.join().packets
    connect = packets[0]
    assert isinstance(connect, Connect)
    assert (connect.client_id, connect.username, connect.password) == (
        f"mpub-{level}",
        "dev",
        b"secret",
    )
    [publish] = _of(packets, Publish)
    assert isinstance(publish, Publish)
    assert (publish.topic, publish.payload, publish.qos, publish.retain) == (
        "sensors/t1",
        b"21.5",
        2,
        True,
    )
    assert Pubrel(publish.packet_id or 0) in packets
    assert isinstance(packets[-1], Disconnect)
    if level == 5:
        assert connect.properties.session_expiry_interval == 30
        assert publish.properties == Properties(
            message_expiry_interval=60, content_type="text/plain", user_properties=(("unit", "C"),)
        )


@needs_mosquitto
@pytest.mark.parametrize("level", [3, 4, 5])
def test_mosquitto_sub_reads_what_we_encode(level: int) -> None:
    peer = CapturePeer(after_subscribe=(_server_publish(level),))
    result = subprocess.run(
        [
            "mosquitto_sub",
            "-h",
            "127.0.0.1",
            "-p",
            str(peer.port),
            "-i",
            f"msub-{level}",
            "-V",
            MOSQ_VERSIONS[level],
            "-t",
            "a/#",
            "-q",
            "1",
            "-C",
            "1",
            "-v",
        ],
        check=True,
        timeout=20,
        capture_output=True,
        text=True,
    )
    assert result.stdout.strip() == "a/x from-server"
    packets = peer.join().packets
    [subscribe] = _of(packets, Subscribe)
    assert isinstance(subscribe, Subscribe)
    assert subscribe.subscriptions[0].topic_filter == "a/#"
    assert subscribe.subscriptions[0].qos == 1
    assert Puback(9) in packets


# Byte strings captured from mosquitto_pub 2.0.11 (Debian) with
#   mosquitto_pub -i gold -V <v> -t s/t -m hi -q 1 -u u -P p --will-topic w --will-payload x
#                 --will-qos 1 [-D publish user-property k v -D connect receive-maximum 10]
# kept literally so the codec is checked even where the tools are not installed.
GOLDEN_V5 = (
    b"\x10!\x00\x04MQTT\x05\xce\x00<\x03!\x00\n\x00\x04gold\x00\x00\x01w\x00\x01x\x00\x01u"
    b"\x00\x01p2\x11\x00\x03s/t\x00\x01\x07&\x00\x01k\x00\x01vhi\xe0\x00"
)
GOLDEN_V31 = (
    b"\x10\x1e\x00\x06MQIsdp\x03\xce\x00<\x00\x04gold\x00\x01w\x00\x01x\x00\x01u\x00\x01p"
    b"2\t\x00\x03s/t\x00\x01hi\xe0\x00"
)


def test_golden_mosquitto_pub_v5_bytes() -> None:
    connect, publish, disconnect = PacketReader(side="server").feed(GOLDEN_V5)
    assert connect == Connect(
        5, "gold", True, 60, Will("w", b"x", 1), "u", b"p", Properties(receive_maximum=10)
    )
    assert publish == Publish(
        "s/t", b"hi", 1, packet_id=1, properties=Properties(user_properties=(("k", "v"),))
    )
    assert disconnect == Disconnect()


def test_golden_mosquitto_pub_v31_bytes() -> None:
    connect, publish, disconnect = PacketReader(side="server").feed(GOLDEN_V31)
    assert connect == Connect(
        3, "gold", True, 60, Will("w", b"x", 1), "u", b"p", protocol_name="MQIsdp"
    )
    assert publish == Publish("s/t", b"hi", 1, packet_id=1)
    assert disconnect == Disconnect()

"""paho-mqtt 2.x against the real broker: MQTT 3.1, 3.1.1 and 5."""

from __future__ import annotations

import itertools
import queue
import threading
import time

import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

VERSIONS = {"3.1": paho.MQTTv31, "3.1.1": paho.MQTTv311, "5": paho.MQTTv5}
_ids = itertools.count()


class Client:
    """A paho client with a message queue and synchronous helpers."""

    def __init__(self, broker, version, will=None, connect_props=None, clean=True, client_id=None):
        self.version = version
        self.client_id = client_id or f"paho-{next(_ids)}-{time.monotonic_ns() % 10**9}"
        kwargs = {"client_id": self.client_id, "protocol": version}
        if version != paho.MQTTv5:
            kwargs["clean_session"] = clean
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, **kwargs)
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        self.reason = None
        self.c.on_message = lambda c, u, m: self.messages.put(m)
        self.c.on_connect = self._on_connect
        self.c.on_disconnect = lambda c, u, f, rc, p: self.disconnected.set()
        if will:
            self.c.will_set(*will)
        if version == paho.MQTTv5:
            self.c.connect(broker.host, broker.port, clean_start=clean, properties=connect_props)
        else:
            self.c.connect(broker.host, broker.port)
        self.c.loop_start()
        assert self.connected.wait(5), "no CONNACK"

    def _on_connect(self, c, u, flags, rc, props):
        self.reason = rc
        self.connack_props = props
        self.connected.set()

    def subscribe(self, topic, qos=0, **kw):
        done = threading.Event()
        self.c.on_subscribe = lambda c, u, mid, rcs, p: done.set()
        self.c.subscribe(topic, qos, **kw)
        assert done.wait(5), "no SUBACK"

    def publish(self, topic, payload, qos=0, retain=False, properties=None):
        info = self.c.publish(topic, payload, qos, retain, properties=properties)
        info.wait_for_publish(5)

    def get(self, timeout=5.0) -> paho.MQTTMessage:
        return self.messages.get(timeout=timeout)

    def none(self, timeout=0.4):
        with pytest.raises(queue.Empty):
            self.messages.get(timeout=timeout)

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()


@pytest.fixture
def clients(module_broker):
    made: list[Client] = []

    def make(version, **kw) -> Client:
        c = Client(module_broker, version, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        try:
            c.close()
        except Exception:
            pass


def uniq(prefix: str) -> str:
    return f"{prefix}/{next(_ids)}-{time.monotonic_ns() % 10**9}"


@pytest.mark.parametrize("name", list(VERSIONS))
def test_qos_0_1_2(clients, name):
    v = VERSIONS[name]
    sub, pub = clients(v), clients(v)
    t = uniq("paho/qos")
    sub.subscribe(t + "/#", 2)
    for qos in (0, 1, 2):
        pub.publish(f"{t}/{qos}", f"m{qos}".encode(), qos)
        m = sub.get()
        assert (m.topic, m.payload, m.qos) == (f"{t}/{qos}", f"m{qos}".encode(), qos)


@pytest.mark.parametrize("name", list(VERSIONS))
def test_retained(clients, name):
    v = VERSIONS[name]
    pub = clients(v)
    t = uniq("paho/ret")
    pub.publish(t, b"kept", 1, retain=True)
    sub = clients(v)
    sub.subscribe(t, 1)
    m = sub.get()
    assert m.payload == b"kept" and m.retain


@pytest.mark.parametrize("name", list(VERSIONS))
def test_will(clients, name):
    v = VERSIONS[name]
    t = uniq("paho/will")
    watcher = clients(v)
    watcher.subscribe(t, 1)
    dying = clients(v, will=(t, b"gone", 1, False))
    dying.c.socket().close()  # network loss without DISCONNECT
    assert watcher.get().payload == b"gone"


@pytest.mark.parametrize("name", list(VERSIONS))
def test_wildcards(clients, name):
    v = VERSIONS[name]
    sub, pub = clients(v), clients(v)
    t = uniq("paho/wild")
    sub.subscribe(t + "/+/temp", 0)
    sub.subscribe(t + "/hall/#", 0)
    for topic in ("kitchen/temp", "hall/temp", "hall/light/on", "x/humidity"):
        pub.publish(f"{t}/{topic}", b"v", 0)
    got = sorted(sub.get().topic[len(t) + 1 :] for _ in range(3))
    assert got == ["hall/light/on", "hall/temp", "kitchen/temp"]
    sub.none()


def test_persistent_session_v311(clients, module_broker):
    t = uniq("paho/persist")
    name = f"persist-{time.monotonic_ns()}"
    s = clients(paho.MQTTv311, clean=False, client_id=name)
    s.subscribe(t, 1)
    s.close()
    pub = clients(paho.MQTTv311)
    pub.publish(t, b"queued", 1)
    back = clients(paho.MQTTv311, clean=False, client_id=name)
    assert back.get().payload == b"queued"


def test_v5_shared_subscription(clients):
    v = paho.MQTTv5
    a, b, pub = clients(v), clients(v), clients(v)
    t = uniq("paho/share")
    a.subscribe(f"$share/workers/{t}", 1)
    b.subscribe(f"$share/workers/{t}", 1)
    for i in range(8):
        pub.publish(t, str(i).encode(), 1)
    got_a = [a.get().payload for _ in range(4)]
    got_b = [b.get().payload for _ in range(4)]
    assert sorted(got_a + got_b) == sorted(str(i).encode() for i in range(8))
    a.none()
    b.none()


def test_v5_subscription_identifiers_and_options(clients):
    v = paho.MQTTv5
    sub = clients(v)
    t = uniq("paho/subid")
    props = Properties(PacketTypes.SUBSCRIBE)
    props.SubscriptionIdentifier = 77
    sub.subscribe(t + "/#", options=SubscribeOptions(qos=1, noLocal=True), properties=props)
    sub.publish(t + "/self", b"mine", 1)  # No Local: not back to me
    other = clients(v)
    other.publish(t + "/x", b"theirs", 1)
    m = sub.get()
    assert m.payload == b"theirs" and m.properties.SubscriptionIdentifier == [77]
    sub.none()


def test_v5_topic_aliases_both_ways(clients):
    v = paho.MQTTv5
    cprops = Properties(PacketTypes.CONNECT)
    cprops.TopicAliasMaximum = 4
    sub = clients(v, connect_props=cprops)
    t = uniq("paho/alias")
    sub.subscribe(t, 0)
    pub = clients(v)
    first = Properties(PacketTypes.PUBLISH)
    first.TopicAlias = 1
    pub.publish(t, b"1", 0, properties=first)
    pub.c.publish("", b"2", 0, properties=first).wait_for_publish(5)
    got = [sub.get(), sub.get()]
    assert [m.payload for m in got] == [b"1", b"2"]
    # Outbound: the broker set alias 1 with the topic, then sent the alias alone (paho 2.x
    # hands the raw packet to the application without resolving inbound aliases).
    assert got[0].topic == t and got[0].properties.TopicAlias == 1
    assert got[1].topic == "" and got[1].properties.TopicAlias == 1


def test_v5_message_expiry(clients):
    v = paho.MQTTv5
    pub = clients(v)
    t = uniq("paho/exp")
    props = Properties(PacketTypes.PUBLISH)
    props.MessageExpiryInterval = 30
    pub.publish(t, b"fresh", 1, retain=True, properties=props)
    short = Properties(PacketTypes.PUBLISH)
    short.MessageExpiryInterval = 1
    pub.publish(t + "/old", b"stale", 1, retain=True, properties=short)
    # real time on purpose: the one end-to-end proof of message expiry with a real client (the
    # exact deadline is tested on the broker's fake clock, tests/broker/test_sessions_memory.py)
    time.sleep(1.5)
    sub = clients(v)
    sub.subscribe(t + "/#", 1)
    m = sub.get()
    assert m.payload == b"fresh" and 28 <= m.properties.MessageExpiryInterval <= 30
    sub.none()


def test_v5_flow_control(clients):
    v = paho.MQTTv5
    cprops = Properties(PacketTypes.CONNECT)
    cprops.ReceiveMaximum = 3
    sub = clients(v, connect_props=cprops)
    t = uniq("paho/flow")
    sub.subscribe(t, 2)
    pub = clients(v)
    for i in range(30):
        pub.c.publish(t, str(i).encode(), 2)
    got = [sub.get(10).payload for _ in range(30)]
    assert got == [str(i).encode() for i in range(30)]


def test_v5_request_response(clients):
    v = paho.MQTTv5
    responder, requester = clients(v), clients(v)
    t = uniq("paho/rpc")
    responder.subscribe(t + "/req", 1)
    requester.subscribe(t + "/resp", 1)
    props = Properties(PacketTypes.PUBLISH)
    props.ResponseTopic = t + "/resp"
    props.CorrelationData = b"corr-1"
    props.UserProperty = [("k", "v")]
    props.ContentType = "application/json"
    requester.publish(t + "/req", b"{}", 1, properties=props)
    req = responder.get()
    assert req.properties.ResponseTopic == t + "/resp"
    assert req.properties.ContentType == "application/json"
    assert req.properties.UserProperty == [("k", "v")]
    back = Properties(PacketTypes.PUBLISH)
    back.CorrelationData = req.properties.CorrelationData
    responder.publish(req.properties.ResponseTopic, b"ok", 1, properties=back)
    resp = requester.get()
    assert resp.payload == b"ok" and resp.properties.CorrelationData == b"corr-1"

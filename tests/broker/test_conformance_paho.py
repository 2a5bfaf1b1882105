"""Broker behaviour the Eclipse Paho interoperability suites (paho.mqtt.testing,
interoperability/client_test.py for 3.1.1 and client_test5.py for 5.0) check, written as our own
raw-socket tests against the real broker process, configured the way a conformance run is:
an authorizer refuses the suites' ``nosubscribe`` filters with 0x80 (MQTT 5 §3.9.3, 3.1.1 §3.9.3).

Each test names the Paho test whose expectation it pins."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_raw import RawClients, unique_id

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
)

HERE = Path(__file__).resolve().parent

CONFIG = """
[[listeners]]
name = "tcp"
port = 0

[[authorizers]]
name = "paho-nosubscribe-v5"
class = "conformance_authorizer:RefuseFilter"
timeout = 0.5
fallback = "deny"
options = { filter = "test/nosubscribe", reason_code = 128 }

[[authorizers]]
name = "paho-nosubscribe-v311"
class = "conformance_authorizer:RefuseFilter"
timeout = 0.5
fallback = "deny"
options = { filter = "nosubscribe", reason_code = 128 }
"""


def cid(prefix: str = "paho") -> str:
    return unique_id(prefix)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from tests.conftest import start_broker

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(HERE) + (os.pathsep + old if old else "")
    try:
        b = start_broker(tmp_path_factory.mktemp("conformance-paho"), CONFIG)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


@pytest.fixture
def client(broker) -> Iterator[RawClients]:
    with RawClients(broker, level=5) as make:
        yield make


@pytest.mark.parametrize("level, topic_filter", [(5, "test/nosubscribe"), (4, "nosubscribe")])
def test_subscribe_failure_is_0x80_next_to_a_granted_filter(
    client, level: int, topic_filter: str
) -> None:
    """client_test5 test_subscribe_failure / client_test subscribe_failure_test: the refused
    filter gets 0x80 and the other filter of the same SUBSCRIBE is still granted."""
    c = client(level)
    c.connect(cid())
    c.send(Subscribe(3, (Subscription(topic_filter, 2), Subscription(f"ok/{cid()}", 2))))
    ack = c.expect(Suback)
    assert ack.packet_id == 3 and ack.reason_codes == (0x80, 2)


def test_v5_empty_client_id_with_clean_start_0_is_assigned_an_identifier(client) -> None:
    """client_test5 test_zero_length_clientid: MQTT 5 accepts an empty client id even with
    Clean Start 0 (§3.1.3.1) and returns Assigned Client Identifier; a client that names itself
    gets none."""
    c = client()
    ack = c.connect("", clean=False)
    assert ack.reason_code == 0 and not ack.session_present
    assigned = ack.properties.assigned_client_identifier
    assert assigned
    d = client()
    ack2 = d.connect("", clean=True)
    assert ack2.properties.assigned_client_identifier not in (None, assigned)
    named = client().connect(cid())
    assert named.reason_code == 0 and named.properties.assigned_client_identifier is None


@pytest.mark.parametrize("level", [4, 5])
def test_unacknowledged_qos1_and_qos2_are_redelivered_with_dup_on_reconnect(
    client, level: int
) -> None:
    """client_test redelivery_on_reconnect_test / client_test5 (3.x era): a subscriber that
    publishes QoS 1 and 2 to itself and acknowledges nothing gets both again, DUP set, after
    reconnecting to its session; then completes them and nothing more comes."""
    me = cid("redeliver")
    base = f"TopicA/{me}"
    props = Properties(session_expiry_interval=60) if level == 5 else Properties()
    c = client(level)
    c.connect(me, clean=level == 5, properties=props)  # 3.1.1 keeps a session only with clean 0
    c.subscribe(f"{base}/#", 2)
    c.send(Publish(f"{base}/B", b"q1", 1, packet_id=10))
    c.send(Publish(f"{base}/C", b"q2", 2, packet_id=11))
    got = [c.recv() for _ in range(4)]  # PUBACK 10, PUBREC 11 and our two deliveries, any order
    assert {type(p) for p in got} == {Puback, Pubrec, Publish}
    c.send(Pubrel(11))
    c.expect(Pubcomp)
    c.close()
    time.sleep(0.2)

    again = client(level)
    ack = again.connect(me, clean=False, properties=props)
    assert ack.session_present
    redelivered = sorted((again.expect(Publish) for _ in range(2)), key=lambda p: p.qos)
    assert [(p.topic, p.payload, p.qos, p.dup) for p in redelivered] == [
        (f"{base}/B", b"q1", 1, True),
        (f"{base}/C", b"q2", 2, True),
    ]
    q1, q2 = redelivered
    assert q1.packet_id is not None and q2.packet_id is not None
    again.send(Puback(q1.packet_id))
    again.send(Pubrec(q2.packet_id))
    assert again.expect(Pubrel).packet_id == q2.packet_id
    again.send(Pubcomp(q2.packet_id))
    again.nothing(0.5)
    if level == 5:
        again.send(Disconnect(0, Properties(session_expiry_interval=0)))


@pytest.mark.parametrize("level", [4, 5])
def test_overlapping_subscriptions_deliver_once_at_the_highest_qos(client, level: int) -> None:
    """client_test(5) overlapping subscriptions: TopicA/# at QoS 2 and TopicA/+ at QoS 1 both
    match; the broker sends one message at QoS 2 (MQTT 5 §3.3.4 allows one per subscription
    too, so the suite accepts either; this pins our choice)."""
    me = cid("overlap")
    c = client(level)
    c.connect(me)
    c.send(Subscribe(1, (Subscription(f"{me}/TopicA/#", 2), Subscription(f"{me}/TopicA/+", 1))))
    assert c.expect(Suback).reason_codes == (2, 1)
    c.send(Publish(f"{me}/TopicA/C", b"overlapping topic filters", 2, packet_id=7))
    got = [c.recv() for _ in range(2)]
    pubs = [p for p in got if isinstance(p, Publish)]
    assert len(pubs) == 1 and pubs[0].qos == 2
    assert any(isinstance(p, Pubrec) and p.packet_id == 7 for p in got)
    c.send(Pubrel(7))
    c.send(Pubrec(pubs[0].packet_id))
    rest = [c.recv() for _ in range(2)]
    assert {type(p) for p in rest} == {Pubcomp, Pubrel}
    c.nothing(0.5)

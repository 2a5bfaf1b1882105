"""Egress: every delivery is checked for the RECEIVING client's subject (AUTHZ.md §2 gate 5,
"egress = broker → client"). A subscriber whose subject has an egress deny never receives the
matching messages — live, retained or queued while it was offline — while others on the same
subscription do. Subjects here are usernames (password method)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import paho.mqtt.client as paho
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.authz.acl_paho import NOT_AUTHORIZED, AclClient, password_file, toml_with_acl
from tests.conftest import RunningBroker, start_broker

USERS = {"guest": "guest-pw", "staff": "staff-pw", "writer": "writer-pw"}

ACL = """
[acl]
enabled = true
default_permission = "allow"

[[acl.rules]]
id = "guests-see-no-secrets"
messages = ["put"]
flows = ["egress"]
permission = "deny"
key_exprs = ["plant/secret/**"]

[[acl.rules]]
id = "guests-answer-no-queries"
messages = ["query"]
flows = ["egress"]
permission = "deny"
key_exprs = ["rpc/**"]

[[acl.subjects]]
id = "guests"
usernames = ["guest"]

[[acl.policies]]
rules = ["guests-see-no-secrets", "guests-answer-no-queries"]
subjects = ["guests"]
"""


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    d = tmp_path_factory.mktemp("egress")
    passwd = password_file(d / "passwd", USERS)
    listeners = (
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\nauth_methods = ["password"]\n'
    )
    b = start_broker(d, toml_with_acl(ACL, listeners, extra=f'[passwords]\nfile = "{passwd}"\n'))
    yield b
    b.stop()


def client(b: RunningBroker, user: str, **kw: object) -> AclClient:
    return AclClient(b.host, b.port, username=user, password=USERS[user], **kw)  # type: ignore[arg-type]


def test_egress_deny_filters_one_subscriber_only(broker: RunningBroker) -> None:
    with (
        client(broker, "guest") as guest,
        client(broker, "staff") as staff,
        client(broker, "writer") as pub,
    ):
        assert guest.subscribe("plant/#") == 1  # ingress has no deny: the SUBSCRIBE is granted
        assert staff.subscribe("plant/#") == 1
        for i in range(10):
            assert pub.publish_code(f"plant/secret/s{i}", b"s") != NOT_AUTHORIZED
            pub.publish_code(f"plant/public/p{i}", b"p")
        staff_got = staff.received(20)
        guest_got = guest.received(10)
    assert len(staff_got) == 20
    assert sorted(t for t, _ in guest_got) == sorted(f"plant/public/p{i}" for i in range(10))


def test_retained_messages_are_filtered_too(broker: RunningBroker) -> None:
    with client(broker, "writer") as pub:
        pub.publish("plant/secret/retained", b"r", retain=True)
        pub.publish("plant/public/retained", b"r", retain=True)
    with client(broker, "guest") as guest, client(broker, "staff") as staff:
        guest.subscribe("plant/+/retained")
        staff.subscribe("plant/+/retained")
        assert sorted(t for t, _ in staff.received(2)) == [
            "plant/public/retained",
            "plant/secret/retained",
        ]
        assert [t for t, _ in guest.received(1)] == ["plant/public/retained"]
    with client(broker, "writer") as pub:  # leave no retained messages for the other tests
        pub.publish("plant/secret/retained", b"", retain=True)
        pub.publish("plant/public/retained", b"", retain=True)


def _session_client(b: RunningBroker, clean_start: bool) -> tuple[paho.Client, queue.Queue[str]]:
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 300
    c = paho.Client(
        paho.CallbackAPIVersion.VERSION2, client_id="guest-queued", protocol=paho.MQTTv5
    )
    c.username_pw_set("guest", USERS["guest"])
    got: queue.Queue[str] = queue.Queue()
    connected = threading.Event()
    c.on_message = lambda cl, u, m: got.put(m.topic)
    c.on_connect = lambda *a: connected.set()
    c.connect(b.host, b.port, clean_start=clean_start, properties=props)
    c.loop_start()
    assert connected.wait(5)
    return c, got


def test_queued_messages_of_an_offline_session_are_filtered(broker: RunningBroker) -> None:
    c, _ = _session_client(broker, clean_start=True)
    subscribed = threading.Event()
    c.on_subscribe = lambda *a: subscribed.set()
    c.subscribe("plant/#", 1)
    assert subscribed.wait(5)
    c.disconnect()
    c.loop_stop()
    with client(broker, "writer") as pub:
        pub.publish("plant/secret/q", b"q")
        pub.publish("plant/public/q", b"q")
    resumed, got = _session_client(broker, clean_start=False)
    try:
        assert got.get(timeout=5) == "plant/public/q"  # the queue is delivered ...
        with pytest.raises(queue.Empty):
            got.get(timeout=0.5)  # ... without the secret
    finally:
        resumed.disconnect()
        resumed.loop_stop()


def test_query_egress_deny(broker: RunningBroker) -> None:
    """A request (PUBLISH with a Response Topic) is a `query`: guests do not receive it, while a
    plain `put` on the same topic reaches them."""
    with (
        client(broker, "guest") as guest,
        client(broker, "staff") as staff,
        client(broker, "writer") as pub,
    ):
        guest.subscribe("rpc/#")
        staff.subscribe("rpc/#")
        pub.publish("rpc/reboot", b"query", response_topic="replies/1")
        pub.publish("rpc/status", b"put")
        assert sorted(p for _, p in staff.received(2)) == [b"put", b"query"]
        assert [p for _, p in guest.received(1)] == [b"put"]


def test_shared_group_message_goes_to_a_member_allowed_to_receive_it(broker: RunningBroker) -> None:
    with (
        client(broker, "guest") as guest,
        client(broker, "staff") as staff,
        client(broker, "writer") as pub,
    ):
        assert guest.subscribe("$share/g/plant/#") == 1
        assert staff.subscribe("$share/g/plant/#") == 1
        for i in range(6):
            pub.publish(f"plant/secret/shared{i}", b"s")
        assert sorted(t for t, _ in staff.received(6)) == [
            f"plant/secret/shared{i}" for i in range(6)
        ]
        assert guest.received() == []

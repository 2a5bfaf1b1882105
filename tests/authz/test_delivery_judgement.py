"""Issue 15 items 2 and 4: what is queued or in flight for a session is judged under the policy
in force when it would leave, for the principal connected then. Over real sockets against the
real broker: after a reload that revokes a topic, after a re-authentication with a narrower
token, and after a restart under a tightened config, nothing the receiver may no longer receive
is delivered — queued, in flight, or live through a restored subscription — and the drops are
logged."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from edge_broker.mqtt.packets import (
    Auth,
    Disconnect,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from tests.authz.session_support import (
    RULES_NO_ADMIN,
    RULES_WIDE,
    gateway_config,
    password_login,
    reload,
    write_passwd,
)
from tests.broker.broker_raw import RawClient, unique_id
from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402

PERSISTENT = Properties(session_expiry_interval=300)
# activity-scoped: the publisher may still publish admin/#, the "user" role may not receive it
USER_NO_ADMIN_SUB = (
    '{ id = "no-admin-sub", topic = "admin/#", type = "DENY", activity = "SUBSCRIBE" }, '
    '{ id = "all", topic = "#" }'
)


def login(b: RunningBroker, user: str, cid: str, clean: bool = False, **props: int) -> RawClient:
    return password_login(RawClient(b.host, b.port), user, cid, clean, **props)


def publish(b: RunningBroker, *topics: str) -> None:
    pub = login(b, "bob", unique_id("pub-"), clean=True)  # bob: admin, may publish anything
    for i, topic in enumerate(topics, 1):
        pub.send(Publish(topic, topic.encode(), 1, packet_id=i))
        assert pub.expect(Puback).reason_code in (0, 0x10)  # 0x10: nobody may receive it
    pub.close()


@pytest.fixture
def gateway(tmp_path: Path):
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin"})
    b = start_broker(tmp_path / "run", gateway_config(tmp_path, user_rules=RULES_WIDE))
    yield b, tmp_path
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def test_queued_messages_go_with_the_subscription_a_reload_removes(gateway) -> None:
    b, directory = gateway
    cid = unique_id("alice-")
    alice = login(b, "alice", cid)
    alice.send(Subscribe(1, (Subscription("admin/#", 1), Subscription("open/#", 1))))
    assert alice.expect(Suback).reason_codes == (1, 1)
    alice.send(Disconnect(0))
    alice.close()
    publish(b, "admin/a", "open/o")
    reload(b, gateway_config(directory, user_rules=RULES_NO_ADMIN))
    alice = login(b, "alice", cid)
    assert [p.topic for p in alice.publishes(0.8)] == ["open/o"]
    alice.close()
    assert "queued message dropped after reload" in b.log()


def test_queued_messages_under_a_kept_wildcard_are_judged_per_topic(gateway) -> None:
    """``#`` survives the narrowing (deliveries re-checked per topic): the queued admin message
    under it is dropped, the rest is delivered."""
    b, directory = gateway
    cid = unique_id("alice-")
    alice = login(b, "alice", cid)
    assert alice.subscribe("#", 1).reason_codes == (1,)
    alice.send(Disconnect(0))
    alice.close()
    publish(b, "admin/a", "open/o")
    reload(b, gateway_config(directory, user_rules=RULES_NO_ADMIN))
    alice = login(b, "alice", cid)
    assert [p.topic for p in alice.publishes(0.8)] == ["open/o"]
    alice.close()


def test_in_flight_messages_are_not_resent_after_the_right_is_gone(gateway) -> None:
    b, directory = gateway
    cid = unique_id("alice-")
    alice = login(b, "alice", cid)
    assert alice.subscribe("admin/#", 1).reason_codes == (1,)
    publish(b, "admin/inflight")
    got = alice.expect(Publish)
    assert got.topic == "admin/inflight"
    alice.close()  # no PUBACK: in flight, resent on the next connect (MQTT 5 §4.4)
    reload(b, gateway_config(directory, user_rules=RULES_NO_ADMIN))
    alice = login(b, "alice", cid)
    assert alice.publishes(0.8) == []
    alice.close()


def test_a_restart_judges_restored_subscriptions_and_queues(tmp_path: Path) -> None:
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin"})
    b = start_broker(
        tmp_path / "run1", gateway_config(tmp_path, user_rules=RULES_WIDE, persistence=True)
    )
    cid = unique_id("alice-")
    try:
        alice = login(b, "alice", cid)
        assert alice.subscribe("#", 1).reason_codes == (1,)
        alice.send(Disconnect(0))
        alice.close()
        publish(b, "admin/queued", "open/queued")
    finally:
        assert b.stop() == 0
    b = start_broker(
        tmp_path / "run2", gateway_config(tmp_path, user_rules=USER_NO_ADMIN_SUB, persistence=True)
    )
    try:
        alice = login(b, "alice", cid)
        assert [p.topic for p in alice.publishes(0.8)] == ["open/queued"]
        publish(b, "admin/live", "open/live")  # live, through the restored subscription
        assert [p.topic for p in alice.publishes(0.8)] == ["open/live"]
        alice.close()
        assert "restored sessions judged" in b.log()
    finally:
        b.stop()


def test_reauthentication_with_a_narrower_token_drops_what_was_queued(tmp_path: Path) -> None:
    b = start_broker(tmp_path / "run", token_config(tmp_path))
    wide = [grant(["~"], pub=["#"], sub=["data/#", "other/#"])]
    narrow = [grant(["~"], pub=["#"], sub=["data/#"])]
    try:
        c = RawClient(b.host, b.port)
        ack = c.connect(
            unique_id("dev-"),
            properties=Properties(
                receive_maximum=1,
                authentication_method="TOKEN",
                authentication_data=make_token(wide, subject="dev").encode(),
            ),
        )
        assert ack.reason_code == 0
        c.send(Subscribe(1, (Subscription("data/#", 1), Subscription("other/#", 1))))
        assert c.expect(Suback).reason_codes == (1, 1)
        pub = RawClient(b.host, b.port)
        pub.connect(
            unique_id("pub-"),
            properties=Properties(
                authentication_method="TOKEN", authentication_data=make_token(wide).encode()
            ),
        )
        for i, topic in enumerate(("other/1", "other/2", "data/3"), 1):
            pub.send(Publish(topic, b"x", 1, packet_id=i))
            assert pub.expect(Puback).reason_code == 0
        first = c.expect(Publish)  # Receive Maximum 1: the rest waits in the session queue
        assert first.topic == "other/1"
        c.send(
            Auth(
                0x19,
                Properties(
                    authentication_method="TOKEN",
                    authentication_data=make_token(narrow, subject="dev").encode(),
                ),
            )
        )
        assert isinstance(c.recv(), Auth)
        c.send(Puback(first.packet_id))
        assert [p.topic for p in c.publishes(0.8)] == ["data/3"]
        c.close()
        pub.close()
    finally:
        b.stop()


# test_revocations_are_counted_and_audited: on the in-memory broker
# (test_delivery_judgement_memory.py)


def test_a_narrower_token_resuming_gets_none_of_what_was_queued_for_the_wider(
    tmp_path: Path,
) -> None:
    b = start_broker(tmp_path / "run", token_config(tmp_path))
    wide = [grant(["~"], pub=["#"], sub=["data/#", "other/#"])]
    narrow = [grant(["~"], pub=["#"], sub=["data/#"])]
    cid = unique_id("dev-")

    def token_login(grants: list[dict[str, object]]) -> RawClient:
        c = RawClient(b.host, b.port)
        assert (
            c.connect(
                cid,
                clean=False,
                properties=Properties(
                    session_expiry_interval=300,
                    authentication_method="TOKEN",
                    authentication_data=make_token(grants, subject="dev").encode(),
                ),
            ).reason_code
            == 0
        )
        return c

    try:
        c = token_login(wide)
        c.send(Subscribe(1, (Subscription("data/#", 1), Subscription("other/#", 1))))
        assert c.expect(Suback).reason_codes == (1, 1)
        c.send(Disconnect(0))
        c.close()
        pub = RawClient(b.host, b.port)
        pub.connect(
            unique_id("pub-"),
            properties=Properties(
                authentication_method="TOKEN", authentication_data=make_token(wide).encode()
            ),
        )
        for i, topic in enumerate(("other/q", "data/q"), 1):
            pub.send(Publish(topic, b"x", 1, packet_id=i))
            assert pub.expect(Puback).reason_code == 0
        pub.close()
        c = token_login(narrow)
        assert [p.topic for p in c.publishes(0.8)] == ["data/q"]
        c.close()
    finally:
        b.stop()

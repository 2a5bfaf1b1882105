"""Issue 21 item 3: the facts the gates and routing ask about a published message are computed
once, on the one value built for it (``authz/request.py`` ``Publication``), and a will reaches
the gates as that value too, built when it is checked and when it is published.

The broker runs in this process (``test_egress_per_subscription.Running``) so the tests can
count calls of the real code; the clients are raw sockets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edge_broker.authz.decision import Decision, GateName
from edge_broker.authz.policy import Policy
from edge_broker.authz.request import Publication
from edge_broker.broker.delivery import Delivery
from edge_broker.broker.message import Message
from edge_broker.claims import gate as claims_gate
from edge_broker.claims.gate import ClaimsGate
from edge_broker.identity import Identity
from edge_broker.matching import reserved_topics
from edge_broker.matching.reserved_topics import ReservedTopics
from edge_broker.mqtt.packets import Properties, Puback, Publish, Will
from tests.broker.broker_raw import RawClient
from tests.broker.test_egress_per_subscription import running

CONFIG = '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n[sys]\ninterval = 0\n'

# every test of ReservedTopics that can tell a reserved topic from another
RESERVED_TESTS = ("classify", "is_sys", "is_smoker_system", "reserved", "routable")


@pytest.fixture
def reserved_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The topics every reserved-topic test was run on, in order (the real test still answers)."""
    seen: list[str] = []
    for name in RESERVED_TESTS:
        real = getattr(ReservedTopics, name, None)
        if real is None:
            continue

        def counted(self: ReservedTopics, topic: str, _real: Any = real) -> Any:
            seen.append(topic)
            return _real(self, topic)

        monkeypatch.setattr(ReservedTopics, name, counted)
    return seen


def client(port: int, client_id: str, **kw: Any) -> RawClient:
    c = RawClient("127.0.0.1", port)
    assert c.connect(client_id, **kw).reason_code == 0
    return c


def test_the_reserved_topic_test_runs_once_per_publish(
    tmp_path: Path, reserved_calls: list[str]
) -> None:
    """Gate 2 at ingress and routing used to test the topic separately (3 tests per routed
    PUBLISH); the message now carries the answer."""
    with running(CONFIG) as r:
        sub = client(r.port, "sub")
        assert sub.subscribe("#", 0).reason_codes == (0,)
        pub = client(r.port, "pub")
        reserved_calls.clear()
        topics = ["plant/a", "plant/b", "access/x", "$SYS/forged", "access/claim"]
        for i, topic in enumerate(topics, 1):
            pub.send(Publish(topic, b"x", 1, packet_id=i))
            assert pub.expect(Puback).reason_code == (0x87 if i > 3 else 0), topic
        got = sorted(p.topic for p in sub.publishes(0.4))
        assert got == ["access/x", "plant/a", "plant/b"]
        assert reserved_calls == topics
        sub.close()
        pub.close()


def test_a_message_keeps_its_reserved_class() -> None:
    topics = ReservedTopics(".")
    for topic, want in [
        ("a/b", reserved_topics.NOT_RESERVED),
        ("$SYS.x", reserved_topics.SYS),
        ("$SYS/x", reserved_topics.SYS),
        ("access/claim", reserved_topics.SMOKER_SYSTEM),
        ("access.claims.me.request", reserved_topics.SMOKER_SYSTEM),
        ("accessory", reserved_topics.NOT_RESERVED),
    ]:
        message = Message(topic, b"", 0, False)
        assert message.reservation(topics) == want, topic
        assert topics.reserved(topic) == (want != reserved_topics.NOT_RESERVED)
        assert topics.routable(topic) == (want != reserved_topics.SMOKER_SYSTEM)
    policy = Policy(".")
    assert policy.routable(Message("$SYS.broker.x", b"", 0, False))
    assert not policy.routable(Message("access.claim", b"", 0, False))


def test_the_claims_gate_reads_the_restricted_fact_of_the_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The claims gate used to run its ``restricted/`` prefix test per check (ingress and every
    checked delivery); it reads the fact the message computed once."""
    per_check: list[str] = []
    real = claims_gate.is_restricted

    def counted(topic: str) -> bool:
        per_check.append(topic)
        return real(topic)

    monkeypatch.setattr(claims_gate, "is_restricted", counted)

    class NoClaims:  # the part of ClaimService the gate reads for a topic outside the area
        generation = 0

    gate = ClaimsGate(NoClaims())  # type: ignore[arg-type]
    who = Identity("c", "anonymous")
    outside = Message("open/t", b"", 0, False)
    assert gate.check_publish(who, outside) is None
    for _ in range(3):
        assert gate.check_deliver(who, outside) is None
    assert gate.check_will(who, outside) is None
    assert per_check == []
    assert not outside.restricted and Message("restricted/x/t", b"", 0, False).restricted
    assert not Message("restrictedx/t", b"", 0, False).restricted


def test_a_will_reaches_the_gates_as_the_message_it_is_published_as(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At CONNECT the gates judge the will as a :class:`Publication` (not the codec's Will);
    when it is published, the message judged is the very one retained and routed."""
    judged: list[Any] = []
    routed: list[Message] = []
    real_check = Policy.check_will
    real_route = Delivery.route

    def check_will(self: Policy, identity: Identity, will: Any) -> Any:
        judged.append(will)
        return real_check(self, identity, will)

    def route(self: Delivery, space: Any, message: Message) -> int:
        routed.append(message)
        return real_route(self, space, message)

    monkeypatch.setattr(Policy, "check_will", check_will)
    monkeypatch.setattr(Delivery, "route", route)
    with running(CONFIG) as r:
        sub = client(r.port, "sub")
        assert sub.subscribe("lwt/#", 0).reason_codes == (0,)
        delayed = Properties(will_delay_interval=0, content_type="text/plain")
        dying = client(r.port, "dying", will=Will("lwt/dying", b"bye", 0, False, delayed))
        assert len(judged) == 1 and isinstance(judged[0], Publication)
        assert judged[0].properties.will_delay_interval is None  # a CONNECT property only
        dying.sock.close()  # no DISCONNECT: the will is published
        got = sub.publishes(1.0)
        assert [(p.topic, p.payload, p.properties.content_type) for p in got] == [
            ("lwt/dying", b"bye", "text/plain")
        ]
        assert len(judged) == 2
        will_routes = [m for m in routed if m.topic == "lwt/dying"]
        assert will_routes == [judged[1]] and will_routes[0] is judged[1]
        sub.close()


def test_a_reserved_will_is_refused_by_gate_2() -> None:
    policy = Policy("/")
    who = Identity("c", "anonymous")
    refused = policy.check_will(who, Message("$SYS/x", b"", 0, False))
    assert isinstance(refused, Decision) and refused.denied
    assert refused.gate is GateName.RESERVED
    allowed = policy.check_will(who, Message("a/x", b"", 0, False))
    assert isinstance(allowed, Decision) and allowed.allowed

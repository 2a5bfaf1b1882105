"""Issue 21 item 3: every gate and authorizer judges the message the broker built once per
PUBLISH, with the topic resolved and the Topic Alias gone (MQTT 5 §3.3.2.3.4: an alias is per
connection and per hop, never part of the message). Over real sockets against the real broker
(in this process, so the test's authorizer module is importable)."""

from __future__ import annotations

from typing import Any

import pytest

from edge_broker.authz.acl_mqtt import PUBLISH_MESSAGES
from edge_broker.authz.request import DELETE, PUT, QUERY, REPLY, message_kind
from edge_broker.broker.message import Message
from edge_broker.mqtt.packets import Properties, Puback, Publish, Subscribe, Subscription
from tests.broker.broker_raw import RawClient

CONFIG = """
[sys]
interval = 0
[[listeners]]
name = "tcp"
port = 0
[[authorizers]]
name = "sees-no-alias"
class = "tests.authz.alias_authorizer:SeesNoAlias"
timeout = 2
fallback = "deny"
"""


def test_an_authorizer_sees_the_resolved_topic_and_no_topic_alias(
    inprocess_broker_factory: Any,
) -> None:
    b = inprocess_broker_factory(CONFIG)
    with RawClient(b.host, b.port) as sub, RawClient(b.host, b.port) as pub:
        sub.connect("alias-sub")
        sub.send(Subscribe(1, (Subscription("alias/#", 1),)))
        sub.recv()
        pub.connect("alias-pub")
        # sets alias 1, then uses it with an empty topic
        pub.send(Publish("alias/t", b"1", 1, packet_id=1, properties=Properties(topic_alias=1)))
        pub.send(Publish("", b"2", 1, packet_id=2, properties=Properties(topic_alias=1)))
        acks = [pub.expect(Puback) for _ in range(2)]
        assert [(a.reason_code, a.properties.reason_string) for a in acks] == [(0, None)] * 2
        got = [sub.expect(Publish) for _ in range(2)]
        assert [(p.topic, p.payload) for p in got] == [("alias/t", b"1"), ("alias/t", b"2")]
        assert all(p.properties.topic_alias is None for p in got)


@pytest.mark.parametrize(
    ("retain", "payload", "props", "kind"),
    [
        (False, b"x", Properties(), "put"),
        (True, b"", Properties(), "delete"),
        (True, b"", Properties(response_topic="r"), "delete"),
        (False, b"x", Properties(response_topic="r", correlation_data=b"c"), "query"),
        (False, b"x", Properties(correlation_data=b"c"), "reply"),
    ],
)
def test_the_message_kind_is_computed_once_with_the_message(
    retain: bool, payload: bytes, props: Properties, kind: str
) -> None:
    """The site ACL's message kind (AUTHZ.md §2 table) is a field of the routed message, so
    neither the ingress check nor any delivery computes it again."""
    message = Message("t", payload, 1, retain, props)
    assert PUBLISH_MESSAGES[message_kind(retain, payload, props)].value == kind
    assert message.kind == {"put": PUT, "delete": DELETE, "query": QUERY, "reply": REPLY}[kind]

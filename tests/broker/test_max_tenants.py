"""``[limits] max_tenants`` (issue 34): the topic spaces of tenants besides the default one are
bounded. A CONNECT into one more tenant gets CONNACK 0x97 with a Reason String naming the limit,
counted as a limit hit; spaces nobody uses any more are freed at once to make room; a client of
a tenant that already has its space, or of the default tenant, still connects. Each tenant's
space gets routing caches of a share of ``routing_cache_bytes``. In-memory broker
(engine_harness.py)."""

from __future__ import annotations

from engine_harness import memory_broker

from edge_broker.broker.topic_space import TENANT_CACHE_SHARE, space_cache_bytes
from edge_broker.identity import DEFAULT_TENANT
from edge_broker.mqtt.packets import Properties, Puback, Publish
from edge_broker.mqtt.reason_codes import ReasonCode

OPEN = {"name": "tcp", "bind": "127.0.0.1", "port": 0, "tenant_choice": "open"}


def tenant(name: str) -> Properties:
    return Properties(user_properties=(("tenant", name),))


def test_one_tenant_more_than_max_tenants_is_refused_with_0x97() -> None:
    for mb in memory_broker({"listeners": [OPEN], "limits": {"max_tenants": 2}}):
        a, b = mb.client(), mb.client()
        assert a.connect("a", properties=tenant("acme")).reason_code == 0
        assert b.connect("b", properties=tenant("globex")).reason_code == 0
        c = mb.client()
        ack = c.connect("c", properties=tenant("initech"))
        assert ack.reason_code == ReasonCode.QUOTA_EXCEEDED
        reason = ack.properties.reason_string or ""
        assert "limits.max_tenants" in reason and "'initech'" in reason, reason
        assert mb.broker.limit_hits.counts["limits.max_tenants"] == 1
        assert "initech" not in mb.broker.topic_spaces
        # a tenant that has its space, and the default tenant, still get in
        again = mb.client()
        assert again.connect("a2", properties=tenant("acme")).reason_code == 0
        default = mb.client()
        assert default.connect("d").reason_code == 0
        assert len(mb.broker.topic_spaces) == 3  # the default one and two tenants'


def test_a_space_nobody_uses_is_freed_to_make_room() -> None:
    for mb in memory_broker({"listeners": [OPEN], "limits": {"max_tenants": 1}}):
        a = mb.client()
        assert a.connect("a", properties=tenant("acme")).reason_code == 0
        a.close()  # clean session: nothing keeps acme's space but the next sweep
        assert "acme" in mb.broker.topic_spaces
        b = mb.client()
        assert b.connect("b", properties=tenant("globex")).reason_code == 0
        assert "acme" not in mb.broker.topic_spaces and "globex" in mb.broker.topic_spaces


def test_a_retained_message_keeps_its_tenant_counted() -> None:
    for mb in memory_broker({"listeners": [OPEN], "limits": {"max_tenants": 1}}):
        a = mb.client()
        assert a.connect("a", properties=tenant("acme")).reason_code == 0
        a.send(Publish("kept", b"v", 1, True, packet_id=1))
        assert a.expect(Puback).reason_code in (0, 0x10)
        a.close()
        b = mb.client()
        ack = b.connect("b", properties=tenant("globex"))
        assert ack.reason_code == ReasonCode.QUOTA_EXCEEDED, ack


def test_tenant_spaces_get_a_share_of_the_routing_cache() -> None:
    assert space_cache_bytes(DEFAULT_TENANT, 1 << 20) == 1 << 20
    assert space_cache_bytes("acme", 1 << 20) == (1 << 20) // TENANT_CACHE_SHARE
    for mb in memory_broker({"listeners": [OPEN]}):
        c = mb.client()
        assert c.connect("c", properties=tenant("acme")).reason_code == 0
        trie = mb.broker.topic_spaces["acme"].trie
        assert trie._cache_max_bytes == mb.broker.config.limits.routing_cache_bytes // 128

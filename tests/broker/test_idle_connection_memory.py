"""What an idle client costs the broker (issue 32: memory per idle connection), on the
in-memory broker (engine_harness.py): the CONNECT is let go at CONNACK unless enhanced
authentication may need it again, anonymous clients of one listener share their principal, and
the per-connection tables that most clients never use are made on first use. The whole is
checked by tracemalloc against a bound (4.4 KB before these changes, about 2.8 KB after)."""

from __future__ import annotations

import gc
import tracemalloc

from engine_harness import MemoryBroker, memory_broker

from edge_broker.broker.connection import Connection
from edge_broker.mqtt.packets import Auth, Disconnect, Properties, Publish

OPEN = {"limits": {"connect_rate": 100_000, "connect_burst": 100_000}}


def connection_of(mb: MemoryBroker, client_id: str) -> Connection:
    return next(c for c in mb.broker.connections if c.client_id == client_id)


def test_the_connect_packet_is_let_go_at_connack() -> None:
    for mb in memory_broker():
        c = mb.client()
        c.connect("plain", properties=Properties(topic_alias_maximum=3))
        assert connection_of(mb, "plain").connect_packet is None


def test_auth_without_a_connect_method_is_still_a_protocol_error() -> None:
    """MQTT 5 §4.12.1: re-authentication needs the CONNECT's method; the CONNECT that had
    none is gone, and the answer is the one it always was (DISCONNECT 0x82)."""
    for mb in memory_broker():
        c = mb.client()
        c.connect("no-method")
        c.send(Auth(0x19, Properties(authentication_method="SMOKER")))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x82


def test_anonymous_clients_of_a_listener_share_one_principal() -> None:
    for mb in memory_broker():
        for i in range(3):
            mb.client(4).connect(f"anon-{i}")
        owners = {id(s.owner) for s in mb.broker.sessions}
        assert len(owners) == 1


def test_inbound_topic_aliases_still_resolve_once_set() -> None:
    for mb in memory_broker():
        sub, pub = mb.client(), mb.client()
        sub.connect("alias-sub")
        sub.subscribe("a/#")
        pub.connect("alias-pub")
        engine = connection_of(mb, "alias-pub").engine
        assert len(engine.aliases_in) == 0
        pub.send(Publish("a/1", b"one", 0, properties=Properties(topic_alias=1)))
        pub.send(Publish("", b"two", 0, properties=Properties(topic_alias=1)))
        assert [(p.topic, p.payload) for p in sub.publishes()] == [("a/1", b"one"), ("a/1", b"two")]
        assert len(engine.aliases_in) == 1


def test_an_idle_client_costs_the_broker_less_than_3_kb() -> None:
    """MQTT 3.1.1, keep alive 300 s, one QoS 1 subscription: what the broker allocates for
    it, the client side's own reader left out (the socket and asyncio's transport are not in
    the in-memory harness: docs/performance.md gives those)."""
    for mb in memory_broker(OPEN):
        for i in range(20):  # the first clients make the broker's own tables
            c = mb.client(4)
            c.connect(f"warm-{i}", keep_alive=300)
            c.subscribe(f"idle/w{i}/cmd", 1)
        n = 200
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            clients = [mb.client(4) for _ in range(n)]
            for i, c in enumerate(clients):
                c.connect(f"idle-{i}", keep_alive=300)
                c.subscribe(f"idle/{i}/cmd", 1)
                c.reader = None  # type: ignore[assignment]  # the client's, not the broker's
            gc.collect()
            after = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        # the harness's own objects (clients, in-memory transports) are allocated in tests/
        ignore = [
            tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, "*/tests/*"),
        ]
        grown = sum(
            d.size_diff
            for d in after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "lineno")
        )
        assert grown / n < 3000, f"{grown / n:.0f} B per idle client"

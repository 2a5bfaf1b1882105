"""``$SYS`` in every tenant's topic space on the in-memory broker (engine_harness.py): the
``$SYS`` topics reach a tenant's subscriber at the broker's next update, with no wait for the
real interval; a tenant shares the broker-wide values, retained before its space existed, and
hears a value again only when it changed (issue 34). test_dot_separator moved here from
test_broker_tenants.py (a broker process of its own, waiting up to 3 s for ``$SYS``)."""

from __future__ import annotations

from engine_harness import memory_broker

from edge_broker.mqtt.packets import Properties, Publish, Suback, Subscribe, Subscription

OPEN_LISTENER = {"name": "tcp", "bind": "127.0.0.1", "port": 0, "tenant_choice": "open"}


def tenant(name: str) -> Properties:
    return Properties(user_properties=(("tenant", name),))


def test_sys_topics_in_every_tenant() -> None:
    for mb in memory_broker({"sys": {"interval": 0.5}, "listeners": [OPEN_LISTENER]}):
        c = mb.client()
        c.connect("sys-reader", properties=tenant("acme"))
        mb.advance(1.0)  # $SYS updates before anyone of the tenant subscribed
        c.send(
            Subscribe(
                1,
                (
                    Subscription("$SYS/broker/clients/connected", 0),
                    Subscription("$SYS/broker/version", 0),
                ),
            )
        )
        c.expect(Suback)
        # the values every tenant shares are retained before the tenant's space existed
        got = {p.topic: p.payload for p in (c.expect(Publish), c.expect(Publish))}
        assert got["$SYS/broker/version"].startswith(b"edge-broker version")
        assert int(got["$SYS/broker/clients/connected"]) >= 1
        mb.advance(0.5)
        c.nothing()  # nothing the tenant subscribed to changed: nothing is sent again
        other = mb.client()
        other.connect("sys-other", properties=tenant("globex"))
        mb.advance(0.5)  # clients/connected changed: the subscribed space hears it
        assert int(c.expect(Publish).payload) >= 2


def test_dot_separator() -> None:
    for mb in memory_broker({"topics": {"separator": "."}, "sys": {"interval": 0.5}}):
        c = mb.client()
        c.connect("dots")
        c.send(
            Subscribe(
                1, (Subscription("store.+.status", 0), Subscription("$SYS.broker.version", 0))
            )
        )
        assert c.expect(Suback).reason_codes == (0, 0)
        mb.advance(0.5)  # the next $SYS update, at most one interval away
        assert c.expect(Publish).topic == "$SYS.broker.version"
        c.send(Publish("store/1/status", b"slash", 0))
        c.send(Publish("store.1.status", b"dot", 0))
        assert c.expect(Publish).payload == b"dot"
        c.nothing()

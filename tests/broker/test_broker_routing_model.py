"""Routing against a model: random subscriptions of three clients (overlapping filters, No Local,
subscription identifiers, granted QoS) and random publishes; every client must receive exactly
one copy of each matching message, with the highest granted QoS and every matching identifier
(MQTT 5 §3.3.4), and nothing else."""

from __future__ import annotations

import itertools

from broker_raw import RawClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_broker.matching.mqtt_topics import topic_matches
from edge_broker.mqtt.packets import (
    Pingreq,
    Pingresp,
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

LEVELS = ["a", "b"]
_runs = itertools.count()

topics = st.lists(st.sampled_from(LEVELS), min_size=1, max_size=3).map("/".join)
filter_levels = st.lists(st.sampled_from(["a", "b", "+"]), min_size=0, max_size=3)
filters = st.builds(
    lambda levels, tail: "/".join(levels + (["#"] if tail or not levels else [])),
    filter_levels,
    st.booleans(),
)
subscription = st.tuples(filters, st.integers(0, 2), st.booleans())  # filter, qos, no_local
clients_subs = st.lists(st.lists(subscription, min_size=1, max_size=3), min_size=3, max_size=3)
publishes = st.lists(
    st.tuples(st.integers(0, 2), topics, st.integers(0, 2)), min_size=1, max_size=6
)  # (publisher index, topic, qos)


def sync(c: RawClient, into: list[Publish]) -> None:
    """PINGREQ, then read up to its PINGRESP: collect (and acknowledge) deliveries, skip the
    broker's acknowledgements of this client's own publishes."""
    c.send(Pingreq())
    pong = False
    releases: set[int] = set()
    while not (pong and not releases):
        p = c.recv(5)
        if isinstance(p, Pingresp):
            pong = True
        elif isinstance(p, (Puback, Pubrec)):
            continue
        elif isinstance(p, Pubrel):
            releases.discard(p.packet_id)
            c.send(Pubcomp(p.packet_id))
        else:
            assert isinstance(p, Publish), p
            into.append(p)
            if p.qos == 1:
                c.send(Puback(p.packet_id))
            elif p.qos == 2:
                releases.add(p.packet_id)
                c.send(Pubrec(p.packet_id))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(subs=clients_subs, pubs=publishes)
def test_routing_matches_model(module_broker, subs, pubs):
    run = next(_runs)
    prefix = f"model{run}-{id(subs) % 10**6}"
    clients = [RawClient(module_broker.host, module_broker.port) for _ in range(3)]
    try:
        for i, c in enumerate(clients):
            c.connect(f"{prefix}-c{i}")
        model: list[dict[str, tuple[int, bool, int]]] = []
        for i, (c, their) in enumerate(zip(clients, subs, strict=True)):
            mine: dict[str, tuple[int, bool, int]] = {}
            for k, (flt, qos, no_local) in enumerate(their):
                sub_id = 10 * i + k + 1
                full = f"{prefix}/{flt}"
                c.send(
                    Subscribe(
                        k + 1,
                        (Subscription(full, qos, no_local=no_local),),
                        Properties(subscription_identifiers=(sub_id,)),
                    )
                )
                assert c.expect(Suback).reason_codes == (qos,)
                mine[full] = (qos, no_local, sub_id)  # a re-subscription replaces
            model.append(mine)
        for n, (who, topic, qos) in enumerate(pubs):
            full = f"{prefix}/{topic}"
            clients[who].send(Publish(full, b"%d" % n, qos, packet_id=n + 1 if qos else None))
        received: list[list[Publish]] = [[], [], []]
        for who in sorted({w for w, _, _ in pubs}):  # every PUBLISH routed after this
            sync(clients[who], received[who])
        for i, c in enumerate(clients):
            sync(c, received[i])
        for i in range(3):
            expected = []
            for n, (who, topic, qos) in enumerate(pubs):
                full = f"{prefix}/{topic}"
                hits = [
                    (q, sid)
                    for flt, (q, nl, sid) in model[i].items()
                    if topic_matches(flt, full) and not (nl and who == i)
                ]
                if hits:
                    expected.append(
                        (
                            b"%d" % n,
                            min(qos, max(q for q, _ in hits)),
                            sorted(sid for _, sid in hits),
                        )
                    )
            got = [
                (p.payload, p.qos, sorted(p.properties.subscription_identifiers))
                for p in received[i]
                if p.topic.startswith(prefix)
            ]
            assert sorted(got) == sorted(expected)
    finally:
        for c in clients:
            c.close()

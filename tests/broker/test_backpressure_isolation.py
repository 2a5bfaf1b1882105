"""Issue 31 item 3: backpressure holds only the publisher whose message met a full queue, once
per publish (broker/delivery.py; docs/limits-admission.md). Real sockets, an attacker and a
victim side by side; counts of holds, not wall time."""

from __future__ import annotations

from pathlib import Path

from edge_broker.mqtt.packets import Properties, Puback, Publish, Will
from tests.authz.session_support import wait_for_log
from tests.broker.broker_raw import RawClient, unique_id

STALL = {"max_inflight": 1, "max_queued_messages": 5, "queue_overflow": "backpressure"}


def stalled(b, topics: list[str]) -> RawClient:
    """A subscriber that never reads nor acknowledges (QoS 1)."""
    c = RawClient(b.host, b.port)
    assert c.connect(unique_id("stall-")).reason_code == 0
    for i, topic in enumerate(topics):
        assert c.subscribe(topic, 1, packet_id=i + 1).reason_codes == (1,)
    return c


def publish_acked(c: RawClient, topic: str, count: int, first_id: int = 1) -> None:
    """``count`` QoS 1 messages sent at once; every PUBACK awaited (10 s each at most)."""
    for i in range(count):
        c.send(Publish(topic, b"m", 1, packet_id=first_id + i))
    acks = 0
    while acks < count:
        if isinstance(c.recv(10.0), Puback):
            acks += 1


def sys_value(b, key: str, quiet: float = 2.5) -> str:
    """``$SYS/broker/<key>`` once it has settled: the retained copy a new subscription gets, then
    every change the broker's ticks send (only changed values are sent), until none came for
    ``quiet`` seconds (2.5 ticks of the tests' 1 s interval)."""
    with RawClient(b.host, b.port) as c:
        assert c.connect(unique_id("sys-")).reason_code == 0
        c.subscribe(f"$SYS/broker/{key}", 0)
        seen: list[str] = []
        while True:
            try:
                got = c.recv(quiet if seen else 10.0)
            except TimeoutError:
                assert seen, f"no $SYS/broker/{key}"
                return seen[-1]
            if isinstance(got, Publish):
                seen.append(got.payload.decode())


def test_five_stalled_sessions_of_one_principal_hold_a_publisher_once(broker_factory) -> None:
    b = broker_factory({"limits": {**STALL, "backpressure_timeout": 0.5}, "sys": {"interval": 1}})
    shared = unique_id("shared/")
    attackers = [stalled(b, [f"{shared}/own{i}", shared]) for i in range(5)]
    feeder = RawClient(b.host, b.port)
    assert feeder.connect(unique_id("feed-")).reason_code == 0
    next_id = 1
    for i in range(5):  # session i: 1 in flight and 5 - i queued, so each fills on another publish
        publish_acked(feeder, f"{shared}/own{i}", 6 - i, next_id)
        next_id += 6 - i
    victim = RawClient(b.host, b.port)
    assert victim.connect(unique_id("victim-")).reason_code == 0
    publish_acked(victim, shared, 5)  # each of the five meets a newly full queue
    assert sys_value(b, "limits/limits_backpressure_timeout/hits") == "1"  # was 5
    assert sys_value(b, "limits/backpressure/holds") == "1"
    for c in (*attackers, feeder, victim):
        c.close()


def test_a_will_into_a_full_queue_holds_no_unrelated_publisher(broker_factory, tmp_path: Path):
    """The table's attack: fill your own stalled subscriber, route a QoS 1 will into it; the
    "congested" mark used to hold whoever published next, for the whole hold (30 s here)."""
    b = broker_factory({"limits": {**STALL, "backpressure_timeout": 30}})
    topic = unique_id("atk/")
    sink = stalled(b, [topic])
    feeder = RawClient(b.host, b.port)
    assert feeder.connect(unique_id("feed-")).reason_code == 0
    publish_acked(feeder, topic, 6)  # 1 in flight, 5 queued: full, nobody held yet
    dying = RawClient(b.host, b.port)
    will = Will(topic, b"will", 1, properties=Properties())
    assert dying.connect(unique_id("dying-"), will=will).reason_code == 0
    dying.close()  # no DISCONNECT: the will is published into the full queue
    wait_for_log(b, "will published")
    victim = RawClient(b.host, b.port)
    assert victim.connect(unique_id("victim-")).reason_code == 0
    # another topic, nobody subscribed: the second PUBACK comes only if the first PUBLISH
    # held nothing (held, it would come after 30 s; recv gives up after 10)
    publish_acked(victim, unique_id("victim/"), 2)
    for c in (sink, feeder, victim):
        c.close()

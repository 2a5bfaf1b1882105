"""The journal keeps a persistent session's queued references in the order of its queue (issue
17: a deque beside ``session.queue``, no per-message dict): these pin the paths where a
reference leaves other than from the head — a revocation that drops queued messages from the
middle, a session that becomes persistent with messages already in flight and queued — across
a kill -9 and a restart, over real sockets against the real broker."""

from __future__ import annotations

import signal
from pathlib import Path

from persist_support import EXPIRY, RawClient, persistent_config, subscribe

from edge_broker.broker.persist.tables import BROKER_LOG
from edge_broker.mqtt.packets import Properties, Puback, Publish
from edge_broker.store import KeyedLog
from tests.authz.session_support import (
    RULES_NO_ADMIN,
    RULES_WIDE,
    gateway_config,
    password_login,
    reload,
    write_passwd,
)
from tests.broker.broker_raw import unique_id
from tests.conftest import RunningBroker, start_broker


def _references(state: Path) -> int:
    keyed = KeyedLog.open(state / BROKER_LOG)
    try:
        return keyed.count("ref")
    finally:
        keyed.close()


def _login(b: RunningBroker, user: str, cid: str, clean: bool = False) -> RawClient:
    return password_login(RawClient(b.host, b.port), user, cid, clean)


def test_a_revocation_drops_queued_messages_from_the_middle_and_a_kill_keeps_the_rest(
    tmp_path: Path,
) -> None:
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin"})
    state = tmp_path / "state"

    def config(rules: str) -> str:  # its state directory is tmp_path / "state"
        return gateway_config(tmp_path, user_rules=rules, persistence=True)

    b = start_broker(tmp_path / "run1", config(RULES_WIDE))
    cid = unique_id("alice-")
    topics = [t for i in range(1, 6) for t in (f"open/{i}", f"admin/{i}")]
    try:
        alice = _login(b, "alice", cid)
        assert alice.subscribe("#", 1).reason_codes == (1,)
        alice.close()  # offline: everything below is queued for her
        pub = _login(b, "bob", unique_id("pub-"), clean=True)
        for i, topic in enumerate(topics, 1):
            pub.send(Publish(topic, topic.encode(), 1, packet_id=i))
            assert pub.expect(Puback).reason_code == 0
        pub.close()
        reload(b, config(RULES_NO_ADMIN))  # drops admin/1..5, queued between the open ones
        assert "queued message dropped after reload" in b.log()
    finally:
        b.stop(signal.SIGKILL)
    assert _references(state) == 5  # the five dropped are gone from the store, not only memory
    b = start_broker(tmp_path / "run2", config(RULES_WIDE))  # a restart alone would not drop
    try:
        alice = _login(b, "alice", cid)
        assert [p.topic for p in alice.publishes(0.8)] == [f"open/{i}" for i in range(1, 6)]
        alice.close()
    finally:
        b.stop()


def test_a_session_that_becomes_persistent_keeps_its_flight_and_queue_across_a_kill(
    broker_factory, tmp_path: Path
) -> None:
    """A client with session expiry 0 has two messages in flight (Receive Maximum 2) and three
    queued; a takeover with an expiry makes the session persistent (``Persistence.adopt``).
    After kill -9 the resumed session gets the two again under the same packet ids with DUP,
    then the three queued in order, each once."""
    state = tmp_path / "state"
    config = persistent_config(state, "sync")
    b = broker_factory(config)
    cid = unique_id("adopt-")
    sub = RawClient(b.host, b.port)
    sub.connect(cid, clean=True, properties=Properties(receive_maximum=2))
    subscribe(sub, ("adopt/#", 1))
    pub = RawClient(b.host, b.port)
    pub.connect(unique_id("adopt-pub-"))
    for i in range(1, 6):
        pub.send(Publish(f"adopt/{i}", b"m%d" % i, 1, packet_id=i))
        assert pub.expect(Puback).reason_code == 0
    first = [sub.expect(Publish) for _ in range(2)]
    assert [p.topic for p in first] == ["adopt/1", "adopt/2"]
    taker = RawClient(b.host, b.port)
    ack = taker.connect(
        cid, clean=False, properties=Properties(session_expiry_interval=3600, receive_maximum=2)
    )
    assert ack.session_present
    resent = [taker.expect(Publish) for _ in range(2)]
    assert [(p.topic, p.packet_id, p.dup) for p in resent] == [
        (p.topic, p.packet_id, True) for p in first
    ]
    b.stop(signal.SIGKILL)
    b2 = broker_factory(config)
    again = RawClient(b2.host, b2.port)
    assert again.connect(cid, clean=False, properties=EXPIRY).session_present
    got = [again.expect(Publish) for _ in range(2)]
    assert [(p.topic, p.packet_id, p.dup) for p in got] == [
        (p.topic, p.packet_id, True) for p in first
    ]
    for p in got:
        again.send(Puback(p.packet_id))
    rest = []
    for _ in range(3):
        p = again.expect(Publish)
        rest.append(p.topic)
        again.send(Puback(p.packet_id))
    assert rest == ["adopt/3", "adopt/4", "adopt/5"]
    assert again.publishes(0.5) == []
    again.close()
    b2.stop()
    assert _references(state) == 0

"""Sessions across a broker restart (issue 8): subscriptions with their options and
identifiers come back without resubscribing, expired sessions are dropped at start, a will
pending at the crash is published after its delay, clean sessions leave nothing behind."""

from __future__ import annotations

import signal
import time

from persist_support import EXPIRY, RawClient, drain, persistent_config

from edge_broker.broker.persist.tables import BROKER_LOG
from edge_broker.mqtt.packets import (
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Will,
)
from edge_broker.store import KeyedLog


def test_subscription_options_and_identifier_survive_restart(broker_factory, tmp_path):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state))
    sub = RawClient(b.host, b.port)
    sub.connect("opts", clean=False, properties=EXPIRY)
    sub.send(
        Subscribe(
            1,
            (Subscription("a/+", 1, no_local=True, retain_as_published=True),),
            Properties(subscription_identifiers=(7,)),
        )
    )
    assert sub.expect(Suback).reason_codes == (1,)
    sub.close()
    b.stop()
    b2 = broker_factory(persistent_config(state))
    sub2 = RawClient(b2.host, b2.port)
    assert sub2.connect("opts", clean=False, properties=EXPIRY).session_present
    pub = RawClient(b2.host, b2.port)
    pub.connect("other")
    pub.send(Publish("a/b", b"hello", 1, retain=True, packet_id=1))
    pub.expect(Puback)
    sub2.send(Publish("a/own", b"mine", 0))  # no_local: not delivered back
    got = drain(sub2, 1.0)
    assert [(p.topic, p.payload, p.qos, p.retain) for p in got] == [("a/b", b"hello", 1, True)]
    assert got[0].properties.subscription_identifiers == (7,)


def test_expired_session_is_dropped_at_start(broker_factory, tmp_path):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state))
    c = RawClient(b.host, b.port)
    c.connect("short", clean=False, properties=Properties(session_expiry_interval=1))
    c.send(Subscribe(1, (Subscription("x", 1),)))
    c.expect(Suback)
    c.close()
    time.sleep(0.3)  # the broker sees the connection end before it stops (no signal for it)
    b.stop()
    # real time on purpose: the session's deadline passes while no broker runs, and the next
    # one compares it with the wall clock at start (the fake clock cannot span two processes)
    time.sleep(1.5)
    b2 = broker_factory(persistent_config(state))
    c2 = RawClient(b2.host, b2.port)
    assert not c2.connect("short", clean=False, properties=EXPIRY).session_present


def test_will_pending_at_the_crash_is_published_after_its_delay(broker_factory, tmp_path):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state))
    c = RawClient(b.host, b.port)
    c.connect(
        "dying",
        clean=False,
        properties=Properties(session_expiry_interval=60),
        will=Will("wills/dying", b"gone", 1, False, Properties(will_delay_interval=1)),
    )
    time.sleep(0.3)  # the session record is written just after CONNACK, not before it
    b.process.send_signal(signal.SIGKILL)
    b.process.wait(10)
    b2 = broker_factory(persistent_config(state))
    watch = RawClient(b2.host, b2.port)
    watch.connect("watch")
    watch.send(Subscribe(1, (Subscription("wills/#", 1),)))
    watch.expect(Suback)
    got = drain(watch, 3.0)
    assert [(p.topic, p.payload) for p in got] == [("wills/dying", b"gone")]


def test_clean_sessions_are_not_stored(broker_factory, tmp_path):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state))
    c = RawClient(b.host, b.port)
    c.connect("clean-one")
    c.send(Subscribe(1, (Subscription("c/#", 1),)))
    c.expect(Suback)
    pub = RawClient(b.host, b.port)
    pub.connect("clean-pub")
    for i in range(20):
        pub.send(Publish("c/x", b"m", 1, packet_id=i + 1))
        pub.expect(Puback)
    drain(c, 0.5)
    b.stop()
    keyed = KeyedLog.open(state / BROKER_LOG, readonly=True)
    try:
        assert keyed.count("s") == 0 and keyed.count("m") == 0 and keyed.count("f") == 0
    finally:
        keyed.close()


def test_v3_clean_session_0_is_persistent(broker_factory, tmp_path):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state))
    sub = RawClient(b.host, b.port, level=4)
    sub.connect("v3sub", clean=False)
    sub.send(Subscribe(1, (Subscription("v3/#", 2),)))
    sub.expect(Suback)
    sub.close()
    pub = RawClient(b.host, b.port, level=4)
    pub.connect("v3pub")
    pub.send(Publish("v3/a", b"kept", 1, packet_id=1))
    pub.expect(Puback)
    b.process.send_signal(signal.SIGKILL)
    b.process.wait(10)
    b2 = broker_factory(persistent_config(state))
    sub2 = RawClient(b2.host, b2.port, level=4)
    assert sub2.connect("v3sub", clean=False).session_present
    assert [(p.topic, p.payload) for p in drain(sub2, 2.0)] == [("v3/a", b"kept")]


def test_second_broker_on_the_same_state_dir_refuses_to_start(broker_factory, tmp_path):
    state = tmp_path / "state"
    broker_factory(persistent_config(state))
    try:
        broker_factory(persistent_config(state))
    except RuntimeError as exc:
        assert "cannot open the broker store" in str(exc) and "state_dir" in str(exc)
    else:
        raise AssertionError("a second broker opened a store that another broker holds")

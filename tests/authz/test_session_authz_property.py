"""Issue 15 property: random interleavings of connect / resume / takeover / reload /
re-authentication / subscribe / publish across two token principals never deliver to a
connection a message that its policy at delivery time denies.

The broker runs in-process (``inprocess_broker_factory``: real sockets, reloads applied on its
loop without a signal). Rights at any moment: a connection may receive topic ``t`` when its
current token grants subscribing to ``t``'s first level and the current site ACL (toggled by
reload) does not deny ``b/**`` on egress. Receivers never acknowledge, so QoS 1 messages stay
queued or in flight and come back on every resume. After each step every open receiver is read
up to a PINGRESP (the broker writes a connection's packets in order, so everything it sent that
connection during the step is read by then) and each PUBLISH is judged against the rights of
that step.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_broker.broker.reload import apply_config
from edge_broker.config import loads_config
from edge_broker.mqtt.packets import (
    Auth,
    Connack,
    Connect,
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from tests.broker.broker_raw import RawClient, unique_id

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402

GRANTS = {"ab": ("a/#", "b/#"), "a": ("a/#",), "b": ("b/#",)}
ACL_DENY_B = """
[acl]
enabled = true
default_permission = "allow"
[[acl.rules]]
id = "no-b-out"
messages = ["put"]
flows = ["egress"]
permission = "deny"
key_exprs = ["b/**"]
[[acl.rules]]
id = "no-b-sub"
messages = ["declare_subscriber"]
permission = "deny"
key_exprs = ["b/**"]
[[acl.subjects]]
id = "everyone"
[[acl.policies]]
rules = ["no-b-out", "no-b-sub"]
subjects = ["everyone"]
"""
ACL_OPEN = """
[acl]
enabled = true
default_permission = "allow"
rules = []
subjects = []
policies = []
"""

SLOTS = [0, 1]  # two client ids both principals try (takeover and resume across principals)
# connect: (principal, slot, clean start, grants, filter subscribed right after, or None)
connect = st.tuples(
    st.just("connect"),
    st.sampled_from(["p1", "p2"]),
    st.sampled_from(SLOTS),
    st.sampled_from([False, False, True]),
    st.sampled_from(sorted(GRANTS)),
    st.sampled_from([None, "a/#", "b/#", "#"]),
)
publish = st.tuples(st.just("publish"))  # a/x and b/x, QoS 1
actions = st.one_of(
    connect,
    connect,
    publish,
    publish,
    st.tuples(st.just("reauth"), st.sampled_from(SLOTS), st.sampled_from(sorted(GRANTS))),
    st.tuples(st.just("close"), st.sampled_from(SLOTS)),
    st.tuples(st.just("reload"), st.booleans()),
)


@dataclass
class Receiver:
    client: RawClient
    principal: str
    grants: str


@dataclass
class World:
    broker: object
    configs: dict[bool, object]
    prefix: str
    deny_b: bool = False
    slots: dict[int, Receiver] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    delivered: int = 0


def may_receive(world: World, receiver: Receiver, topic: str) -> bool:
    level = topic.split("/", 1)[0]
    if f"{level}/#" not in GRANTS[receiver.grants]:
        return False
    return not (world.deny_b and level == "b")


def token(principal: str, grants: str) -> bytes:
    sub = list(GRANTS[grants])
    return make_token([grant(["~"], pub=["#"], sub=sub)], subject=principal).encode()


def judge(world: World, slot: int, receiver: Receiver, packet: object, step: str) -> None:
    if isinstance(packet, Publish):
        world.delivered += 1
        if not may_receive(world, receiver, packet.topic):
            world.violations.append(
                f"{step}: slot {slot} ({receiver.principal}, grants {receiver.grants}, "
                f"acl deny b={world.deny_b}) got {packet.topic}"
            )


def barrier(world: World, step: str) -> None:
    """Read every open receiver up to a PINGRESP; judge what arrived."""
    for slot, receiver in list(world.slots.items()):
        c = receiver.client
        try:
            c.send(Pingreq())
            while not isinstance(packet := c.recv(5.0), Pingresp):
                judge(world, slot, receiver, packet, step)
        except (EOFError, OSError):
            c.close()
            del world.slots[slot]


def run(world: World, ib, action: tuple, step: str) -> None:  # type: ignore[no-untyped-def]
    kind = action[0]
    if kind == "connect":
        _, principal, slot, clean, grants, topic_filter = action
        c = RawClient(ib.host, ib.port)
        c.send(
            Connect(
                5,
                f"{world.prefix}-{slot}",
                clean,
                60,
                properties=Properties(
                    session_expiry_interval=300,
                    authentication_method="TOKEN",
                    authentication_data=token(principal, grants),
                ),
            )
        )
        ack = c.expect(Connack)
        if ack.reason_code != 0:
            c.close()
            return
        old = world.slots.pop(slot, None)
        if old is not None:
            old.client.close()  # taken over (0x8E); what it got before was judged already
        receiver = world.slots[slot] = Receiver(c, principal, grants)
        if topic_filter is not None:
            c.send(Subscribe(1, (Subscription(topic_filter, 1),)))
            while not isinstance(packet := c.recv(), Suback):
                judge(world, slot, receiver, packet, step)  # resent / queued, before the SUBACK
    elif kind == "reauth":
        receiver = world.slots.get(action[1])
        if receiver is not None:
            receiver.client.send(
                Auth(
                    0x19,
                    Properties(
                        authentication_method="TOKEN",
                        authentication_data=token(receiver.principal, action[2]),
                    ),
                )
            )
            receiver.grants = action[2]
    elif kind == "close":
        receiver = world.slots.pop(action[1], None)
        if receiver is not None:
            receiver.client.send(Disconnect(0))
            receiver.client.close()
    elif kind == "reload":
        world.deny_b = action[1]
        future = asyncio.run_coroutine_threadsafe(
            apply_config(ib.broker, world.configs[action[1]], "property reload"), ib.loop
        )
        assert future.result(10).ok
    elif kind == "publish":
        pub = RawClient(ib.host, ib.port)
        assert pub.connect(unique_id("pub-")).reason_code == 0  # anonymous: may publish all
        for pid, topic in enumerate(("a/x", "b/x"), 1):
            pub.send(Publish(topic, b"m", 1, packet_id=pid))
            pub.expect(Puback)
        pub.close()


@pytest.fixture
def world_broker(tmp_path: Path, inprocess_broker_factory):
    base = token_config(tmp_path)
    configs = {
        False: loads_config(base + ACL_OPEN, "<open>"),
        True: loads_config(base + ACL_DENY_B, "<deny b>"),
    }
    return inprocess_broker_factory(base + ACL_OPEN), configs


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(actions, min_size=5, max_size=20))
def test_nothing_leaves_that_the_receivers_policy_denies_now(world_broker, steps) -> None:
    ib, configs = world_broker
    world = World(ib.broker, configs, unique_id("w"))
    future = asyncio.run_coroutine_threadsafe(
        apply_config(ib.broker, configs[False], "reset"), ib.loop
    )
    assert future.result(10).ok
    try:
        for i, action in enumerate(steps):
            step = f"step {i} {action}"
            run(world, ib, action, step)
            barrier(world, step)
        assert world.violations == [], "\n".join(world.violations)
    finally:
        for receiver in world.slots.values():
            receiver.client.close()

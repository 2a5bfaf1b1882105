"""Tenant isolation with token clients (AUTHZ.md §1, issue 5): the same topic in two tenants never
crosses, for live messages, retained messages, shared subscriptions, MQTT wildcards and runtime
patterns. One token granting both tenants picks its tenant with the CONNECT user property."""

from __future__ import annotations

import itertools
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "authz"))
from token_broker import grant, make_token, token_config  # noqa: E402
from token_paho import V5, V311, TokenClient  # noqa: E402

_runs = itertools.count()
WILDCARDS = ["#", "+/x", "t/#", "*", ">", "t/*", "t*", "t#", "t>"]


@pytest.fixture(scope="module")
def pattern_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    directory = tmp_path_factory.mktemp("tenants")
    b = start_broker(directory, token_config(directory, patterns="seed001"))
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def tenants() -> tuple[str, str, str]:
    """Two fresh tenants and a token granting everything in both."""
    n = next(_runs)
    red, blue = f"red-{n}", f"blue-{n}"
    return red, blue, make_token([grant([red, blue], pub=["#"], sub=["#"])])


def client(b: RunningBroker, token: str, tenant: str, version: int = V5) -> TokenClient:
    if version == V5:
        return TokenClient(b.host, b.port, token, V5, tenant=tenant)
    # MQTT 3.1.1 has no user properties: the tenant comes from a token naming exactly one
    return TokenClient(b.host, b.port, make_token([grant([tenant], pub=["#"], sub=["#"])]), V311)


@pytest.mark.parametrize("version", [V5, V311], ids=["v5", "v311"])
def test_live_messages_stay_in_their_tenant(pattern_broker, version):
    red, blue, token = tenants()
    b = pattern_broker
    with (
        client(b, token, red, version) as red_sub,
        client(b, token, blue, version) as blue_sub,
        client(b, token, red) as red_pub,
        client(b, token, blue) as blue_pub,
    ):
        for sub in (red_sub, blue_sub):
            assert sub.subscribe("t/x", *WILDCARDS, qos=0) == [0] * (1 + len(WILDCARDS))
        red_pub.publish("t/x", b"red", qos=0)
        red_pub.publish("x", b"red-top", qos=0)
        blue_pub.publish("t/x", b"blue", qos=0)
        assert sorted(red_sub.received(2)) == [("t/x", b"red"), ("x", b"red-top")]
        assert blue_sub.received(1) == [("t/x", b"blue")]


def test_retained_messages_stay_in_their_tenant(pattern_broker):
    red, blue, token = tenants()
    b = pattern_broker
    with client(b, token, red) as red_pub:
        red_pub.publish("t/x", b"red retained", retain=True)
    with client(b, token, blue) as blue_sub:
        blue_sub.subscribe("t/x", *WILDCARDS)
        assert blue_sub.received(0) == []
    with client(b, token, blue) as blue_pub:
        blue_pub.publish("t/x", b"blue retained", retain=True)
    with client(b, token, red) as red_sub:
        red_sub.subscribe("t/x")
        assert red_sub.received(1) == [("t/x", b"red retained")]
    with client(b, token, blue) as blue_sub:
        blue_sub.subscribe("t/*")
        assert blue_sub.received(1) == [("t/x", b"blue retained")]


@pytest.mark.parametrize("shared_filter", ["$share/g/t/#", "$share/g/t/*", "$share/g/t>"])
def test_shared_groups_of_the_same_name_are_per_tenant(pattern_broker, shared_filter):
    red, blue, token = tenants()
    b = pattern_broker
    with (
        client(b, token, red) as r1,
        client(b, token, red) as r2,
        client(b, token, blue) as b1,
        client(b, token, red) as pub,
    ):
        for member in (r1, r2, b1):
            assert member.subscribe(shared_filter) == [1]
        for i in range(6):
            pub.publish(f"t/{i}", b"%d" % i)
        red_got = r1.received(0) + r2.received(0)
        assert sorted(p for _, p in red_got) == [b"%d" % i for i in range(6)]
        assert b1.received(0) == []


def test_a_token_that_names_two_tenants_needs_the_tenant_property(pattern_broker):
    red, blue, token = tenants()
    b = pattern_broker
    with TokenClient(b.host, b.port, token, V5) as c:  # no tenant: '~', which it does not name
        assert int(c.reason.value) == 0x87
    with TokenClient(b.host, b.port, token, V5, tenant=red) as c:
        assert c.reason == 0

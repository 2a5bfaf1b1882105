"""Seed 001 end to end: runtime subscription patterns routed exactly per PATTERNS.md §2, invalid
patterns refused, tenant names validated and normalised, over MQTT with paho (MQTT 5 and 3.1.1)
against brokers with '/' and '.' (listeners with ``subscription_patterns = "seed001"``)."""

from __future__ import annotations

import itertools
import sys
import threading
from pathlib import Path

import pytest
from token_paho import V5, V311, TokenClient

from tests.conftest import start_broker
from tests.seed001_tables import ROUTING

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402

_tenants = itertools.count()

INVALID = ["a.>.b", "a.#.b", "a.b.c>.x", "a.ab*c", "a.*a", "a.**", "a.*>", "a..b"]


def tenant_tokens(sep: str) -> tuple[str, str]:
    tenant = f"seed001-{next(_tenants)}"
    return (
        make_token([grant([tenant], pub=["#"])], separator=sep),
        make_token([grant([tenant], sub=["#"])], separator=sep),
    )


def by_pattern() -> list[tuple[str, list[tuple[str, bool]]]]:
    out: dict[str, list[tuple[str, bool]]] = {}
    for pattern, channel, matches in ROUTING:
        out.setdefault(pattern, []).append((channel, matches))
    return list(out.items())


@pytest.mark.parametrize("version", [V5, V311], ids=["v5", "v311"])
@pytest.mark.parametrize(("pattern", "cases"), by_pattern(), ids=lambda v: str(v)[:20])
def test_patterns_route_exactly_the_channels_they_match(seed001_broker, version, pattern, cases):
    b, sep = seed001_broker
    pub_token, sub_token = tenant_tokens(sep)
    pattern = pattern.replace(".", sep)
    with (
        TokenClient(b.host, b.port, pub_token) as pub,
        TokenClient(b.host, b.port, sub_token, version) as sub,
    ):
        assert sub.subscribe(pattern) == [1]
        expected = []
        for channel, matches in cases:
            channel = channel.replace(".", sep)
            pub.publish(channel, channel.encode())
            if matches:
                expected.append((channel, channel.encode()))
        assert sorted(sub.received(len(expected))) == sorted(expected), pattern


@pytest.mark.parametrize("pattern", INVALID)
def test_invalid_patterns_are_refused_0x8f(seed001_broker, pattern):
    b, sep = seed001_broker
    _, sub_token = tenant_tokens(sep)
    with TokenClient(b.host, b.port, sub_token) as sub:
        assert sub.subscribe(pattern.replace(".", sep)) == [0x8F]


def test_retained_messages_are_selected_by_patterns(seed001_broker):
    b, sep = seed001_broker
    pub_token, sub_token = tenant_tokens(sep)
    channels = ["a.b.c1.x", "a.b.c1", "a.b.d1.x", "a.b"]
    with TokenClient(b.host, b.port, pub_token) as pub:
        for channel in channels:
            pub.publish(channel.replace(".", sep), b"kept", retain=True)
    with TokenClient(b.host, b.port, sub_token) as sub:
        assert sub.subscribe(f"a{sep}b{sep}c>") == [1]
        assert sub.received(1) == [(f"a{sep}b{sep}c1{sep}x", b"kept")]
        assert sub.subscribe(f"a{sep}*") == [1]
        assert sub.received(1) == [(f"a{sep}b", b"kept")]


def test_a_shared_subscription_with_a_pattern_delivers_once(seed001_broker):
    b, sep = seed001_broker
    pub_token, sub_token = tenant_tokens(sep)
    with (
        TokenClient(b.host, b.port, pub_token) as pub,
        TokenClient(b.host, b.port, sub_token) as s1,
        TokenClient(b.host, b.port, sub_token) as s2,
    ):
        for s in (s1, s2):
            assert s.subscribe(f"$share{sep}g{sep}sensors{sep}t*") == [1]
        for i in range(6):
            pub.publish(f"sensors{sep}t{i}", b"%d" % i)
        pub.publish(f"sensors{sep}x", b"no")
        got = s1.received(0) + s2.received(0)
        assert sorted(p for _, p in got) == [b"%d" % i for i in range(6)]


def test_on_an_mqtt_listener_star_is_a_literal(tmp_path):
    directory = tmp_path / "mqtt"
    b = start_broker(directory, token_config(directory, patterns="mqtt"))
    try:
        pub_token, sub_token = tenant_tokens("/")
        with (
            TokenClient(b.host, b.port, pub_token) as pub,
            TokenClient(b.host, b.port, sub_token) as sub,
        ):
            assert sub.subscribe("a/b#") == [0x8F]  # not an MQTT filter
            assert sub.subscribe("a/*") == [1]
            pub.publish("a/x", b"wild")
            pub.publish("a/*", b"literal")  # not a valid channel: refused for a token client
            assert sub.received(0) == []
    finally:
        b.stop()


@pytest.mark.parametrize(
    ("asked", "granted", "ok"),
    [
        ("", "~", True),  # D14: empty becomes '~'
        ("acme.eu@site_1-~", "acme.eu@site_1-~", True),
        ("x" * 128, "x" * 128, True),
        ("x" * 129, "x" * 129, False),
        ("no spaces", "no spaces", False),
        ("slash/not/allowed", "slash", False),
    ],
)
def test_tenant_names(seed001_broker, asked, granted, ok):
    b, sep = seed001_broker
    if not ok:
        token = make_token([grant(["fine"], pub=["#"])], separator=sep)
    else:
        token = make_token([grant([granted], pub=["#"])], separator=sep)
    with TokenClient(b.host, b.port, token, V5, tenant=asked) as client:
        assert (client.reason == 0) is ok, (asked, client.reason)
        if not ok:
            assert int(client.reason.value) == 0x87


def test_unsubscribing_a_pattern_stops_its_deliveries(seed001_broker):
    b, sep = seed001_broker
    pub_token, sub_token = tenant_tokens(sep)
    pattern, channel = f"a{sep}b{sep}c>", f"a{sep}b{sep}c1{sep}x"
    with (
        TokenClient(b.host, b.port, pub_token) as pub,
        TokenClient(b.host, b.port, sub_token) as sub,
    ):
        assert sub.subscribe(pattern, f"$share{sep}g{sep}{pattern}") == [1, 1]
        pub.publish(channel, b"before")
        # one copy through the plain subscription, one through the shared group (MQTT 5 §4.8.2)
        assert sub.received(2) == [(channel, b"before")] * 2
        done = threading.Event()
        sub.c.on_unsubscribe = lambda *args: done.set()
        sub.c.unsubscribe([pattern, f"$share{sep}g{sep}{pattern}"])
        assert done.wait(5)
        pub.publish(channel, b"after")
        assert sub.received(0) == []


def test_patterns_are_wildcards_for_the_wildcard_capability(tmp_path):
    directory = tmp_path / "nowild"
    text = (
        token_config(directory, patterns="seed001") + "\n[broker]\nwildcard_subscriptions = false\n"
    )
    b = start_broker(directory, text)
    try:
        _, sub_token = tenant_tokens("/")
        with TokenClient(b.host, b.port, sub_token) as sub:
            assert sub.subscribe("a/b", "a/*", "a/b>", "a/+") == [1, 0xA2, 0xA2, 0xA2]
    finally:
        b.stop()

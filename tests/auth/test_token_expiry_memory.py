"""Token expiry during a session (issue 5, broker/token_expiry.py) on the in-memory broker with
a fake clock: the session ends when the token's time is up, not a tick before, and a
re-authentication in time moves the deadline; no test waits for a token to run out. Moved
from test_token_reauth.py (which keeps the re-authentication exchanges over real sockets)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from token_broker import grant, make_token, token_config

from edge_broker.mqtt.packets import (
    Auth,
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
from tests.broker.engine_harness import MemoryBroker, memory_broker

ALL = [grant(["fleet"], pub=["data/#"], sub=["data/#"])]


@pytest.fixture
def mb(tmp_path: Path) -> Iterator[MemoryBroker]:
    yield from memory_broker(token_config(tmp_path, leeway=0))


def token_props(token: str) -> Properties:
    return Properties(authentication_method="TOKEN", authentication_data=token.encode())


def expiring_in(seconds: int) -> tuple[str, float]:
    """A token whose exp is ``seconds`` whole seconds ahead, and the seconds really left."""
    now = time.time()
    exp = int(now) + seconds
    return make_token(ALL, ttl=1, now=exp - 1), exp - now


def test_expiry_without_reauthentication_ends_the_session_with_0xa0(mb: MemoryBroker) -> None:
    token, left = expiring_in(30)
    c = mb.client()
    assert c.connect("exp-v5", properties=token_props(token)).reason_code == 0
    mb.advance(left - 1.0)
    c.send(Pingreq())
    c.expect(Pingresp)  # still connected a second before
    mb.advance(1.5)
    [disconnect] = c.closed()
    assert isinstance(disconnect, Disconnect) and disconnect.reason_code == 0xA0
    assert "expired" in (disconnect.properties.reason_string or "")


def test_expiry_closes_a_v311_connection(mb: MemoryBroker) -> None:
    token, left = expiring_in(30)
    c = mb.client(level=4)
    assert c.connect("exp-v311", username="d", password=token.encode()).reason_code == 0
    mb.advance(left - 1.0)
    c.nothing()
    mb.advance(1.5)
    assert c.closed() == []  # 3.1.1 has no DISCONNECT from the server


def test_reauthentication_in_time_moves_the_deadline(mb: MemoryBroker) -> None:
    token, left = expiring_in(30)
    c, pub = mb.client(), mb.client()
    assert c.connect("reauth-ok", properties=token_props(token)).reason_code == 0
    assert pub.connect("reauth-pub", properties=token_props(make_token(ALL))).reason_code == 0
    c.send(Subscribe(1, (Subscription("data/#", 1),)))
    assert c.expect(Suback).reason_codes == (1,)
    mb.advance(left - 10.0)
    c.send(Auth(0x19, token_props(make_token(ALL, ttl=600))))
    answer = c.expect(Auth)
    assert answer.reason_code == 0 and answer.properties.authentication_method == "TOKEN"
    mb.advance(20.0)  # past the first token's expiry
    pub.send(Publish("data/x", b"still here", 1, packet_id=1))
    pub.expect(Puback)
    got = c.expect(Publish)
    assert got.payload == b"still here"
    c.send(Puback(got.packet_id or 0))
    c.send(Pingreq())
    c.expect(Pingresp)  # still connected

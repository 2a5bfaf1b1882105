"""Issue 15 item 3 over time, on the in-memory broker with a fake clock (engine_harness.py): a
delayed will is judged at the end of its delay under the policy and the token in force then,
and a token the broker ends publishes no will. Moved from test_will_judgement.py, which waited
up to 4.5 s of wall clock for the token and the delay; the assertions are unchanged, the times
exact (the token's wall-clock ``exp`` becomes a deadline on the broker's clock at CONNECT)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_broker.mqtt.packets import Properties
from tests.authz.session_support import (
    NO_WILLS,
    PASSWORDS,
    RULES_WIDE,
    gateway_config,
    watching,
    will,
    with_token_will,
    write_passwd,
)
from tests.broker.broker_raw import unique_id
from tests.broker.engine_harness import MemoryBroker, MemoryClient, memory_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402

GRANTS = [grant(["~"], pub=["wills/#"])]


@pytest.fixture
def mb(tmp_path: Path) -> Iterator[MemoryBroker]:
    yield from memory_broker(token_config(tmp_path, leeway=0))


def watcher(mb: MemoryBroker, topic: str, **login: object) -> MemoryClient:
    c = mb.client()
    watching(c, topic, **login)
    return c


def token_client(mb: MemoryBroker, token: str, topic: str, delay: int | None) -> MemoryClient:
    c = mb.client()
    with_token_will(c, token, topic, delay)
    return c


def expiring_in(seconds: int) -> tuple[str, float]:
    """A token whose ``exp`` is ``seconds`` whole seconds ahead, and the seconds really left."""
    now = time.time()
    exp = int(now) + seconds
    return make_token(GRANTS, ttl=1, now=exp - 1), exp - now


def test_a_will_whose_token_expired_is_not_published(mb: MemoryBroker) -> None:
    topic = "wills/" + unique_id()
    w = watcher(mb, topic)
    expiring, left = expiring_in(10)  # the token ends about 10 s from now, the will is due in 20
    token_client(mb, expiring, topic, delay=20).close()
    lasting = token_client(mb, make_token(GRANTS, ttl=300), topic + "/control", delay=20)
    assert w.subscribe(topic + "/control", 0, packet_id=2).reason_codes == (0,)
    lasting.close()
    mb.advance(20 - 1e-6)
    assert w.publishes() == []  # neither will before its delay
    mb.advance(1e-6)
    got = [p.topic for p in w.publishes()]
    assert got == [topic + "/control"]  # the control will (valid token) only
    assert left < 20


def test_the_broker_ending_an_expired_token_publishes_no_will(mb: MemoryBroker) -> None:
    topic = "wills/" + unique_id()
    w = watcher(mb, topic)
    expiring, left = expiring_in(10)
    c = token_client(mb, expiring, topic, delay=None)
    mb.advance(left - 0.5)
    c.nothing()  # still connected before the token's time
    mb.advance(1.0)
    assert c.closed()[-1].reason_code == 0xA0  # type: ignore[attr-defined]
    assert w.publishes() == []


def test_a_delayed_will_is_judged_when_its_delay_ends(tmp_path: Path) -> None:
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin"})
    config = tmp_path / "broker.toml"
    for mb in memory_broker(gateway_config(tmp_path, user_rules=RULES_WIDE)):
        topic = "wills/" + unique_id()
        w = watcher(mb, topic, username="bob", password=PASSWORDS["bob"].encode())
        alice = mb.client()
        ack = alice.connect(
            unique_id("alice-"),
            username="alice",
            password=PASSWORDS["alice"].encode(),
            will=will(topic, 1),
            properties=Properties(session_expiry_interval=30),
        )
        assert ack.reason_code == 0
        alice.close()  # allowed now, due in 1 s
        mb.advance(0.2)
        assert mb.reload(config, gateway_config(tmp_path, user_rules=NO_WILLS))
        mb.advance(2.0)
        assert w.publishes() == []

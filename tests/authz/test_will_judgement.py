"""Issue 15 item 3: a will is judged when it is published (a delayed will at the end of its
delay) against the policy and the identity in force then, not only at CONNECT. Over real
sockets against the real broker: a reload that denies the will topic, a re-authentication with
a narrower token — no will; and a will the policy still allows is published as before. The
cases that wait for a will delay or a token's end run on the in-memory broker with a fake clock
(test_will_judgement_memory.py)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from edge_broker.mqtt.packets import Auth, Properties
from tests.authz.session_support import (
    NO_WILLS,
    PASSWORDS,
    RULES_WIDE,
    gateway_config,
    reload,
    watching,
    will,
    with_token_will,
    write_passwd,
)
from tests.broker.broker_raw import RawClient, unique_id
from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402


def watcher(b: RunningBroker, topic: str, **login: object) -> RawClient:
    c = RawClient(b.host, b.port)
    watching(c, topic, **login)
    return c


@pytest.fixture
def gateway(tmp_path: Path):
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin"})
    b = start_broker(tmp_path / "run", gateway_config(tmp_path, user_rules=RULES_WIDE))
    yield b, tmp_path
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def alice_with_will(b: RunningBroker, topic: str, delay: int | None = None) -> RawClient:
    c = RawClient(b.host, b.port)
    ack = c.connect(
        unique_id("alice-"),
        username="alice",
        password=PASSWORDS["alice"].encode(),
        will=will(topic, delay),
        properties=Properties(session_expiry_interval=30),
    )
    assert ack.reason_code == 0
    return c


def test_a_will_the_policy_still_allows_is_published(gateway) -> None:
    b, _ = gateway
    topic = "wills/" + unique_id()
    w = watcher(b, topic, username="bob", password=PASSWORDS["bob"].encode())
    alice_with_will(b, topic).close()
    assert [p.payload for p in w.publishes(0.8)] == [b"gone"]
    w.close()


def test_a_reload_that_denies_the_will_topic_stops_the_will(gateway) -> None:
    b, directory = gateway
    topic = "wills/" + unique_id()
    w = watcher(b, topic, username="bob", password=PASSWORDS["bob"].encode())
    alice = alice_with_will(b, topic)
    reload(b, gateway_config(directory, user_rules=NO_WILLS))
    alice.close()
    assert w.publishes(0.8) == []
    w.close()
    assert "will not published" in b.log()


# test_a_delayed_will_is_judged_when_its_delay_ends: on the in-memory broker
# (test_will_judgement_memory.py)


@pytest.fixture
def token_gateway(tmp_path: Path):
    b = start_broker(tmp_path / "run", token_config(tmp_path, leeway=0))
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def token_client(
    b: RunningBroker, token: str, topic: str, delay: int | None, retain: bool = False
) -> RawClient:
    c = RawClient(b.host, b.port)
    with_token_will(c, token, topic, delay, retain)
    return c


# test_a_will_whose_token_expired_is_not_published: on the in-memory broker
# (test_will_judgement_memory.py)


def test_a_will_after_reauthentication_is_judged_under_the_new_token(token_gateway) -> None:
    b = token_gateway
    topic = "wills/" + unique_id()
    w = watcher(b, topic)
    c = token_client(b, make_token([grant(["~"], pub=["wills/#"])], subject="d"), topic, None)
    narrower = make_token([grant(["~"], pub=["data/#"])], subject="d")
    c.send(
        Auth(0x19, Properties(authentication_method="TOKEN", authentication_data=narrower.encode()))
    )
    assert isinstance(c.recv(), Auth)
    c.close()
    assert w.publishes(0.8) == []
    w.close()


# test_the_broker_ending_an_expired_token_publishes_no_will: on the in-memory broker
# (test_will_judgement_memory.py)


def test_a_token_clients_will_is_not_published_after_a_restart(tmp_path: Path) -> None:
    """The token's grants are not stored: after a restart nothing can judge the will, so it is
    not published (fail closed); an anonymous client's restored will still is."""
    config = (
        token_config(tmp_path, leeway=0)
        + f'\n[persistence]\nenabled = true\nstate_dir = "{tmp_path / "state"}"\n'
    )
    b = start_broker(tmp_path / "run1", config)
    topic = "wills/" + unique_id()
    try:
        # retained wills: a restart slower than the delay (a loaded machine) publishes the
        # anonymous will as the second broker starts, before the watcher subscribes
        token = make_token([grant(["~"], pub=["wills/#"])])
        token_client(b, token, topic + "/token", delay=2, retain=True)
        anonymous = RawClient(b.host, b.port)
        assert (
            anonymous.connect(
                unique_id("anon-"),
                # a delay the restart fits in: a shutdown may wait up to 2 s for a client
                # that does not close after DISCONNECT 0x8B (broker/graceful_close.py)
                will=will(topic + "/anon", 4, retain=True),
                properties=Properties(session_expiry_interval=30),
            ).reason_code
            == 0
        )
    finally:
        assert b.stop() == 0  # DISCONNECT 0x8B: the wills wait for their delay
    b = start_broker(tmp_path / "run2", config)
    try:
        w = watcher(b, topic + "/#")
        assert sorted(p.topic for p in w.publishes(5.5)) == [topic + "/anon"]
        w.close()
    finally:
        b.stop()

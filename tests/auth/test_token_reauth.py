"""Token expiry and re-authentication over the wire (AUTHZ.md §2, MQTT 5 §4.12.1; issue 5).

A token that expires during a session ends it (MQTT 5: DISCONNECT 0xA0 with a Reason String;
3.1.1: the connection is closed) unless the client re-authenticated in time with AUTH 0x19,
method TOKEN and a fresh token: then the session goes on with the new grants and expiry.
paho-mqtt cannot send AUTH, so these tests use the project's codec over a raw socket. The
tests that wait for a token to run out are in test_token_expiry_memory.py (fake clock).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from token_broker import grant, make_token, token_config

from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from broker_raw import RawClient  # noqa: E402

from edge_broker.mqtt.packets import (  # noqa: E402
    Auth,
    Disconnect,
    Properties,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)

TENANT = "fleet"
ALL = [grant([TENANT], pub=["data/#"], sub=["data/#", "other/#"])]


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    directory = tmp_path_factory.mktemp("reauth")
    b = start_broker(directory, token_config(directory, leeway=0))
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def token_props(token: str) -> Properties:
    return Properties(authentication_method="TOKEN", authentication_data=token.encode())


def reauth(c: RawClient, token: str) -> object:
    c.send(Auth(0x19, token_props(token)))
    return c.recv()


def test_reauthentication_with_a_bad_token_disconnects_0x87(token_broker):
    with RawClient(token_broker.host, token_broker.port) as c:
        assert c.connect("reauth-bad", properties=token_props(make_token(ALL))).reason_code == 0
        answer = reauth(c, make_token(ALL, ttl=60)[:-4] + "AAAA")
        assert isinstance(answer, Disconnect) and answer.reason_code == 0x87
        assert "signature" in (answer.properties.reason_string or "")
        c.closed()


def test_reauthentication_for_another_tenant_is_refused(token_broker):
    with RawClient(token_broker.host, token_broker.port) as c:
        assert c.connect("reauth-ten", properties=token_props(make_token(ALL))).reason_code == 0
        answer = reauth(c, make_token([grant(["elsewhere"], pub=["#"])]))
        assert isinstance(answer, Disconnect) and answer.reason_code == 0x87
        assert "fleet" in (answer.properties.reason_string or "")


def test_narrower_grants_remove_subscriptions_they_no_longer_accept(token_broker):
    with (
        RawClient(token_broker.host, token_broker.port) as c,
        RawClient(token_broker.host, token_broker.port) as pub,
    ):
        assert c.connect("reauth-narrow", properties=token_props(make_token(ALL))).reason_code == 0
        pub_token = make_token([grant([TENANT], pub=["#"])])
        assert pub.connect("narrow-pub", properties=token_props(pub_token)).reason_code == 0
        c.send(Subscribe(1, (Subscription("data/#", 0), Subscription("other/#", 0))))
        assert c.expect(Suback).reason_codes == (0, 0)
        narrower = [grant([TENANT], pub=["data/#"], sub=["data/#"])]
        answer = reauth(c, make_token(narrower, ttl=60))
        assert isinstance(answer, Auth) and answer.reason_code == 0
        pub.send(Publish("other/x", b"gone", 0))
        pub.send(Publish("data/x", b"kept", 0))
        assert c.expect(Publish).payload == b"kept"
        c.nothing()
        c.send(Subscribe(2, (Subscription("other/#", 0),)))
        assert c.expect(Suback).reason_codes == (0x87,)


def test_a_password_token_client_cannot_reauthenticate(token_broker):
    with RawClient(token_broker.host, token_broker.port) as c:
        ack = c.connect("reauth-pw", username="d", password=make_token(ALL).encode())
        assert ack.reason_code == 0
        c.send(Auth(0x19, token_props(make_token(ALL))))
        packets = c.closed()
        assert isinstance(packets[-1], Disconnect) and packets[-1].reason_code == 0x82


def test_a_resumed_session_keeps_only_what_the_new_token_accepts(token_broker):
    persistent = Properties(session_expiry_interval=300)
    with RawClient(token_broker.host, token_broker.port) as c:
        ack = c.connect(
            "resume-narrow",
            clean=False,
            properties=Properties(
                session_expiry_interval=300,
                authentication_method="TOKEN",
                authentication_data=make_token(ALL).encode(),
            ),
        )
        assert ack.reason_code == 0 and not ack.session_present
        c.send(Subscribe(1, (Subscription("data/#", 0), Subscription("other/#", 0))))
        assert c.expect(Suback).reason_codes == (0, 0)
        c.send(Disconnect(0, persistent))
    narrower = make_token([grant([TENANT], sub=["data/#"])])
    with (
        RawClient(token_broker.host, token_broker.port) as c,
        RawClient(token_broker.host, token_broker.port) as pub,
    ):
        ack = c.connect(
            "resume-narrow",
            clean=False,
            properties=Properties(
                session_expiry_interval=300,
                authentication_method="TOKEN",
                authentication_data=narrower.encode(),
            ),
        )
        assert ack.reason_code == 0 and ack.session_present
        pub_token = make_token([grant([TENANT], pub=["#"])])
        assert pub.connect("resume-pub", properties=token_props(pub_token)).reason_code == 0
        pub.send(Publish("other/x", b"not any more", 0))
        pub.send(Publish("data/x", b"still", 0))
        assert c.expect(Publish).payload == b"still"
        c.nothing()


def test_narrower_grants_remove_shared_pattern_subscriptions(broker_factory, tmp_path):
    b = broker_factory(token_config(tmp_path, leeway=0, patterns="seed001"))
    with RawClient(b.host, b.port) as c, RawClient(b.host, b.port) as pub:
        assert c.connect("narrow-shared", properties=token_props(make_token(ALL))).reason_code == 0
        pub_token = make_token([grant([TENANT], pub=["#"])])
        assert pub.connect("narrow-shared-pub", properties=token_props(pub_token)).reason_code == 0
        c.send(Subscribe(1, (Subscription("$share/g/other/o#", 0), Subscription("data/d*", 0))))
        assert c.expect(Suback).reason_codes == (0, 0)
        pub.send(Publish("other/o1", b"before", 0))
        assert c.expect(Publish).payload == b"before"
        answer = reauth(c, make_token([grant([TENANT], sub=["data/#"])], ttl=60))
        assert isinstance(answer, Auth) and answer.reason_code == 0
        pub.send(Publish("other/o1", b"after", 0))
        pub.send(Publish("data/d1", b"kept", 0))
        assert c.expect(Publish).payload == b"kept"
        c.nothing()

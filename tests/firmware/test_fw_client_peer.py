"""The device client's MQTT 5 logic against a scripted server (tests/firmware/fw_peer.py).

Every exchange the broker may answer, including the wrong answers a broker must never give:
SMOKER authentication (checked with the broker's own edge_broker.auth.smoker), claims and their
PUBACK codes, refusals, keepalive, server DISCONNECT, reconnect with backoff.
"""

from __future__ import annotations

import os
import time

import pytest
from smokermqtt import client as fwclient
from smokermqtt import ed25519, ids
from smokermqtt.client import MQTTClient, backoff_ms
from smokermqtt.packets import MQTTError

from edge_broker.auth.smoker import SmokerChallenge, check_response, issue_challenge
from edge_broker.claims.parse import parse_claim
from edge_broker.claims.signature import verify_claim
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
)

from .fw_peer import PeerConnection, ScriptedPeer

KEY = ed25519.SigningKey(bytes(range(32)))
ID = ids.client_id(KEY.public_key)
SMOKER_OK = Connack(False, 0, Properties(authentication_method="SMOKER"))


def smoker_handshake(peer: PeerConnection) -> Connect:
    """The broker's side of SMOKER.md steps 1-5, verified with edge_broker.auth.smoker."""
    connect = peer.recv()
    assert isinstance(connect, Connect)
    assert connect.protocol_level == 5
    assert connect.properties.authentication_method == "SMOKER"
    assert connect.properties.authentication_data is None
    nonce = os.urandom(32)
    challenge = issue_challenge(connect.client_id, nonce)
    assert isinstance(challenge, SmokerChallenge)
    peer.send(Auth(0x18, Properties(authentication_method="SMOKER", authentication_data=nonce)))
    answer = peer.recv()
    assert isinstance(answer, Auth)
    assert check_response(challenge, answer) is None
    peer.send(SMOKER_OK)
    return connect


def smoker_client(port: int, **kwargs: object) -> MQTTClient:
    options: dict[str, object] = {"signing_key": KEY, "timeout_ms": 3000}
    options.update(kwargs)
    return MQTTClient("127.0.0.1", port, **options)


def test_smoker_authentication_and_claim() -> None:
    claims_seen: list[bytes] = []

    def script(peer: PeerConnection) -> None:
        connect = smoker_handshake(peer)
        assert connect.client_id == ID
        for reason in (0x00, 0x99, 0x97):
            pub = peer.recv()
            assert isinstance(pub, Publish) and pub.topic == "access/claim" and pub.qos == 1
            claims_seen.append(pub.payload)
            peer.send(
                Puback(
                    pub.packet_id or 0,
                    reason,
                    Properties(reason_string=None if reason == 0 else "why"),
                )
            )
        unclaim = peer.recv()
        assert isinstance(unclaim, Publish) and unclaim.topic == "access/unclaim"
        assert unclaim.payload == f"restricted/{ID}/temp".encode()
        peer.send(Puback(unclaim.packet_id or 0, 0))
        assert isinstance(peer.recv(), Disconnect)

    with ScriptedPeer(script) as peer:
        c = smoker_client(peer.port)
        assert c.connect() is False
        assert c.smoker_authenticated and c.client_id == ID
        assert c.claim_topic(f"restricted/{ID}/temp", "WHITELIST", [("*", "SUBSCRIBE")]) == 0
        assert c.claim_topic(f"restricted/{ID}/temp") == 0x99
        assert c.last_reason_string == "why"
        assert c.claim_topic(f"restricted/{ID}/other") == 0x97
        assert c.unclaim(f"restricted/{ID}/temp") == 0
        c.disconnect()
    for payload in claims_seen:
        verify_claim(parse_claim(payload))


@pytest.mark.parametrize("code", [0x87, 0x85, 0x8C])
def test_connack_refusal_raises_with_the_reason(code: int) -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(
            Auth(0x18, Properties(authentication_method="SMOKER", authentication_data=bytes(32)))
        )
        peer.recv()
        peer.send(Connack(False, code, Properties(reason_string="bad signature")))

    with ScriptedPeer(script) as peer:
        with pytest.raises(MQTTError, match="bad signature") as info:
            smoker_client(peer.port).connect()
    assert info.value.reason == code


@pytest.mark.parametrize(
    ("auth", "why"),
    [
        (
            Auth(0x18, Properties(authentication_method="smoker", authentication_data=bytes(32))),
            "method 'smoker'",
        ),
        (
            Auth(0x18, Properties(authentication_method="SMOKER", authentication_data=bytes(31))),
            "32-byte nonce",
        ),
        (Auth(0x18, Properties(authentication_method="SMOKER")), "32-byte nonce"),
        (
            Auth(0x19, Properties(authentication_method="SMOKER", authentication_data=bytes(32))),
            "AUTH 0x18",
        ),
    ],
)
def test_a_wrong_challenge_is_not_signed(auth: Auth, why: str) -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(auth)
        assert peer.closed_by_client()  # nothing signed, nothing sent

    with ScriptedPeer(script) as peer:
        c = smoker_client(peer.port)
        with pytest.raises(MQTTError, match=why):
            c.connect()
        c.close()


def test_accepting_without_the_exchange_is_refused_by_the_client() -> None:
    # a broker that does not check the signature must not get a "SMOKER-authenticated" device
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0))

    with ScriptedPeer(script) as peer:
        with pytest.raises(MQTTError, match="without SMOKER authentication"):
            smoker_client(peer.port).connect()


def test_broker_that_never_answers_times_out() -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        assert peer.closed_by_client(timeout=3)

    with ScriptedPeer(script) as peer:
        start = time.monotonic()
        with pytest.raises(OSError, match="no CONNACK"):
            smoker_client(peer.port, timeout_ms=300).connect()
        assert time.monotonic() - start < 2


def test_plain_mqtt5_with_password_subscribe_and_receive() -> None:
    got: list[tuple[str, bytes]] = []

    def script(peer: PeerConnection) -> None:
        connect = peer.recv()
        assert isinstance(connect, Connect)
        assert connect.client_id == "dev-1" and connect.username == "dev-1"
        assert connect.password == b"eyJ.token.sig"
        assert connect.properties.authentication_method is None
        peer.send(Connack(False, 0, Properties(server_keep_alive=7, maximum_qos=1)))
        sub = peer.recv()
        assert isinstance(sub, Subscribe)
        assert sub.subscriptions[0].topic_filter == "cmd/#" and sub.subscriptions[0].qos == 1
        peer.send(Suback(sub.packet_id, (1,)))
        peer.send(Publish("cmd/a", b"one", 1, False, False, 11))
        ack = peer.recv()
        assert ack == Puback(11)
        peer.send(Publish("cmd/b", b"two", 0))
        assert isinstance(peer.recv(), Disconnect)

    with ScriptedPeer(script) as peer:
        c = MQTTClient(
            "127.0.0.1",
            peer.port,
            client_id="dev-1",
            username="dev-1",
            password=b"eyJ.token.sig",
            callback=lambda t, p: got.append((t, p)),
        )
        c.connect()
        assert c.server_keepalive == 7 and c.server_max_qos == 1
        assert c.subscribe("cmd/#", qos=1) == 1
        c.loop(300)
        with pytest.raises(ValueError, match="QoS 0 or 1"):
            c.publish("x", b"", qos=2)
        c.disconnect()
    assert got == [("cmd/a", b"one"), ("cmd/b", b"two")]


def test_keepalive_pings_and_detects_a_dead_broker() -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0, Properties(server_keep_alive=1)))
        assert isinstance(peer.recv(), Pingreq)  # after half a keepalive of silence
        peer.send(Pingresp())
        assert isinstance(peer.recv(), Pingreq)
        # no answer now: the client must give up within one keepalive
        assert peer.closed_by_client(timeout=3)

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="k", keepalive=60)
        c.connect()
        start = time.monotonic()
        with pytest.raises(OSError, match="no PINGRESP"):
            c.loop(5000)
        assert 1.0 <= time.monotonic() - start < 3.5
        assert not c.connected


def test_server_disconnect_raises_with_reason() -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0))
        peer.send(Disconnect(0x8E, Properties(reason_string="session taken over")))

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="d")
        c.connect()
        with pytest.raises(MQTTError, match="session taken over") as info:
            c.loop(2000)
        assert info.value.reason == 0x8E and not c.connected


def test_reconnect_with_backoff_renews_subscriptions() -> None:
    def first(peer: PeerConnection) -> None:
        smoker_handshake(peer)
        sub = peer.recv()
        assert isinstance(sub, Subscribe)
        peer.send(Suback(sub.packet_id, (1,)))
        # then the "broker" dies: the connection closes

    def refuse(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0x88, Properties(reason_string="server unavailable")))

    def third(peer: PeerConnection) -> None:
        smoker_handshake(peer)  # session_present False: the client must subscribe again
        sub = peer.recv()
        assert isinstance(sub, Subscribe)
        assert sub.subscriptions[0].topic_filter == f"restricted/{ID}/cmd"
        peer.send(Suback(sub.packet_id, (1,)))
        assert isinstance(peer.recv(), Disconnect)

    with ScriptedPeer(first, refuse, third) as peer:
        c = smoker_client(peer.port, backoff_base_ms=50, backoff_max_ms=400)
        slept: list[int] = []
        real_sleep = c.sleep_ms
        c.sleep_ms = lambda ms: (slept.append(ms), real_sleep(ms))
        c.connect()
        assert c.subscribe(f"restricted/{ID}/cmd", qos=1) == 1
        with pytest.raises(OSError, match="closed"):
            c.loop(2000)
        assert c.reconnect() is False
        assert c.smoker_authenticated
        assert len(slept) == 1 and 25 <= slept[0] < 50  # first retry: [base/2, base)
        c.disconnect()
    assert peer.accepted == 3


def test_permanent_refusals_are_not_retried() -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0x85))

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="x", backoff_base_ms=10)
        with pytest.raises(MQTTError) as info:
            c.connect_with_backoff()
        assert info.value.reason == 0x85
    assert peer.accepted == 1


def test_unreachable_broker_gives_up_after_the_attempts() -> None:
    with ScriptedPeer() as peer:
        port = peer.port
    c = MQTTClient("127.0.0.1", port, client_id="x", backoff_base_ms=10, backoff_max_ms=40)
    slept: list[int] = []
    c.sleep_ms = slept.append
    with pytest.raises(OSError):
        c.connect_with_backoff(attempts=5)
    assert len(slept) == 4
    for attempt, ms in enumerate(slept):
        cap = min(40, 10 << attempt)
        assert cap // 2 <= ms < cap or ms == cap // 2


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    for attempt in range(30):
        cap = min(60000, 1000 << attempt)
        low = backoff_ms(attempt, 1000, 60000, 0)
        high = backoff_ms(attempt, 1000, 60000, 65535)
        assert low == cap // 2 and cap // 2 <= high < cap
    assert backoff_ms(3, 1000, 60000, 32768) == 6000


def test_publish_larger_than_max_packet_size_is_refused_locally() -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0))
        assert isinstance(peer.recv(), Disconnect)

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="x", max_packet_size=100)
        c.connect()
        with pytest.raises(MQTTError, match="exceeds max_packet_size"):
            c.publish("t", b"x" * 100)
        c.disconnect()


def test_oversized_incoming_packet_is_refused() -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0))
        peer.send(Publish("t", b"x" * 200))
        assert peer.closed_by_client()

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="x", max_packet_size=100)
        c.connect()
        with pytest.raises(MQTTError) as info:
            c.loop(2000)
        assert info.value.reason == 0x95


def test_module_constants_match_smoker_md() -> None:
    assert fwclient.SMOKER == "SMOKER" and fwclient.NONCE_SIZE == 32


def test_qos2_delivery_is_exactly_once() -> None:
    from edge_broker.mqtt.packets import Pubcomp, Pubrec, Pubrel

    got: list[bytes] = []

    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0))
        peer.send(Publish("q2", b"once", 2, False, False, 5))
        assert peer.recv() == Pubrec(5)
        peer.send(Publish("q2", b"once", 2, False, True, 5))  # resent before PUBREL (DUP)
        assert peer.recv() == Pubrec(5)
        peer.send(Pubrel(5))
        assert peer.recv() == Pubcomp(5)
        peer.send(Publish("q2", b"next", 2, False, False, 5))  # the id is free again
        assert peer.recv() == Pubrec(5)
        assert isinstance(peer.recv(), Disconnect)

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="q2", callback=lambda t, p: got.append(p))
        c.connect()
        c.loop(500)
        c.disconnect()
    assert got == [b"once", b"next"]


def test_publish_above_the_brokers_maximum_qos_is_refused_locally() -> None:
    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0, Properties(maximum_qos=0)))
        pub = peer.recv()
        assert isinstance(pub, Publish) and pub.qos == 0
        assert isinstance(peer.recv(), Disconnect)

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="mq")
        c.connect()
        with pytest.raises(MQTTError) as info:
            c.publish("t", b"x", qos=1)
        assert info.value.reason == 0x9B
        assert c.publish("t", b"x") is None
        c.disconnect()


def test_claims_request_refused_or_unanswered() -> None:
    def script(peer: PeerConnection) -> None:
        smoker_handshake(peer)
        sub = peer.recv()
        assert isinstance(sub, Subscribe)
        assert sub.subscriptions[0].topic_filter == f"restricted/{ID}/claims"
        peer.send(Suback(sub.packet_id, (1,)))
        req = peer.recv()
        assert isinstance(req, Publish) and req.topic == f"access/claims/{ID}/request"
        assert req.properties.response_topic == f"restricted/{ID}/claims"
        peer.send(Puback(req.packet_id or 0, 0x90, Properties(reason_string="wrong topic")))
        req = peer.recv()  # already subscribed: straight to the request
        assert isinstance(req, Publish)
        peer.send(Puback(req.packet_id or 0, 0))  # ...and then no answer
        assert isinstance(peer.recv(), Disconnect)

    with ScriptedPeer(script) as peer:
        c = smoker_client(peer.port)
        c.connect()
        with pytest.raises(MQTTError, match="wrong topic") as info:
            c.request_claims()
        assert info.value.reason == 0x90
        with pytest.raises(OSError, match="no answer"):
            c.request_claims(timeout_ms=200)
        c.disconnect()
    plain = MQTTClient("127.0.0.1", 1, client_id="p")
    with pytest.raises(MQTTError, match="only SMOKER"):
        plain.request_claims()


def test_a_failed_connect_leaves_the_client_disconnected() -> None:
    with ScriptedPeer() as peer:
        port = peer.port
    c = MQTTClient("127.0.0.1", port, client_id="x")
    with pytest.raises(OSError):
        c.connect()
    assert not c.connected

    def script(peer: PeerConnection) -> None:
        peer.recv()
        peer.send(Connack(False, 0x87))

    with ScriptedPeer(script) as peer:
        c = MQTTClient("127.0.0.1", peer.port, client_id="x")
        with pytest.raises(MQTTError):
            c.connect()
        assert not c.connected
        with pytest.raises(OSError, match="not connected"):
            c.publish("t", b"x")


def test_reauthentication_with_a_fresh_nonce() -> None:
    def script(peer: PeerConnection) -> None:
        smoker_handshake(peer)
        start = peer.recv()
        assert start == Auth(0x19, Properties(authentication_method="SMOKER"))
        nonce = os.urandom(32)
        challenge = issue_challenge(ID, nonce)
        assert isinstance(challenge, SmokerChallenge)
        peer.send(Publish("in/between", b"still delivered", 0))  # traffic may interleave
        peer.send(Auth(0x18, Properties(authentication_method="SMOKER", authentication_data=nonce)))
        answer = peer.recv()
        assert isinstance(answer, Auth) and check_response(challenge, answer) is None
        peer.send(Auth(0x00, Properties(authentication_method="SMOKER")))
        peer.recv()  # the second AUTH 0x19
        peer.send(Disconnect(0x87, Properties(reason_string="signature does not verify")))

    got: list[bytes] = []
    with ScriptedPeer(script) as peer:
        c = smoker_client(peer.port, callback=lambda t, p: got.append(p))
        c.connect()
        c.reauthenticate()
        assert c.smoker_authenticated and got == [b"still delivered"]
        with pytest.raises(MQTTError, match="does not verify") as info:
            c.reauthenticate()
        assert info.value.reason == 0x87 and not c.connected
    plain = MQTTClient("127.0.0.1", 1, client_id="p")
    with pytest.raises(MQTTError, match="only a SMOKER"):
        plain.reauthenticate()

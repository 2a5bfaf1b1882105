"""The seams later issues plug into, exercised with test doubles on an in-process broker:
enhanced authentication and re-authentication through the AuthChain (MQTT 5 §4.12), and an
asynchronous policy whose decisions keep packet order (AUTHZ.md §2, §3)."""

from __future__ import annotations

import asyncio

from broker_raw import RawClient

from edge_broker.auth.chain import AuthChain
from edge_broker.auth.method_api import (
    Accepted,
    AuthOutcome,
    AuthRequest,
    Continue,
    Refused,
)
from edge_broker.authz.decision import ALLOW, Decision, GateName, deny
from edge_broker.authz.policy import Policy
from edge_broker.identity import Identity
from edge_broker.mqtt.packets import (
    Auth,
    Disconnect,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from edge_broker.mqtt.reason_codes import ReasonCode


class ChallengeAuthenticator:
    """Enhanced auth ``CHALLENGE``: the client must answer the nonce reversed."""

    method = "challenge"
    enhanced_method = "CHALLENGE"

    def __init__(self) -> None:
        self.requests: list[AuthRequest] = []

    def applies(self, request: AuthRequest) -> bool:
        return request.connect.properties.authentication_method == "CHALLENGE"

    async def authenticate(self, request: AuthRequest) -> AuthOutcome:
        self.requests.append(request)
        if request.auth is None or request.auth.reason_code == ReasonCode.RE_AUTHENTICATE:
            nonce = b"nonce-%d" % len(self.requests)
            return Continue(nonce, state=nonce)
        assert isinstance(request.state, bytes)
        if request.auth.properties.authentication_data != request.state[::-1]:
            return Refused(ReasonCode.NOT_AUTHORIZED, "wrong answer to the challenge")
        await asyncio.sleep(0)
        return Accepted(
            Identity(
                request.connect.client_id, "challenge", request.tenant, cert_cn=request.info.cert_cn
            ),
            b"welcome",
        )


def with_chain(authenticator):
    def before_start(broker) -> None:
        from edge_broker.auth.anonymous import AnonymousAuthenticator

        broker._chains["tcp"] = AuthChain([authenticator, AnonymousAuthenticator()])

    return before_start


def test_enhanced_authentication_and_reauthentication(inprocess_broker_factory):
    authenticator = ChallengeAuthenticator()
    b = inprocess_broker_factory(before_start=with_chain(authenticator))
    with RawClient(b.host, b.port) as c:
        from edge_broker.mqtt.packets import Connack, Connect

        c.send(Connect(5, "enh", properties=Properties(authentication_method="CHALLENGE")))
        challenge = c.expect(Auth)
        assert challenge.reason_code == 0x18
        assert challenge.properties.authentication_method == "CHALLENGE"
        nonce = challenge.properties.authentication_data
        c.send(
            Auth(
                0x18, Properties(authentication_method="CHALLENGE", authentication_data=nonce[::-1])
            )
        )
        ack = c.expect(Connack)
        assert ack.reason_code == 0
        assert ack.properties.authentication_method == "CHALLENGE"
        assert ack.properties.authentication_data == b"welcome"
        # Re-authentication goes to the same method.
        c.send(Auth(0x19, Properties(authentication_method="CHALLENGE")))
        again = c.expect(Auth)
        assert again.reason_code == 0x18
        c.send(
            Auth(
                0x18,
                Properties(
                    authentication_method="CHALLENGE",
                    authentication_data=again.properties.authentication_data[::-1],
                ),
            )
        )
        done = c.expect(Auth)
        assert done.reason_code == 0 and done.properties.authentication_data == b"welcome"
        assert authenticator.requests[-1].reauthenticating
        # A wrong answer during re-authentication disconnects.
        c.send(Auth(0x19, Properties(authentication_method="CHALLENGE")))
        c.expect(Auth)
        c.send(Auth(0x18, Properties(authentication_method="CHALLENGE", authentication_data=b"?")))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x87


def test_enhanced_authentication_refused(inprocess_broker_factory):
    b = inprocess_broker_factory(before_start=with_chain(ChallengeAuthenticator()))
    with RawClient(b.host, b.port) as c:
        from edge_broker.mqtt.packets import Connack, Connect

        c.send(Connect(5, "enh2", properties=Properties(authentication_method="CHALLENGE")))
        c.expect(Auth)
        c.send(Auth(0x18, Properties(authentication_method="CHALLENGE", authentication_data=b"x")))
        ack = c.expect(Connack)
        assert ack.reason_code == 0x87 and ack.properties.reason_string
        c.closed()
    with RawClient(b.host, b.port) as plain:  # the chain falls through to anonymous
        assert plain.connect("plain").reason_code == 0


class SlowPolicy(Policy):
    """An asynchronous gate: publish to ``deny/...`` is denied after a delay; subscribe too."""

    async def _publish(self, topic: str) -> Decision:
        await asyncio.sleep(0.02)
        if topic.startswith("deny/"):
            return deny(GateName.AUTHORIZER, "no-deny", "denied by authorizer rule 'no-deny'")
        return ALLOW

    def check_publish(self, identity, message):
        first = super().check_publish(identity, message)
        if first.denied:
            return first
        return self._publish(message.topic)

    async def _subscribe(self, topic_filter: str) -> Decision:
        await asyncio.sleep(0.01)
        if topic_filter.startswith("deny/"):
            return deny(GateName.AUTHORIZER, "no-deny", "denied by authorizer rule 'no-deny'")
        return ALLOW

    def check_subscribe(self, identity, subscription, user_properties=()):
        return self._subscribe(subscription.topic_filter)


def with_policy(broker) -> None:
    broker.policy = SlowPolicy(broker.separator)


def test_async_policy_keeps_order_and_outcomes(inprocess_broker_factory):
    b = inprocess_broker_factory(before_start=with_policy)
    with RawClient(b.host, b.port) as sub, RawClient(b.host, b.port) as pub:
        sub.connect("async-sub")
        sub.send(Subscribe(1, (Subscription("deny/x", 0), Subscription("ok/#", 1))))
        assert sub.expect(Suback).reason_codes == (0x87, 1)
        pub.connect("async-pub")
        for i in range(5):
            topic = "deny/x" if i == 2 else f"ok/{i}"
            pub.send(Publish(topic, b"%d" % i, 1, packet_id=i + 1))
        acks = [pub.expect(Puback) for _ in range(5)]
        assert [a.packet_id for a in acks] == [1, 2, 3, 4, 5]  # order kept across awaits
        assert acks[2].reason_code == 0x87
        assert acks[2].properties.reason_string == "denied by authorizer rule 'no-deny'"
        got = [sub.expect(Publish).payload for _ in range(4)]
        assert got == [b"0", b"1", b"3", b"4"]


def test_deny_action_disconnect(inprocess_broker_factory):
    b = inprocess_broker_factory(
        {"listeners": [{"name": "tcp", "port": 0, "deny_action": "disconnect"}]},
        before_start=with_policy,
    )
    with RawClient(b.host, b.port) as c:
        c.connect("denied-pub")
        c.send(Publish("deny/x", b"x", 1, packet_id=3))
        got = c.closed()
        assert isinstance(got[0], Puback) and got[0].reason_code == 0x87
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x87
    with RawClient(b.host, b.port, level=4) as c:
        c.connect("denied-v3")
        c.send(Publish("deny/x", b"x", 1, packet_id=3))
        assert c.closed() == []


class EgressPolicy(Policy):
    """Deliveries to client ``blocked`` of topics under ``secret/`` are denied (egress gate)."""

    def __init__(self, separator: str) -> None:
        super().__init__(separator)
        self.has_delivery_gates = True

    def check_deliver(self, session, message, *more):
        if session.client_id == "blocked" and message.topic.startswith("secret/"):
            return deny(GateName.ACL, "egress", "egress denied")
        return ALLOW


def test_delivery_gate_applies_to_live_and_retained(inprocess_broker_factory):
    def before_start(broker) -> None:
        broker.policy = EgressPolicy(broker.separator)

    b = inprocess_broker_factory(before_start=before_start)
    with RawClient(b.host, b.port) as pub:
        pub.connect("egress-pub")
        pub.send(Publish("secret/a", b"kept", 1, retain=True, packet_id=1))
        pub.expect(Puback)
        with RawClient(b.host, b.port) as blocked, RawClient(b.host, b.port) as ok:
            blocked.connect("blocked")
            ok.connect("allowed")
            for c in (blocked, ok):
                c.send(Subscribe(1, (Subscription("secret/#", 0), Subscription("open", 0))))
                c.expect(Suback)
            assert ok.expect(Publish).payload == b"kept"  # retained, through the gate
            pub.send(Publish("secret/b", b"live", 0))
            pub.send(Publish("open", b"open", 0))
            assert ok.expect(Publish).payload == b"live"
            assert ok.expect(Publish).payload == b"open"
            assert blocked.expect(Publish).payload == b"open"
            blocked.nothing()


def test_packets_during_enhanced_authentication(inprocess_broker_factory):
    from edge_broker.mqtt.packets import Connack, Connect

    b = inprocess_broker_factory(before_start=with_chain(ChallengeAuthenticator()))
    with RawClient(b.host, b.port) as c:
        c.send(Connect(5, "enh3", properties=Properties(authentication_method="CHALLENGE")))
        c.expect(Auth)
        c.send(Publish("x", b"too early", 0))
        ack = c.expect(Connack)
        assert ack.reason_code == 0x82
        c.closed()
    with RawClient(b.host, b.port) as c:
        c.send(Connect(5, "enh4", properties=Properties(authentication_method="CHALLENGE")))
        c.expect(Auth)
        c.send(Disconnect())
        assert c.closed() == []

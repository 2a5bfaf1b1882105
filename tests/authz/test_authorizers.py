"""Authorizer plugins (seed 003, AUTHZ.md gate 3) against the real broker: every outcome, a
timeout with each fallback, a plugin that raises; and the chain alone."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from edge_broker.authz.authorizers import (
    AuthorizerChain,
    AuthorizerConfigError,
    AuthorizerSpec,
    Outcome,
    PublishRequest,
    instantiate,
    parse_authorizer_specs,
)
from edge_broker.identity import Identity
from edge_broker.mqtt.packets import (
    Disconnect,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from tests.broker.broker_raw import RawClient

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "authorizers"


def config(fallback: str) -> str:
    return f"""
[sys]
interval = 2
[[listeners]]
name = "tcp"
port = 0
[[authorizers]]
name = "guard"
class = "topic_guard:TopicGuard"
timeout = 0.3
fallback = "{fallback}"
options = {{ forbidden_prefix = "forbidden/" }}
[permissions.sets.main]
rules = [
  {{ id = "no-secret", topic = "secret/#", type = "DENY" }},
  {{ id = "rest", topic = "#" }},
]
[[permissions.assign]]
sets = ["main"]
"""


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory):
    from tests.conftest import start_broker

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(EXAMPLES) + (os.pathsep + old if old else "")
    try:
        deny = start_broker(tmp_path_factory.mktemp("authz-deny"), config("deny"))
        nxt = start_broker(tmp_path_factory.mktemp("authz-next"), config("next"))
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    yield {"deny": deny, "next": nxt}
    deny.stop()
    nxt.stop()


def publish_code(b, topic: str, client_id: str, props: Properties | None = None) -> object:
    with RawClient(b.host, b.port) as c:
        c.connect(client_id)
        c.send(Publish(topic, b"x", 1, packet_id=1, properties=props or Properties()))
        got = c.recv()
        if isinstance(got, Puback):
            return got.reason_code, got.properties.reason_string
        return got


def test_deny_outcome_with_reason(brokers) -> None:
    code, reason = publish_code(brokers["deny"], "forbidden/x", "a1")
    assert code == 0x87 and "forbidden by the topic guard" in reason


def test_next_falls_to_default_permissions(brokers) -> None:
    assert publish_code(brokers["deny"], "open/x", "a2")[0] == 0x10  # allowed, no subscribers
    code, reason = publish_code(brokers["deny"], "secret/x", "a3")
    assert code == 0x87 and '"no-secret"' in reason


def test_disconnect_outcome(brokers) -> None:
    b = brokers["deny"]
    with RawClient(b.host, b.port) as c:
        c.connect("a4")
        c.send(
            Publish(
                "open/x",
                b"x",
                1,
                packet_id=1,
                properties=Properties(user_properties=(("notallowed", "1"),)),
            )
        )
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x98


@pytest.mark.parametrize(("fallback", "expected"), [("deny", 0x87), ("next", 0x10)])
def test_timeout_uses_the_fallback(brokers, fallback: str, expected: int) -> None:
    code, _ = publish_code(brokers[fallback], "slow/x", f"t-{fallback}")
    assert code == expected


@pytest.mark.parametrize(("fallback", "expected"), [("deny", 0x87), ("next", 0x10)])
def test_exception_uses_the_fallback_and_broker_survives(
    brokers, fallback: str, expected: int
) -> None:
    b = brokers[fallback]
    assert publish_code(b, "boom/x", f"e-{fallback}")[0] == expected
    assert b.alive()
    assert publish_code(b, "open/y", f"e2-{fallback}")[0] == 0x10
    assert "raised RuntimeError" in b.log()


def test_subscribe_authorizer_per_filter(brokers) -> None:
    b = brokers["deny"]
    with RawClient(b.host, b.port) as c:
        c.connect("s1")
        c.send(
            Subscribe(
                1,
                (
                    Subscription("open/#", 1),
                    Subscription("forbidden/#", 1),
                    Subscription("secret/#", 1),
                ),
            )
        )
        assert c.expect(Suback).reason_codes == (1, 0x87, 0x87)


# -- the chain without a broker -------------------------------------------------------------


class Answers:
    def __init__(self, options: dict) -> None:
        self.answer = options["answer"]

    async def authorize_publish(self, request: PublishRequest) -> object:
        return self.answer


def chain_of(*answers: object) -> AuthorizerChain:
    loaded = []
    for i, answer in enumerate(answers):
        spec = AuthorizerSpec(f"a{i}", "x:y")
        from edge_broker.authz.authorizers import LoadedAuthorizer

        loaded.append(LoadedAuthorizer(spec, Answers({"answer": answer})))
    return AuthorizerChain(loaded)


def request() -> PublishRequest:
    return PublishRequest(Identity("c", "anonymous"), "t", b"", 0, False)


def test_chain_order_and_invalid_answers() -> None:
    decided = asyncio.run(chain_of(Outcome.next(), Outcome.allow()).authorize_publish(request()))
    assert decided is not None and decided.allowed and decided.rule == "a1"
    assert asyncio.run(chain_of(Outcome.next()).authorize_publish(request())) is None
    wrong = asyncio.run(chain_of("yes").authorize_publish(request()))
    assert wrong is not None and wrong.denied  # returned no Outcome: its fallback, deny
    bad_code = asyncio.run(chain_of(Outcome.deny(0x10)).authorize_publish(request()))
    assert bad_code is not None and int(bad_code.reason_code) == 0x87


def test_config_errors_name_the_entry(tmp_path: Path) -> None:
    with pytest.raises(AuthorizerConfigError, match=r"authorizers\[0\]\.class"):
        parse_authorizer_specs([{"name": "x"}])
    with pytest.raises(AuthorizerConfigError, match="fallback"):
        parse_authorizer_specs([{"class": "a:b", "fallback": "maybe"}])
    with pytest.raises(AuthorizerConfigError, match="timeout"):
        parse_authorizer_specs([{"class": "a:b", "timeout": 0}])
    with pytest.raises(AuthorizerConfigError, match="unknown key"):
        parse_authorizer_specs([{"class": "a:b", "colour": 1}])
    with pytest.raises(AuthorizerConfigError, match="must define"):
        instantiate(AuthorizerSpec("n", "json:JSONDecoder"), "authorizers[0]")

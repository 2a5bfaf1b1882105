"""The ``token`` method over the wire (AUTHZ.md §1, issue 5): a JWT as CONNECT password or as
MQTT 5 Authentication Method ``TOKEN``; every bad token refused with the right CONNACK code and
a Reason String, for MQTT 5 and 3.1.1."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from token_broker import ED_KID, grant, make_token, token_config
from token_test_keys import forge, private_keys, public_pem

from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from broker_raw import RawClient  # noqa: E402

from edge_broker.mqtt.packets import NO_PROPERTIES, Properties  # noqa: E402

GRANTS = [grant(["acme"], pub=["store/sell/#"], sub=["store/sell/#"])]


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    directory = tmp_path_factory.mktemp("token-broker")
    b = start_broker(directory, token_config(directory))
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def connect(
    b: RunningBroker,
    token: str | bytes,
    level: int = 5,
    client_id: str = "dev",
    properties: Properties = NO_PROPERTIES,
) -> tuple[int, str | None]:
    password = token.encode() if isinstance(token, str) else token
    with RawClient(b.host, b.port, level=level) as c:
        ack = c.connect(client_id, username="device", password=password, properties=properties)
        return ack.reason_code, ack.properties.reason_string if level == 5 else None


def ed_forged(payload: dict[str, object], headers: dict[str, object] | None = None) -> str:
    """Signed with the broker's Ed25519 key but built without create_token's validation."""
    return jwt.encode(
        payload,
        private_keys()["EdDSA"],
        algorithm="EdDSA",
        headers={"kid": ED_KID, **(headers or {})},
    )


def claims(**extra: object) -> dict[str, object]:
    now = int(time.time())
    return {"iat": now, "exp": now + 300, "tenant_grants": GRANTS, **extra}


def test_a_valid_token_in_the_password_connects_v5_v311_and_v31(token_broker):
    token = make_token(GRANTS)
    assert connect(token_broker, token, 5)[0] == 0
    assert connect(token_broker, token, 4, client_id="dev311")[0] == 0
    assert connect(token_broker, token, 3, client_id="dev31")[0] == 0
    expired = make_token(GRANTS, now=time.time() - 1000, ttl=60)
    assert connect(token_broker, expired, 3, client_id="dev31")[0] == 0x04


def test_authentication_method_token_with_the_jwt_as_authentication_data(token_broker):
    token = make_token(GRANTS).encode()
    props = Properties(authentication_method="TOKEN", authentication_data=token)
    with RawClient(token_broker.host, token_broker.port) as c:
        ack = c.connect("dev-enhanced", properties=props)
        assert ack.reason_code == 0
        assert ack.properties.authentication_method == "TOKEN"
    empty = Properties(authentication_method="TOKEN")
    with RawClient(token_broker.host, token_broker.port) as c:
        ack = c.connect("dev-enhanced2", properties=empty)
        assert ack.reason_code == 0x86
        assert "Authentication Data" in (ack.properties.reason_string or "")


BAD_TOKENS = {
    "expired": (lambda: make_token(GRANTS, now=time.time() - 1000, ttl=60), "expired"),
    "not yet valid": (lambda: ed_forged(claims(nbf=int(time.time()) + 3600)), "not valid before"),
    "unknown key": (lambda: ed_forged(claims(), {"kid": "nobody"}), "unknown key id 'nobody'"),
    "alg none": (
        lambda: forge({"alg": "none", "typ": "JWT"}, claims(), None) + "AAAA",
        "alg 'none'",
    ),
    "HS256 with the public key": (
        lambda: forge(
            {"alg": "HS256", "kid": ED_KID}, claims(), public_pem(private_keys()["EdDSA"])
        ),
        "algorithm confusion",
    ),
    "malformed": (lambda: "eyJub3QiOiJqc29u.YWJj.ZGVm", "malformed"),
    "bad signature": (lambda: make_token(GRANTS)[:-6] + "AAAAAA", "signature"),
    "33-segment rule": (
        lambda: ed_forged(claims(tenant_grants=[grant(["acme"], pub=["/".join(["s"] * 33)])])),
        "allow_channels_pub[0]",
    ),
    "invalid rule": (
        lambda: ed_forged(claims(tenant_grants=[grant(["acme"], pub=["store/?/status"])])),
        "store/?/status",
    ),
    "no exp": (lambda: ed_forged({"tenant_grants": GRANTS}), "no 'exp'"),
    "audience without a configured audience": (lambda: ed_forged(claims(aud="other")), "audience"),
    "bound to another client id": (
        lambda: ed_forged(claims(client_id="someone-else")),
        "bound to client id",
    ),
    # issue 15 item 10: a NaN exp never expired; numeric claims must be finite and in range
    "exp NaN": (lambda: ed_forged(claims(exp=float("nan"))), "'exp' is nan"),
    "exp Infinity": (lambda: ed_forged(claims(exp=float("inf"))), "'exp' is inf"),
    "exp 1e308": (lambda: ed_forged(claims(exp=1e308)), "between 0 and"),
    "exp 10**400": (lambda: ed_forged(claims(exp=10**400)), "finite number"),
    "nbf -Infinity": (lambda: ed_forged(claims(nbf=float("-inf"))), "'nbf' is -inf"),
    "iat NaN": (lambda: ed_forged(claims(iat=float("nan"))), "'iat' is nan"),
    "negative exp": (lambda: ed_forged(claims(exp=-5)), "between 0 and"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
def test_bad_tokens_are_refused_0x86_with_a_reason(token_broker, case):
    make, words = BAD_TOKENS[case]
    token = make()
    code, reason = connect(token_broker, token, 5)
    assert code == 0x86, (case, reason)
    assert reason is not None and words in reason, (case, reason)
    assert connect(token_broker, token, 4)[0] == 0x04  # MQTT 3.1.1: bad user name or password


def test_the_33_segment_rule_reason_names_the_rule_and_the_limit(token_broker):
    rule = "/".join(["s"] * 33)
    token = ed_forged(claims(tenant_grants=[grant(["acme"], sub=[rule])]))
    code, reason = connect(token_broker, token)
    assert code == 0x86
    assert reason is not None and "allow_channels_sub[0]" in reason and "32" in reason


def test_grants_that_do_not_name_the_tenant_are_refused_0x87(token_broker):
    token = make_token(GRANTS)
    other = Properties(user_properties=(("tenant", "globex"),))
    code, reason = connect(token_broker, token, 5, properties=other)
    assert code == 0x87 and reason is not None and "globex" in reason
    two = make_token([grant(["acme", "beta"], pub=["a/#"])])
    code, reason = connect(token_broker, two, 5)  # no tenant asked: "~", not named
    assert code == 0x87 and "'~'" in (reason or "")
    assert connect(token_broker, two, 4)[0] == 0x05  # MQTT 3.1.1: not authorized


def test_a_password_that_is_not_a_jwt_falls_through_to_the_next_method(token_broker):
    code, _ = connect(token_broker, b"just-a-password")
    assert code == 0  # anonymous is the next method on this listener


def test_config_refuses_token_without_keys_and_bad_key_files(tmp_path):
    from edge_broker.config import ConfigError, loads_config

    with pytest.raises(ConfigError) as info:
        loads_config('[[listeners]]\nname = "t"\nauth_methods = ["token"]\n')
    assert info.value.key == "listeners[0].auth_methods" and "[[tokens.keys]]" in info.value.message
    missing = tmp_path / "missing.pem"
    with pytest.raises(ConfigError) as info:
        loads_config(f'[[tokens.keys]]\nfile = "{missing}"\n')
    assert info.value.key == "tokens.keys[0].file" and "cannot read" in info.value.message
    with pytest.raises(ConfigError) as info:
        loads_config('[[tokens.keys]]\nsecret = "short"\n')
    assert info.value.key == "tokens.keys[0].secret" and "32" in info.value.message
    with pytest.raises(ConfigError) as info:
        loads_config('[[listeners]]\nname = "t"\nsubscription_patterns = "nats"\n')
    assert info.value.key == "listeners[0].subscription_patterns"


def test_a_huge_invalid_rule_gives_a_short_reason_naming_rule_and_problem(token_broker):
    rule = "/".join(["x" * 128] * 31 + ["a#b"])  # ~4 KB; the last segment is invalid
    token = ed_forged(claims(tenant_grants=[grant(["acme"], pub=[rule])]))
    code, reason = connect(token_broker, token)
    assert code == 0x86 and reason is not None
    assert len(reason) <= 512
    assert reason.startswith("invalid token grants: tenant_grants[0].allow_channels_pub[0]")
    assert "a#b" in reason[-300:]


def test_looks_like_jwt():
    from edge_broker.auth.token_method import looks_like_jwt

    assert looks_like_jwt(make_token(GRANTS).encode())
    for not_jwt in (
        None,
        b"",
        b"secret",
        b"a.b",
        b"a..c",
        b"a.b.c.d",
        b"a b.c.d",
        "é.b.c".encode(),
    ):
        assert not looks_like_jwt(not_jwt), not_jwt


SEED_INVALID = [  # seed 000: "Invalid publish rules" and "Invalid syntax" of subscribe rules
    ("allow_channels_pub", "store.?.status", "'?' is not allowed in publish rules"),
    ("allow_channels_pub", "store.*.status", "'*' is not allowed in publish rules"),
    ("allow_channels_pub", "store.#.status", "'#' must be the last segment"),
    ("allow_channels_pub", "store..sell", "empty segment"),
    ("allow_channels_sub", "store.sell|bay.status", "sell|bay"),
    ("allow_channels_sub", "store.(sell.status|buy).#", "(sell"),
    ("allow_channels_sub", "store.#.status", "'#' must be the last segment"),
    ("allow_channels_sub", "store..sell", "empty segment"),
]


@pytest.mark.parametrize(("kind", "rule", "words"), SEED_INVALID)
def test_seed_invalid_rules_refuse_the_token_naming_rule_and_problem(
    token_broker, kind, rule, words
):
    rule = rule.replace(".", "/")
    token = ed_forged(claims(tenant_grants=[{"tenant_ids": ["acme"], kind: [rule]}]))
    for level in (5, 4):
        code, reason = connect(token_broker, token, level, client_id=f"inv{level}")
        assert code == (0x86 if level == 5 else 0x04)
    code, reason = connect(token_broker, token)
    assert reason is not None and f"{kind}[0]" in reason and rule in reason, reason
    assert words.replace(".", "/") in reason, reason


b64part = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.tuples(b64part, b64part, b64part), st.sampled_from([5, 4]))
def test_garbage_jwts_are_refused_and_the_broker_carries_on(token_broker, parts, level):
    code, reason = connect(token_broker, ".".join(parts), level, client_id="garbage")
    assert code == (0x86 if level == 5 else 0x04)
    if level == 5:
        assert reason and ("malformed" in reason or "token" in reason), reason

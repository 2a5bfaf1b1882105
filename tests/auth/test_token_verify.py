"""Token verification (AUTHZ.md §1 method `token`): every refusal with its code and reason."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
from token_test_keys import (
    GRANTS,
    HS_SECRET,
    forge,
    private_keys,
    public_pem,
    signing_key,
    verify_key,
)

from edge_broker.auth.token import TokenError, TokenVerifier, create_token
from edge_broker.auth.token_keys import TokenKey
from edge_broker.mqtt.reason_codes import ReasonCode

ALGS = ["EdDSA", "ES256", "RS256", "HS256"]
NOW = 1_800_000_000.0
BAD = ReasonCode.BAD_USER_NAME_OR_PASSWORD


def verifier(*algs: str, **kwargs: Any) -> TokenVerifier:
    return TokenVerifier([verify_key(a, kid=f"k-{a}") for a in algs or ALGS], **kwargs)


def token(alg: str = "EdDSA", kid: str | None = "default", **kwargs: Any) -> str:
    kwargs.setdefault("ttl", 3600)
    kwargs.setdefault("now", NOW)
    kwargs.setdefault("separator", "/")
    key = signing_key(alg, f"k-{alg}" if kid == "default" else kid)
    return create_token(key, kwargs.pop("grants", GRANTS), **kwargs)


def refused(v: TokenVerifier, text: str | bytes, **kwargs: Any) -> TokenError:
    kwargs.setdefault("now", NOW)
    with pytest.raises(TokenError) as info:
        v.verify(text, **kwargs)
    return info.value


@pytest.mark.parametrize("alg", ALGS)
@pytest.mark.parametrize("with_kid", [True, False])
def test_valid_token_with_each_algorithm(alg: str, with_kid: bool) -> None:
    text = token(alg, kid="default" if with_kid else None, subject="dev-1", client_id="c1")
    verified = verifier().verify(text, client_id="c1", tenant="acme", now=NOW + 10)
    assert verified.algorithm == alg
    assert verified.kid == (f"k-{alg}" if with_kid else None)
    assert verified.subject == "dev-1" and verified.client_id == "c1"
    assert verified.expires_at == NOW + 3600 and verified.issued_at == NOW
    assert verified.seconds_left(NOW + 600) == 3000
    acme = verified.for_tenant("acme")
    assert acme.can_publish("store/sell/status") == "store/sell/#"
    assert acme.can_publish("orders/asia/east") == "orders/(eu|us|a*)/#"
    assert acme.can_publish("orders/ru") is None
    assert acme.can_subscribe("store/fi/status") == "store/?/status/#"
    assert acme.can_subscribe("store/+/status") == "store/*/status"
    assert acme.can_subscribe("store/sell") is None


def test_bytes_token_is_accepted() -> None:
    assert verifier().verify(token().encode(), now=NOW).algorithm == "EdDSA"


def test_empty_tenant_is_tilde_and_tenants_are_isolated() -> None:
    verified = verifier().verify(token(), now=NOW)
    assert verified.grants.tenants == {"acme", "beta", "~"}
    home = verified.for_tenant("")
    assert home.can_publish("events/x") == "events/>"
    assert home.can_publish("store/sell/x") is None
    assert verified.for_tenant("acme").can_publish("events/x") is None


def test_tenant_not_named_is_not_authorized_0x87() -> None:
    err = refused(verifier(), token(), tenant="other")
    assert err.reason_code is ReasonCode.NOT_AUTHORIZED
    assert "tenant 'other'" in err.reason and "acme" in err.reason


def test_invalid_tenant_is_not_authorized() -> None:
    err = refused(verifier(), token(), tenant="bad/tenant")
    assert err.reason_code is ReasonCode.NOT_AUTHORIZED and "'/'" in err.reason


def test_expired_token_is_refused_after_the_leeway() -> None:
    text = token(ttl=60)
    verifier().verify(text, now=NOW + 60 + 29)  # inside the default 30 s leeway
    err = refused(verifier(), text, now=NOW + 60 + 31)
    assert err.reason_code is BAD and "expired at" in err.reason and "leeway 30 s" in err.reason
    err = refused(verifier(leeway=0), text, now=NOW + 61)
    assert "expired" in err.reason


def test_not_yet_valid_token_is_refused() -> None:
    key = signing_key("EdDSA", "k-EdDSA")
    claims = {"exp": NOW + 7200, "nbf": NOW + 3600, "tenant_grants": GRANTS}
    text = jwt.encode(claims, key.signing_key, algorithm="EdDSA", headers={"kid": "k-EdDSA"})
    err = refused(verifier(), text, now=NOW)
    assert err.reason_code is BAD and "not valid before" in err.reason
    verifier().verify(text, now=NOW + 3600 - 20)  # leeway


def test_token_without_exp_is_refused_unless_allowed() -> None:
    text = token(ttl=None)
    err = refused(verifier(), text)
    assert err.reason_code is BAD and "no 'exp'" in err.reason
    assert verifier(require_exp=False).verify(text, now=NOW).expires_at is None


def test_unknown_key_id_is_refused() -> None:
    err = refused(verifier(), token(kid="nobody"))
    assert err.reason_code is BAD and "unknown key id 'nobody'" in err.reason


def test_token_signed_by_another_key_is_refused() -> None:
    other = TokenKey.from_pem(
        public_pem(private_keys()["EdDSA"]), "k-EdDSA"
    )  # right kid, wrong key below
    from cryptography.hazmat.primitives.asymmetric import ed25519

    foreign = ed25519.Ed25519PrivateKey.generate()
    text = jwt.encode(
        {"exp": NOW + 60, "tenant_grants": GRANTS},
        foreign,
        algorithm="EdDSA",
        headers={"kid": "k-EdDSA"},
    )
    err = refused(TokenVerifier([other]), text)
    assert err.reason_code is BAD and "signature does not verify" in err.reason
    no_kid = jwt.encode({"exp": NOW + 60, "tenant_grants": GRANTS}, foreign, algorithm="EdDSA")
    err = refused(TokenVerifier([other]), no_kid)
    assert "any configured EdDSA key" in err.reason


def test_alg_none_is_refused() -> None:
    payload = {"exp": NOW + 60, "tenant_grants": GRANTS}
    for alg in ["none", "None", "NONE"]:
        err = refused(verifier(), forge({"alg": alg, "typ": "JWT"}, payload, None) + "x")
        assert err.reason_code is BAD and "unsigned token" in err.reason
    err = refused(verifier(), forge({"alg": "none"}, payload, None))
    assert err.reason_code is BAD and "unsigned token" in err.reason


@pytest.mark.parametrize("alg", ["EdDSA", "ES256", "RS256"])
@pytest.mark.parametrize("kid", [None, "k-{alg}"])
def test_algorithm_confusion_hs256_with_public_key_as_secret(alg: str, kid: str | None) -> None:
    pem = public_pem(private_keys()[alg])
    header: dict[str, Any] = {"alg": "HS256", "typ": "JWT"}
    if kid is not None:
        header["kid"] = kid.format(alg=alg)
    text = forge(header, {"exp": NOW + 60, "tenant_grants": GRANTS}, pem)
    v = verifier(alg)  # only the asymmetric key is configured
    err = refused(v, text)
    assert err.reason_code is BAD
    assert ("algorithm confusion" in err.reason) if kid else ("no HS256 key" in err.reason)
    # and with an HS256 key configured too, the public key is still no HS256 secret
    err = refused(verifier(alg, "HS256"), text)
    assert err.reason_code is BAD


def test_other_algorithms_are_refused() -> None:
    text = forge({"alg": "HS512"}, {"exp": NOW + 60}, HS_SECRET)
    err = refused(verifier(), text)
    assert err.reason_code is BAD and "'HS512' is not allowed" in err.reason


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "three non-empty base64url parts"),
        ("abc", "three non-empty base64url parts"),
        ("a.b", "three non-empty base64url parts"),
        ("a.b.c.d", "three non-empty base64url parts"),
        ("!!!.@@@.###", "header is not base64url-encoded JSON"),
        ("WzFd.e30.e30", "header is not a JSON object"),
        ("eyJhbGciOiJFZERTQSJ9..e30", "three non-empty"),
        ("eyJhbGciOiJFZERTQSJ9.e30", "three non-empty"),
        ("e30.e30.e30", "no 'alg'"),
        (b"\xff\xfe.a.b", "not ASCII"),
        ("x" * 70000 + ".a.b", "longer than"),
    ],
)
def test_malformed_tokens_are_refused(text: str | bytes, fragment: str) -> None:
    err = refused(verifier(), text)
    assert err.reason_code is BAD and fragment in err.reason


def test_payload_that_is_not_an_object_is_malformed() -> None:
    signing_input = forge({"alg": "HS256", "kid": "k-HS256"}, {}, HS_SECRET)
    head = signing_input.split(".")[0]
    import base64
    import hashlib
    import hmac

    body = base64.urlsafe_b64encode(b"[1,2]").rstrip(b"=").decode()
    mac = hmac.new(HS_SECRET, f"{head}.{body}".encode(), hashlib.sha256).digest()
    text = f"{head}.{body}." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    err = refused(verifier(), text)
    assert err.reason_code is BAD and "malformed" in err.reason


def test_33_segment_rule_is_refused_naming_the_rule() -> None:
    rule = "/".join(["s"] * 33)
    grants = [{"tenant_ids": ["acme"], "allow_channels_pub": ["ok/#", rule]}]
    text = forge(
        {"alg": "HS256", "kid": "k-HS256"}, {"exp": NOW + 60, "tenant_grants": grants}, HS_SECRET
    )
    err = refused(verifier(), text)
    assert err.reason_code is BAD
    assert err.reason.startswith("invalid token grants: tenant_grants[0].allow_channels_pub[1]")
    assert rule in err.reason and "33 segments; at most 32" in err.reason


def test_invalid_rule_message_is_the_same_at_creation() -> None:
    grants = [{"tenant_ids": ["acme"], "allow_channels_sub": ["store/#/status"]}]
    from edge_broker.authz.grants import GrantError

    with pytest.raises(GrantError) as created:
        token(grants=grants)
    text = forge(
        {"alg": "HS256", "kid": "k-HS256"}, {"exp": NOW + 60, "tenant_grants": grants}, HS_SECRET
    )
    err = refused(verifier(), text)
    assert err.reason == f"invalid token grants: {created.value}"
    assert str(created.value) == (
        "tenant_grants[0].allow_channels_sub[0]: store/#/status: '#' must be the last segment"
    )


def test_missing_grants_are_refused() -> None:
    text = forge({"alg": "HS256", "kid": "k-HS256"}, {"exp": NOW + 60}, HS_SECRET)
    err = refused(verifier(), text)
    assert err.reason_code is BAD and "no 'tenant_grants'" in err.reason


def test_audience() -> None:
    text = token(audience="gw-1")
    assert verifier(audience="gw-1").verify(text, now=NOW).audience == ("gw-1",)
    err = refused(verifier(audience="gw-2"), text)
    assert err.reason_code is BAD and "does not include 'gw-2'" in err.reason
    err = refused(verifier(audience="gw-2"), token())
    assert "audience (none)" in err.reason
    err = refused(verifier(), text)
    assert "no audience configured" in err.reason
    assert verifier(audience="b").verify(token(audience=["a", "b"]), now=NOW).audience == ("a", "b")


def test_issuer() -> None:
    text = token(issuer="cloud")
    assert verifier(issuer="cloud").verify(text, now=NOW).issuer == "cloud"
    err = refused(verifier(issuer="other"), text)
    assert err.reason_code is BAD and "issuer 'cloud'" in err.reason


def test_client_id_binding() -> None:
    text = token(client_id="dev-1")
    assert verifier().verify(text, client_id="dev-1", now=NOW).client_id == "dev-1"
    err = refused(verifier(), text, client_id="dev-2")
    assert err.reason_code is BAD and "bound to client id 'dev-1', not 'dev-2'" in err.reason
    assert verifier().verify(token(), client_id="anyone", now=NOW).client_id is None


@pytest.mark.parametrize(
    ("claims", "fragment"),
    [
        ({"exp": "soon"}, "'exp' must be a number"),
        ({"exp": True}, "'exp' must be a number"),
        ({"exp": NOW + 60, "nbf": [1]}, "'nbf' must be a number"),
        ({"exp": NOW + 60, "sub": 5}, "'sub' must be a string"),
        ({"exp": NOW + 60, "client_id": 5}, "'client_id' must be a string"),
        ({"exp": NOW + 60, "aud": 5}, "'aud' must be a string or a list"),
    ],
)
def test_claim_types(claims: dict[str, Any], fragment: str) -> None:
    text = forge({"alg": "HS256", "kid": "k-HS256"}, {**claims, "tenant_grants": GRANTS}, HS_SECRET)
    err = refused(verifier(require_exp=False), text)
    assert err.reason_code is BAD and fragment in err.reason


def test_verifier_uses_the_wall_clock_by_default() -> None:
    text = token(now=time.time())
    assert verifier().verify(text).seconds_left() is not None


def test_verifier_configuration_errors() -> None:
    with pytest.raises(ValueError, match="at least one key"):
        TokenVerifier([])
    with pytest.raises(ValueError, match="leeway"):
        TokenVerifier([verify_key("HS256")], leeway=-1)
    with pytest.raises(ValueError, match="separator must be"):
        TokenVerifier([verify_key("HS256")], separator=":")


def test_token_error_str_is_the_reason() -> None:
    err = refused(verifier(), "abc")
    assert str(err) == err.reason


def test_key_without_kid_verifies_tokens_with_any_kid() -> None:
    plain = TokenVerifier([verify_key("EdDSA")])
    assert plain.verify(token("EdDSA", kid="issuer-7"), now=NOW).kid == "issuer-7"
    err = refused(TokenVerifier([verify_key("EdDSA", kid="a")]), token("EdDSA", kid="issuer-7"))
    assert "unknown key id 'issuer-7'" in err.reason


def test_verified_token_is_immutable() -> None:
    verified = verifier().verify(token(), now=NOW)
    with pytest.raises(TypeError):
        verified.claims["exp"] = 0  # type: ignore[index]
    with pytest.raises(AttributeError):
        verified.subject = "x"  # type: ignore[misc]


def test_compiled_grants_are_shared_and_the_cache_is_bounded() -> None:
    from edge_broker.auth import token as token_module

    v = verifier()
    first = v.verify(token(subject="a"), now=NOW)
    second = v.verify(token(subject="b", ttl=99), now=NOW)
    assert first.grants is second.grants  # same grants, one compilation
    for i in range(token_module.GRANTS_CACHE_SIZE + 5):
        grants = [{"tenant_ids": [f"t{i}"], "allow_channels_pub": ["x/#"]}]
        assert v.verify(token(grants=grants), now=NOW).grants.tenants == {f"t{i}"}
    assert len(v._compiled) == token_module.GRANTS_CACHE_SIZE
    bad = [{"tenant_ids": ["t"], "allow_channels_pub": ["x/#/y"]}]
    text = forge(
        {"alg": "HS256", "kid": "k-HS256"}, {"exp": NOW + 60, "tenant_grants": bad}, HS_SECRET
    )
    for _ in range(2):  # invalid grants are never cached
        assert "'#' must be the last segment" in refused(v, text).reason


@pytest.mark.parametrize("extra", [{"crit": ["exp"]}, {"b64": False, "crit": ["b64"]}])
def test_critical_header_extensions_are_refused(extra: dict[str, Any]) -> None:
    text = forge(
        {"alg": "HS256", "kid": "k-HS256", **extra},
        {"exp": NOW + 60, "tenant_grants": GRANTS},
        HS_SECRET,
    )
    err = refused(verifier(), text)
    assert err.reason_code is BAD and "not supported" in err.reason

"""``[tokens]`` configurations at the broker: every allowed algorithm from PEM files, a secret
file and a JWKS file; audience, issuer and client-id binding; and a token issued by
``edge-broker token create`` accepted by the broker. The broker runs in memory (the
``memory_broker_factory`` fixture: its token method and Connections, no socket; a broker process
before, assertions unchanged); the CLI runs as a process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jwt
import pytest
from token_broker import ED_KID, HS_KID, grant, make_token, token_config
from token_test_keys import private_keys, private_pem, signing_key

GRANTS = [grant(["acme"], pub=["a/#"], sub=["a/#"])]


def connect(b: Any, token: str, client_id: str = "cfg") -> tuple[int, str | None]:
    with b.client() as c:
        ack = c.connect(client_id, username="u", password=token.encode())
        return ack.reason_code, ack.properties.reason_string


def jwks_file(directory: Path) -> Path:
    keys = []
    for alg, kid, to_jwk in (
        ("ES256", "es", jwt.algorithms.ECAlgorithm.to_jwk),
        ("RS256", "rs", jwt.algorithms.RSAAlgorithm.to_jwk),
    ):
        jwk = json.loads(to_jwk(private_keys()[alg].public_key()))
        keys.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})
    path = directory / "jwks.json"
    path.write_text(json.dumps({"keys": keys}))
    return path


def test_every_algorithm_from_pem_secret_file_and_jwks(memory_broker_factory, tmp_path):
    extra = f"jwks = {json.dumps(str(jwks_file(tmp_path)))}"
    b = memory_broker_factory(token_config(tmp_path, extra_tokens=extra))
    for alg, kid in (("EdDSA", ED_KID), ("HS256", HS_KID), ("ES256", "es"), ("RS256", "rs")):
        token = make_token(GRANTS, key=signing_key(alg, kid))
        assert connect(b, token) == (0, None), alg
    # the ES256 key id with an RS256 signature: refused, whatever the signature
    confused = make_token(GRANTS, key=signing_key("RS256", "es"))
    code, reason = connect(b, confused)
    assert code == 0x86 and "algorithm confusion" in (reason or "")


def test_audience_issuer_and_client_id_binding(memory_broker_factory, tmp_path):
    extra = 'audience = "gw-1"\nissuer = "iss-A"\nrequire_client_id_binding = true'
    b = memory_broker_factory(token_config(tmp_path, extra_tokens=extra))
    good = dict(audience="gw-1", issuer="iss-A", client_id="dev-1")
    assert connect(b, make_token(GRANTS, **good), "dev-1")[0] == 0
    cases = {
        "audience": dict(good, audience="gw-2"),
        "issuer": dict(good, issuer="iss-B"),
        "bound to client id": dict(good, client_id="dev-2"),
        "client_id": {k: v for k, v in good.items() if k != "client_id"},
    }
    for words, claims in cases.items():
        code, reason = connect(b, make_token(GRANTS, **claims), "dev-1")
        assert code == 0x86 and words in (reason or ""), (words, reason)


def test_a_token_from_the_cli_is_accepted(memory_broker_factory, tmp_path):
    b = memory_broker_factory(token_config(tmp_path))
    key = tmp_path / "issuer.pem"
    key.write_bytes(private_pem(private_keys()["EdDSA"]))
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_broker",
            "token",
            "create",
            "--key",
            str(key),
            "--kid",
            ED_KID,
            "--grant",
            json.dumps(GRANTS),
            "--ttl",
            "5m",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    token = made.stdout.strip()
    assert connect(b, token) == (0, None)


@pytest.mark.parametrize(
    ("toml", "key", "words"),
    [
        ('[[tokens.keys]]\nfile = "x.pem"\nsecret = "y"\n', "tokens.keys[0].file", "either"),
        (
            '[[tokens.keys]]\nsecret = "0123456789abcdef0123456789abcdef!!"\nalg = "RS256"\n',
            "tokens.keys[0].secret",
            "HS256",
        ),
        ('[tokens]\njwks = "/nonexistent/jwks.json"\n', "tokens.jwks", "cannot read"),
        ("[tokens]\nleeway = -1\n", "tokens.leeway", "out of range"),
        ('[tokens]\nkeys = "k.pem"\n', "tokens.keys", "[[tokens.keys]]"),
        (
            '[[tokens.keys]]\nfile = "k.pem"\ncolour = "blue"\n',
            "tokens.keys[0].colour",
            "unknown key",
        ),
    ],
)
def test_config_errors_name_the_key(toml, key, words):
    from edge_broker.config import ConfigError, loads_config

    with pytest.raises(ConfigError) as info:
        loads_config(toml)
    found = [p for p in info.value.problems if p.key == key]
    assert found and words in found[0].message, [str(p) for p in info.value.problems]


def test_cli_and_broker_refuse_an_invalid_rule_with_the_same_message(
    memory_broker_factory, tmp_path
):
    """Issue 5: ``token create`` rejects invalid rules "with the same messages" as the broker."""
    b = memory_broker_factory(token_config(tmp_path))
    key = tmp_path / "issuer.pem"
    key.write_bytes(private_pem(private_keys()["EdDSA"]))
    bad = [grant(["acme"], pub=["store/?/status"])]
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_broker",
            "token",
            "create",
            "--key",
            str(key),
            "--grant",
            json.dumps(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode != 0
    problem = (
        "tenant_grants[0].allow_channels_pub[0]: store/?/status: '?' is not allowed in "
        "publish rules"
    )
    assert problem in made.stderr
    forged = jwt.encode(
        {"exp": 4_000_000_000, "tenant_grants": bad},
        private_keys()["EdDSA"],
        algorithm="EdDSA",
        headers={"kid": ED_KID},
    )
    code, reason = connect(b, forged)
    assert code == 0x86 and problem in (reason or "")

"""`edge-broker token create|inspect` (issue 5): invalid rules refused with the broker's words."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.auth.token import TokenVerifier
from edge_broker.auth.token_keys import TokenKey
from edge_broker.cli import main
from edge_broker.cli.errors import UsageError
from edge_broker.cli.token import parse_duration
from tests.auth.token_test_keys import HS_SECRET, private_keys, private_pem, public_pem

GRANT = {
    "tenant_ids": ["acme"],
    "allow_channels_pub": ["store/sell/#"],
    "allow_channels_sub": ["store/?/status/#"],
}


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    key = private_keys()["ES256"]
    (tmp_path / "priv.pem").write_bytes(private_pem(key))
    (tmp_path / "pub.pem").write_bytes(public_pem(key))
    (tmp_path / "secret").write_bytes(HS_SECRET)
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["token", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_create_then_verify_with_the_library(
    keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys,
        "create",
        "--key",
        str(keys / "priv.pem"),
        "--kid",
        "k1",
        "--grant",
        json.dumps(GRANT),
        "--ttl",
        "1h30m",
        "--sub",
        "dev-1",
        "--client-id",
        "c1",
        "--aud",
        "gw",
    )
    assert code == 0
    token = out.strip()
    verifier = TokenVerifier([TokenKey.load(keys / "pub.pem", kid="k1")], audience="gw")
    verified = verifier.verify(token, client_id="c1", tenant="acme")
    assert verified.subject == "dev-1" and verified.kid == "k1" and verified.algorithm == "ES256"
    assert verified.expires_at is not None and verified.issued_at is not None
    assert verified.expires_at - verified.issued_at == 5400
    assert verified.grants.to_json() == [GRANT]


def test_create_with_hs256_secret_and_grants_file(
    keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (keys / "grants.json").write_text(json.dumps({"tenant_grants": [GRANT, GRANT]}))
    code, out, _ = run(
        capsys,
        "create",
        "--key",
        str(keys / "secret"),
        "--alg",
        "HS256",
        "--grant",
        "@" + str(keys / "grants.json"),
        "--grant",
        json.dumps(GRANT),
    )
    assert code == 0
    verified = TokenVerifier([TokenKey.hs256(HS_SECRET)]).verify(out.strip())
    assert len(verified.grants.grants) == 3


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "store/#/status",
            "tenant_grants[0].allow_channels_pub[0]: store/#/status: '#' must be the last segment",
        ),
        ("/".join(["s"] * 33), "33 segments; at most 32"),
        ("store/?/x", "'?' is not allowed in publish rules"),
    ],
)
def test_create_refuses_invalid_rules(
    keys: Path, capsys: pytest.CaptureFixture[str], rule: str, message: str
) -> None:
    grant = {"tenant_ids": ["acme"], "allow_channels_pub": [rule]}
    code, out, err = run(
        capsys, "create", "--key", str(keys / "priv.pem"), "--grant", json.dumps(grant)
    )
    assert code == 1 and out == ""
    assert "invalid grants: " in err and message in err


def test_create_with_dot_separator(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grant = {"tenant_ids": ["t"], "allow_channels_pub": ["store.sell.#"]}
    code, out, _ = run(
        capsys,
        "create",
        "--key",
        str(keys / "priv.pem"),
        "--separator",
        ".",
        "--grant",
        json.dumps(grant),
    )
    assert code == 0
    verifier = TokenVerifier([TokenKey.load(keys / "pub.pem")], separator=".")
    compiled = verifier.verify(out.strip()).for_tenant("t")
    assert compiled.can_publish("store.sell.x") == "store.sell.#"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--grant", "{not json"], "not valid JSON"),
        (["--grant", "@/nonexistent/grants.json"], "cannot read"),
        (["--grant", json.dumps(GRANT), "--ttl", "soon"], "--ttl 'soon'"),
        (["--grant", json.dumps(GRANT), "--alg", "RS256"], "is a ES256 key but algorithm 'RS256'"),
    ],
)
def test_create_usage_errors(
    keys: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, _, err = run(capsys, "create", "--key", str(keys / "priv.pem"), *args)
    assert code == 2 and message in err


def test_create_needs_a_private_key(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "create", "--key", str(keys / "pub.pem"), "--grant", "{}")
    assert code == 2 and "a public key cannot sign" in err


def _make(keys: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    code, out, _ = run(
        capsys,
        "create",
        "--key",
        str(keys / "priv.pem"),
        "--kid",
        "k1",
        "--grant",
        json.dumps(GRANT),
        *extra,
    )
    assert code == 0
    return out.strip()


def test_inspect_without_key(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = _make(keys, capsys)
    code, out, _ = run(capsys, "inspect", token)
    assert code == 0
    assert '"alg": "ES256"' in out and '"kid": "k1"' in out
    assert "tenants: acme" in out and "pub: store/sell/#" in out and "sub: store/?/status/#" in out
    assert "not verified" in out and out.strip().endswith("VALID (signature unchecked)")


def test_inspect_with_key_and_checks(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = _make(keys, capsys, "--client-id", "c1")
    code, out, _ = run(
        capsys,
        "inspect",
        token,
        "--key",
        str(keys / "pub.pem"),
        "--tenant",
        "acme",
        "--client-id",
        "c1",
    )
    assert code == 0 and "verified (ES256, kid 'k1')" in out and out.strip().endswith("VALID")
    code, out, _ = run(
        capsys, "inspect", token, "--key", str(keys / "pub.pem"), "--tenant", "other"
    )
    assert code == 1 and "verified (ES256" in out
    assert "INVALID: token grants no access to tenant 'other'" in out
    code, out, _ = run(
        capsys, "inspect", token, "--key", str(keys / "pub.pem"), "--client-id", "c2"
    )
    assert code == 1 and "bound to client id 'c1', not 'c2'" in out


def test_inspect_with_wrong_key_is_refused(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = _make(keys, capsys)
    (keys / "other.pem").write_bytes(public_pem(private_keys()["EdDSA"]))
    code, out, _ = run(capsys, "inspect", token, "--key", str(keys / "other.pem"), "--json")
    report = json.loads(out)
    assert code == 1 and report["valid"] is False and report["signature"] == "refused"
    assert report["reason_code"] == "0x86 BAD_USER_NAME_OR_PASSWORD"


def test_inspect_json_and_stdin(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = _make(keys, capsys, "--sub", "dev-9")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_broker",
            "token",
            "inspect",
            "-",
            "--json",
            "--key",
            str(keys / "pub.pem"),
        ],
        input=token,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["valid"] is True and report["verified"] is True
    assert report["claims"]["sub"] == "dev-9"
    assert report["grants"] == [GRANT]
    assert 3500 < report["expires_in"] <= 3600


def test_inspect_shows_invalid_rules_and_expiry(
    keys: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.auth.token_test_keys import forge

    grants = [{"tenant_ids": ["a"], "allow_channels_sub": ["a/(b|)/c"]}]
    token = forge({"alg": "HS256"}, {"exp": 1000, "tenant_grants": grants}, HS_SECRET)
    code, out, _ = run(capsys, "inspect", token)
    assert code == 1
    assert "INVALID: invalid token grants: tenant_grants[0].allow_channels_sub[0]: a/(b|)/c" in out
    assert "INVALID: token expired at 1970-01-01T00:16:40Z" in out
    code, out, _ = run(capsys, "inspect", "not-a-token")
    assert code == 1 and "malformed" in out


def test_parse_duration() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("15m") == 900
    assert parse_duration("1h30m") == 5400
    assert parse_duration("7d") == 604800
    assert parse_duration("1w") == 604800
    for bad in ["", "0", "-5", "1y", "h", "1h 2"]:
        with pytest.raises(UsageError):
            parse_duration(bad)


def test_inspect_with_jwks_and_token_file(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import jwt as pyjwt

    token = _make(keys, capsys)
    public = private_keys()["ES256"].public_key()
    jwk = json.loads(pyjwt.get_algorithm_by_name("ES256").to_jwk(public))
    jwk["kid"] = "k1"
    (keys / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    (keys / "token.jwt").write_text(token + "\n")
    code, out, _ = run(
        capsys, "inspect", "@" + str(keys / "token.jwt"), "--jwks", str(keys / "jwks.json")
    )
    assert code == 0 and "verified (ES256, kid 'k1')" in out
    code, _, err = run(capsys, "inspect", token, "--jwks", str(keys / "missing.json"))
    assert code == 2 and "cannot read JWKS file" in err


def test_help_lists_the_token_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["token", "--help"])
    out = capsys.readouterr().out
    assert "create" in out and "inspect" in out

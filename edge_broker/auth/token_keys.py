"""Keys for token authentication, each bound to one algorithm (AUTHZ.md §1, method ``token``).

The allow-list is EdDSA (Ed25519), ES256 (P-256), RS256 (RSA ≥ 2048 bits) and HS256 (a secret
of at least 32 bytes); ``none`` and every other algorithm are refused. Binding each key to its
algorithm when it is loaded is what makes algorithm confusion impossible: a token is verified
only with keys whose algorithm equals the token's ``alg``, so an HS256 token "signed" with an
RSA or Ed25519 public key finds no HS256 key to verify against; and an HS256 secret that looks
like a PEM or SSH public key is refused at load time.

Keys come from PEM files (public or private; a private key can also sign, for
``edge-broker token create``), HS256 secrets, or a JWKS file. Every loading problem raises
:class:`TokenKeyError` naming the file and what to change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt import PyJWK
from jwt.exceptions import PyJWKError, PyJWTError

from .errors import AuthError

ALGORITHMS: Final = ("EdDSA", "ES256", "RS256", "HS256")
MIN_HS256_SECRET_BYTES: Final = 32  # RFC 7518 §3.2: at least the hash output size
MIN_RSA_BITS: Final = 2048

_PUBLIC_KEY_MARKERS: Final = (
    b"-----BEGIN",
    b"ssh-rsa",
    b"ssh-ed25519",
    b"ecdsa-sha2-",
)


class TokenKeyError(AuthError, ValueError):
    """A token key could not be loaded; the message names the source and what to change."""


@dataclass(frozen=True, slots=True)
class TokenKey:
    """A verification key bound to exactly one ``algorithm`` of :data:`ALGORITHMS`.

    ``verify_key`` is a cryptography public key (or the secret bytes for HS256);
    ``signing_key`` is the private key (or the secret) when the source held one.
    """

    algorithm: str
    verify_key: Any
    kid: str | None = None
    signing_key: Any = None
    source: str = ""

    @property
    def can_sign(self) -> bool:
        return self.signing_key is not None

    @staticmethod
    def hs256(secret: bytes | str, kid: str | None = None, source: str = "secret") -> TokenKey:
        """An HS256 secret; refused when short or when it looks like a public key."""
        data = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
        if any(data.lstrip().startswith(m) for m in _PUBLIC_KEY_MARKERS):
            raise TokenKeyError(
                f"{source}: an HS256 secret must not be a PEM or SSH key (that would allow "
                "algorithm confusion); use a random secret, or load the key as a PEM key"
            )
        if len(data) < MIN_HS256_SECRET_BYTES:
            raise TokenKeyError(
                f"{source}: HS256 secret is {len(data)} bytes; use at least "
                f"{MIN_HS256_SECRET_BYTES} random bytes"
            )
        return TokenKey("HS256", data, kid, data, source)

    @staticmethod
    def from_pem(
        data: bytes, kid: str | None = None, algorithm: str | None = None, source: str = "PEM"
    ) -> TokenKey:
        """A PEM public or private key; the algorithm follows from the key type."""
        private: Any = None
        try:
            if b"PRIVATE KEY" in data:
                private = serialization.load_pem_private_key(data, password=None)
                public: Any = private.public_key()
            else:
                public = serialization.load_pem_public_key(data)
        except (ValueError, TypeError) as exc:
            raise TokenKeyError(
                f"{source}: not a usable PEM key ({exc}); give an unencrypted PEM public or "
                "private key (Ed25519, EC P-256 or RSA)"
            ) from None
        inferred = _algorithm_of(public, source)
        if algorithm is not None and algorithm != inferred:
            raise TokenKeyError(
                f"{source}: the key is a {inferred} key but algorithm {algorithm!r} was "
                f"requested; use alg {inferred!r} with this key"
            )
        return TokenKey(inferred, public, kid, private, source)

    @staticmethod
    def load(path: str | Path, kid: str | None = None, algorithm: str | None = None) -> TokenKey:
        """A key file: PEM, or (``algorithm="HS256"``) a file holding the secret."""
        source = str(path)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise TokenKeyError(f"{source}: cannot read key file ({exc.strerror})") from None
        if algorithm is not None and algorithm not in ALGORITHMS:
            raise TokenKeyError(
                f"{source}: algorithm {algorithm!r} is not allowed; use one of "
                f"{', '.join(ALGORITHMS)}"
            )
        if algorithm == "HS256":
            return TokenKey.hs256(data.rstrip(b"\r\n"), kid, source)
        if b"-----BEGIN" not in data:
            raise TokenKeyError(f"{source}: not a PEM key; for an HS256 secret say so (alg HS256)")
        return TokenKey.from_pem(data, kid, algorithm, source)


def _algorithm_of(public: Any, source: str) -> str:
    if isinstance(public, ed25519.Ed25519PublicKey):
        return "EdDSA"
    if isinstance(public, ec.EllipticCurvePublicKey):
        if not isinstance(public.curve, ec.SECP256R1):
            raise TokenKeyError(
                f"{source}: EC curve {public.curve.name} is not allowed; ES256 needs P-256"
            )
        return "ES256"
    if isinstance(public, rsa.RSAPublicKey):
        if public.key_size < MIN_RSA_BITS:
            raise TokenKeyError(
                f"{source}: RSA key of {public.key_size} bits; use at least {MIN_RSA_BITS}"
            )
        return "RS256"
    raise TokenKeyError(
        f"{source}: {type(public).__name__} keys are not allowed; use Ed25519, EC P-256 or RSA"
    )


def load_jwks(path: str | Path) -> tuple[TokenKey, ...]:
    """Every key of a JWKS file (``{"keys": [...]}``); an unusable key is an error, not skipped."""
    source = str(path)
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise TokenKeyError(f"{source}: cannot read JWKS file ({exc.strerror})") from None
    except ValueError as exc:
        raise TokenKeyError(f"{source}: not valid JSON ({exc})") from None
    return parse_jwks(document, source)


def parse_jwks(document: Any, source: str = "JWKS") -> tuple[TokenKey, ...]:
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise TokenKeyError(f'{source}: a JWKS must be an object {{"keys": [...]}}')
    keys: list[TokenKey] = []
    for i, jwk in enumerate(document["keys"]):
        where = f"{source}: keys[{i}]"
        if not isinstance(jwk, dict):
            raise TokenKeyError(f"{where}: must be a JWK object")
        kid = jwk.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenKeyError(f"{where}: 'kid' must be a string")
        if jwk.get("use", "sig") != "sig":
            raise TokenKeyError(
                f"{where}: 'use' is {jwk.get('use')!r}; token keys must be signature keys "
                '("use": "sig")'
            )
        try:
            parsed = PyJWK(jwk)
        except (PyJWKError, PyJWTError, ValueError, TypeError) as exc:
            raise TokenKeyError(f"{where}: unusable JWK ({exc})") from None
        alg = parsed.algorithm_name
        if alg not in ALGORITHMS:
            raise TokenKeyError(
                f"{where}: algorithm {alg!r} is not allowed; use one of {', '.join(ALGORITHMS)}"
            )
        label = f"{where} (kid {kid!r})" if kid else where
        if alg == "HS256":
            keys.append(TokenKey.hs256(parsed.key, kid, label))
            continue
        public = parsed.key.public_key() if hasattr(parsed.key, "private_bytes") else parsed.key
        if _algorithm_of(public, label) != alg:
            raise TokenKeyError(f"{where}: 'alg' {alg!r} does not fit the key type")
        keys.append(TokenKey(alg, public, kid, None, label))
    if not keys:
        raise TokenKeyError(f"{source}: the JWKS holds no keys")
    return tuple(keys)


def load_key(
    file: str | None, secret: str | None, kid: str | None, alg: str | None
) -> TokenKey | str:
    """A ``[[tokens.keys]]`` entry's key, or a message saying what is wrong with it (for
    ``ConfigError``). Takes the entry's fields, not ``settings.TokenKeyConfig``, because
    ``settings.parse_tokens`` calls it: key files are checked when the config is read."""
    try:
        if secret is not None:
            if alg not in (None, "HS256"):
                return f"an inline secret is an HS256 key; alg {alg!r} needs a PEM file"
            return TokenKey.hs256(secret, kid, "[tokens] secret")
        assert file is not None
        return TokenKey.load(Path(file), kid, alg)
    except TokenKeyError as exc:
        return str(exc)


def load_jwks_file(path: str) -> tuple[TokenKey, ...] | str:
    try:
        return load_jwks(Path(path))
    except TokenKeyError as exc:
        return str(exc)

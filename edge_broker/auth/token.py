"""Token authentication: verifying a JWT that carries ``tenant_grants`` (AUTHZ.md §1, seed 000).

Pure and synchronous: ``TokenVerifier(keys).verify(jwt_text, client_id=..., tenant=..., now=...)``
returns a :class:`VerifiedToken` or raises :class:`TokenError`, whose ``reason_code`` is what the
CONNACK carries (0x86 Bad User Name or Password for malformed, unsigned, badly signed, expired,
not-yet-valid, wrong-audience or wrongly bound tokens and invalid grants; 0x87 Not Authorized
when the grants do not name the connection's tenant) and whose message is the Reason String.

Order of checks: structure and header (``alg`` on the allow-list, never ``none``), key selection
by ``kid`` and algorithm (each key is bound to one algorithm: no algorithm confusion), signature
(PyJWT), then the claims with our own clock ``now`` and ``leeway``: ``exp`` (required unless
configured otherwise), ``nbf``, ``aud``, ``iss``, ``client_id`` binding, and last every rule of
``tenant_grants``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final

import jwt
from jwt.exceptions import InvalidSignatureError, PyJWTError
from jwt.types import Options

from ..authz.grants import CompiledTenantGrants, GrantError, Grants
from ..matching.errors import RuleError
from ..matching.names import DEFAULT_SEPARATOR, DEFAULT_TENANT, check_separator
from ..mqtt.reason_codes import ReasonCode
from .errors import AuthError
from .token_keys import ALGORITHMS, TokenKey

DEFAULT_LEEWAY: Final = 30.0
GRANTS_CLAIM: Final = "tenant_grants"
CLIENT_ID_CLAIM: Final = "client_id"
GRANTS_CACHE_SIZE: Final = 256  # distinct grant sets kept compiled per verifier
MAX_TOKEN_BYTES: Final = 65535  # an MQTT password or Authentication Data cannot be longer
MAX_NUMERIC_DATE: Final = 253402300799  # 9999-12-31T23:59:59Z: the last time datetime can show

# Time, audience and issuer are checked by us, with the caller's clock and clearer messages.
_NO_TIME_CHECKS: Final[Options] = {
    "verify_signature": True,
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
    "require": [],
}


class TokenError(AuthError):
    """A refused token: ``reason_code`` for the CONNACK, ``reason`` for its Reason String."""

    def __init__(self, reason_code: ReasonCode, reason: str) -> None:
        super().__init__(reason)
        self.reason_code = reason_code
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def _bad(reason: str) -> TokenError:
    return TokenError(ReasonCode.BAD_USER_NAME_OR_PASSWORD, reason)


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    """A token whose signature, validity window, bindings and grants have all been checked."""

    subject: str | None
    client_id: str | None  # the bound client id, when the token names one
    expires_at: float | None
    not_before: float | None
    issued_at: float | None
    audience: tuple[str, ...]
    issuer: str | None
    algorithm: str
    kid: str | None
    grants: Grants
    claims: Mapping[str, Any] = field(repr=False)

    def for_tenant(self, tenant: str | None) -> CompiledTenantGrants:
        """The compiled grants for ``tenant``; :class:`TokenError` 0x87 when none names it."""
        try:
            compiled = self.grants.for_tenant(tenant)
        except RuleError as exc:
            raise TokenError(ReasonCode.NOT_AUTHORIZED, f"invalid tenant: {exc}") from None
        if compiled is None:
            named = ", ".join(sorted(self.grants.tenants))
            raise TokenError(
                ReasonCode.NOT_AUTHORIZED,
                f"token grants no access to tenant {tenant or DEFAULT_TENANT!r} "
                f"(it names: {named})",
            )
        return compiled

    def seconds_left(self, now: float | None = None) -> float | None:
        """Seconds until ``exp`` (negative once expired), or ``None`` for a token without one."""
        if self.expires_at is None:
            return None
        return self.expires_at - (time.time() if now is None else now)


class TokenVerifier:
    """Verifies tokens against configured keys; its configuration is fixed at construction."""

    __slots__ = ("keys", "audience", "issuer", "leeway", "separator", "require_exp", "_compiled")

    def __init__(
        self,
        keys: Iterable[TokenKey],
        *,
        audience: str | None = None,
        issuer: str | None = None,
        leeway: float = DEFAULT_LEEWAY,
        separator: str = DEFAULT_SEPARATOR,
        require_exp: bool = True,
    ) -> None:
        self.keys: tuple[TokenKey, ...] = tuple(keys)
        if not self.keys:
            raise ValueError("token authentication needs at least one key")
        for key in self.keys:
            if key.algorithm not in ALGORITHMS:
                raise ValueError(f"key {key.source!r}: algorithm {key.algorithm!r} not allowed")
        if leeway < 0:
            raise ValueError(f"leeway must be >= 0 seconds, not {leeway}")
        self.audience = audience
        self.issuer = issuer
        self.leeway = float(leeway)
        self.separator = check_separator(separator)
        self.require_exp = require_exp
        # Compiled grants by their canonical JSON: Grants are immutable, so clients presenting
        # the same grants (a reconnect, a fleet of devices) share one compilation. Bounded.
        self._compiled: dict[str, Grants] = {}

    def verify(
        self,
        token: str | bytes,
        *,
        client_id: str | None = None,
        tenant: str | None = None,
        now: float | None = None,
    ) -> VerifiedToken:
        """Verify ``token`` for a client; with ``tenant`` also check the grants name it (0x87)."""
        now = time.time() if now is None else now
        text = _token_text(token)
        header = _header(text)
        alg = header["alg"]
        kid = header.get("kid")
        payload = self._verified_payload(text, alg, kid)
        verified = self._check_claims(payload, alg, kid, client_id, now)
        if tenant is not None:
            verified.for_tenant(tenant)
        return verified

    def _candidates(self, alg: str, kid: str | None) -> list[TokenKey]:
        if kid is not None:
            # A key configured without a kid stands for any kid: it must still verify.
            named = [k for k in self.keys if k.kid == kid] or [
                k for k in self.keys if k.kid is None
            ]
            if not named:
                raise _bad(f"token signed with unknown key id {kid!r}")
            bound = [k for k in named if k.algorithm == alg]
            if not bound:
                raise _bad(
                    f"token key id {kid!r} is a {named[0].algorithm} key but the token says "
                    f"alg {alg!r}; refused (algorithm confusion)"
                )
            return bound
        bound = [k for k in self.keys if k.algorithm == alg]
        if not bound:
            have = ", ".join(sorted({k.algorithm for k in self.keys}))
            raise _bad(f"no {alg} key is configured for tokens (configured: {have})")
        return bound

    def _verified_payload(self, text: str, alg: str, kid: str | None) -> dict[str, Any]:
        for key in self._candidates(alg, kid):
            try:
                decoded = jwt.decode_complete(
                    text, key.verify_key, algorithms=[key.algorithm], options=_NO_TIME_CHECKS
                )
            except InvalidSignatureError:
                continue
            except PyJWTError as exc:
                raise _bad(f"token is malformed: {exc}") from None
            payload = decoded["payload"]
            if not isinstance(payload, dict):
                raise _bad("token payload is not a JSON object")
            return payload
        which = f"key id {kid!r}" if kid is not None else f"any configured {alg} key"
        raise _bad(f"token signature does not verify with {which}")

    def _grants(self, value: Any) -> Grants:
        """Every grant and rule validated (refusal names the rule), or the cached compilation."""
        key = _canonical(value)
        cached = self._compiled.get(key) if key is not None else None
        if cached is not None:
            return cached
        try:
            grants = Grants.parse(value, self.separator)
        except GrantError as exc:
            raise _bad(f"invalid token grants: {exc}") from None
        if key is not None:
            if len(self._compiled) >= GRANTS_CACHE_SIZE:
                self._compiled.pop(next(iter(self._compiled), ""), None)  # the oldest
            self._compiled[key] = grants
        return grants

    def _check_claims(
        self,
        payload: dict[str, Any],
        alg: str,
        kid: str | None,
        client_id: str | None,
        now: float,
    ) -> VerifiedToken:
        exp = _number(payload, "exp")
        nbf = _number(payload, "nbf")
        iat = _number(payload, "iat")
        if exp is None and self.require_exp:
            raise _bad("token has no 'exp' claim; issue tokens with an expiry")
        if exp is not None and now > exp + self.leeway:
            raise _bad(f"token expired at {_iso(exp)} (now {_iso(now)}, leeway {self.leeway:g} s)")
        if nbf is not None and now + self.leeway < nbf:
            raise _bad(
                f"token not valid before {_iso(nbf)} (now {_iso(now)}, leeway {self.leeway:g} s)"
            )
        audience = _audience(payload)
        if self.audience is not None and self.audience not in audience:
            got = ", ".join(audience) if audience else "none"
            raise _bad(f"token audience ({got}) does not include {self.audience!r}")
        if self.audience is None and audience:
            raise _bad(
                f"token is restricted to audience {', '.join(audience)} but this broker has no "
                "audience configured; configure it or issue the token without 'aud'"
            )
        issuer = _optional_str(payload, "iss")
        if self.issuer is not None and issuer != self.issuer:
            raise _bad(f"token issuer {issuer!r} is not the configured issuer {self.issuer!r}")
        subject = _optional_str(payload, "sub")
        bound = _optional_str(payload, CLIENT_ID_CLAIM)
        if bound is not None and client_id is not None and bound != client_id:
            raise _bad(f"token is bound to client id {bound!r}, not {client_id!r}")
        if GRANTS_CLAIM not in payload:
            raise _bad(f"token has no '{GRANTS_CLAIM}' claim (the tenants and channels it grants)")
        grants = self._grants(payload[GRANTS_CLAIM])
        return VerifiedToken(
            subject,
            bound,
            exp,
            nbf,
            iat,
            audience,
            issuer,
            alg,
            kid,
            grants,
            MappingProxyType(payload),
        )


def _canonical(value: Any) -> str | None:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def _token_text(token: str | bytes) -> str:
    if isinstance(token, bytes):
        try:
            token = token.decode("ascii")
        except UnicodeDecodeError:
            raise _bad("token is malformed: not ASCII") from None
    token = token.strip()
    if len(token) > MAX_TOKEN_BYTES:
        raise _bad(f"token is malformed: longer than {MAX_TOKEN_BYTES} bytes")
    if token.count(".") != 2 or not token.split(".")[0]:
        raise _bad("token is malformed: a JWT has three non-empty base64url parts")
    return token


def _header(text: str) -> dict[str, Any]:
    """The header, read before anything else so that ``alg`` is judged first."""
    part = text.split(".")[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error):
        raise _bad("token is malformed: the header is not base64url-encoded JSON") from None
    if not isinstance(header, dict):
        raise _bad("token is malformed: the header is not a JSON object")
    alg = header.get("alg")
    if not isinstance(alg, str) or not alg:
        raise _bad("token header has no 'alg'")
    if alg.lower() == "none":
        raise _bad("unsigned token (alg 'none') refused")
    if alg not in ALGORITHMS:
        raise _bad(f"token algorithm {alg!r} is not allowed; allowed: {', '.join(ALGORITHMS)}")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise _bad("token header 'kid' must be a string")
    if "crit" in header or "b64" in header:
        # RFC 7515 §4.1.11: extensions we do not implement must be refused; b64=false
        # (RFC 7797) would change what is signed.
        raise _bad("token header uses 'crit'/'b64' extensions, which are not supported")
    if not all(text.split(".")):
        raise _bad("token is malformed: a JWT has three non-empty base64url parts")
    return header


def unverified_parts(token: str | bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and claims WITHOUT verifying anything but the structure (for ``token inspect``)."""
    text = _token_text(token)
    header = _header(text)
    part = text.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (ValueError, binascii.Error):
        raise _bad("token is malformed: the claims are not base64url-encoded JSON") from None
    if not isinstance(claims, dict):
        raise _bad("token payload is not a JSON object")
    return header, claims


def _number(payload: Mapping[str, Any], name: str) -> float | None:
    """A NumericDate (RFC 7519 §2): finite and between 1970 and the end of year 9999. NaN
    compares false with everything (an ``exp`` of NaN would never expire) and JSON parsers
    accept ``NaN``/``Infinity``/``1e308``, so each is refused by name."""
    value = payload.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(f"token claim {name!r} must be a number (seconds since the epoch)")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = math.inf
    if not math.isfinite(number):
        raise _bad(
            f"token claim {name!r} is {value!r}: it must be a finite number of seconds "
            "since the epoch"
        )
    if not 0 <= number <= MAX_NUMERIC_DATE:
        raise _bad(
            f"token claim {name!r} is {value!r}: it must be between 0 and "
            f"{MAX_NUMERIC_DATE} (1970 to the end of year 9999)"
        )
    return number


def _optional_str(payload: Mapping[str, Any], name: str) -> str | None:
    value = payload.get(name)
    if value is not None and not isinstance(value, str):
        raise _bad(f"token claim {name!r} must be a string")
    return value


def _audience(payload: Mapping[str, Any]) -> tuple[str, ...]:
    value = payload.get("aud")
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _bad("token claim 'aud' must be a string or a list of strings")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def create_token(
    key: TokenKey,
    grants: Any,
    *,
    ttl: float | None,
    subject: str | None = None,
    client_id: str | None = None,
    audience: str | Sequence[str] | None = None,
    issuer: str | None = None,
    now: float | None = None,
    separator: str = DEFAULT_SEPARATOR,
) -> str:
    """Sign a token carrying ``grants`` (seed 000 JSON shape), validated exactly as at presentation.

    :class:`GrantError` when a grant or rule is invalid; :class:`ValueError` when ``key``
    cannot sign.
    """
    if not key.can_sign:
        raise ValueError(f"{key.source}: a public key cannot sign; give the private key")
    parsed = Grants.parse(grants, separator)
    issued = int(time.time() if now is None else now)
    claims: dict[str, Any] = {"iat": issued, GRANTS_CLAIM: parsed.to_json()}
    if ttl is not None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, not {ttl}")
        claims["exp"] = issued + int(ttl)
    if subject is not None:
        claims["sub"] = subject
    if client_id is not None:
        claims[CLIENT_ID_CLAIM] = client_id
    if audience is not None:
        claims["aud"] = audience if isinstance(audience, str) else list(audience)
    if issuer is not None:
        claims["iss"] = issuer
    headers = {"kid": key.kid} if key.kid is not None else None
    return jwt.encode(claims, key.signing_key, algorithm=key.algorithm, headers=headers)

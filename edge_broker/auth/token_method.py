"""The ``token`` authentication method (AUTHZ.md §1, seed 000): a JWT carrying ``tenant_grants``.

The token arrives either as the CONNECT password (the method applies when the password looks
like a JWT: three non-empty base64url parts), or as MQTT 5 enhanced authentication with
Authentication Method ``TOKEN`` and the JWT as Authentication Data. Only the latter allows
re-authentication (MQTT 5 §4.12.1): AUTH 0x19 with method ``TOKEN`` and a fresh JWT replaces the
connection's grants and expiry without reconnecting; the tenant stays the one chosen at CONNECT.

Tenant (AUTHZ.md §1): the CONNECT user property ``tenant`` when present (validated by the chain,
empty → ``~``); otherwise the tenant the token's grants name when they name exactly one;
otherwise ``~``. A token whose grants do not name the tenant is refused with 0x87.

Refusals at CONNECT: 0x86 Bad User Name or Password (3.x: 0x04) for a malformed, unsigned,
badly signed, expired, not-yet-valid, wrong-audience or wrongly bound token and for invalid
grants (the Reason String names the rule and the problem); 0x87 (3.x: 0x05) when the grants do
not name the tenant. A re-authentication that fails ends the connection with DISCONNECT 0x87
(0x86 is not a DISCONNECT reason code, MQTT 5 §3.14.2.1).

The verified grants for the tenant (:class:`~edge_broker.authz.grants.CompiledTenantGrants`)
become ``Identity.grants``, which the token gate (``authz/token_gate.py``) decides on, and
``exp + leeway`` becomes ``Identity.token_expires_at`` (the broker ends the session then,
``broker/token_expiry.py``).

User name: the identity carries only what the token proves. ``Identity.username`` is the
token's ``sub`` claim when the issuer put one there (authorizers, permissions' ``${username}``
and site-ACL ``usernames`` subjects then see it) and ``None`` otherwise; the User Name the
client sent in CONNECT is ignored, as the anonymous method ignores it, because nothing verified
it (docs/identity-and-tenants.md).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from ..identity import DEFAULT_TENANT
from ..matching.errors import RuleError
from ..matching.names import normalize_tenant
from ..mqtt.reason_codes import ReasonCode
from .method_api import TENANT_PROPERTY, Accepted, AuthOutcome, AuthRequest, Refused
from .token import TokenError, TokenVerifier, VerifiedToken
from .token_keys import TokenKey, TokenKeyError, load_jwks_file, load_key

if TYPE_CHECKING:
    from .settings import AuthSections, ListenerAuth, TokensConfig

TOKEN_METHOD: Final = "TOKEN"  # the MQTT 5 Authentication Method (enhanced authentication)
# A rule can be ~4 KB (32 segments of 128 bytes); a Reason String quoting it is cut here so that
# the CONNACK stays small for clients with a small Maximum Packet Size.
MAX_REASON_CHARS: Final = 512
_B64URL_PART: Final = r"[A-Za-z0-9_-]+={0,2}"
_JWT_RE: Final = re.compile(rf"{_B64URL_PART}\.{_B64URL_PART}\.{_B64URL_PART}")


def looks_like_jwt(password: bytes | None) -> bool:
    """Three non-empty base64url parts separated by dots (AUTHZ.md §1 "applies when")."""
    if not password or len(password) > 65535:
        return False
    try:
        text = password.decode("ascii")
    except UnicodeDecodeError:
        return False
    return _JWT_RE.fullmatch(text.strip()) is not None


def build_verifier(tokens: TokensConfig, separator: str) -> TokenVerifier:
    """A verifier for ``[tokens]`` (already validated by the config parser)."""
    keys: list[TokenKey] = []
    for entry in tokens.keys:
        key = load_key(entry.file, entry.secret, entry.kid, entry.alg)
        if isinstance(key, str):
            raise TokenKeyError(key)
        keys.append(key)
    if tokens.jwks is not None:
        jwks = load_jwks_file(tokens.jwks)
        if isinstance(jwks, str):
            raise TokenKeyError(jwks)
        keys.extend(jwks)
    return TokenVerifier(
        keys,
        audience=tokens.audience,
        issuer=tokens.issuer,
        leeway=tokens.leeway,
        separator=separator,
        require_exp=tokens.require_exp,
    )


def _short(reason: str) -> str:
    """``reason`` cut in the middle when long: the start names the grant and rule, the end says
    what is wrong with it."""
    if len(reason) <= MAX_REASON_CHARS:
        return reason
    head = MAX_REASON_CHARS // 3
    return reason[:head] + " … " + reason[-(MAX_REASON_CHARS - head - 3) :]


def _named_tenant(request: AuthRequest) -> bool:
    return any(k == TENANT_PROPERTY for k, _ in request.connect.properties.user_properties)


class TokenAuthenticator:
    """The chain's ``token`` method; one instance (and one verifier cache) per listener."""

    __slots__ = ("verifier", "require_client_id_binding")

    def __init__(self, verifier: TokenVerifier, require_client_id_binding: bool = False) -> None:
        self.verifier = verifier
        self.require_client_id_binding = require_client_id_binding

    @property
    def method(self) -> str:
        return "token"

    @property
    def enhanced_method(self) -> str | None:
        return TOKEN_METHOD

    def applies(self, request: AuthRequest) -> bool:
        wanted = request.connect.properties.authentication_method
        if wanted is not None:
            return wanted == TOKEN_METHOD
        return looks_like_jwt(request.connect.password)

    async def authenticate(self, request: AuthRequest) -> AuthOutcome:
        if request.reauthenticating:
            return self._reauthenticate(request)
        connect = request.connect
        if connect.properties.authentication_method == TOKEN_METHOD:
            raw = connect.properties.authentication_data
            if not raw:
                return Refused(
                    ReasonCode.BAD_USER_NAME_OR_PASSWORD,
                    f"Authentication Method {TOKEN_METHOD!r} needs the JWT as Authentication Data",
                )
        else:
            raw = connect.password
            assert raw is not None  # applies() checked it
        try:
            verified = self.verifier.verify(raw, client_id=connect.client_id)
            tenant = self._tenant(request, verified)
            grants = verified.for_tenant(tenant)
            self._check_binding(verified)
        except TokenError as exc:
            return Refused(exc.reason_code, _short(exc.reason))
        return Accepted(
            request.identity_for(
                "token",
                tenant=tenant,
                # never the CONNECT User Name: nothing verified it (issue 15 item 6)
                username=verified.subject,
                grants=grants,
                token_expires_at=self._deadline(verified),
                tenant_verified=True,  # for_tenant refused the token unless its grants name it
                client_id_verified=verified.client_id is not None,  # verify() checked the binding
                token_subject=verified.subject,
            )
        )

    def _reauthenticate(self, request: AuthRequest) -> AuthOutcome:
        """AUTH 0x19 with a fresh JWT: same client and tenant, new grants and expiry."""
        current = request.identity
        auth = request.auth
        assert current is not None and auth is not None
        if auth.properties.authentication_method != TOKEN_METHOD:
            return Refused(
                ReasonCode.BAD_AUTHENTICATION_METHOD,
                f"re-authentication must use method {TOKEN_METHOD!r}",
            )
        raw = auth.properties.authentication_data
        if not raw:
            return Refused(
                ReasonCode.NOT_AUTHORIZED,
                "re-authentication needs a fresh JWT as Authentication Data",
            )
        try:
            verified = self.verifier.verify(raw, client_id=current.client_id)
            grants = verified.for_tenant(current.tenant)
            self._check_binding(verified)
        except TokenError as exc:
            # 0x86 is a CONNACK code only; a failed re-authentication is 0x87 (MQTT 5 §4.12.1)
            return Refused(
                ReasonCode.NOT_AUTHORIZED, _short(f"re-authentication refused: {exc.reason}")
            )
        if verified.subject != current.token_subject:
            # the user name and the session's owner are the verified 'sub' (broker/ownership.py):
            # a token for someone else is a new principal, which takes a new connection, not a
            # swap on this one (issue 15 items 1 and 6)
            return Refused(
                ReasonCode.NOT_AUTHORIZED,
                _short(
                    f"re-authentication refused: the token's subject {verified.subject!r} is not "
                    f"this connection's {current.token_subject!r}; reconnect to change identity"
                ),
            )
        # the same client on the same connection: only what the new token decides changes
        return Accepted(
            replace(
                current,
                grants=grants,
                token_expires_at=self._deadline(verified),
                client_id_verified=verified.client_id is not None,
            )
        )

    def _tenant(self, request: AuthRequest, verified: VerifiedToken) -> str:
        if _named_tenant(request):
            return request.tenant  # validated and normalised by the chain
        named = verified.grants.tenants
        if len(named) == 1:
            (only,) = named
            try:
                return normalize_tenant(only)
            except RuleError as exc:  # Grants.parse validated it; kept for a clear message
                raise TokenError(ReasonCode.NOT_AUTHORIZED, f"invalid tenant: {exc}") from None
        return DEFAULT_TENANT

    def _check_binding(self, verified: VerifiedToken) -> None:
        if self.require_client_id_binding and verified.client_id is None:
            raise TokenError(
                ReasonCode.BAD_USER_NAME_OR_PASSWORD,
                "this broker needs tokens bound to the Client Identifier: issue "
                "the token with a 'client_id' claim",
            )

    def _deadline(self, verified: VerifiedToken) -> float | None:
        """Wall-clock time at which the session must end: ``exp`` plus the same leeway that
        admitted the token at CONNECT."""
        if verified.expires_at is None:
            return None
        return verified.expires_at + self.verifier.leeway


def build(listener: ListenerAuth, config: AuthSections) -> TokenAuthenticator:
    tokens = config.tokens
    return TokenAuthenticator(
        build_verifier(tokens, config.topics.separator), tokens.require_client_id_binding
    )

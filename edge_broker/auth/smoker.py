"""The ``smoker`` authentication method: MQTT 5 enhanced authentication with an Ed25519 key
(SMOKER.md "Enhanced authentication").

1. CONNECT with Authentication Method ``SMOKER`` and the base32 SMOKER ID as Client Identifier
   → :func:`issue_challenge`: AUTH 0x18 with a fresh 32-byte nonce for this connection only.
2. The client's AUTH 0x18 carries ``crypto_sign(nonce)`` (64-byte signature + nonce)
   → :func:`check_response`: the signature must verify with the key the Client Identifier
   names, and the attached message must be exactly the nonce.

Refusals: 0x85 Client Identifier not a SMOKER ID, 0x87 bad or missing signature, 0x8C a method
other than exactly ``SMOKER``. :func:`refuse_smoker_impostor` is rule 6: a client accepted by
another method may not use a SMOKER ID as its Client Identifier (0x85), or it could take over a
SMOKER client's session. Re-authentication (AUTH 0x19) issues a new nonce the same way.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..claims.errors import ClaimError
from ..claims.smoker_id import is_smoker_id, parse_smoker_id
from ..identity import Identity
from ..mqtt.packets import Auth
from ..mqtt.reason_codes import ReasonCode
from .method_api import Accepted, AuthOutcome, AuthRequest, Continue, Refused

if TYPE_CHECKING:
    from .settings import AuthSections, ListenerAuth

SMOKER_METHOD = "SMOKER"  # compared case-sensitively, as the TypeScript client does
NONCE_BYTES = 32
SIGNATURE_BYTES = 64
RESPONSE_BYTES = SIGNATURE_BYTES + NONCE_BYTES


@dataclass(frozen=True, slots=True)
class SmokerChallenge:
    """What one connection keeps between the AUTH it was sent and the AUTH it answers."""

    client_id: str
    nonce: bytes


def issue_challenge(client_id: str, nonce: bytes) -> SmokerChallenge | Refused:
    """Step 1: the challenge for ``client_id``, or 0x85 when it names no Ed25519 key."""
    if len(nonce) != NONCE_BYTES:
        raise ValueError(f"a SMOKER nonce has {NONCE_BYTES} bytes, got {len(nonce)}")
    try:
        parse_smoker_id(client_id)
    except ClaimError as exc:
        return Refused(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"SMOKER authentication needs the base32 Ed25519 public key as Client Identifier: "
            f"{exc.message}",
        )
    return SmokerChallenge(client_id, nonce)


def check_response(challenge: SmokerChallenge, auth: Auth) -> Refused | None:
    """Step 2: ``None`` when ``auth`` proves the key, else the refusal (0x8C or 0x87)."""
    method = auth.properties.authentication_method
    if method != SMOKER_METHOD:
        return Refused(
            ReasonCode.BAD_AUTHENTICATION_METHOD,
            f"the AUTH packet names method {method!r}; this exchange is {SMOKER_METHOD!r}",
        )
    if auth.reason_code != ReasonCode.CONTINUE_AUTHENTICATION:
        return Refused(
            ReasonCode.NOT_AUTHORIZED,
            f"expected AUTH 0x18 with the signed nonce, got reason code 0x{auth.reason_code:02X}",
        )
    data = auth.properties.authentication_data
    if data is None or len(data) != RESPONSE_BYTES:
        got = "none" if data is None else f"{len(data)} bytes"
        return Refused(
            ReasonCode.NOT_AUTHORIZED,
            f"Authentication Data must be the attached signature of the nonce "
            f"({SIGNATURE_BYTES}-byte signature + {NONCE_BYTES}-byte nonce); got {got}",
        )
    if data[SIGNATURE_BYTES:] != challenge.nonce:
        return Refused(
            ReasonCode.NOT_AUTHORIZED, "the signed message is not the nonce of this connection"
        )
    from nacl.exceptions import BadSignatureError  # PyNaCl only once a SMOKER client signs

    try:
        parse_smoker_id(challenge.client_id).verify(challenge.nonce, data[:SIGNATURE_BYTES])
    except BadSignatureError:
        return Refused(
            ReasonCode.NOT_AUTHORIZED,
            "the nonce signature does not verify with the key of the Client Identifier",
        )
    return None


def refuse_smoker_impostor(identity: Identity) -> Refused | None:
    """SMOKER.md rule 6: 0x85 for a non-SMOKER client whose Client Identifier is a SMOKER ID."""
    if identity.smoker_id is None and is_smoker_id(identity.client_id):
        return Refused(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            "this Client Identifier is a SMOKER ID: authenticate with method SMOKER to use it, "
            "or choose another Client Identifier",
        )
    return None


class SmokerAuthenticator:
    """The chain's view of the SMOKER exchange; one instance serves every connection."""

    __slots__ = ()

    @property
    def method(self) -> str:
        return "smoker"

    @property
    def enhanced_method(self) -> str | None:
        return SMOKER_METHOD

    def applies(self, request: AuthRequest) -> bool:
        return request.connect.properties.authentication_method == SMOKER_METHOD

    async def authenticate(self, request: AuthRequest) -> AuthOutcome:
        client_id = request.connect.client_id
        restart = (
            request.reauthenticating
            and request.auth is not None
            and (request.auth.reason_code == ReasonCode.RE_AUTHENTICATE)
        )  # AUTH 0x19 starts a new exchange, whatever the last one left behind
        if isinstance(request.state, SmokerChallenge) and not restart:
            if request.auth is None:
                return Refused(ReasonCode.NOT_AUTHORIZED, "the signed nonce never arrived")
            refused = check_response(request.state, request.auth)
            if refused is not None:
                return refused
            return Accepted(self._identity(request))
        start = request.auth if request.reauthenticating else None
        if start is not None and start.properties.authentication_method != SMOKER_METHOD:
            return Refused(
                ReasonCode.BAD_AUTHENTICATION_METHOD,
                f"re-authentication must use method {SMOKER_METHOD!r}",
            )
        first_data = (start.properties if start else request.connect.properties).authentication_data
        if first_data:
            return Refused(
                ReasonCode.NOT_AUTHORIZED,
                "send no Authentication Data before the broker's nonce "
                "(SMOKER: the CONNECT carries only the method)",
            )
        challenge = issue_challenge(client_id, secrets.token_bytes(NONCE_BYTES))
        if isinstance(challenge, Refused):
            return challenge
        return Continue(challenge.nonce, challenge)

    @staticmethod
    def _identity(request: AuthRequest) -> Identity:
        return request.identity_for(
            "smoker",
            smoker_id=request.connect.client_id,
            client_id_verified=True,  # the signature over the nonce proves the SMOKER id
        )


def build(listener: ListenerAuth, config: AuthSections) -> SmokerAuthenticator:
    return SmokerAuthenticator()

"""What an authentication method is asked and answers (AUTHZ.md §1): the
:class:`AuthRequest` (the CONNECT packet, what is known about the connection, and for enhanced
authentication the client's AUTH packet plus the state the method kept), and one of

- :class:`Accepted` — an :class:`~edge_broker.identity.Identity` (and, for enhanced
  authentication, the Authentication Data to put on the CONNACK or the final AUTH);
- :class:`Refused` — an MQTT 5 reason code and a Reason String (the broker maps the code to a
  3.x return code when needed);
- :class:`Continue` — MQTT 5 enhanced authentication (§4.12): the broker sends AUTH 0x18 with the
  method and ``authentication_data``, and calls the same authenticator again with the client's
  AUTH packet and ``state`` when it arrives. Re-authentication (AUTH 0x19, §4.12.1) is routed to
  the authenticator whose method accepted the connection, with ``reauthenticating=True``.

The methods (``anonymous.py``, ``password_method.py``, ``certificate.py``, ``smoker.py``,
``token_method.py``) import this module and nothing above it; ``chain.py``, which loads them as
plugins by name (``methods.py``), sits above them: no import cycle inside ``auth/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..identity import DEFAULT_TENANT, Identity
from ..matching.errors import RuleError
from ..matching.names import normalize_tenant
from ..mqtt.packets import Auth, Connect
from ..mqtt.reason_codes import ReasonCode

TENANT_PROPERTY = "tenant"  # AUTHZ.md §1: MQTT 5 CONNECT user property naming the tenant


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What the listener knows about a network connection before any packet is read."""

    listener: str
    transport: str  # "tcp", "tls" or "websocket"
    local_address: tuple[str, int] | None = None
    remote_address: tuple[str, int] | None = None
    interface: str | None = None  # local network interface name the connection arrived on
    cert_cn: str | None = None  # subject CN of a verified TLS client certificate

    @property
    def loopback(self) -> bool:
        host = self.remote_address[0] if self.remote_address else ""
        return host.startswith("127.") or host in ("::1", "::ffff:127.0.0.1")


@dataclass(frozen=True, slots=True)
class AuthRequest:
    connect: Connect
    info: ConnectionInfo
    tenant: str = DEFAULT_TENANT  # the tenant the client asked for (already validated)
    auth: Auth | None = None  # the client's AUTH packet (enhanced auth continuation / re-auth)
    state: object = None  # what this authenticator's previous Continue carried
    reauthenticating: bool = False
    identity: Identity | None = None  # the current identity while re-authenticating

    def identity_for(self, method: str, **verified: Any) -> Identity:
        """The :class:`Identity` of a client ``method`` accepts: what the connection says
        (Client Identifier, the tenant asked for, certificate CN, interface, addresses) is
        filled here, once for every method; ``verified`` holds what the method itself
        established (``tenant``, ``username``, ``roles``, ``grants``, ...), which wins."""
        info = self.info
        fields: dict[str, Any] = {
            "client_id": self.connect.client_id,
            "tenant": self.tenant,
            "cert_cn": info.cert_cn,
            "interface": info.interface,
            "local_address": info.local_address,
            "remote_address": info.remote_address,
        }
        fields.update(verified)
        return Identity(method=method, **fields)


@dataclass(frozen=True, slots=True)
class Accepted:
    identity: Identity
    authentication_data: bytes | None = None


@dataclass(frozen=True, slots=True)
class Refused:
    reason_code: ReasonCode
    reason: str
    limit: str | None = None  # the config key of the bound that refused (counted and logged)


@dataclass(frozen=True, slots=True)
class Continue:
    authentication_data: bytes | None
    state: object = None


AuthOutcome = Accepted | Refused | Continue


class Authenticator(Protocol):
    """One authentication method of AUTHZ.md §1."""

    @property
    def method(self) -> str:
        """The name used in ``auth_methods`` (``anonymous``, ``password``, ``token`` ...)."""
        ...

    @property
    def enhanced_method(self) -> str | None:
        """The MQTT 5 Authentication Method this authenticator handles (``SMOKER``), or None."""
        ...

    def applies(self, request: AuthRequest) -> bool:
        """Whether this method decides for this CONNECT (AUTHZ.md §1 table, "applies when")."""
        ...

    async def authenticate(self, request: AuthRequest) -> AuthOutcome: ...


def requested_tenant(connect: Connect) -> str | Refused:
    """The tenant named by the CONNECT user property ``tenant`` (AUTHZ.md §1), ``~`` if none."""
    values = [v for k, v in connect.properties.user_properties if k == TENANT_PROPERTY]
    if not values:
        return DEFAULT_TENANT
    if len(values) > 1:
        return Refused(ReasonCode.NOT_AUTHORIZED, "the CONNECT names more than one tenant")
    try:
        return normalize_tenant(values[0])  # seed 001 names; empty → "~" (PATTERNS.md D14)
    except RuleError as exc:
        return Refused(ReasonCode.NOT_AUTHORIZED, f"tenant {values[0]!r} is invalid: {exc.reason}")

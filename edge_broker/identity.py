"""Who is connected: the result of authentication (AUTHZ.md §1), and what the gates judge.

Depends only on `matching` (the tenant names of PATTERNS.md D14: an empty or absent tenant
becomes ``DEFAULT_TENANT``): `authz`, `claims` and `auth` all import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .matching.names import DEFAULT_TENANT

__all__ = ["DEFAULT_TENANT", "Identity"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Everything the policy systems may key a decision on.

    ``method`` is the authentication method that accepted the client (``anonymous``,
    ``password``, ``certificate``, ``token``, ``smoker``). ``interface`` is the name of the
    local network interface the connection arrived on (site ACL subjects), or ``None`` when it
    cannot be found. ``grants`` holds the compiled token grants (token method only) and
    ``smoker_id`` the base32 SMOKER client id proven by enhanced authentication.
    ``token_subject`` is the verified token's ``sub`` claim (token method only): it decides
    who owns a session (``broker/ownership.py``), never a grant.

    ``tenant_verified`` says the credentials themselves name ``tenant`` (a password entry's
    ``tenants``, a token's grants); otherwise the client chose it, which a listener allows only
    for ``~`` unless ``tenant_choice = "open"`` (auth/tenant_choice.py). ``client_id_verified``
    says the credentials bind the client id (a password entry's ``clientids``, a token's
    ``client_id`` claim, the SMOKER id): only then does ``${clientid}`` in a permission name
    something proven (docs/identity-and-tenants.md).
    """

    client_id: str
    method: str
    tenant: str = DEFAULT_TENANT
    username: str | None = None
    cert_cn: str | None = None
    interface: str | None = None
    local_address: tuple[str, int] | None = None
    remote_address: tuple[str, int] | None = None
    roles: tuple[str, ...] = ()
    grants: Any = None
    token_expires_at: float | None = None
    smoker_id: str | None = None
    subscription_patterns: bool = False  # the listener accepts seed 001 patterns (PATTERNS.md §2)
    token_subject: str | None = None
    tenant_verified: bool = False
    client_id_verified: bool = False

    @property
    def smoker_authenticated(self) -> bool:
        return self.smoker_id is not None

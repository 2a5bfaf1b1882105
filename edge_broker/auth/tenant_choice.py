"""Which tenant a client may enter (issue 15 item 7; AUTHZ.md §1 "tenant").

A client names its tenant in the MQTT 5 CONNECT user property ``tenant``. Only some methods
can prove a tenant: a password entry that lists ``tenants`` and a token whose grants name the
tenant (``Identity.tenant_verified``). Anonymous, certificate and SMOKER clients, and password
entries without ``tenants``, prove none. The listener's ``tenant_choice`` decides what such a
client may enter:

- ``credentials`` (default): only the default tenant ``~``; naming another is refused with
  CONNACK 0x87 (3.x: 0x05) and a Reason String naming this rule;
- ``open``: any tenant it names (the behaviour before issue 15, for deployments that want
  clients to pick their tenant freely).

Kept apart from ``handle_connect`` so that the rule is found by name and tested on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..identity import DEFAULT_TENANT, Identity
from ..mqtt.reason_codes import ReasonCode
from .method_api import Refused

if TYPE_CHECKING:
    from .settings import ListenerAuth

OPEN = "open"
CREDENTIALS = "credentials"


def tenant_refusal(identity: Identity, listener: ListenerAuth) -> Refused | None:
    """``None`` when ``identity`` may enter its tenant on ``listener``, else the refusal."""
    if identity.tenant == DEFAULT_TENANT or identity.tenant_verified:
        return None
    if listener.tenant_choice == OPEN:
        return None
    return Refused(
        ReasonCode.NOT_AUTHORIZED,
        f"tenant {identity.tenant!r} is not named by the credentials of method "
        f"{identity.method!r}, and listener {listener.name!r} has tenant_choice = "
        f"\"{CREDENTIALS}\": such clients may only use the default tenant '~' "
        f'(the operator may set tenant_choice = "{OPEN}")',
    )

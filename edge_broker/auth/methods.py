"""The authentication methods by name, as a listener's ``auth_methods`` lists them (AUTHZ.md §1).

Data only, so that ``config.py`` can check the names without importing the methods (which
import ``config`` for their factories' types): DESIGN.md, one direction of imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

AUTHENTICATOR_FACTORIES: Mapping[str, str] = MappingProxyType(
    {
        "anonymous": "edge_broker.auth.anonymous:build",
        "password": "edge_broker.auth.password_method:build",
        "certificate": "edge_broker.auth.certificate:build",
        "smoker": "edge_broker.auth.smoker:build",
        "token": "edge_broker.auth.token_method:build",
    }
)
"""Method name (as written in a listener's ``auth_methods``) → ``module:factory``."""

KEEPS_STATE: frozenset[str] = frozenset({"password"})
"""Methods whose factory takes a third argument: the broker's mapping of state kept across
reloads (the password method's hash slots, credential cache and failure back-off)."""

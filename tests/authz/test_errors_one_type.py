"""The authorization layer raises one exception type (CONVENTIONS.md "Errors"): AuthzError.

Loading bad permissions, authorizers or a bad site ACL can be caught as AuthzError, and the
message still names what is wrong.
"""

from __future__ import annotations

import pytest

from edge_broker.authz.acl_config import load_acl_config
from edge_broker.authz.authorizers import load_class
from edge_broker.authz.errors import AuthzError
from edge_broker.authz.permissions import parse_permission_list


def test_bad_permission_is_an_authz_error() -> None:
    with pytest.raises(AuthzError, match="activity"):
        parse_permission_list([{"id": "p1", "topic": "a/#", "activity": "FLY"}], "s", "deny")


def test_bad_authorizer_is_an_authz_error() -> None:
    with pytest.raises(AuthzError, match="no_such_module_xyz"):
        load_class("no_such_module_xyz:Authorizer", "edge-broker.toml: authorizers[0]")


def test_bad_site_acl_is_an_authz_error() -> None:
    with pytest.raises(AuthzError, match="problem"):
        load_acl_config({"enabled": True, "default_permission": "sometimes"})

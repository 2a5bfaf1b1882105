"""The authorization layer's one exception type (CONVENTIONS.md "Errors").

:class:`AuthzError` is what the layer raises when a policy cannot be used (permissions,
authorizers, the site ACL) or an identity cannot be bound to one; its message names the file,
key or rule and says what to change. The per-source subclasses (``PermissionConfigError``,
``AuthorizerConfigError``, ``AclError``, …) only add structured detail, such as the list of
problems found, for the configuration loader to map to ``ConfigError`` keys.
"""

from __future__ import annotations


class AuthzError(ValueError):
    """A policy or binding the authorization layer cannot use; the message says what to change."""

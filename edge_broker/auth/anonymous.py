"""The ``anonymous`` authentication method (AUTHZ.md §1): proves nothing.

It applies to every CONNECT without an MQTT 5 Authentication Method (a client asking for
enhanced authentication must get it, or 0x8C). The username the client sent is not kept: it was
not verified, and permissions keyed on usernames must not trust it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .method_api import Accepted, AuthOutcome, AuthRequest

if TYPE_CHECKING:
    from .settings import AuthSections, ListenerAuth


class AnonymousAuthenticator:
    __slots__ = ()

    @property
    def method(self) -> str:
        return "anonymous"

    @property
    def enhanced_method(self) -> str | None:
        return None

    def applies(self, request: AuthRequest) -> bool:
        return request.connect.properties.authentication_method is None

    async def authenticate(self, request: AuthRequest) -> AuthOutcome:
        return Accepted(request.identity_for("anonymous"))


def build(listener: ListenerAuth, config: AuthSections) -> AnonymousAuthenticator:
    return AnonymousAuthenticator()

"""The authentication chain (AUTHZ.md §1): a listener's methods, tried in order; the first that
applies decides.

Methods are registered by name in :data:`~edge_broker.auth.methods.AUTHENTICATOR_FACTORIES`
(``"module:function"``) and loaded here; a factory takes the listener's config and the assembled
config, each typed by a Protocol of :mod:`~edge_broker.auth.settings` naming what the methods
read, and returns an :class:`~edge_broker.auth.method_api.Authenticator`. What a method is asked
and answers (``AuthRequest``, ``Accepted``, ``Refused``, ``Continue``) is in
:mod:`~edge_broker.auth.method_api`, below the methods: this loader is above them.
"""

from __future__ import annotations

import importlib
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING

from ..mqtt.reason_codes import ReasonCode
from .method_api import Authenticator, AuthOutcome, AuthRequest, Refused
from .methods import AUTHENTICATOR_FACTORIES, KEEPS_STATE

if TYPE_CHECKING:
    from .settings import AuthSections, ListenerAuth


class AuthChain:
    """A listener's authenticators in order of ``auth_methods``."""

    __slots__ = ("authenticators",)

    def __init__(self, authenticators: Sequence[Authenticator]) -> None:
        self.authenticators = tuple(authenticators)

    @classmethod
    def from_config(
        cls,
        listener: ListenerAuth,
        config: AuthSections,
        kept: MutableMapping[str, object] | None = None,
    ) -> AuthChain:
        """``kept``: where methods in ``KEEPS_STATE`` keep what outlives a reload (the broker
        owns the mapping; the password method's slots, cache and back-off)."""
        built: list[Authenticator] = []
        for name in listener.auth_methods:
            target = AUTHENTICATOR_FACTORIES[name]
            module_name, _, func = target.partition(":")
            factory = getattr(importlib.import_module(module_name), func)
            if name in KEEPS_STATE:
                built.append(factory(listener, config, kept))
            else:
                built.append(factory(listener, config))
        return cls(built)

    def select(self, request: AuthRequest) -> Authenticator | None:
        """The first authenticator that applies, or None."""
        for authenticator in self.authenticators:
            if authenticator.applies(request):
                return authenticator
        return None

    async def authenticate(self, request: AuthRequest) -> tuple[Authenticator | None, AuthOutcome]:
        """Run the first applicable method; refuse (0x8C or 0x87) when none applies."""
        authenticator = self.select(request)
        if authenticator is None:
            wanted = request.connect.properties.authentication_method
            if wanted is not None:
                return None, Refused(
                    ReasonCode.BAD_AUTHENTICATION_METHOD,
                    f"authentication method {wanted!r} is not accepted on listener "
                    f"{request.info.listener!r}",
                )
            accepted = ", ".join(a.method for a in self.authenticators) or "none"
            return None, Refused(
                ReasonCode.NOT_AUTHORIZED,
                f"no authentication method of listener {request.info.listener!r} applies "
                f"(accepted: {accepted})",
            )
        return authenticator, await authenticator.authenticate(request)

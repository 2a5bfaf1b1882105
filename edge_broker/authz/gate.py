"""One gate of the authorization pipeline (AUTHZ.md §2), as the pipeline sees it.

The pipeline runs gates in the order of AUTHZ.md §2: syntax, reserved topics, authorizers,
identity policy (default permissions, or token grants for token clients), site ACL, claims. An
action is allowed only if every gate that applies allows it; the first gate that denies gives the
outcome and the rule id.

A gate answers ``None`` when it does not apply to the request (for example the claims gate for a
topic outside ``restricted/``, or the token gate for a client without a token); otherwise a
:class:`~edge_broker.authz.decision.Decision` naming itself and the deciding rule. Gates are
synchronous except the authorizers gate, which the pipeline awaits.

Every gate judges a published message as one :class:`~edge_broker.authz.request.Publication`,
built once per PUBLISH (topic resolved, no Topic Alias, ACL message kind computed): at ingress
in ``check_publish`` and, where a delivery can be denied, again in ``check_deliver``.

Delivery checks are on the hot path: the broker asks ``delivers_need_check`` once per
subscription (and again whenever it is judged again: reload, bundle, resume, restart) and
calls ``check_deliver`` only for the subscriptions where it answered True, per message.
"""

from __future__ import annotations

from typing import Protocol

from ..identity import Identity
from .decision import Decision, GateName
from .request import Publication, SubscribeFilter


class PolicyGate(Protocol):
    """The interface of gates 4–6 (identity policy, site ACL, claims)."""

    @property
    def gate(self) -> GateName: ...

    def check_publish(self, identity: Identity, message: Publication) -> Decision | None:
        """PUBLISH from ``identity``; ``message.topic`` is concrete (the alias resolved)."""
        ...

    def check_will(self, identity: Identity, will: Publication) -> Decision | None:
        """The will in CONNECT, checked as a publish at connect time."""
        ...

    def check_subscribe(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        share_group: str | None,
    ) -> Decision | None:
        """One filter of a SUBSCRIBE; ``topic_filter`` is without ``$share/<group>/``.

        A Decision with ``recheck=True`` allows the subscription but asks for a per-delivery
        check through :meth:`check_deliver` (a wildcard that reaches into an area decided per
        topic).
        """
        ...

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        """Whether deliveries through this subscription must be checked one by one."""
        ...

    def check_deliver(self, identity: Identity, message: Publication) -> Decision | None:
        """A message about to be sent to ``identity`` (retained and queued messages included)."""
        ...

"""One gate of the authorization pipeline (AUTHZ.md §2), as the pipeline sees it.

The pipeline runs gates in the order of AUTHZ.md §2: syntax, reserved topics, authorizers,
identity policy (default permissions, or token grants for token clients), site ACL, claims. An
action is allowed only if every gate that applies allows it; the first gate that denies gives the
outcome and the rule id.

A gate answers ``None`` when it does not apply to the request (for example the claims gate for a
topic outside ``restricted/``, or the token gate for a client without a token); otherwise a
:class:`~edge_broker.authz.decision.Decision` naming itself and the deciding rule. Gates are
synchronous except the authorizers gate, which the pipeline awaits.

Delivery checks are on the hot path: ``check_deliver`` runs per message for the subscriptions
a gate marked ``recheck`` (and for every delivery when any gate can deny on egress). The message
is duck-typed (``topic``, ``qos``, ``retain``, ``payload``, ``properties``) so that authz does
not import the broker.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..identity import Identity
from ..mqtt.packets import Publish, Subscription, Will
from .decision import Decision, GateName


class PolicyGate(Protocol):
    """The interface of gates 4–6 (identity policy, site ACL, claims)."""

    @property
    def gate(self) -> GateName: ...

    def check_publish(self, identity: Identity, topic: str, packet: Publish) -> Decision | None:
        """PUBLISH from ``identity`` to the concrete ``topic`` (after topic-alias resolution)."""
        ...

    def check_will(self, identity: Identity, will: Will) -> Decision | None:
        """The will in CONNECT, checked as a publish at connect time."""
        ...

    def check_subscribe(
        self,
        identity: Identity,
        subscription: Subscription,
        topic_filter: str,
        share_group: str | None,
    ) -> Decision | None:
        """One filter of a SUBSCRIBE; ``topic_filter`` is without ``$share/<group>/``.

        A Decision with ``recheck=True`` allows the subscription but asks for a per-delivery
        check through :meth:`check_deliver` (a wildcard that reaches into an area decided per
        topic).
        """
        ...

    def check_deliver(self, identity: Identity, message: Any) -> Decision | None:
        """A message about to be sent to ``identity`` (retained and queued messages included)."""
        ...

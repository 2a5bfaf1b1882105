"""Retained message limits (issue 16): ``[limits] max_retained_messages``,
``max_retained_bytes`` (both over every topic space), ``max_retained_per_client`` and
``max_retained_payload``.

:class:`RetainedBudget` is one object per broker; every :class:`MemoryRetainedStore` reports
what it gains and loses to it (so messages loaded from the log, wills and expiries count), and
``handle_publish`` asks :meth:`RetainedBudget.refusal` before storing. ``$`` topics (``$SYS``,
the broker's own, a fixed set per topic space) are neither counted nor refused.

Beyond a limit, MQTT 5 QoS 1/2 get PUBACK/PUBREC 0x97 Quota exceeded and the message is not
accepted; QoS 0 and MQTT 3.x (which have no way to be told) are delivered to the current
subscribers but not retained. Either way it is counted and logged (rate-limited).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..message import Message
from .quotas import Quotas

if TYPE_CHECKING:
    from ...config import LimitsConfig
    from ..ownership import Principal


class RetainedBudget:
    """What every topic space's retained messages hold together, per publishing client, and
    (``quotas``, quotas.py) per tenant and per principal."""

    __slots__ = ("count", "bytes", "per_client", "quotas")

    def __init__(self, quotas: Quotas | None = None) -> None:
        self.count = 0
        self.bytes = 0
        self.per_client: dict[tuple[str, str | None], int] = {}  # (tenant, origin) -> topics
        self.quotas = quotas if quotas is not None else Quotas()

    def added(self, tenant: str, message: Message) -> None:
        if message.topic[:1] == "$":
            return
        self.count += 1
        self.bytes += message.size
        key = (tenant, message.origin)
        self.per_client[key] = self.per_client.get(key, 0) + 1
        self.quotas.retained_added(tenant, message)

    def removed(self, tenant: str, message: Message) -> None:
        if message.topic[:1] == "$":
            return
        self.count -= 1
        self.bytes -= message.size
        key = (tenant, message.origin)
        left = self.per_client.get(key, 0) - 1
        if left > 0:
            self.per_client[key] = left
        else:
            self.per_client.pop(key, None)
        self.quotas.retained_removed(tenant, message)

    def refusal(
        self,
        limits: LimitsConfig,
        tenant: str,
        message: Message,
        old: Message | None,
        owner: Principal,
    ) -> tuple[str, str] | None:
        """``(limit key, reason)`` when storing ``message`` of ``owner`` in place of ``old``
        (the retained message of that topic, if any) would pass a limit or ``owner``'s or
        ``tenant``'s share of one (the running config's ``limits``: a reload may change them);
        ``None`` when it fits."""
        payload = len(message.payload)
        if payload > limits.max_retained_payload:
            return (
                "max_retained_payload",
                f"retained payload of {payload} bytes exceeds "
                f"limits.max_retained_payload ({limits.max_retained_payload} bytes)",
            )
        if old is None and self.count >= limits.max_retained_messages:
            return (
                "max_retained_messages",
                f"the broker holds {self.count} retained messages (limits.max_retained_messages)",
            )
        size = message.size - (old.size if old is not None else 0)
        if self.bytes + size > limits.max_retained_bytes:
            return (
                "max_retained_bytes",
                f"retained messages would hold more than "
                f"limits.max_retained_bytes ({limits.max_retained_bytes} bytes)",
            )
        if old is None or old.origin != message.origin:
            held = self.per_client.get((tenant, message.origin), 0)
            if held >= limits.max_retained_per_client:
                return (
                    "max_retained_per_client",
                    f"this client already holds {held} retained "
                    f"messages (limits.max_retained_per_client)",
                )
        return self.quotas.retained_refusal(limits, tenant, owner, message, old)

"""What the broker asks of its bridges (issue 19), without importing them (issue 21 item 5).

The bridges are built on the broker (they route inbound messages through it and read its
policy), so the broker must not import them: the run path that builds both
(``ops/service.py`` ``run_service``) registers :attr:`Broker.open_bridges`, and the broker calls
it in ``start()``, before the listeners, so no message is routed unbridged.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from ..mqtt.packets import Properties
from .message import Message


class Bridging(Protocol):
    """The running bridges as the broker core uses them (``bridge/service.py`` ``Bridges``)."""

    def start(self) -> None: ...

    async def close(self) -> None: ...

    def offer(self, tenant: str, message: Message) -> None:
        """Every routed message, before the local subscribers."""
        ...

    def take_pending(self) -> Awaitable[None] | None:
        """The queue logs' write of the message just published, which its PUBACK waits for."""
        ...

    def client_properties(self, props: Properties) -> Properties:
        """A client's PUBLISH properties without forged bridge origin entries."""
        ...

    def values(self) -> dict[str, str]:
        """``$SYS/broker/bridge/<name>/…`` values."""
        ...


def client_properties(bridges: Bridging | None, props: Properties) -> Properties:
    """PUBLISH ingress from a client (issue 31 item 7): what the bridges rely on in a message
    (the ``edge-bridge-origin`` path naming one of them) is never taken from a client; the
    properties pass unchanged when there are no bridges or no user properties."""
    if bridges is None or not props.user_properties:
        return props
    return bridges.client_properties(props)

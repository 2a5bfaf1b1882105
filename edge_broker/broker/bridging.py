"""What the broker asks of its bridges (issue 19), without importing them (issue 21 item 5).

The bridges are built on the broker (they route inbound messages through it and read its
policy), so the broker must not import them: the run path that builds both
(``ops/service.py`` ``run_service``) registers :attr:`Broker.open_bridges`, and the broker calls
it in ``start()``, before the listeners, so no message is routed unbridged.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

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

    def values(self) -> dict[str, str]:
        """``$SYS/broker/bridge/<name>/…`` values."""
        ...

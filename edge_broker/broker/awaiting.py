"""Awaiting several things a packet's answer depends on (a store write, a bridge log's fsync, a
held publisher's congestion) as one awaitable."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def all_of(*awaitables: Awaitable[Any]) -> None:
    """Await every one (none is left unretrieved, so no "exception never retrieved" warning);
    then raise the first error, if any."""
    results = await asyncio.gather(*awaitables, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result

"""What policy sync may ask of the running broker (DESIGN.md: ``sync`` is a client of the
broker's narrow interfaces, never of its internals): its audit log, a reload of a config file,
and applying an already merged config. ``broker.server.Broker`` is one; sync imports nothing of
``broker``, so a test can hand it any object with these three members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..audit.log import AuditLog
    from ..config import Config


class Applied(Protocol):
    """The outcome of a reload or an applied bundle (the broker's ``ReloadResult``)."""

    @property
    def ok(self) -> bool: ...

    @property
    def message(self) -> str: ...


class PolicyHost(Protocol):
    @property
    def audit(self) -> AuditLog | None: ...

    async def reload(self, path: str) -> Applied:
        """Read ``path`` and apply it; a file with errors keeps the running policy (logged)."""
        ...

    async def apply_config(self, new: Config, source: str) -> Applied:
        """Compile ``new``'s policy, swap it in and judge live sessions again; ``source``
        names the change in logs and the audit log."""
        ...


@dataclass(frozen=True, slots=True)
class Refused:
    """A change sync refuses before it reaches the broker (the bundle does not merge with the
    reloaded file): the running policy is kept."""

    message: str
    ok: bool = False

"""The one exception type of the claims layer (CONVENTIONS.md: one exception type per layer)."""

from __future__ import annotations

from ..mqtt.reason_codes import ReasonCode


class ClaimError(Exception):
    """A claim, unclaim, SMOKER ID or key file that SMOKER.md refuses.

    ``reason_code`` is what the broker answers (0x99 Payload format invalid for a malformed or
    badly signed claim, 0x87 Not authorized, 0x85 for a bad Client Identifier, …); ``message``
    names the field or check that failed and what the sender has to change.
    """

    def __init__(self, reason_code: ReasonCode | int, message: str) -> None:
        super().__init__(message)
        self.reason_code = ReasonCode(reason_code)
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} (0x{int(self.reason_code):02X} {self.reason_code.name})"


def shown(text: str, limit: int = 120) -> str:
    """``text`` quoted for a Reason String or log line, cut to ``limit`` characters.

    Reason Strings travel in PUBACKs; echoing a 64 KB topic back would only waste the link.
    """
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"… ({len(text)} characters)"

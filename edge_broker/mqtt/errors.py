"""The one exception type of the codec layer."""

from __future__ import annotations

from .reason_codes import ReasonCode


class ProtocolError(Exception):
    """A violation of the MQTT specification found while decoding or validating.

    ``reason_code`` is the MQTT 5 reason code the server answers with (0x81 Malformed Packet,
    0x82 Protocol Error, 0x95 Packet too large, …); for MQTT 3.x the server just closes.
    """

    def __init__(self, reason_code: ReasonCode | int, message: str) -> None:
        super().__init__(message)
        self.reason_code = ReasonCode(reason_code)
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} (0x{int(self.reason_code):02X} {self.reason_code.name})"

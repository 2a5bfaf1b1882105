"""The one exception type of the codec layer."""

from __future__ import annotations

from .packets import Packet
from .reason_codes import ReasonCode


class ProtocolError(Exception):
    """A violation of the MQTT specification found while decoding or validating.

    ``reason_code`` is the MQTT 5 reason code the server answers with (0x81 Malformed Packet,
    0x82 Protocol Error, …); for MQTT 3.x the server just closes.

    ``protocol_level`` is set for every error found in a CONNECT once its protocol level byte
    has been read, so the broker can answer a CONNACK in the client's format before closing
    (MQTT 5 §4.13.1). With reason 0x84 it is the level the codec does not speak: the broker
    answers CONNACK 0x84 (MQTT 5) or return code 0x01 (3.x) (MQTT 3.1.1 §3.1.2.2, 5 §3.1.2.2).

    ``packets_before_error`` holds the packets a single ``PacketReader.feed`` call decoded
    successfully before it met the violation, so the broker may still act on them.
    """

    def __init__(
        self,
        reason_code: ReasonCode | int,
        message: str,
        *,
        protocol_level: int | None = None,
    ) -> None:
        super().__init__(message)
        self.reason_code = ReasonCode(reason_code)
        self.message = message
        self.protocol_level = protocol_level
        self.packets_before_error: tuple[Packet, ...] = ()

    def __str__(self) -> str:
        return f"{self.message} (0x{int(self.reason_code):02X} {self.reason_code.name})"

"""Primitive data representations on the wire (MQTT 5 §1.5; 3.1.1 §1.5).

Readers take the whole buffer, a position and the end of the current packet, and return the
value and the next position; running past the end is a Malformed Packet (0x81).
"""

from __future__ import annotations

from .errors import ProtocolError
from .reason_codes import ReasonCode

MALFORMED = ReasonCode.MALFORMED_PACKET
PROTOCOL = ReasonCode.PROTOCOL_ERROR
MAX_VARINT = 268_435_455  # four bytes of Variable Byte Integer (MQTT 5 §1.5.5)


def read_u8(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    if pos >= end:
        raise ProtocolError(MALFORMED, f"packet ends before its {what}")
    return buf[pos], pos + 1


def read_u16(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    if pos + 2 > end:
        raise ProtocolError(MALFORMED, f"packet ends inside its {what} (two-byte integer)")
    return (buf[pos] << 8) | buf[pos + 1], pos + 2


def read_u32(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    if pos + 4 > end:
        raise ProtocolError(MALFORMED, f"packet ends inside its {what} (four-byte integer)")
    return int.from_bytes(buf[pos : pos + 4], "big"), pos + 4


def read_varint(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Variable Byte Integer: at most four bytes (MQTT 5 §1.5.5)."""
    value = 0
    shift = 0
    for _ in range(4):
        if pos >= end:
            raise ProtocolError(MALFORMED, f"packet ends inside its {what} (variable byte integer)")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ProtocolError(MALFORMED, f"{what} is a variable byte integer longer than four bytes")


def read_binary(buf: bytes, pos: int, end: int, what: str) -> tuple[bytes, int]:
    """Binary Data: two-byte length then bytes (MQTT 5 §1.5.6)."""
    if pos + 2 > end:
        raise ProtocolError(MALFORMED, f"packet ends inside the length of its {what}")
    stop = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
    if stop > end:
        raise ProtocolError(MALFORMED, f"the {what} runs past the end of the packet")
    return buf[pos + 2 : stop], stop


def read_string(buf: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
    """UTF-8 Encoded String: well-formed, no surrogates, no U+0000 (MQTT 5 §1.5.4, 3.1.1 §1.5.3)."""
    if pos + 2 > end:
        raise ProtocolError(MALFORMED, f"packet ends inside the length of its {what}")
    stop = pos + 2 + ((buf[pos] << 8) | buf[pos + 1])
    if stop > end:
        raise ProtocolError(MALFORMED, f"the {what} runs past the end of the packet")
    return decode_utf8(buf[pos + 2 : stop], what), stop


def decode_utf8(raw: bytes, what: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            MALFORMED, f"the {what} is not well-formed UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    if "\x00" in text:
        raise ProtocolError(MALFORMED, f"the {what} contains U+0000, which MQTT forbids")
    return text


def encode_varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    if value > MAX_VARINT:
        raise ProtocolError(
            ReasonCode.PACKET_TOO_LARGE, f"{value} does not fit a variable byte integer"
        )
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode_string(text: str, what: str) -> bytes:
    """Refuses what a receiver must reject: lone surrogates and U+0000 (MQTT 5 §1.5.4)."""
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError(MALFORMED, f"the {what} contains a lone surrogate") from None
    if b"\x00" in raw:
        raise ProtocolError(MALFORMED, f"the {what} contains U+0000, which MQTT forbids")
    return encode_binary(raw, what)


def encode_binary(raw: bytes, what: str) -> bytes:
    if len(raw) > 0xFFFF:
        raise ProtocolError(MALFORMED, f"the {what} is {len(raw)} bytes; MQTT allows at most 65535")
    return len(raw).to_bytes(2, "big") + raw


def u16(value: int) -> bytes:
    return value.to_bytes(2, "big")

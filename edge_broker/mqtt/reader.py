"""``PacketReader``: framing of a byte stream into MQTT packets (MQTT 5 §2.1, 3.1.1 §2.2).

A reader is the receiving half of one connection, in the manner of h11: feed it the bytes as
they arrive, get back the complete packets, with any partial packet kept for the next call.
It checks the fixed header as soon as the first byte is known, and the packet size as soon as
the Remaining Length is known, so an oversized packet is refused before its body is buffered.
After a ``ProtocolError`` the reader is dead: every later ``feed`` raises again.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

from .decoder import DECODERS, decode_publish
from .errors import ProtocolError
from .packets import (
    CLIENT_SENDS,
    SERVER_SENDS,
    V5_ONLY_FROM_CLIENT,
    V5_ONLY_FROM_SERVER,
    Connect,
    Packet,
    PacketType,
    Properties,
)
from .reason_codes import ReasonCode
from .wire import MALFORMED, MAX_VARINT, PROTOCOL

Side = Literal["server", "client"]

MAX_PACKET_SIZE = MAX_VARINT
"""Largest packet MQTT can express is 1 + 4 + 268,435,455 bytes; this default cap is just below."""

# Required fixed-header flags by packet type; None for PUBLISH, whose flags carry DUP/QoS/RETAIN
# (MQTT 5 §2.1.3, Table 2-2; 3.1.1 §2.2.2).
_REQUIRED_FLAGS: tuple[int | None, ...] = (
    None,
    0,
    0,
    None,
    0,
    0,
    0b0010,
    0,
    0b0010,
    0,
    0b0010,
    0,
    0,
    0,
    0,
    0,
)


Admits = tuple[frozenset[PacketType], frozenset[PacketType]]
"""The client packet types a server-side reader lets through before its CONNECT and after it."""

CODEC_ADMITS: Admits = (frozenset({PacketType.CONNECT}), CLIENT_SENDS - {PacketType.CONNECT})
"""What the codec alone requires (MQTT 5 §3.1, 3.1.1 §3.1.0-1: CONNECT first and only once).
The broker's connection engine passes its own state table's rows instead
(``engine/states.py`` ``READER_ADMITS``)."""


@cache
def _accepted(admits: Admits | None, level: int | None) -> tuple[bool, ...]:
    """For each packet type: may it arrive now without further checks? Server side
    (``admits`` given): its first set before CONNECT, its second after; client side (None):
    what a server sends, once the protocol level is known."""
    if admits is not None:
        types, v5_only = admits[0 if level is None else 1], V5_ONLY_FROM_CLIENT
    else:
        types, v5_only = (frozenset() if level is None else SERVER_SENDS), V5_ONLY_FROM_SERVER
    return tuple(ptype in types and (level == 5 or ptype not in v5_only) for ptype in range(16))


_CONNECT_LEVEL_AT = 9  # a CONNECT's level byte is within 9 bytes of its variable header ("MQIsdp")


def _connect_level(buf: bytes, start: int, end: int) -> int | None:
    """The protocol level byte of a CONNECT whose variable header is ``buf[start:end]``, when
    the protocol name is one of MQTT's (3.1.1/5 §3.1.2.1, 3.1 "MQIsdp") and the level lies
    within the packet; else None."""
    name_length = int.from_bytes(buf[start : start + 2], "big")
    at = start + 2 + name_length
    if at >= end or buf[start + 2 : at] not in (b"MQTT", b"MQIsdp"):
        return None
    level = buf[at]
    return level if level in (3, 4, 5) else None


class PacketReader:
    """Turns the bytes one peer sends into packets; see the module docstring.

    ``side="server"`` decodes what clients send; the first packet must be CONNECT, which sets
    ``protocol_level`` (3, 4 or 5); a server-side reader given ``protocol_level`` behaves as if
    that CONNECT had already arrived. ``side="client"`` decodes what a server sends and needs
    ``protocol_level`` set (argument or attribute) before the first ``feed``.
    ``max_packet_size`` bounds whole packets (fixed header included), MQTT 5 §3.1.2.11.4.
    ``admitted`` (server side): the packet types let through before and after CONNECT, by
    default :data:`CODEC_ADMITS`; the broker's engine gives its state table's rows.
    """

    __slots__ = (
        "side",
        "max_packet_size",
        "protocol_level",
        "_from_client",
        "_admits",
        "_buffer",
        "_need",
        "_error",
        "_publish_properties",
    )

    def __init__(
        self,
        side: Side = "server",
        max_packet_size: int = MAX_PACKET_SIZE,
        protocol_level: int | None = None,
        admitted: Admits = CODEC_ADMITS,
    ) -> None:
        if side not in ("server", "client"):
            raise ValueError(f"PacketReader side must be 'server' or 'client', not {side!r}")
        if max_packet_size < 2:
            raise ValueError(f"max_packet_size must be at least 2 bytes, not {max_packet_size}")
        if protocol_level not in (None, 3, 4, 5):
            raise ValueError(f"protocol_level must be 3, 4, 5 or None, not {protocol_level!r}")
        self.side: Side = side
        self.max_packet_size = max_packet_size
        self.protocol_level = protocol_level
        self._from_client = side == "server"
        self._admits: Admits | None = admitted if side == "server" else None
        self._buffer = bytearray()
        self._need = 0
        self._error: ProtocolError | None = None
        # MQTT 5 PUBLISH properties seen on this connection (decoder.py), made by its first
        # MQTT 5 PUBLISH: an idle or 3.x connection never needs one (issue 32: memory)
        self._publish_properties: dict[bytes, Properties] | None = None

    @property
    def buffered(self) -> int:
        """Bytes held for a packet that has not fully arrived yet."""
        return len(self._buffer)

    @property
    def pending_size(self) -> int:
        """Size of the packet being received (fixed header included) once its Remaining Length
        has arrived, else the bytes held; 0 when nothing is held. The broker reserves memory
        for it before reading on (broker/limits/read_pool.py)."""
        return max(self._need, len(self._buffer)) if self._buffer else 0

    def feed(self, data: bytes | bytearray | memoryview) -> list[Packet]:
        """Add ``data`` and return every packet it completes, in order.

        Raises ``ProtocolError`` at the first violation; its ``packets_before_error`` holds the
        packets decoded before it in this call.
        """
        if self._error is not None:
            raise ProtocolError(
                self._error.reason_code,
                f"the reader already failed and accepts no more data: {self._error.message}",
            )
        if self._buffer:
            self._buffer += data
            if len(self._buffer) < self._need:
                return []
            buf = bytes(self._buffer)
        else:
            buf = bytes(data)
        packets: list[Packet] = []
        try:
            pos = self._parse(buf, packets)
        except ProtocolError as exc:
            exc.packets_before_error = tuple(packets)
            self._error = exc
            self._buffer = bytearray()
            raise
        if pos < len(buf):
            self._buffer = bytearray(memoryview(buf)[pos:])
        elif self._buffer:
            self._buffer = bytearray()
        return packets

    def _parse(self, buf: bytes, packets: list[Packet]) -> int:
        """Decode complete packets from ``buf``; return where the unfinished rest starts."""
        n = len(buf)
        pos = 0
        from_client = self._from_client
        limit = self.max_packet_size
        level = self.protocol_level
        if level not in (None, 3, 4, 5):
            raise ValueError(f"protocol_level must be 3, 4, 5 or None, not {level!r}")
        admits = self._admits
        accepted = _accepted(admits, level)
        cache = self._publish_properties
        self._need = 0
        while pos < n:
            first = buf[pos]
            ptype = first >> 4
            if not accepted[ptype]:
                self._refuse(ptype, level)
            flags = first & 0x0F
            if ptype == 3:
                if flags & 0x06 == 0x06:
                    raise ProtocolError(MALFORMED, "PUBLISH has QoS 3; it must be 0, 1 or 2")
                if flags & 0x08 and not flags & 0x06:
                    raise ProtocolError(MALFORMED, "PUBLISH sets DUP on a QoS 0 message")
            elif flags != _REQUIRED_FLAGS[ptype]:
                raise ProtocolError(
                    MALFORMED,
                    f"{PacketType(ptype).name} fixed-header flags are 0b{flags:04b}; "
                    f"they must be 0b{_REQUIRED_FLAGS[ptype]:04b}",
                )
            i = pos + 1
            remaining = 0
            shift = 0
            while i < n:
                byte = buf[i]
                i += 1
                remaining |= (byte & 0x7F) << shift
                if byte < 0x80:
                    break
                shift += 7
                if shift == 28:
                    raise ProtocolError(MALFORMED, "remaining length is longer than four bytes")
            else:
                return pos
            end = i + remaining
            if end - pos > limit:
                connect_level = None
                if ptype == 1:
                    # The client's protocol level lets the broker answer CONNACK 0x95 in its
                    # format (MQTT 5 §4.13.1); wait for those few bytes, never for the body,
                    # and never past the packet's own end (a short CONNECT has no level)
                    peek = min(end, i + _CONNECT_LEVEL_AT)
                    if n < peek:
                        self._need = peek - pos
                        return pos
                    connect_level = _connect_level(buf, i, peek)
                raise ProtocolError(
                    ReasonCode.PACKET_TOO_LARGE,
                    f"{PacketType(ptype).name} of {end - pos} bytes exceeds the maximum packet "
                    f"size of {limit} bytes",
                    protocol_level=connect_level,
                )
            if end > n:
                self._need = end - pos
                return pos
            if ptype == 3:
                if cache is None and level == 5:  # the connection's first MQTT 5 PUBLISH
                    cache = self._publish_properties = {}
                packet: Packet = decode_publish(flags, buf, i, end, level or 0, from_client, cache)
            else:
                decoder = DECODERS[ptype]
                assert decoder is not None  # type 0 is never accepted
                packet = decoder(flags, buf, i, end, level or 0, from_client)
            packets.append(packet)
            pos = end
            if ptype == 1:
                assert isinstance(packet, Connect)
                level = self.protocol_level = packet.protocol_level
                accepted = _accepted(admits, level)
        return pos

    def _refuse(self, ptype: int, level: int | None) -> None:
        """Raise the error for a packet type that may not arrive now."""
        if ptype == 0:
            raise ProtocolError(MALFORMED, "packet type 0 is reserved")
        name = PacketType(ptype).name
        if self._from_client:
            if ptype not in CLIENT_SENDS:
                raise ProtocolError(PROTOCOL, f"a client must not send {name}")
            if level is None:
                raise ProtocolError(PROTOCOL, f"the first packet must be CONNECT, not {name}")
            if ptype == 1:
                raise ProtocolError(PROTOCOL, "a second CONNECT on the same connection")
        else:
            if ptype not in SERVER_SENDS:
                raise ProtocolError(PROTOCOL, f"a server must not send {name}")
            if level is None:
                raise ValueError("a client-side PacketReader needs protocol_level set first")
        raise ProtocolError(MALFORMED, f"packet type {ptype} ({name}) does not exist before MQTT 5")

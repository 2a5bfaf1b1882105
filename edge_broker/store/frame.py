"""The on-disk format of the log: a file header, then CRC-framed CBOR records.

File  = header(12) frame*
header = b"EBLOG\\r\\n\\x1a" (8) | version u16 BE (1) | reserved u16 (0)
frame = magic b"\\xeb\\x1c" (2) | crc32 of the rest u32 BE | length u32 BE | payload

The payload is one CBOR item. The per-frame magic lets recovery resynchronise after damage in
the middle of the file: it searches for the next magic whose frame has a valid CRC, so every
intact record after the damage is kept. The CRC covers the length field and the payload (one
contiguous run, one ``crc32`` call), so a flipped length bit is a detected error, not a misread
frame. This module is pure: bytes in, frames and damage out.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

FILE_MAGIC = b"EBLOG\r\n\x1a"
FORMAT_VERSION = 1
HEADER = FILE_MAGIC + struct.pack(">HH", FORMAT_VERSION, 0)
HEADER_SIZE = len(HEADER)

FRAME_MAGIC = b"\xeb\x1c"
_FRAME_HEAD = struct.Struct(">2sII")  # magic, crc, length
FRAME_OVERHEAD = _FRAME_HEAD.size
_LENGTH = struct.Struct(">I")
MAX_PAYLOAD_LIMIT = 0xFFFFFFFF


class Frame(NamedTuple):
    """An intact record: its ``offset`` in the file, its total ``size`` and its ``payload``.

    A NamedTuple rather than a frozen dataclass: one is built per record at every open, and a
    frozen dataclass's ``__init__`` costs about 10% of the replay time."""

    offset: int
    size: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes recovery could not use: ``length`` bytes from ``offset``, and why.

    ``tail`` is true when no intact frame follows, so the bytes can be truncated away (a torn
    write at the end, or corruption of the last records); otherwise they sit between two intact
    frames and are skipped.
    """

    offset: int
    length: int
    reason: str
    tail: bool = False


def encode_frame(payload: bytes) -> bytes:
    """Frame one CBOR payload; the caller bounds its length (max record size)."""
    length = _LENGTH.pack(len(payload))
    crc = zlib.crc32(payload, zlib.crc32(length))
    return FRAME_MAGIC + _LENGTH.pack(crc) + length + payload


def header_problem(data: bytes) -> str | None:
    """``None`` when ``data`` starts with a valid header of a version this code reads."""
    if len(data) < HEADER_SIZE:
        return f"file shorter than the {HEADER_SIZE}-byte header"
    if data[: len(FILE_MAGIC)] != FILE_MAGIC:
        return "bad file magic"
    version, _reserved = struct.unpack_from(">HH", data, len(FILE_MAGIC))
    if version != FORMAT_VERSION:
        return f"format version {version}, this edge-broker reads version {FORMAT_VERSION}"
    return None


def is_header_prefix(data: bytes) -> bool:
    """True for an empty file or one cut inside the header (a crash while creating it)."""
    return len(data) < HEADER_SIZE and HEADER.startswith(bytes(data))


def _try_frame(view: memoryview, pos: int, max_payload: int) -> Frame | str:
    end_of_data = len(view)
    if end_of_data - pos < FRAME_OVERHEAD:
        return "torn frame header"
    magic, crc, length = _FRAME_HEAD.unpack_from(view, pos)
    if magic != FRAME_MAGIC:
        return "bad frame magic"
    if length > max_payload:
        return f"length {length} over the maximum record size {max_payload}"
    end = pos + FRAME_OVERHEAD + length
    if end > end_of_data:
        return f"torn frame: {length}-byte payload runs past the end of the file"
    if zlib.crc32(view[pos + 6 : end]) != crc:
        return "CRC mismatch"
    return Frame(pos, end - pos, view[pos + FRAME_OVERHEAD : end].tobytes())


def scan(data: bytes | mmap.mmap, start: int, max_payload: int) -> Iterator[Frame | Damage]:
    """Yield every intact frame from ``start`` in file order, and a ``Damage`` for each gap.

    After a bad frame the scan looks for the next frame magic whose frame is intact; the bytes in
    between are one ``Damage``. If no intact frame follows, the final ``Damage`` has ``tail``
    set. A false resync needs a matching magic, length and CRC-32 at once (odds about 2^-48).
    Exhaust or close the iterator before closing an mmap passed as ``data``.
    """
    unpack, crc32, overhead = _FRAME_HEAD.unpack_from, zlib.crc32, FRAME_OVERHEAD
    with memoryview(data) as view:
        pos = start
        end_of_data = len(view)
        while pos < end_of_data:
            # The fast path for an intact frame; _try_frame repeats the checks to say what failed.
            if end_of_data - pos >= overhead:
                magic, crc, length = unpack(view, pos)
                end = pos + overhead + length
                if (
                    magic == FRAME_MAGIC
                    and length <= max_payload
                    and end <= end_of_data
                    and crc32(view[pos + 6 : end]) == crc
                ):
                    yield Frame(pos, end - pos, view[pos + overhead : end].tobytes())
                    pos = end
                    continue
            found = _try_frame(view, pos, max_payload)
            if isinstance(found, Frame):
                yield found
                pos += found.size
                continue
            candidate = data.find(FRAME_MAGIC, pos + 1)
            while candidate != -1 and not isinstance(
                _try_frame(view, candidate, max_payload), Frame
            ):
                candidate = data.find(FRAME_MAGIC, candidate + 1)
            if candidate == -1:
                yield Damage(pos, end_of_data - pos, found, tail=True)
                return
            yield Damage(pos, candidate - pos, found)
            pos = candidate

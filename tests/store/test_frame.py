"""The frame format alone (bytes in, frames and damage out), as properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.store.frame import (
    FRAME_MAGIC,
    FRAME_OVERHEAD,
    HEADER,
    HEADER_SIZE,
    Damage,
    Frame,
    encode_frame,
    header_problem,
    is_header_prefix,
    scan,
)

payloads = st.lists(st.binary(max_size=80) | st.just(FRAME_MAGIC * 3), max_size=12)


@settings(max_examples=300)
@given(payloads)
def test_scan_returns_exactly_the_encoded_frames(items: list[bytes]) -> None:
    data = HEADER + b"".join(encode_frame(p) for p in items)
    found = list(scan(data, HEADER_SIZE, 1 << 20))
    assert all(isinstance(f, Frame) for f in found)
    assert [f.payload for f in found if isinstance(f, Frame)] == items
    offset = HEADER_SIZE
    for frame, payload in zip(found, items, strict=True):
        assert isinstance(frame, Frame)
        assert frame.offset == offset and frame.size == FRAME_OVERHEAD + len(payload)
        offset += frame.size


@settings(max_examples=300)
@given(payloads, st.data())
def test_garbage_between_frames_is_one_damage_each(items: list[bytes], data: st.DataObject) -> None:
    chunks = [HEADER]
    garbage_spans = []
    for payload in items:
        # No 0xEB byte, so the garbage cannot hold (or end in part of) a frame magic.
        garbage = data.draw(st.binary(max_size=30)).replace(FRAME_MAGIC[:1], b"\0")
        if garbage:
            start = sum(map(len, chunks))
            garbage_spans.append((start, len(garbage)))
            chunks.append(garbage)
        chunks.append(encode_frame(payload))
    blob = b"".join(chunks)
    found = list(scan(blob, HEADER_SIZE, 1 << 20))
    assert [f.payload for f in found if isinstance(f, Frame)] == items
    assert [(d.offset, d.length) for d in found if isinstance(d, Damage)] == garbage_spans
    assert not any(isinstance(d, Damage) and d.tail for d in found)


def test_damage_kinds_are_named() -> None:
    frame = encode_frame(b"hello")
    cases = {
        "torn frame header": frame[:5],
        "bad frame magic": b"xx" + frame[2:],
        "CRC mismatch": frame[:-1] + b"X",
        "runs past the end": frame[:-1],
        "over the maximum record size": encode_frame(b"x" * 100),
    }
    for reason, blob in cases.items():
        (damage,) = list(scan(HEADER + blob, HEADER_SIZE, 50))
        assert isinstance(damage, Damage) and damage.tail
        assert reason in damage.reason, (reason, damage.reason)
        assert (damage.offset, damage.length) == (HEADER_SIZE, len(blob))


def test_header_checks() -> None:
    assert header_problem(HEADER) is None
    assert header_problem(HEADER[:5]) is not None
    assert "bad file magic" in str(header_problem(b"X" + HEADER[1:]))
    assert is_header_prefix(b"") and is_header_prefix(HEADER[:7])
    assert not is_header_prefix(HEADER) and not is_header_prefix(b"X")

"""The UTF-8 payload check of Payload Format Indicator 1 (MQTT 5 §3.3.2.3.2)."""

from __future__ import annotations

import pytest

from edge_broker.mqtt.codec import payload_is_valid_utf8


@pytest.mark.parametrize(
    ("payload", "ok"),
    [
        (b"", True),
        (b"plain", True),
        ("héllo €".encode(), True),
        (b"\x00\n\t", True),
        (b"\xff", False),
        (b"\xc0\xaf", False),
        (b"\xed\xa0\x80", False),
        (b"\xf4\x90\x80\x80", False),
        (b"\xe2\x82", False),
    ],
)
def test_payload_is_valid_utf8(payload: bytes, ok: bool) -> None:
    assert payload_is_valid_utf8(payload) is ok

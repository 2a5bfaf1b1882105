"""Canonical claim JSON (smokermqtt/canonjson.py) is byte-for-byte CPython's
``json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)`` (SMOKER.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from smokermqtt import canonjson

# text with control characters, quotes, backslashes, non-ASCII and astral characters
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | _text,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_text, inner, max_size=5),
    max_leaves=30,
)


def reference(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8"
    )


@settings(max_examples=200, deadline=None)
@given(_json)
def test_agrees_with_cpython_json(value: Any) -> None:
    assert canonjson.dumpb(value) == reference(value)


def test_a_restriction() -> None:
    restriction = {
        "topicName": "restricted/ABC====/température",
        "restrictionType": "WHITELIST",
        "permissions": [{"clientId": "*", "activity": "SUBSCRIBE"}],
    }
    assert canonjson.dumps(restriction) == (
        '{"permissions":[{"activity":"SUBSCRIBE","clientId":"*"}],'
        '"restrictionType":"WHITELIST","topicName":"restricted/ABC====/température"}'
    )


def test_every_escape() -> None:
    text = "".join(chr(c) for c in range(0x20)) + '"\\/\x7f\u2028é😀'
    assert canonjson.dumpb(text) == reference(text)


def test_tuples_are_lists() -> None:
    assert canonjson.dumps((1, "a")) == '[1,"a"]'


@pytest.mark.parametrize("bad", [1.5, {1: "x"}, b"bytes", {"a": {2}}])
def test_refuses_what_has_no_canonical_form(bad: Any) -> None:
    with pytest.raises(TypeError, match="canonical JSON"):
        canonjson.dumps(bad)

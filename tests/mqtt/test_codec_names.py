"""Topic name / filter validation and the UTF-8 payload check (MQTT 5 §4.7, §4.8.2, §3.3.2.3.2).

Besides fixed tables, validation is compared with libmosquitto's own
``mosquitto_sub_topic_check`` / ``mosquitto_pub_topic_check`` on generated strings.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.mqtt.codec import (
    parse_shared_filter,
    payload_is_valid_utf8,
    validate_topic_filter,
    validate_topic_name,
)

VALID_FILTERS = [
    "#",
    "+",
    "a",
    "a/b",
    "a/+",
    "a/#",
    "+/+",
    "/",
    "//",
    "/+",
    "+/#",
    "a/+/b/#",
    "$SYS/#",
    "$share/g/a/b",
    "$share/g/#",
    "$share/g/+/x",
    "$share/group-1/a",
    "sport/tennis/player1/#",
    "$share",
    "$shared/x",
]
INVALID_FILTERS = [
    ("", "at least one character"),
    ("a#", "whole level"),
    ("a/#/b", "last level"),
    ("#/", "last level"),
    ("a+", "whole level"),
    ("a/b+/c", "whole level"),
    ("++", "whole level"),
    ("a\x00b", "U+0000"),
    ("$share//a", "empty share name"),
    ("$share/", "empty share name"),
    ("$share/g", "no topic filter"),
    ("$share/g/", "no topic filter"),
    ("$share/g+/a", "must not contain"),
    ("$share/#/a", "must not contain"),
    ("$share/g/a#", "whole level"),
]


@pytest.mark.parametrize("topic_filter", VALID_FILTERS)
def test_valid_filters(topic_filter: str) -> None:
    assert validate_topic_filter(topic_filter) is None


@pytest.mark.parametrize(("topic_filter", "why"), INVALID_FILTERS)
def test_invalid_filters(topic_filter: str, why: str) -> None:
    error = validate_topic_filter(topic_filter)
    assert error is not None and why in error


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "at least one"),
        ("a/+", "wildcard"),
        ("#", "wildcard"),
        ("a\x00", "U+0000"),
        ("x" * 65_536, "65535"),
    ],
)
def test_invalid_names(name: str, why: str) -> None:
    error = validate_topic_name(name)
    assert error is not None and why in error


@pytest.mark.parametrize("name", ["a", "/", "a/b", "$SYS/x", "é/ü", " ", "x" * 65_535])
def test_valid_names(name: str) -> None:
    assert validate_topic_name(name) is None


def test_parse_shared_filter() -> None:
    assert parse_shared_filter("$share/g/a/+") == ("g", "a/+")
    assert parse_shared_filter("$share/g") is None
    assert parse_shared_filter("a/b") is None


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


def _libmosquitto() -> ctypes.CDLL | None:
    path = ctypes.util.find_library("mosquitto")
    if path is None:
        return None
    lib = ctypes.CDLL(path)
    lib.mosquitto_sub_topic_check.argtypes = [ctypes.c_char_p]
    lib.mosquitto_pub_topic_check.argtypes = [ctypes.c_char_p]
    return lib


LIB = _libmosquitto()
needs_lib = pytest.mark.skipif(LIB is None, reason="libmosquitto not installed")
topic_text = st.text(alphabet=st.sampled_from(["a", "b", "/", "+", "#", "$", "é"]), max_size=10)


@needs_lib
@settings(max_examples=400, deadline=None)
@given(topic_filter=topic_text)
def test_filter_validation_agrees_with_libmosquitto(topic_filter: str) -> None:
    assert LIB is not None
    if topic_filter.startswith("$share/"):
        return  # libmosquitto's check knows nothing of shared-subscription syntax
    theirs = LIB.mosquitto_sub_topic_check(topic_filter.encode()) == 0
    ours = validate_topic_filter(topic_filter) is None
    # libmosquitto accepts the empty filter here; MQTT 4.7.3 says at least one character.
    assert ours == (theirs and topic_filter != "")


@needs_lib
@settings(max_examples=400, deadline=None)
@given(name=topic_text)
def test_name_validation_agrees_with_libmosquitto(name: str) -> None:
    assert LIB is not None
    theirs = LIB.mosquitto_pub_topic_check(name.encode()) == 0
    ours = validate_topic_name(name) is None
    assert ours == (theirs and name != "")


def _matching_accepts_filter(topic_filter: str) -> bool:
    from edge_broker.matching import RuleError, parse_shared
    from edge_broker.matching import validate_topic_filter as matching_filter

    try:
        matching_filter(topic_filter)
        parse_shared(topic_filter)
    except RuleError:
        return False
    return True


def _matching_accepts_name(name: str) -> bool:
    from edge_broker.matching import RuleError
    from edge_broker.matching import validate_topic_name as matching_name

    try:
        matching_name(name)
    except RuleError:
        return False
    return True


project_text = st.lists(
    st.sampled_from(["a", "/", "+", "#", "$", "share", "$share/", "g", "\x00", "é"]), max_size=8
).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=project_text)
def test_codec_and_matching_agree_on_filters_and_names(text: str) -> None:
    """The broker validates with edge_broker.matching; the codec exports the same rules."""
    assert (validate_topic_filter(text) is None) == _matching_accepts_filter(text), text
    assert (validate_topic_name(text) is None) == _matching_accepts_name(text), text

"""Topic name / filter validation (MQTT 5 §4.7, §4.8.2): the one definition,
``edge_broker.matching`` (``validate_topic_name``, ``validate_topic_filter``, ``parse_shared``),
which gate 1, the bridges' config and every trie use.

Besides fixed tables, validation is compared with libmosquitto's own
``mosquitto_sub_topic_check`` / ``mosquitto_pub_topic_check`` on generated strings.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching import RuleError, parse_shared
from edge_broker.matching import validate_topic_filter as matching_filter
from edge_broker.matching import validate_topic_name as matching_name


def filter_error(topic_filter: str) -> str | None:
    """Why ``topic_filter`` (``$share/<group>/<filter>`` included) is refused, or None."""
    try:
        matching_filter(topic_filter)
        parse_shared(topic_filter)
    except RuleError as exc:
        return str(exc)
    return None


def name_error(name: str) -> str | None:
    try:
        matching_name(name)
    except RuleError as exc:
        return str(exc)
    return None


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
    ("a#", "whole segment"),
    ("a/#/b", "last segment"),
    ("#/", "last segment"),
    ("a+", "whole segment"),
    ("a/b+/c", "whole segment"),
    ("++", "whole segment"),
    ("a\x00b", "U+0000"),
    ("$share//a", "share"),
    ("$share/", "share"),
    ("$share/g", "share"),
    ("$share/g/", "share"),
    ("$share/g+/a", "share"),
    ("$share/#/a", "share"),
    ("$share/g/a#", "whole segment"),
]


@pytest.mark.parametrize("topic_filter", VALID_FILTERS)
def test_valid_filters(topic_filter: str) -> None:
    assert filter_error(topic_filter) is None


@pytest.mark.parametrize(("topic_filter", "why"), INVALID_FILTERS)
def test_invalid_filters(topic_filter: str, why: str) -> None:
    error = filter_error(topic_filter)
    assert error is not None and why in error, error


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
    error = name_error(name)
    assert error is not None and why in error, error


@pytest.mark.parametrize("name", ["a", "/", "a/b", "$SYS/x", "é/ü", " ", "x" * 65_535])
def test_valid_names(name: str) -> None:
    assert name_error(name) is None


def test_parse_shared() -> None:
    shared = parse_shared("$share/g/a/+")
    assert shared is not None and (shared.group, shared.filter) == ("g", "a/+")
    assert parse_shared("a/b") is None


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
    ours = filter_error(topic_filter) is None
    # libmosquitto accepts the empty filter here; MQTT 4.7.3 says at least one character.
    assert ours == (theirs and topic_filter != "")


@needs_lib
@settings(max_examples=400, deadline=None)
@given(name=topic_text)
def test_name_validation_agrees_with_libmosquitto(name: str) -> None:
    assert LIB is not None
    theirs = LIB.mosquitto_pub_topic_check(name.encode()) == 0
    ours = name_error(name) is None
    assert ours == (theirs and name != "")

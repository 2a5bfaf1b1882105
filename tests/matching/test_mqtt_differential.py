"""Differential tests: our MQTT matcher against paho-mqtt and libmosquitto (PATTERNS.md §4).

libmosquitto's ``mosquitto_topic_matches_sub(sub, topic, bool *result)`` returns an error code
and writes the answer through the pointer; it is called through ctypes on the Debian library.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paho.mqtt.client import topic_matches_sub

from edge_broker.matching import topic_matches

MOSQ_ERR_SUCCESS = 0


def _load_libmosquitto() -> ctypes.CDLL | None:
    for name in ("libmosquitto.so.1", ctypes.util.find_library("mosquitto")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.mosquitto_topic_matches_sub.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_bool),
        ]
        lib.mosquitto_topic_matches_sub.restype = ctypes.c_int
        return lib
    return None


LIBMOSQ = _load_libmosquitto()


def mosquitto_matches(sub: str, topic: str) -> bool:
    assert LIBMOSQ is not None
    result = ctypes.c_bool(False)
    rc = LIBMOSQ.mosquitto_topic_matches_sub(sub.encode(), topic.encode(), ctypes.byref(result))
    assert rc == MOSQ_ERR_SUCCESS, (sub, topic, rc)
    return bool(result.value)


# Levels of any characters our validator accepts in a filter, plus the wildcards.
LITERALS = ["a", "b", "", "$s", "$", "é", "x y", "$SYS"]


@st.composite
def filters(draw: st.DrawFn) -> str:
    body = draw(st.lists(st.sampled_from([*LITERALS, "+"]), max_size=5))
    if body in ([], [""]) or draw(st.booleans()):
        body = [*body, "#"]
    return "/".join(body)


topics = (
    st.lists(st.sampled_from([*LITERALS, "c"]), min_size=1, max_size=6)
    .filter(lambda t: t != [""])
    .map("/".join)
)


@pytest.mark.skipif(LIBMOSQ is None, reason="libmosquitto1 is not installed")
@settings(max_examples=500, deadline=None)
@given(filters(), topics)
def test_agrees_with_libmosquitto(flt: str, topic: str) -> None:
    assert topic_matches(flt, topic) == mosquitto_matches(flt, topic), (flt, topic)


@settings(max_examples=500, deadline=None)
@given(filters(), topics)
def test_agrees_with_paho(flt: str, topic: str) -> None:
    assert topic_matches(flt, topic) == topic_matches_sub(flt, topic), (flt, topic)


def test_libmosquitto_is_present_on_the_ci_image() -> None:
    # The Debian image installs libmosquitto1 (common.md); a silent skip would hide the oracle.
    assert LIBMOSQ is not None


@pytest.mark.parametrize(
    ("flt", "topic"),
    [("a/#", "a"), ("#", "$SYS/x"), ("+/x", "$SYS/x"), ("+/+", "/a"), ("$SYS/#", "$SYS")],
)
def test_both_oracles_on_the_sharp_cases(flt: str, topic: str) -> None:
    ours = topic_matches(flt, topic)
    assert ours == topic_matches_sub(flt, topic)
    assert ours == mosquitto_matches(flt, topic)

"""Whatever arrives on ``access/claim``/``access/unclaim``, the answer is a reason code, never an
exception: random bytes, random JSON, and mutations of a valid claim (hypothesis)."""

from __future__ import annotations

import json
from typing import Any

from claims_helpers import OTHER, OWNER, NoThrottle, claim_obj, restriction, smoker_identity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_broker.claims.evaluate import evaluate_claim, evaluate_unclaim
from edge_broker.claims.model import Activity, RestrictionType
from edge_broker.mqtt.reason_codes import ReasonCode

VALID = claim_obj(restriction(None, RestrictionType.WHITELIST, (OTHER, Activity.SUBSCRIBE)))
ANSWERS = {ReasonCode.SUCCESS, ReasonCode.PAYLOAD_FORMAT_INVALID, ReasonCode.NOT_AUTHORIZED}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=60)
    | st.sampled_from(["WHITELIST", "BLACKLIST", "PUBLISH", "SUBSCRIBE", "ALL", "*", OWNER, OTHER]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


def answer(payload: bytes) -> ReasonCode | None:
    return evaluate_claim(smoker_identity(), 1, payload, NoThrottle(), 0.0).reason_code


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes(payload: bytes) -> None:
    assert answer(payload) is ReasonCode.PAYLOAD_FORMAT_INVALID
    assert evaluate_unclaim(smoker_identity(), 1, payload).reason_code in ANSWERS


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_random_json(value: Any) -> None:
    assert answer(json.dumps(value).encode()) is ReasonCode.PAYLOAD_FORMAT_INVALID


PATHS = [
    ["restriction"],
    ["signature"],
    ["restriction", "topicName"],
    ["restriction", "restrictionType"],
    ["restriction", "permissions"],
    ["restriction", "permissions", 0],
    ["restriction", "permissions", 0, "clientId"],
    ["restriction", "permissions", 0, "activity"],
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=json_values)
def test_mutated_valid_claim(path: list[str | int], value: Any) -> None:
    obj = json.loads(json.dumps(VALID))
    target = obj
    for step in path[:-1]:
        target = target[step]
    original = target[path[-1]]
    target[path[-1]] = value
    code = answer(json.dumps(obj, ensure_ascii=False).encode())
    # a changed claim is refused unless the change was no change at all
    assert code is (ReasonCode.SUCCESS if value == original else ReasonCode.PAYLOAD_FORMAT_INVALID)


def test_pathological_json() -> None:
    for payload in (
        b'{"restriction": ' + b"1" * 5000 + b', "signature": ""}',
        b"[" * 100_000,
        b'{"a":' * 50_000,
        b'"' + b"\\ud800" * 10 + b'"',
        b"\xef\xbb\xbf{}",  # a UTF-8 byte order mark
    ):
        assert answer(payload) is ReasonCode.PAYLOAD_FORMAT_INVALID

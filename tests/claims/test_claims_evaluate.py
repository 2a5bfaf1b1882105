"""Every row of the PUBACK table of SMOKER.md, in order, through ``evaluate_claim`` and
``evaluate_unclaim``."""

from __future__ import annotations

import base64
import json

import pytest
from claims_helpers import (
    OTHER,
    OTHER_KEY,
    OWNER,
    OWNER_KEY,
    NoThrottle,
    claim_obj,
    claim_payload,
    dumps,
    plain_identity,
    restriction,
    smoker_identity,
)

from edge_broker.claims.evaluate import evaluate_claim, evaluate_unclaim
from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType
from edge_broker.claims.signature import sign_restriction
from edge_broker.mqtt.reason_codes import ReasonCode

OK = ReasonCode.SUCCESS
INVALID = ReasonCode.PAYLOAD_FORMAT_INVALID
NOT_AUTHORIZED = ReasonCode.NOT_AUTHORIZED


def evaluate(payload: bytes, qos: int = 1, who: str = OWNER) -> tuple[ReasonCode | None, str]:
    outcome = evaluate_claim(smoker_identity(who), qos, payload, NoThrottle(), 0.0)
    return outcome.reason_code, outcome.reason_string or ""


def good() -> dict:  # type: ignore[type-arg]
    return claim_obj(restriction(None, RestrictionType.WHITELIST, (OTHER, Activity.SUBSCRIBE)))


def test_a_valid_claim_is_accepted_with_the_parsed_claim() -> None:
    r = restriction(None, RestrictionType.BLACKLIST, ("*", Activity.ALL), (OTHER, Activity.PUBLISH))
    throttle = NoThrottle()
    payload = claim_payload(r)
    outcome = evaluate_claim(smoker_identity(), 1, payload, throttle, 12.5)
    assert outcome.reason_code is OK and outcome.accepted and outcome.reason_string is None
    assert outcome.claim is not None and outcome.claim.restriction == r
    assert throttle.asked == [(OWNER, r.topic_name, len(payload), 12.5)]


def test_qos_2_is_processed_like_qos_1() -> None:
    assert evaluate(dumps(good()), qos=2)[0] is OK


def test_row_1_not_smoker_authenticated_is_0x87_before_anything_else() -> None:
    throttle = NoThrottle()
    outcome = evaluate_claim(plain_identity(OWNER), 1, b"not even json", throttle, 0.0)
    assert outcome.reason_code is NOT_AUTHORIZED and "SMOKER-authenticated" in (
        outcome.reason_string or ""
    )
    assert outcome.claim is None and throttle.asked == []
    # also at QoS 0 the authentication row comes first
    assert evaluate_claim(plain_identity(), 0, b"", throttle, 0.0).reason_code is NOT_AUTHORIZED


def test_row_2_qos_0_is_not_processed() -> None:
    code, reason = evaluate(dumps(good()), qos=0)
    assert code is None and "QoS 0" in reason


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        (b"", "empty"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"{not json", "not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'"text"', "must be a JSON object"),
        (b"NaN", "not JSON"),
        (b'{"restriction": {}, "signature": "", "extra": 1}', "unknown field"),
        (b'{"signature": "AAAA"}', "lacks field"),
    ],
)
def test_row_3_payload_format(payload: bytes, fragment: str) -> None:
    code, reason = evaluate(payload)
    assert code is INVALID and fragment in reason


def mutate(path: list[str | int], value: object, delete: bool = False) -> bytes:
    obj = good()
    target = obj
    for step in path[:-1]:
        target = target[step]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return dumps(obj)


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (["restriction", "restrictionType"], "whitelist", "upper case"),
        (["restriction", "restrictionType"], "Whitelist", "upper case"),
        (["restriction", "restrictionType"], "GREYLIST", "upper case"),
        (["restriction", "restrictionType"], 1, "must be a string"),
        (["restriction", "permissions"], {}, "must be a list"),
        (["restriction", "permissions"], None, "must be a list"),
        (["restriction", "permissions", 0, "activity"], "subscribe", "upper case"),
        (["restriction", "permissions", 0, "activity"], "READ", "upper case"),
        (["restriction", "permissions", 0, "activity"], ["ALL"], "must be a string"),
        (["restriction", "permissions", 0, "clientId"], "sensor-1", "neither '*' nor a SMOKER ID"),
        (["restriction", "permissions", 0, "clientId"], OTHER.lower(), "neither"),
        (["restriction", "permissions", 0, "clientId"], "**", "neither"),
        (["restriction", "permissions", 0, "clientId"], 7, "must be a string"),
        (["restriction", "permissions", 0, "role"], "x", "unknown field"),
        (["restriction", "permissions", 0], "ALL", "must be a JSON object"),
        (["restriction", "owner"], OWNER, "unknown field"),
        (["restriction"], [], "must be a JSON object"),
        (["signature"], 5, "must be a string"),
        (["signature"], "not base64!", "base64"),
        (["signature"], "QUJD", "signature has 3 bytes"),
    ],
)
def test_row_3_fields_types_and_enums(path: list[str | int], value: object, fragment: str) -> None:
    code, reason = evaluate(mutate(path, value))
    assert code is INVALID
    assert fragment in reason


@pytest.mark.parametrize("field", ["topicName", "restrictionType", "permissions"])
def test_row_3_missing_restriction_field(field: str) -> None:
    code, reason = evaluate(mutate(["restriction", field], None, delete=True))
    assert code is INVALID and "lacks field" in reason and field in reason


def test_row_3_duplicate_keys_are_refused() -> None:
    text = dumps(good()).decode()
    twice = text.replace('"signature":', '"signature": "AAAA", "signature":', 1)
    code, reason = evaluate(twice.encode())
    assert code is INVALID and "duplicate key" in reason


def topic_claim(topic: str) -> bytes:
    """A claim on ``topic`` correctly signed by OWNER (so that only the topic rule can fail)."""
    r = Restriction(topic, RestrictionType.WHITELIST, ())
    signed = OWNER_KEY.sign(r.canonical_bytes())
    return json.dumps(
        {"restriction": r.to_json_obj(), "signature": base64.b64encode(bytes(signed)).decode()},
        ensure_ascii=False,
    ).encode()


@pytest.mark.parametrize(
    ("topic", "fragment"),
    [
        ("", "empty or only whitespace"),
        ("   \t ", "empty or only whitespace"),
        (f"restricted/{OWNER}/+", "'+'"),
        (f"restricted/{OWNER}/a/#", "'#'"),
        (f"restricted/{OWNER}/a+b", "'+'"),
        (f"restricted/{OWNER}/a\x00b", "U+0000"),
        (f"restricted/{OWNER}//a", "empty level"),
        (f"restricted/{OWNER}/a/", "empty level"),
        (f"/restricted/{OWNER}/a", "empty level"),
        (f"restricted/{OWNER}", "restricted/<owner SMOKER ID>/"),
        (f"open/{OWNER}/a", "restricted/<owner SMOKER ID>/"),
        (f"Restricted/{OWNER}/a", "restricted/<owner SMOKER ID>/"),
        ("restricted/sensor-1/a", "restricted/<owner SMOKER ID>/"),
        (f"restricted/{OWNER.lower()}/a", "restricted/<owner SMOKER ID>/"),
        (f"restricted/{OWNER}/" + "x" * 65536, "UTF-8 bytes"),
    ],
)
def test_row_4_topic_name_rules(topic: str, fragment: str) -> None:
    code, reason = evaluate(topic_claim(topic))
    assert code is INVALID and fragment in reason
    assert len(reason) < 400  # a Reason String never echoes a whole 64 KB topic


def test_row_4_lone_surrogate_escape_is_payload_invalid() -> None:
    obj = good()
    obj["restriction"]["topicName"] = f"restricted/{OWNER}/a\ud800"
    payload = json.dumps(obj).encode()  # ensure_ascii: the surrogate travels as \ud800
    code, reason = evaluate(payload)
    assert code is INVALID and "surrogate" in reason


def test_row_5_signature_must_verify() -> None:
    r = restriction()
    canonical = r.canonical_bytes()
    sig = bytes(OWNER_KEY.sign(canonical))
    cases = {
        "wrong key": bytes(OTHER_KEY.sign(canonical)),
        "flipped bit": bytes([sig[0] ^ 1]) + sig[1:],
        "detached": sig[:64],
        "other message": bytes(OWNER_KEY.sign(canonical + b" ")),
        "non-canonical attached": sig[:64] + json.dumps(r.to_json_obj()).encode(),
    }
    for name, signature in cases.items():
        payload = dumps(
            {"restriction": r.to_json_obj(), "signature": base64.b64encode(signature).decode()}
        )
        code, reason = evaluate(payload)
        assert code is INVALID, name
        assert "signature" in reason or "attached" in reason, name


def test_row_5_a_changed_permission_breaks_the_signature() -> None:
    obj = good()
    obj["restriction"]["permissions"][0]["activity"] = "ALL"
    code, reason = evaluate(dumps(obj))
    assert code is INVALID and "attached" in reason


def test_row_6_owner_segment_must_be_the_publisher() -> None:
    # OTHER signs a valid claim on OTHER's area, but OWNER publishes it: a replay.
    theirs = claim_payload(restriction(owner=OTHER), OTHER_KEY)
    code, reason = evaluate(theirs, who=OWNER)
    assert code is NOT_AUTHORIZED and OTHER in reason
    assert evaluate(theirs, who=OTHER)[0] is OK


def test_row_order_signature_before_owner() -> None:
    # a claim that fails both the signature and the owner check answers the earlier row (0x99)
    r = restriction(owner=OTHER)
    forged = dumps(
        {
            "restriction": r.to_json_obj(),
            "signature": base64.b64encode(bytes(OWNER_KEY.sign(r.canonical_bytes()))).decode(),
        }
    )
    assert evaluate(forged, who=OWNER)[0] is INVALID


class Refuse:
    def admit(self, owner: str, topic: str, size: int, now: float, charge: int = 0) -> str | None:
        return "over the limit"


def test_row_7_throttle_refusal_is_quota_exceeded_after_every_check() -> None:
    outcome = evaluate_claim(smoker_identity(), 1, dumps(good()), Refuse(), 0.0)
    assert outcome.reason_code is ReasonCode.QUOTA_EXCEEDED
    assert outcome.reason_string == "over the limit" and outcome.claim is None
    # an invalid claim is 0x99 even when the throttle would refuse: the table's order
    bad = evaluate_claim(smoker_identity(), 1, b"{}", Refuse(), 0.0)
    assert bad.reason_code is INVALID
    foreign = claim_payload(restriction(owner=OTHER), OTHER_KEY)
    assert (
        evaluate_claim(smoker_identity(), 1, foreign, Refuse(), 0.0).reason_code is NOT_AUTHORIZED
    )


def test_key_order_and_whitespace_of_the_payload_do_not_matter() -> None:
    obj = claim_obj(
        restriction(None, RestrictionType.WHITELIST, ("*", Activity.PUBLISH), (OTHER, Activity.ALL))
    )
    r = obj["restriction"]
    shuffled = {
        "signature": obj["signature"],
        "restriction": {
            "permissions": [
                {"activity": p["activity"], "clientId": p["clientId"]} for p in r["permissions"]
            ],
            "topicName": r["topicName"],
            "restrictionType": r["restrictionType"],
        },
    }
    assert evaluate(json.dumps(shuffled, indent=4).encode())[0] is OK


def test_permission_order_is_signed() -> None:
    r = restriction(None, RestrictionType.WHITELIST, ("*", Activity.PUBLISH), (OTHER, Activity.ALL))
    obj = claim_obj(r)
    obj["restriction"]["permissions"].reverse()
    assert evaluate(dumps(obj))[0] is INVALID


def test_non_ascii_topic_is_signed_as_utf8() -> None:
    r = Restriction(
        f"restricted/{OWNER}/wohnzimmer/température/温度", RestrictionType.WHITELIST, ()
    )
    payload = sign_restriction(OWNER_KEY, r).to_json().encode()
    assert "温度".encode() in payload
    assert evaluate(payload)[0] is OK
    ascii_payload = json.dumps(json.loads(payload)).encode()  # \uXXXX escapes on the wire
    assert evaluate(ascii_payload)[0] is OK


def test_empty_permissions_and_duplicates_are_valid() -> None:
    assert evaluate(claim_payload(restriction(None, RestrictionType.WHITELIST)))[0] is OK
    dup = restriction(None, RestrictionType.BLACKLIST, (OTHER, Activity.ALL), (OTHER, Activity.ALL))
    assert evaluate(claim_payload(dup))[0] is OK


# --- unclaim -------------------------------------------------------------------------------


def unclaim(payload: bytes, qos: int = 1, who: str = OWNER, smoker: bool = True) -> tuple:  # type: ignore[type-arg]
    identity = smoker_identity(who) if smoker else plain_identity(who)
    outcome = evaluate_unclaim(identity, qos, payload)
    return outcome.reason_code, outcome.reason_string or "", outcome.topic


def test_unclaim_own_topic_is_accepted() -> None:
    topic = f"restricted/{OWNER}/temperature"
    assert unclaim(topic.encode()) == (OK, "", topic)
    deep = f"restricted/{OWNER}/küche/a/b"
    assert unclaim(deep.encode()) == (OK, "", deep)


def test_unclaim_rows() -> None:
    topic = f"restricted/{OWNER}/temperature".encode()
    assert unclaim(topic, smoker=False)[0] is NOT_AUTHORIZED
    assert unclaim(topic, qos=0)[0] is None
    assert unclaim(b"")[0] is INVALID
    assert unclaim(b"\xc3\x28")[0] is INVALID
    for bad in (
        b"restricted/",
        b"temperature",
        f"restricted/{OWNER}/#".encode(),
        f"restricted/{OWNER}".encode(),
        f"restricted/{OWNER}//x".encode(),
        b"   ",
    ):
        code, reason, target = unclaim(bad)
        assert code is INVALID and target is None, bad
        assert reason.startswith("unclaim:")
    code, reason, target = unclaim(f"restricted/{OTHER}/temperature".encode())
    assert code is NOT_AUTHORIZED and target is None and "only its owner" in reason


def test_identity_protocol_uses_the_proven_smoker_id_not_the_client_id() -> None:
    from edge_broker.identity import Identity

    odd = Identity(client_id=OTHER, method="smoker", smoker_id=OWNER)
    outcome = evaluate_claim(odd, 1, dumps(good()), NoThrottle(), 0.0)
    assert outcome.reason_code is OK
    assert Permission("*", Activity.ALL).covers(OTHER, Activity.PUBLISH)

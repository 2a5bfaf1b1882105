"""Strict parsing of a claim payload (SMOKER.md "Claim payload" and the 0x99 rows of the table).

Every refusal is a ``ClaimError`` with reason code 0x99 and a message naming the field and what
is wrong. Strict means: UTF-8 JSON object, exactly the documented fields (no unknown, none
missing, no duplicate keys), strings where strings belong, enums exactly upper case, a
permission's ``clientId`` ``*`` or a valid SMOKER ID, ``signature`` standard padded base64.
"""

from __future__ import annotations

import base64
import binascii
import json
import sys
from typing import Any, TypeVar

from ..mqtt.reason_codes import ReasonCode
from .errors import ClaimError, shown
from .model import (
    ANY_CLIENT,
    SIGNATURE_BYTES,
    Activity,
    Claim,
    Permission,
    Restriction,
    RestrictionType,
)
from .smoker_id import is_smoker_id
from .topics import validate_claim_topic

E = TypeVar("E", Activity, RestrictionType)

_CLAIM_FIELDS = frozenset({"restriction", "signature"})
_RESTRICTION_FIELDS = frozenset({"topicName", "restrictionType", "permissions"})
_PERMISSION_FIELDS = frozenset({"clientId", "activity"})


def _invalid(message: str) -> ClaimError:
    return ClaimError(ReasonCode.PAYLOAD_FORMAT_INVALID, message)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _invalid(f"duplicate key {key!r} in the claim JSON")
        obj[key] = value
    return obj


def _no_constants(name: str) -> Any:
    raise _invalid(f"{name} is not JSON")


def _fields(obj: Any, where: str, expected: frozenset[str]) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise _invalid(f"{where} must be a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - expected)
    missing = sorted(expected - set(obj))
    if unknown:
        raise _invalid(f"{where} has unknown field(s) {unknown}; allowed: {sorted(expected)}")
    if missing:
        raise _invalid(f"{where} lacks field(s) {missing}")
    return obj


def _string(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise _invalid(f"{where}.{key} must be a string, got {type(value).__name__}")
    return value


def _enum_value(enum: type[E], text: str, where: str) -> E:
    try:
        return enum(text)
    except ValueError:
        allowed = ", ".join(m.value for m in enum)
        raise _invalid(
            f"{where} is {shown(text)}; use exactly one of {allowed} (upper case)"
        ) from None


def parse_permission(obj: Any, where: str = "permission") -> Permission:
    fields = _fields(obj, where, _PERMISSION_FIELDS)
    client_id = _string(fields, "clientId", where)
    if client_id != ANY_CLIENT and not is_smoker_id(client_id):
        raise _invalid(f"{where}.clientId {client_id[:80]!r} is neither '*' nor a SMOKER ID")
    activity = _enum_value(Activity, _string(fields, "activity", where), f"{where}.activity")
    # interned: the same few IDs recur in many claims, and the index keeps them all in memory
    return Permission(sys.intern(client_id), activity)


def parse_restriction(obj: Any) -> Restriction:
    fields = _fields(obj, "restriction", _RESTRICTION_FIELDS)
    topic = _string(fields, "topicName", "restriction")
    kind = _enum_value(
        RestrictionType,
        _string(fields, "restrictionType", "restriction"),
        "restriction.restrictionType",
    )
    raw_permissions = fields["permissions"]
    if not isinstance(raw_permissions, list):
        raise _invalid(
            f"restriction.permissions must be a list, got {type(raw_permissions).__name__}"
        )
    permissions = tuple(
        parse_permission(p, f"restriction.permissions[{i}]") for i, p in enumerate(raw_permissions)
    )
    validate_claim_topic(topic)
    return Restriction(topic, kind, permissions)


def decode_signature(text: str) -> bytes:
    """Standard base64 with padding, nothing else (SMOKER.md)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error) as exc:
        raise _invalid(f"signature is not standard base64 with padding ({exc})") from None
    return raw


def load_json(data: bytes, what: str) -> Any:
    """Strict JSON: UTF-8, no duplicate keys, no NaN/Infinity; ``ClaimError`` 0x99 otherwise."""
    if not data:
        raise _invalid(f"{what} is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(f"{what} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        raise _invalid(f"{what} is not JSON: {exc}") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise _invalid(f"{what} cannot be read: {str(exc)[:120]}") from None
    except RecursionError:
        raise _invalid(f"{what} is nested too deeply") from None


def attached_part(restriction: Restriction, attached: bytes) -> bytes:
    """The 64 signature bytes of ``attached``, once its message is the canonical restriction."""
    try:
        canonical = restriction.canonical_bytes()
    except UnicodeEncodeError:
        raise _invalid(
            "the restriction contains a lone surrogate (a \\uD800-\\uDFFF escape) and has no "
            "UTF-8 form to sign"
        ) from None
    if len(attached) < SIGNATURE_BYTES:
        raise _invalid(
            f"signature has {len(attached)} bytes; an attached Ed25519 signature has 64 bytes "
            "followed by the signed restriction"
        )
    if attached[SIGNATURE_BYTES:] != canonical:
        raise _invalid(
            "the message attached to the signature is not the canonical restriction (keys "
            "sorted, no whitespace, UTF-8): sign exactly those bytes with crypto_sign"
        )
    return attached[:SIGNATURE_BYTES]


def parse_claim(payload: bytes) -> Claim:
    """The claim in an ``access/claim`` payload, its attached message checked against the
    canonical restriction; the signature itself is checked by ``signature.verify_claim``."""
    fields = _fields(load_json(payload, "the claim payload"), "claim", _CLAIM_FIELDS)
    restriction = parse_restriction(fields["restriction"])
    attached = decode_signature(_string(fields, "signature", "claim"))
    return Claim(restriction, attached_part(restriction, attached))

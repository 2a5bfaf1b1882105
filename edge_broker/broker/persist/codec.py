"""CBOR-ready records for what persistence stores (issue 8): messages, wills, identities,
subscriptions and sessions, and back.

Deadlines are values of the broker's clock (``Broker.clock``, the one clock of the session
lifecycle) in memory and wall-clock seconds on disk, so a message expiry or a session expiry
survives a restart (MQTT 5 §3.3.2.3.3, §3.1.2.11.2): the broker's clock starts anew with each
process, and only the wall clock means the same moment after a restart.
Every decoder raises :class:`RecordError` naming the record and field when a stored value does
not have the expected shape (a record written by another version, or damage the frame CRC did
not catch); recovery skips and reports such records instead of crashing.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from ...identity import Identity
from ...mqtt.packets import NO_PROPERTIES, Properties, Will
from ..message import Message
from ..session import Outgoing

_TUPLE_FIELDS = ("subscription_identifiers", "user_properties")
_PROPERTY_NAMES = frozenset(f.name for f in dataclasses.fields(Properties))


class RecordError(ValueError):
    """A stored record does not decode; the message names the record kind and the field."""


def to_wall(deadline: float | None, now_mono: float, now_wall: float) -> float | None:
    """A deadline on the broker's clock as wall-clock seconds (``None`` stays ``None``)."""
    return None if deadline is None else now_wall + (deadline - now_mono)


def to_mono(wall: float | None, now_mono: float, now_wall: float) -> float | None:
    return None if wall is None else now_mono + (wall - now_wall)


def encode_properties(props: Properties) -> dict[str, Any] | None:
    """The properties that differ from their defaults, by field name (``None``: none)."""
    if props is NO_PROPERTIES:
        return None
    out: dict[str, Any] = {}
    for name in _PROPERTY_NAMES:
        value = getattr(props, name)
        if value is None or value == ():
            continue
        if name == "user_properties":
            value = [list(pair) for pair in value]
        elif name == "subscription_identifiers":
            value = list(value)
        out[name] = value
    return out or None


def decode_properties(raw: Any, what: str) -> Properties:
    if raw is None:
        return NO_PROPERTIES
    if not isinstance(raw, dict) or not set(raw) <= _PROPERTY_NAMES:
        raise RecordError(f"{what}: properties {raw!r} are not a map of MQTT property names")
    values = dict(raw)
    for name in _TUPLE_FIELDS:
        if name in values:
            if name == "user_properties":
                values[name] = tuple((str(k), str(v)) for k, v in values[name])
            else:
                values[name] = tuple(int(v) for v in values[name])
    try:
        return Properties(**values)
    except TypeError as exc:
        raise RecordError(f"{what}: properties do not decode ({exc})") from exc


def encode_message(message: Message, now_mono: float, now_wall: float) -> list[Any]:
    return [
        message.topic,
        message.payload,
        message.qos,
        message.retain,
        encode_properties(message.properties),
        to_wall(message.expires_at, now_mono, now_wall),
        message.origin,
    ]


def decode_message(raw: Any, what: str, now_mono: float, now_wall: float) -> Message:
    try:
        topic, payload, qos, retain, props, expires, origin = raw
    except (TypeError, ValueError):
        raise RecordError(
            f"{what}: a message is [topic, payload, qos, retain, properties, "
            f"expires, origin], got {raw!r:.120}"
        ) from None
    if not isinstance(topic, str) or not isinstance(payload, bytes) or qos not in (0, 1, 2):
        raise RecordError(f"{what}: message topic/payload/qos have the wrong types")
    if expires is not None and not isinstance(expires, int | float):
        raise RecordError(f"{what}: message expiry {expires!r} is not a number")
    if origin is not None and not isinstance(origin, str):
        raise RecordError(f"{what}: message origin {origin!r} is not a string")
    return Message(
        topic,
        payload,
        qos,
        bool(retain),
        decode_properties(props, what),
        to_mono(expires, now_mono, now_wall),
        origin,
    )


def encode_outgoing(
    client_id: str, outgoing: Outgoing, now_mono: float, now_wall: float
) -> list[Any]:
    return [
        client_id,
        encode_message(outgoing.message, now_mono, now_wall),
        outgoing.qos,
        outgoing.retain,
        list(outgoing.sub_ids),
    ]


def decode_outgoing(raw: Any, what: str, now_mono: float, now_wall: float) -> tuple[str, Outgoing]:
    try:
        client_id, message, qos, retain, sub_ids = raw
    except (TypeError, ValueError):
        raise RecordError(
            f"{what}: a queued message is [client_id, message, qos, retain, "
            f"sub_ids], got {raw!r:.120}"
        ) from None
    if not isinstance(client_id, str) or qos not in (1, 2) or not isinstance(sub_ids, list):
        raise RecordError(f"{what}: queued message client id/qos/sub_ids have the wrong types")
    decoded = decode_message(message, what, now_mono, now_wall)
    if sub_ids and not all(type(i) is int for i in sub_ids):
        raise RecordError(f"{what}: subscription identifiers {sub_ids!r:.80} are not integers")
    return client_id, Outgoing(decoded, qos, bool(retain), tuple(sub_ids) if sub_ids else ())


def encode_will(will: Will) -> list[Any]:
    return [will.topic, will.payload, will.qos, will.retain, encode_properties(will.properties)]


def decode_will(raw: Any, what: str) -> Will:
    try:
        topic, payload, qos, retain, props = raw
    except (TypeError, ValueError):
        raise RecordError(f"{what}: a will is [topic, payload, qos, retain, properties]") from None
    if not isinstance(topic, str) or not isinstance(payload, bytes) or qos not in (0, 1, 2):
        raise RecordError(f"{what}: will topic/payload/qos have the wrong types")
    return Will(topic, payload, qos, bool(retain), decode_properties(props, what))


_IDENTITY_FIELDS = (
    "client_id",
    "method",
    "tenant",
    "username",
    "cert_cn",
    "interface",
    "smoker_id",
    "subscription_patterns",
    "tenant_verified",
    "client_id_verified",
)
_IDENTITY_FLAGS = ("subscription_patterns", "tenant_verified", "client_id_verified")


def encode_identity(identity: Identity) -> dict[str, Any]:
    """The identity without run-time parts (addresses, compiled token grants, token expiry):
    a restored session is offline until its client connects again with fresh credentials."""
    out: dict[str, Any] = {name: getattr(identity, name) for name in _IDENTITY_FIELDS}
    out["roles"] = list(identity.roles)
    return out


def decode_identity(raw: Any, what: str) -> Identity:
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("client_id"), str)
        or not isinstance(raw.get("method"), str)
    ):
        raise RecordError(f"{what}: identity {raw!r:.120} lacks client_id/method")
    values: dict[str, Any] = {name: raw.get(name) for name in _IDENTITY_FIELDS if name in raw}
    for flag in _IDENTITY_FLAGS:  # absent in records written before the flag existed: False
        values[flag] = bool(values.get(flag, False))
    values["roles"] = tuple(str(r) for r in raw.get("roles", ()))
    try:
        return Identity(**values)
    except TypeError as exc:
        raise RecordError(f"{what}: identity does not decode ({exc})") from exc


def now_pair(clock: Callable[[], float]) -> tuple[float, float]:
    """(``clock``, wall) read together, for the conversions above; ``clock`` is the broker's
    (``Persistence.clock``), so a test's fake clock and the stored deadlines agree."""
    return clock(), time.time()

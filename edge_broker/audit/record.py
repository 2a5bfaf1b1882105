"""The audit record: one JSON object per line, format version 1.

Every denial, and optionally every allowed decision, becomes a ``decision`` record; connects,
disconnects, claims, policy changes and similar happenings become ``event`` records. The cloud
pipeline (``edge_broker.pipeline``) reads these files with ``spark.read.json``; keep fields flat
and their names stable. A new field may be added within a version; renaming or changing the
meaning of one needs a new ``v``.

Fields (absent when not applicable; ``null`` is never written):

=========  ======  =================================================================
field      type    meaning
=========  ======  =================================================================
v          int     format version, 1
ts         float   Unix time in seconds (UTC), millisecond precision
gw         str     gateway id: [audit] gateway_id, else [sync] gateway_id, else host name
type       str     ``decision`` or ``event``
action     str     decision: ``connect``, ``will``, ``publish``, ``subscribe``, ``deliver``
event      str     event: ``connect``, ``disconnect``, ``claim``, ``unclaim``,
                   ``policy_applied``, ``policy_rejected``, ``client_stats``, ...
client     str     client identifier (deliver: the publisher, when known)
user       str     username, when authenticated with one (deliver: the receiver's)
tenant     str     tenant (``~`` by default)
method     str     authentication method
topic      str     topic or topic filter the decision is about
qos        int     publish, will, deliver: the message's QoS; subscribe: the requested QoS
retain     bool    publish, will, deliver: the message's RETAIN flag
roles      list    the principal's roles (str, sorted); absent when it has none
cn         str     subject CN of the client's TLS certificate (certificate logins)
iface      str     name of the local network interface the connection arrived on (the
                   site ACL's ``interfaces``)
grants     str     token clients: sha256 hex of their grants for the tenant (``grants_digest``
                   in ``events.py``): equal digests, equal grants
set        str     permission set(s) (comma-separated, in assignment order) the client's
                   assignment chose, or ``unassigned``; written when default permissions judge
msg        str     publish, will, subscribe: the site ACL's message kind (``put``, ``delete``,
                   ``query``, ``reply``; ``declare_subscriber``, ``declare_queryable``)
addr       str     connect: the client's IP address (no port)
outcome    str     ``allow``, ``deny`` or ``disconnect``
gate       str     deciding gate: syntax, reserved, authorizer, permissions, token, acl, claims
rule       str     id of the deciding rule, when one decided
rc         int     MQTT reason code sent to the client
reason     str     human-readable reason (the Reason String)
to         str     deliver: the receiving client (the one the egress gate refused)
msgs_in    int     client_stats: PUBLISH packets received from the client since its last
                   client_stats record (deltas: summing a client's records gives totals)
msgs_out   int     client_stats: PUBLISH packets sent to the client (delta)
bytes_in   int     client_stats: bytes received (delta)
bytes_out  int     client_stats: bytes sent (delta)
detail     str     free text for events
count      int     aggregated records: how many identical requests this record stands for
                   (absent means 1); see ``aggregate.py``
first_ts   float   aggregated records: time of the first request counted in ``count``
last_ts    float   aggregated records: time of the last request counted in ``count``
=========  ======  =================================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

FORMAT_VERSION = 1

RECORD_FIELDS: dict[str, type] = {
    "v": int,
    "ts": float,
    "gw": str,
    "type": str,
    "action": str,
    "event": str,
    "client": str,
    "user": str,
    "tenant": str,
    "method": str,
    "topic": str,
    "qos": int,
    "retain": bool,
    "roles": list,
    "cn": str,
    "iface": str,
    "grants": str,
    "set": str,
    "msg": str,
    "addr": str,
    "outcome": str,
    "gate": str,
    "rule": str,
    "rc": int,
    "reason": str,
    "to": str,
    "msgs_in": int,
    "msgs_out": int,
    "bytes_in": int,
    "bytes_out": int,
    "detail": str,
    "count": int,
    "first_ts": float,
    "last_ts": float,
}
RECORD_TYPES = ("decision", "event")


def _is(value: Any, expected: type) -> bool:
    """JSON's types as the fields use them: a float field takes an integer, a bool is never a
    number, a list holds strings (``roles``)."""
    if expected is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if expected is float:
        return isinstance(value, (int, float))
    if expected is list:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    return isinstance(value, expected)


class AuditRecordError(ValueError):
    """A line that is not a valid version-1 audit record."""


def encode_record(record: Mapping[str, Any]) -> str:
    """One line of JSON (without the newline); drops ``None`` values."""
    return json.dumps(
        {key: value for key, value in record.items() if value is not None},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def decode_record(line: str) -> dict[str, Any]:
    """Parse and check one line; raises AuditRecordError saying what is wrong."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise AuditRecordError(f"not JSON: {exc.msg} at column {exc.colno}") from exc
    if not isinstance(record, dict):
        raise AuditRecordError("an audit record must be a JSON object")
    if record.get("v") != FORMAT_VERSION:
        raise AuditRecordError(
            f"unsupported format version {record.get('v')!r}; expected {FORMAT_VERSION}"
        )
    if record.get("type") not in RECORD_TYPES:
        raise AuditRecordError(
            f"field 'type' must be one of {RECORD_TYPES}, not {record.get('type')!r}"
        )
    for key, value in record.items():
        expected = RECORD_FIELDS.get(key)
        if expected is None:
            continue  # fields added later within version 1 are tolerated by older readers
        if not _is(value, expected):
            raise AuditRecordError(
                f"field {key!r} must be {expected.__name__}, not {type(value).__name__}"
            )
    return record

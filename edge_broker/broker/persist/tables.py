"""The tables of ``broker.log`` and their rows (issues 8 and 17).

One :class:`~edge_broker.store.KeyedLog` file, ``<state_dir>/broker.log``, with tables:

- ``s``: session key → session record (tenant, identity, protocol level, expiry interval, expiry
  deadline while offline, pending delayed will, the connected client's will, subscriptions with
  options and identifiers, next packet id, owning principal); only sessions that outlive their
  connection. A record without an owner (older state) gets ``ownership.owner_of_restored``.
- ``msg``: message id → a QoS 1/2 message held by persistent sessions, stored once however many
  hold it; ``ref``: reference id → ``[session key, message id, qos, retain, packet id or None,
  released, subscription ids (None, one id or a list)]``, one per session holding it, queued
  (no packet id) or in flight (rows of format 2, ``[…, released, *subscription ids]``, and
  earlier, ``[…, retain, [subscription ids], packet id, released]``, are read as well).
  A message is deleted with its last reference (counted in ``Persistence._messages``). The
  references of a turn are written as batched ops (one per kind: new rows, packet ids,
  releases, deletes; store/keyed.py), and after recovery the journals hold them instead of the
  store's index (``KeyedLog.hold``; compaction reads ``Persistence.held_rows``).
- ``q``: ``session key NUL packet id`` → incoming QoS 2 awaiting PUBREL (exactly once).
- ``r``: ``tenant NUL topic`` → retained message (``$`` topics such as ``$SYS`` are not stored).
- ``meta``: ``format`` → 3. Format 2 loads as it is; format 1 (tables ``m``/``f``: a whole
  message per session) is migrated at start (migrations.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...config import Config
from ...mqtt.packets import Will
from ...store import Op, Put
from ...store.keyed import RAW_DELETE, RAW_DELETES, RAW_PUT, RAW_ROWS, RAW_SET, RAW_SETS
from ...store.state_dir import state_dir
from ..ownership import owner_of_restored, principal_from_record
from ..session import Outgoing, Session, SubscriptionEntry, client_id_of
from .codec import (
    RecordError,
    decode_identity,
    decode_will,
    to_mono,
)

BROKER_LOG = "broker.log"
SESSIONS, QOS2, RETAINED, META = "s", "q", "r", "meta"
MESSAGES, REFS = "msg", "ref"  # each message once; queued/in-flight references to it
REF_PID, REF_RELEASED = 4, 5  # positions in a reference row, changed by RAW_SET(S)
REF_WIDTH = 7  # fields of a reference row written by this build (RAW_ROWS, compaction)
BATCH_ROWS = 4096  # references per batched op: a turn's refs become ops of at most this many
OLD_MESSAGES, OLD_FLIGHT = "m", "f"  # the previous format (a message per session), migrated
FORMAT = 3  # 3: batched reference ops (kinds 9-11) and a 7-field reference row; 2 is read
CHUNK_BYTES = 1 << 20  # ops of one commit beyond this are split into several records


# A reference held by a journal: (outgoing, reference number, the message's entry in
# Persistence._messages ([message id, references, message]), the number of the turn batch its
# row went into (-1: restored) and the place of its packet id there (Persistence.ref_sent)).
Ref = tuple[Outgoing, int, list[Any], int, int]


def log_path(config: Config) -> Path:
    return state_dir(config) / BROKER_LOG  # store/state_dir.py: one place decides the directory


def ref_row(cid: str, ref: Ref, pid: int | None, released: bool) -> list[Any]:
    """A reference row as this build writes it (REF_WIDTH fields; see put_ref)."""
    outgoing = ref[0]
    sub_ids = outgoing.sub_ids
    return [
        cid,
        ref[2][0],
        outgoing.qos,
        outgoing.retain,
        pid,
        released,
        None if not sub_ids else sub_ids[0] if len(sub_ids) == 1 else list(sub_ids),
    ]


def decode_ref(raw: Any) -> tuple[str, int, int, bool, tuple[int, ...], int | None, bool] | None:
    """``[session key, message id, qos, retain, packet id or None, released, sub ids]`` with
    the subscription ids ``None``, one id or a list (format 3), ``[…, released, *sub ids]``
    (format 2), or ``[…, retain, [sub ids], packet id or None, released]`` (earlier)."""
    if not isinstance(raw, list) or len(raw) < 6:
        return None
    if isinstance(raw[4], list):
        if len(raw) != 7:
            return None
        cid, message_id, qos, retain, sub_ids, pid, released = raw
    else:
        cid, message_id, qos, retain, pid, released = raw[:6]
        sub_ids = raw[6:]
        if len(sub_ids) == 1 and (sub_ids[0] is None or isinstance(sub_ids[0], list)):
            sub_ids = sub_ids[0] or []
    if (
        not isinstance(cid, str)
        or not isinstance(message_id, int)
        or qos not in (1, 2)
        or not all(type(i) is int for i in sub_ids)
        or not (pid is None or type(pid) is int)
    ):
        return None
    return cid, message_id, qos, bool(retain), tuple(sub_ids), pid, bool(released)


def decode_session(
    cid: str, raw: Any, now_mono: float, now_wall: float
) -> tuple[Session, Will | None]:
    what = f"session {cid!r}"
    if isinstance(raw, list | tuple) and len(raw) == 10:
        raw = [*raw, None]  # written before sessions recorded their owner (issue 15)
    (
        tenant,
        identity_raw,
        level,
        expiry,
        expires,
        will_raw,
        will_at,
        live_raw,
        subs,
        next_pid,
        owner_raw,
    ) = raw
    identity = decode_identity(identity_raw, what)
    if not isinstance(tenant, str) or level not in (3, 4, 5) or not isinstance(expiry, int):
        raise RecordError(f"{what}: tenant/protocol level/expiry have the wrong types")
    session = Session(client_id_of(cid), tenant, identity, level)
    if session.key != cid:
        raise RecordError(f"{what}: the record's tenant {tenant!r} does not match its key")
    session.owner = principal_from_record(owner_raw) or owner_of_restored(identity)
    session.expiry_interval = expiry
    session.expires_at = to_mono(expires, now_mono, now_wall)
    session.will = None if will_raw is None else decode_will(will_raw, what)
    session.will_at = to_mono(will_at, now_mono, now_wall)
    session.next_packet_id = next_pid if isinstance(next_pid, int) and 0 < next_pid <= 65535 else 1
    for sub in subs:
        topic_filter, qos, no_local, rap, rh, sub_id, share_group, recheck = sub
        if not isinstance(topic_filter, str) or qos not in (0, 1, 2):
            raise RecordError(f"{what}: subscription {sub!r:.80} has the wrong types")
        session.subscriptions[topic_filter] = SubscriptionEntry(
            session,
            topic_filter,
            qos,
            bool(no_local),
            bool(rap),
            int(rh),
            sub_id if isinstance(sub_id, int) else None,
            share_group if isinstance(share_group, str) else None,
            bool(recheck),
        )
    live_will = None if live_raw is None else decode_will(live_raw, what)
    return session, live_will


def op_weight(op: Op) -> int:
    """About the bytes ``op`` takes in a record (payloads dominate)."""
    if isinstance(op, Put) and op.table in (MESSAGES, RETAINED):
        return 64 + len(op.value[1])
    return 64


def flat_chunks(ops: list[Any]) -> Iterator[tuple[list[Any], int, int]]:
    """Flat ops (``Persistence._ops``) in chunks of about ``CHUNK_BYTES`` each, with their
    weight and op count."""
    start = i = size = count = 0
    end = len(ops)
    while i < end:
        kind = ops[i]
        width = _FLAT_WIDTH[kind]
        weight = 64
        if kind == RAW_PUT and ops[i + 1] in (MESSAGES, RETAINED):
            weight += len(ops[i + 3][1])
        elif kind >= RAW_ROWS:  # batched: its list of rows is its last field
            weight += 4 * len(ops[i + width - 1])
        if count and size + weight > CHUNK_BYTES:
            yield ops[start:i], size, count
            start, size, count = i, 0, 0
        i += width
        size += weight
        count += 1
    if count:
        yield ops[start:], size, count


_FLAT_WIDTH = {RAW_PUT: 4, RAW_DELETE: 3, RAW_SET: 5, RAW_ROWS: 4, RAW_SETS: 4, RAW_DELETES: 3}


def ops_weight(ops: list[Op]) -> int:
    return sum(op_weight(op) for op in ops)

"""Stores of earlier formats brought to this one at start (docs/persistence.md)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...store import Delete, Op, Put, StoreError
from ..session import Session
from .codec import (
    RecordError,
    decode_outgoing,
    encode_message,
)
from .hooks import restore
from .tables import CHUNK_BYTES, FORMAT, MESSAGES, META, OLD_FLIGHT, OLD_MESSAGES, REFS, ops_weight

if TYPE_CHECKING:
    from .persistence import Persistence

log = logging.getLogger("edge_broker.persistence")


def migrate(
    store: Persistence,
    sessions: dict[str, Session],
    now_mono: float,
    now_wall: float,
    drop: list[Op],
) -> int:
    """A store of the previous format (tables ``m``: a whole message per session and
    ``f``: its packet id) becomes references to messages stored once; each message's
    conversion is one atomic record, so a crash midway resumes at the next start."""
    if not (store.keyed.has_table(OLD_MESSAGES) or store.keyed.has_table(OLD_FLIGHT)):
        if store.keyed.lookup(META, "format") != FORMAT:
            drop.append(Put(META, "format", FORMAT))
        return 0
    flights = store.keyed.rows(OLD_FLIGHT)
    groups: list[list[Op]] = []
    count = 0
    for key, raw in store.keyed.iter_items(OLD_MESSAGES):
        old: list[Op] = [Delete(OLD_MESSAGES, key)]
        flight = flights.pop(key, None)
        if flight is not None:
            old.append(Delete(OLD_FLIGHT, key))
        try:
            cid, outgoing = decode_outgoing(raw, f"message {key!r}", now_mono, now_wall)
        except RecordError as exc:
            log.warning(f"broker store: {exc}; dropped", extra={"event": "store_record"})
            groups.append(old)
            continue
        session = sessions.get(cid)
        if session is None or outgoing.message.expired(now_mono):
            groups.append(old)
            continue
        pid, released = None, False
        if isinstance(flight, list) and len(flight) == 2 and isinstance(flight[0], int):
            pid, released = flight[0], bool(flight[1])
        seq, message_id = store._seq, store._seq + 1
        store._seq += 2
        pid = restore(store, session, seq, outgoing, pid, released, message_id)
        groups.append(
            [
                Put(MESSAGES, message_id, encode_message(outgoing.message, now_mono, now_wall)),
                Put(
                    REFS,
                    seq,
                    [
                        cid,
                        message_id,
                        outgoing.qos,
                        outgoing.retain,
                        pid,
                        released and pid is not None,
                        *outgoing.sub_ids,
                    ],
                ),
                *old,
            ]
        )
        count += 1
    groups.extend([Delete(OLD_FLIGHT, key)] for key in flights)
    groups.append([Put(META, "format", FORMAT)])
    record: list[Op] = []
    try:
        for group in groups:
            if record and ops_weight(record) + ops_weight(group) > CHUNK_BYTES:
                store.keyed.commit_sync(record)
                record = []
            record.extend(group)
        if record:
            store.keyed.commit_sync(record)
    except StoreError as exc:
        store._failed(exc)
        log.error(
            f"broker store: migrating the previous format failed: {exc}; it is "
            "retried at the next start",
            extra={"event": "store_migration"},
        )
        return count
    log.warning(
        f"broker store {store.keyed.path}: migrated {count} queued messages from "
        "the previous format (one record per session) to messages stored once",
        extra={"event": "store_migration", "messages": count},
    )
    return count

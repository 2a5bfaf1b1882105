"""Recovery at start (docs/persistence.md): the log back into the broker.

Recovery (:func:`recover`) replays the log (a torn tail is truncated and reported),
drops expired sessions and messages, restores subscriptions into the topic spaces, sessions
into ``broker.sessions`` (so reload re-checks them) and their queues and in-flight windows,
then the broker serves. A session whose client was connected at the crash is treated as
disconnected at start: its expiry starts then and its will (if any) follows its delay.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Protocol

from ...mqtt.packets import Will
from ...store import Delete, Op, Put, StoreError
from ..message import Message
from ..session import NEVER_EXPIRES, Outgoing, Session
from .codec import (
    RecordError,
    decode_message,
    now_pair,
)
from .hooks import PersistentJournal, restore
from .migrations import migrate
from .tables import MESSAGES, QOS2, REFS, RETAINED, SESSIONS, decode_ref, decode_session

if TYPE_CHECKING:
    from ..topic_space import TopicSpace
    from .persistence import Persistence

log = logging.getLogger("edge_broker.persistence")


class RecoveryTarget(Protocol):
    """What recovery fills: the topic spaces (subscriptions and retained messages), the
    sessions, and the wills of sessions that expired while the broker was down."""

    @property
    def separator(self) -> str: ...

    def topic_space(self, tenant: str) -> TopicSpace: ...

    def restore_session(self, session: Session) -> None: ...

    def publish_will(self, session: Session, will: Will) -> None: ...


def recover(store: Persistence, broker: RecoveryTarget) -> None:
    """Load retained messages and sessions into ``broker`` (module docstring)."""
    started = time.perf_counter()  # how long recovery took, for the log line
    report = store.keyed.report
    if not report.clean:
        log.warning(
            f"broker store recovery: {report}",
            extra={
                "event": "store_recovery",
                "path": store.keyed.path,
                "bytes_dropped": report.bytes_dropped,
                "tail_bytes_dropped": report.tail_bytes_dropped,
            },
        )
    now_mono, now_wall = now_pair(store.clock)
    drop: list[Op] = []
    retained = _recover_retained(store, broker, now_mono, now_wall, drop)
    sessions = _recover_sessions(store, broker, now_mono, now_wall, drop)
    messages = _recover_messages(store, sessions, now_mono, now_wall, drop)
    for key, _ in store.keyed.iter_items(QOS2):
        cid, _, pid = str(key).rpartition("\x00")  # the session key may hold a U+0000 too
        session = sessions.get(cid)
        if session is None or not pid.isdigit():
            drop.append(Delete(QOS2, key))
        else:
            session.hold_incoming(int(pid))
    for session in sessions.values():
        broker.restore_session(session)
    if drop:
        try:
            store.keyed.commit_sync(drop, split_to_fit=True)
        except StoreError as exc:
            store._failed(exc)
    # From here the journals hold the references; the index keeps no copy of them, and
    # compaction asks held_rows (issue 17: a copy per reference cost as much as its ops).
    store.keyed.hold(REFS, store)
    store._recording = True
    # Only deletions are drops: rows rewritten in place and the format mark are not.
    dropped = sum(isinstance(op, Delete) for op in drop)
    log.info(
        f"broker store {store.keyed.path}: {len(sessions)} sessions, {messages} queued "
        f"messages, {retained} retained messages restored in "
        f"{time.perf_counter() - started:.3f} s ({dropped} expired or unusable records "
        "dropped)",
        extra={
            "event": "store_loaded",
            "path": store.keyed.path,
            "sessions": len(sessions),
            "messages": messages,
            "retained": retained,
            "dropped": dropped,
        },
    )


def _recover_retained(
    store: Persistence, broker: RecoveryTarget, now_mono: float, now_wall: float, drop: list[Op]
) -> int:
    count = 0
    for key, raw in store.keyed.iter_items(RETAINED):
        tenant, _, topic = str(key).partition("\x00")
        try:
            message = decode_message(raw, f"retained {topic!r}", now_mono, now_wall)
        except RecordError as exc:
            log.warning(f"broker store: {exc}; dropped", extra={"event": "store_record"})
            drop.append(Delete(RETAINED, key))
            continue
        if message.expired(now_mono) or not topic:
            drop.append(Delete(RETAINED, key))
            continue
        broker.topic_space(tenant).retained.set(message)
        count += 1
    return count


def _recover_sessions(
    store: Persistence, broker: RecoveryTarget, now_mono: float, now_wall: float, drop: list[Op]
) -> dict[str, Session]:
    from ...matching.subscription_patterns import subscription_pattern

    sessions: dict[str, Session] = {}
    for key, raw in store.keyed.iter_items(SESSIONS):
        cid = str(key)
        try:
            session, live_will = decode_session(cid, raw, now_mono, now_wall)
        except (RecordError, TypeError, ValueError) as exc:
            log.warning(
                f"broker store: session {cid!r}: {exc}; dropped",
                extra={"event": "store_record"},
            )
            drop.append(Delete(SESSIONS, key))
            continue
        if session.expires_at is None and session.expiry_interval != NEVER_EXPIRES:
            session.expires_at = now_mono + session.expiry_interval  # was online at the crash
        if live_will is not None and session.will is None:
            delay = live_will.properties.will_delay_interval or 0
            session.will = live_will
            session.will_at = now_mono + min(delay, session.expiry_interval)
        if session.expires_at is not None and session.expires_at <= now_mono:
            drop.append(Delete(SESSIONS, key))
            if session.will is not None:
                broker.publish_will(session, session.will)
            continue
        space = broker.topic_space(session.tenant)
        for topic_filter, entry in list(session.subscriptions.items()):
            try:
                _, inner, pattern = subscription_pattern(
                    topic_filter, broker.separator, session.identity.subscription_patterns
                )
            except Exception as exc:  # a rule the running config no longer accepts
                log.warning(
                    f"broker store: subscription {topic_filter!r} of {cid!r} dropped: {exc}",
                    extra={"event": "store_record"},
                )
                del session.subscriptions[topic_filter]
                continue
            space.subscribe(entry, inner, pattern)
        store._tracked[cid] = session
        session.journal = PersistentJournal(store, session)
        sessions[cid] = session
    return sessions


def _recover_messages(
    store: Persistence,
    sessions: dict[str, Session],
    now_mono: float,
    now_wall: float,
    drop: list[Op],
) -> int:
    messages: dict[int, Message] = {}
    highest = 0
    for key, raw in store.keyed.iter_items(MESSAGES):
        if not isinstance(key, int):
            drop.append(Delete(MESSAGES, key))
            continue
        highest = max(highest, key)
        try:
            messages[key] = decode_message(raw, f"message {key}", now_mono, now_wall)
        except RecordError as exc:
            log.warning(f"broker store: {exc}; dropped", extra={"event": "store_record"})
            drop.append(Delete(MESSAGES, key))
    count = 0
    refs = [(key, raw) for key, raw in store.keyed.iter_items(REFS) if isinstance(key, int)]
    drop.extend(
        Delete(REFS, key) for key, _ in store.keyed.iter_items(REFS) if not isinstance(key, int)
    )
    for key, raw in sorted(refs, key=lambda item: item[0]):
        highest = max(highest, key)
        ref = decode_ref(raw)
        session = None if ref is None else sessions.get(ref[0])
        message = None if ref is None else messages.get(ref[1])
        if ref is None:
            log.warning(
                f"broker store: reference {key} {raw!r:.80} does not decode; dropped",
                extra={"event": "store_record"},
            )
        if session is None or message is None or message.expired(now_mono):
            drop.append(Delete(REFS, key))
            continue
        assert ref is not None
        cid, message_id, qos, retain, sub_ids, pid, released = ref
        restored = restore(
            store, session, key, Outgoing(message, qos, retain, sub_ids), pid, released, message_id
        )
        if isinstance(raw[4], list) or (restored is None and (pid is not None or released)):
            # RAW_SET changes a row in place (ref_sent, ref_released): rows of the old
            # shape, and queued rows still naming a packet id, are written as it expects.
            row = [cid, message_id, qos, retain, restored, released and restored is not None]
            drop.append(Put(REFS, key, [*row, *sub_ids]))
        count += 1
    for message_id, message in messages.items():  # no reference left (all expired)
        if id(message) not in store._messages:
            drop.append(Delete(MESSAGES, message_id))
    store._seq = highest + 1
    return count + migrate(store, sessions, now_mono, now_wall, drop)

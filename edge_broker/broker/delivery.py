"""Routing a message through a topic space to the sessions subscribed, and the outgoing QoS flow.

MQTT 5 §3.3.4: a client subscribed through several overlapping filters gets ONE copy with the
highest granted QoS and all matching Subscription Identifiers; a shared subscription group gets one
copy for one of its members (§4.8.2). QoS 1/2 messages beyond the client's Receive Maximum, or
for an offline or slow client, wait in the session queue, bounded in messages and bytes; what
does not fit is dropped and counted (``$SYS/broker/publish/messages/dropped``). A slow client's
QoS 0 messages are dropped and counted too, never buffered without bound.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .message import Message
from .session import Outgoing, Session, SubscriptionEntry
from .topic_space import SharedGroup, TopicSpace

if TYPE_CHECKING:
    from .server import Broker


class Delivery:
    __slots__ = ("broker", "stats", "max_queued", "max_queued_bytes")

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.stats = broker.stats
        self.max_queued = broker.config.limits.max_queued_messages
        self.max_queued_bytes = broker.config.limits.max_queued_bytes

    def route(self, space: TopicSpace, message: Message) -> int:
        """Deliver ``message`` to every matching subscription; return how many got it."""
        hits = space.match(message.topic)
        if not hits:
            return 0
        policy = self.broker.policy  # read each time: the policy may be swapped at run time
        if not policy.routable(message.topic):
            return 0
        origin = message.origin
        check = policy.has_delivery_gates
        count = 0
        if len(hits) == 1:  # the common case: no overlapping filters to merge
            for key, value in hits[0].items():
                if type(value) is SharedGroup:
                    if self._deliver_shared(value, message, check):
                        count += 1
                elif value.no_local and key == origin:  # type: ignore[attr-defined]
                    continue
                elif self._deliver(value, message, check):  # type: ignore[arg-type]
                    count += 1
            return count
        groups: dict[object, list[SubscriptionEntry]] = {}
        for subs in hits:
            for key, value in subs.items():
                if type(value) is SharedGroup:
                    if self._deliver_shared(value, message, check):
                        count += 1
                    continue
                assert isinstance(value, SubscriptionEntry)
                if value.no_local and key == origin:
                    continue
                entries = groups.get(key)
                if entries is None:
                    groups[key] = [value]
                else:
                    entries.append(value)
        for entries in groups.values():
            if self._deliver_merged(entries, message, check):
                count += 1
        return count

    def _deliver_shared(self, group: SharedGroup, message: Message, check: bool) -> bool:
        """One member of a shared group (MQTT 5 §4.8.2); members the delivery gates refuse are
        passed over, so the message reaches a member allowed to receive it (SMOKER.md: claims
        are decided per delivery), or nobody."""
        entry = group.pick(message.qos)
        if entry is None or not (check or entry.recheck):
            return entry is not None and self._deliver(entry, message, False)
        policy = self.broker.policy
        for _ in range(len(group.members)):
            if entry is None:
                return False
            if policy.check_deliver(entry.session, message, entry).allowed:
                return self._deliver(entry, message, False)
            entry = group.pick(message.qos)
        return False

    def _deliver(self, entry: SubscriptionEntry, message: Message, check: bool) -> bool:
        session = entry.session
        if (check or entry.recheck) and not self.broker.policy.check_deliver(
                session, message, entry).allowed:
            return False
        qos = entry.qos if entry.qos < message.qos else message.qos
        retain = message.retain if entry.retain_as_published else False
        sub_ids = (entry.subscription_id,) if entry.subscription_id else ()
        if qos == 0:  # the fan-out hot path: no Outgoing, no queue
            conn = session.connection
            if conn is None:
                return False
            if conn.paused:
                self.stats.dropped += 1
                return False
            return conn.send_message(message, 0, retain, sub_ids)
        return self.send(session, Outgoing(message, qos, retain, sub_ids))

    def _deliver_merged(
        self, entries: list[SubscriptionEntry], message: Message, check: bool
    ) -> bool:
        if len(entries) == 1:
            return self._deliver(entries[0], message, check)
        session = entries[0].session
        rechecked = [e for e in entries if e.recheck]
        # a subscription without recheck already admits the topic; else the widest rechecked one
        through = max(rechecked, key=lambda e: e.qos) if len(rechecked) == len(entries) else None
        if (check or rechecked) and not self.broker.policy.check_deliver(
            session, message, through
        ).allowed:
            return False
        qos = min(max(e.qos for e in entries), message.qos)
        retain = message.retain and any(e.retain_as_published for e in entries)
        sub_ids = tuple(sorted({e.subscription_id for e in entries if e.subscription_id}))
        return self.send(session, Outgoing(message, qos, retain, sub_ids))

    def send(self, session: Session, outgoing: Outgoing) -> bool:
        """Send now, or queue (QoS 1/2), or drop (counted). True if sent or queued."""
        conn = session.connection
        if outgoing.qos == 0:
            if conn is None:
                return False
            if conn.paused:
                self.stats.dropped += 1
                return False
            return conn.send_publish(outgoing)
        if (
            conn is None
            or conn.paused
            or session.queue
            or len(session.inflight) >= conn.send_quota
        ):
            return self.enqueue(session, outgoing)
        conn.register_inflight(outgoing)
        return True

    def enqueue(self, session: Session, outgoing: Outgoing) -> bool:
        size = outgoing.message.size
        if (
            len(session.queue) >= self.max_queued
            or session.queued_bytes + size > self.max_queued_bytes
        ):
            self.stats.dropped += 1
            return False
        session.queue.append(outgoing)
        session.queued_bytes += size
        session.journal.queued(outgoing)
        return True

    def drain(self, session: Session) -> None:
        """Move queued messages into flight while the client has quota and is not slow."""
        conn = session.connection
        queue = session.queue
        policy = self.broker.policy
        check = policy.has_delivery_gates
        while queue and conn is not None and not conn.paused and not conn.closing:
            if len(session.inflight) >= conn.send_quota:
                return
            outgoing = queue.popleft()
            session.queued_bytes -= outgoing.message.size
            if check and not policy.check_deliver(session, outgoing.message).allowed:
                session.journal.dropped(outgoing)
                continue  # denied since it was queued (a claim update: decided at delivery time)
            if outgoing.qos == 0:
                session.journal.dropped(outgoing)
                conn.send_publish(outgoing)
            else:
                conn.register_inflight(outgoing)

"""Routing a message through a topic space to the sessions subscribed, and the outgoing QoS flow.

MQTT 5 §3.3.4: a client subscribed through several overlapping filters gets ONE copy with the
highest granted QoS and all matching Subscription Identifiers; a shared subscription group gets one
copy for one of its members (§4.8.2). QoS 1/2 messages beyond the client's Receive Maximum, or
for an offline or slow client, wait in the session queue, bounded in messages and bytes; what
does not fit is dropped and counted (``$SYS/broker/publish/messages/dropped``). A slow client's
QoS 0 messages are dropped and counted too, never buffered without bound.

``[limits] queue_overflow`` (issue 16) decides what a full queue of an ONLINE session does:
``drop`` (the default, as Mosquitto: counted, and logged with the client id, rate-limited) or
``backpressure``: the message is kept beyond the limit (up to twice it) and the publisher's
PUBLISH handler waits (:meth:`Delivery.congestion`: its connection stops reading) until the
queue has drained to half, for at most ``backpressure_timeout`` seconds; a session still full
then drops until it has drained (so one stuck subscriber cannot stop its publishers for long).
Offline sessions always drop: nobody is reading their queue.

Only the publisher whose own message met a full queue is held, once per PUBLISH (issue 31 item
3): one deadline per publish whatever the number of full queues (:meth:`Delivery.congestion`),
and only deliveries routed for a client's PUBLISH (``route(..., publisher=True)``) can hold
anyone: a will, a bridged message, ``$SYS`` or a retained message sent at SUBSCRIBE is kept
beyond the limit like a held one, but holds nobody. A subscriber that kept a publisher waiting
until the deadline is the one that loses: every session of its principal (its owner,
broker/ownership.py) drops what meets its full queue, holding nobody, until the session that
timed out has drained to half; so five stalled sessions of one principal cost a publisher one
hold, not five.

``[limits] max_queued_bytes_total`` bounds every session's queue together (what Message.size
counts plus :data:`QUEUE_ENTRY_BYTES` an entry): 2,000 sessions of 4 MiB each are 8 GB, more
than a Pi has. The running total is kept here and recounted from the sessions every few
seconds (:meth:`Delivery.recount`), so queues filled or emptied elsewhere (a session restored
from the log, one that ends) cannot make it drift for long.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Protocol

from .limits.quotas import UNATTRIBUTED
from .message import Message
from .session import NO_QUEUE, Outgoing, Session, SubscriptionEntry, new_outgoing
from .topic_space import SharedGroup, TopicSpace

if TYPE_CHECKING:
    from ..authz.policy import Policy
    from ..config import Config
    from .bridging import Bridging
    from .limits.limit_hits import LimitHits
    from .limits.quotas import Quotas
    from .stats import BrokerStats


QUEUE_ENTRY_BYTES = 120  # an Outgoing and its deque slot, besides the message's own size


class DeliveryHost(Protocol):
    """What delivery reads of the broker (``Broker`` is one). The policy is read at each use: a
    reload or a bundle swaps it."""

    @property
    def config(self) -> Config: ...

    @property
    def stats(self) -> BrokerStats: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def limit_hits(self) -> LimitHits: ...

    @property
    def bridges(self) -> Bridging | None: ...

    @property
    def quotas(self) -> Quotas: ...


class Delivery:
    __slots__ = (
        "broker",
        "stats",
        "max_queued",
        "max_queued_bytes",
        "backpressure",
        "backpressure_timeout",
        "congested",
        "_publishing",
        "_waiting",
        "_overflowing",
        "max_queued_total",
        "queued_total",
    )

    def __init__(self, broker: DeliveryHost) -> None:
        self.broker = broker
        self.stats = broker.stats
        limits = broker.config.limits
        self.max_queued = limits.max_queued_messages
        self.max_queued_bytes = limits.max_queued_bytes
        self.max_queued_total = limits.max_queued_bytes_total
        self.queued_total = 0  # every session's queue, as max_queued_bytes_total counts it
        self.backpressure = limits.queue_overflow == "backpressure"
        self.backpressure_timeout = limits.backpressure_timeout
        # sessions whose queue went beyond the limit during the current publisher's route()
        self.congested: list[Session] = []
        self._publishing = False  # route() runs for a client's PUBLISH: its publisher may wait
        self._waiting: dict[Session, list[asyncio.Future[None]]] = {}  # publishers held
        # subscribers (principals) that held a publisher until its deadline → the sessions that
        # did: all their sessions drop when full until those have drained
        self._overflowing: dict[object, set[Session]] = {}

    def route(self, space: TopicSpace, message: Message, publisher: bool = False) -> int:
        """Deliver ``message`` to every matching subscription; return how many got it.
        ``publisher``: routed for a client's PUBLISH, whose handler then calls
        :meth:`congestion` (nothing else may turn a full queue into a hold; without
        ``backpressure`` nothing is ever held, so there is nothing to note)."""
        if publisher and self.backpressure:
            self.congested.clear()
            self._publishing = True
            try:
                return self.route(space, message)
            finally:
                self._publishing = False
        bridges = self.broker.bridges
        if bridges is not None:  # issue 19: the bridges' outbound queues see every message
            bridges.offer(space.tenant, message)
        hits = space.match(message.topic)
        if not hits:
            return 0
        policy = self.broker.policy  # read each time: the policy may be swapped at run time
        if not policy.routable(message):
            return 0
        origin = message.origin
        # gates 5-6 check only deliveries through subscriptions marked ``egress`` (issue 21)
        check = policy.has_delivery_gates
        count = 0
        if len(hits) == 1:  # the common case: no overlapping filters to merge
            deliver = self._deliver  # bound once, not per subscriber of a fan-out
            for key, value in hits[0].items():
                if type(value) is SharedGroup:
                    if self._deliver_shared(value, message, check):
                        count += 1
                elif value.no_local and key == origin:  # type: ignore[attr-defined]
                    continue
                elif deliver(value, message, check):  # type: ignore[arg-type]
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
        if entry is None:
            return False
        if not ((check and entry.egress) or entry.recheck):
            return self._deliver(entry, message, False)
        policy = self.broker.policy
        for _ in range(len(group.members)):
            if entry is None:
                return False
            if (
                not ((check and entry.egress) or entry.recheck)
                or policy.check_deliver(entry.session, message, entry).allowed
            ):
                return self._deliver(entry, message, False)
            entry = group.pick(message.qos)
        return False

    def _deliver(self, entry: SubscriptionEntry, message: Message, check: bool) -> bool:
        session = entry.session
        egress = check and entry.egress
        if (egress or entry.recheck) and not self.broker.policy.check_deliver(
            session, message, entry
        ).allowed:
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
            return conn.send_message(message, retain, sub_ids)
        # no gate 5-6 can deny it under this policy: the queue's drain need not ask again
        exempt = None if egress else self.broker.policy.epoch
        return self.send(session, new_outgoing(message, qos, retain, sub_ids, exempt))

    def _deliver_merged(
        self, entries: list[SubscriptionEntry], message: Message, check: bool
    ) -> bool:
        if len(entries) == 1:
            return self._deliver(entries[0], message, check)
        session = entries[0].session
        rechecked = [e for e in entries if e.recheck]
        # a subscription without recheck already admits the topic; else the widest rechecked one
        through = max(rechecked, key=lambda e: e.qos) if len(rechecked) == len(entries) else None
        egress = check and any(e.egress for e in entries)
        if (egress or rechecked) and not self.broker.policy.check_deliver(
            session, message, through
        ).allowed:
            return False
        qos = min(max(e.qos for e in entries), message.qos)
        retain = message.retain and any(e.retain_as_published for e in entries)
        sub_ids = tuple(sorted({e.subscription_id for e in entries if e.subscription_id}))
        exempt = None if egress else self.broker.policy.epoch
        return self.send(session, new_outgoing(message, qos, retain, sub_ids, exempt))

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
        if conn is None or conn.paused or session.queue or not session.window_open(conn.send_quota):
            return self.enqueue(session, outgoing)
        conn.register_inflight(outgoing)
        return True

    def enqueue(self, session: Session, outgoing: Outgoing) -> bool:
        size = outgoing.message.size
        if self.queued_total + size + QUEUE_ENTRY_BYTES > self.max_queued_total:
            self._drop_overflow(session, size, "max_queued_bytes_total")
            return False
        # the session's tenant and owner have a share of max_queued_bytes_total (quotas.py;
        # below the ledger's floor its refusal answers with one comparison)
        owner = session.owner
        if owner is not None:
            refused = self.broker.quotas.queued_bytes.refusal(
                self.broker.config.limits, session.tenant, owner, size + QUEUE_ENTRY_BYTES
            )
            if refused is not None:
                self._drop_over_share(session, size, refused)
                return False
        queue = session.queue
        if queue is NO_QUEUE:  # the first message that waits: the session's own deque
            queue = session.open_queue()
        if len(queue) >= self.max_queued or session.queued_bytes + size > self.max_queued_bytes:
            if self.backpressure and self._hold_beyond_limit(session, outgoing, size):
                return True
            self._drop_overflow(session, size)
            return False
        queue.append(outgoing)
        session.queued_bytes += size
        self.queued_total += size + QUEUE_ENTRY_BYTES
        session.journal.queued(outgoing)
        self.hold_queue(session)
        return True

    def _drop_over_share(self, session: Session, size: int, refused: tuple[str, str]) -> None:
        """The message would take the session's tenant or owner past its share of
        ``max_queued_bytes_total`` (limits/quotas.py): dropped for this session, counted."""
        self.stats.dropped += 1
        key, reason = refused
        self.broker.limit_hits.limits_key(
            key,
            session.client_id,
            f"a message of {size} bytes for {session.client_id!r} dropped: {reason}",
        )

    def hold_queue(self, session: Session) -> None:
        """What ``session``'s queue holds, charged to its tenant and owner (quotas.py)."""
        self.broker.quotas.queued_bytes.hold(
            session,
            session.tenant,
            session.owner or UNATTRIBUTED,
            session.queued_bytes + len(session.queue) * QUEUE_ENTRY_BYTES,
        )

    def recount(self, sessions: Iterable[Session]) -> None:
        """The total of every queue, counted afresh (every few seconds, from the broker's tick)."""
        total = 0
        for session in sessions:
            self.hold_queue(session)
            if session.queue:
                total += session.queued_bytes + len(session.queue) * QUEUE_ENTRY_BYTES
        self.queued_total = total

    def forget_queue(self, session: Session) -> None:
        """A session's queue is about to be emptied (the session ends)."""
        self.queued_total = max(
            0, self.queued_total - session.queued_bytes - len(session.queue) * QUEUE_ENTRY_BYTES
        )

    def _drop_overflow(self, session: Session, size: int, limit: str = "") -> None:
        """A full queue drops the message: counted, and logged with the client id."""
        self.stats.dropped += 1
        if not limit:
            limit = (
                "max_queued_messages"
                if len(session.queue) >= self.max_queued
                else "max_queued_bytes"
            )
        state = "online" if session.connection is not None else "offline"
        self.broker.limit_hits.limits_key(
            limit,
            session.client_id,
            f"queue of {session.client_id!r} ({state}) full with {len(session.queue)} messages, "
            f"{session.queued_bytes} bytes: a message of {size} bytes dropped",
        )

    def _hold_beyond_limit(self, session: Session, outgoing: Outgoing, size: int) -> bool:
        """``backpressure``: keep the message (up to twice the limits) for an online session
        that has not been held too long, and note the session for :meth:`congestion`."""
        if session.connection is None:
            return False
        timed_out = self._overflowing.get(_subscriber(session)) if self._overflowing else None
        if timed_out is not None:
            if any(s.connection is not None for s in timed_out):
                return False  # its principal kept a publisher waiting: it drops
            del self._overflowing[_subscriber(session)]  # those sessions are gone since
        if (
            len(session.queue) >= 2 * self.max_queued
            or session.queued_bytes + size > 2 * self.max_queued_bytes
        ):
            return False
        session.open_queue().append(outgoing)
        session.queued_bytes += size
        self.queued_total += size + QUEUE_ENTRY_BYTES
        session.journal.queued(outgoing)
        self.hold_queue(session)
        if self._publishing:
            self.congested.append(session)
        return True

    def congestion(self) -> Awaitable[None] | None:
        """After routing a PUBLISH under ``backpressure``: an awaitable the publisher's handler
        returns (so its connection stops reading) that ends when every session it filled has
        drained to half, or after ``backpressure_timeout``; ``None`` if nothing is full."""
        sessions = set(self.congested)
        self.congested.clear()
        if not sessions:
            return None
        self.stats.backpressure_holds += 1
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for session in sessions:
            self._waiting.setdefault(session, []).append(future)
        return self._held(future, sessions)

    async def _held(self, future: asyncio.Future[None], sessions: set[Session]) -> None:
        try:
            await asyncio.wait_for(future, self.backpressure_timeout)
        except TimeoutError:
            self.stats.backpressure_timeouts += 1
            self._forget_gone()
            for session in sessions:
                waiting = self._waiting.get(session)
                if waiting is not None and future in waiting:
                    waiting.remove(future)
                    if not waiting:
                        del self._waiting[session]
                if session.connection is not None and len(session.queue) >= self.max_queued:
                    self._overflowing.setdefault(_subscriber(session), set()).add(session)
                    self.broker.limit_hits.limits_key(
                        "backpressure_timeout",
                        session.client_id,
                        f"{session.client_id!r} did not drain its queue in "
                        f"{self.backpressure_timeout:g} s: its publishers go on, the full "
                        f"queues of {_subscriber(session)} drop until it has drained",
                    )

    def _forget_gone(self) -> None:
        """Sessions that lost their connection no longer keep their principal overflowing."""
        for key in list(self._overflowing):
            live = {s for s in self._overflowing[key] if s.connection is not None}
            if live:
                self._overflowing[key] = live
            else:
                del self._overflowing[key]

    def _release(self, session: Session) -> None:
        """The session's queue has drained to half: its held publishers read again, and its
        principal holds publishers again once every session of it that timed out has drained."""
        key = _subscriber(session)
        timed_out = self._overflowing.get(key)
        if timed_out is not None:
            timed_out.discard(session)
            if not timed_out:
                del self._overflowing[key]
        for future in self._waiting.pop(session, ()):
            if not future.done():
                future.set_result(None)

    def drain(self, session: Session) -> None:
        """Move queued messages into flight while the client has quota and is not slow."""
        conn = session.connection
        queue = session.queue
        policy = self.broker.policy
        # checked whenever gates 5-6 exist, unless routed under this policy through a
        # subscription they cannot deny (``Outgoing.exempt``, issue 32)
        check = policy.has_delivery_gates
        quota = conn.send_quota if conn is not None else 0  # agreed at CONNACK: read once
        while queue and conn is not None and not conn.paused and not conn.closing:
            if not session.window_open(quota):
                break  # the ledger and the held publishers below still hear what has left
            outgoing = queue.popleft()
            size = outgoing.message.size
            session.queued_bytes -= size
            self.queued_total -= size + QUEUE_ENTRY_BYTES
            if (
                check
                and outgoing.exempt is not policy.epoch
                and not policy.check_deliver(session, outgoing.message).allowed
            ):
                session.journal.dropped(outgoing)
                continue  # denied since it was queued (a claim update: decided at delivery time)
            if outgoing.qos == 0:
                session.journal.dropped(outgoing)
                conn.send_publish(outgoing)
            else:
                conn.register_inflight(outgoing)
        self.hold_queue(session)
        if (
            (self._waiting or self._overflowing)
            and len(queue) <= self.max_queued // 2
            and (session.queued_bytes <= self.max_queued_bytes // 2)
        ):
            self._release(session)


def _subscriber(session: Session) -> object:
    """Who loses when a hold times out: the session's principal (every session of one user,
    token subject, SMOKER key or anonymous listener), or the session when its owner is unknown."""
    owner = session.owner
    return owner if owner is not None else session

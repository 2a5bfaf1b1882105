"""The claim service: the live claim index on top of a durable store (SMOKER.md "Claim store").

Every claim and unclaim goes through ``evaluate_claim``/``evaluate_unclaim``; an accepted one
is written to the store and only then applied to the index and answered 0x00, so a PUBACK 0x00
is a promise that the claim survives a crash. Writes run shielded from cancellation (a client
that disconnects mid-write cannot leave the index and the store disagreeing), and are applied in
the order they were queued, which is the order of the log.

At start-up every stored claim is re-verified (parse, signature, owner in topic, stored under
its own topic). A record that fails is *quarantined*: it stays in the store, is kept out of
service, and its topic answers 0x83 until the owner claims it again or unclaims it.

With ``lazy=True`` (the broker) start-up only reads the records: each one stays *pending* until
``verify_pending`` (a background task, a batch per event-loop turn) or the first decision that
needs it verifies it, so a broker with 100k claims serves at once. Invariant: a pending record
is never used for a decision, a claims request or a listing without being verified first.

Claims are per tenant (AUTHZ.md §1: every tenant is an isolated topic space).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ..identity import DEFAULT_TENANT, Identity
from ..mqtt.reason_codes import ReasonCode
from ..store import StoreError
from .access import AccessResult, ClaimRecord, Quarantined, decide
from .errors import ClaimError
from .evaluate import ClaimOutcome, UnclaimOutcome, evaluate_claim, evaluate_unclaim
from .info import (
    INVOLVED,
    OWNED,
    InfoRequestOutcome,
    check_claims_request,
    claims_info_page,
    is_involved,
    parse_page_request,
)
from .model import ANY_CLIENT, Activity, Claim
from .persistence import ClaimPersistence, record_value, verify_record
from .pool import claim_charge, document_charge
from .throttle import ClientBuckets, FloodGuard, ThrottleLimits
from .topics import owner_segment


@dataclass(frozen=True, slots=True)
class LoadReport:
    """What start-up found: claims in service, records quarantined (tenant, topic, why).

    ``pending`` counts records read but not yet verified (lazy loading); ``seconds`` is the
    time spent reading and verifying.
    """

    loaded: int
    quarantined: tuple[tuple[str, str, str], ...]
    seconds: float
    pending: int = 0


@dataclass(frozen=True, slots=True)
class _Pending:
    """A stored document read at start-up and not yet re-verified (never decides anything)."""

    value: Any


@dataclass(frozen=True, slots=True)
class _TenantQuota:
    """The ``ClaimThrottle`` of one tenant: the flood guard fed from the claim index."""

    service: ClaimService
    tenant: str

    def admit(self, owner: str, topic: str, size: int, now: float, charge: int = 0) -> str | None:
        service = self.service
        tenant = self.tenant
        released = service.released_by(tenant, topic)
        return service.guard.admit(
            owner,
            topic,
            size,
            now,
            service.live_topics(tenant, owner),
            service.live_total(),
            (tenant, service.live_in_tenant(tenant)),
            (
                charge,
                service.pool_used() - released,
                service.pool_used(tenant) - released,
            ),
        )


_EMPTY: Mapping[str, ClaimRecord | _Pending] = MappingProxyType({})


class ClaimService:
    """The claims of a broker: index, flood guard, durable claim/unclaim, access decisions."""

    __slots__ = (
        "store",
        "guard",
        "load_report",
        "generation",
        "_clock",
        "_wall_clock",
        "_index",
        "_owned",
        "_naming",
        "_charges",
        "_pool",
        "_inflight",
        "_seq",
        "_tasks",
        "_pending",
        "requests",
        "request_scans",
    )

    def __init__(
        self,
        store: ClaimPersistence,
        limits: ThrottleLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        *,
        lazy: bool = False,
    ) -> None:
        """Load every stored claim and re-verify it now, or (``lazy``) before its first use."""
        self.store = store
        self._clock = clock
        self._wall_clock = wall_clock
        self.guard = FloodGuard(limits or ThrottleLimits(), now=clock())
        limits = self.guard.limits
        self.requests = ClientBuckets(limits.request_rate, limits.request_burst)
        # per requester (issue 31 item 6): one client's requests never spend another's budget
        self.request_scans = ClientBuckets(limits.request_scan_rate, limits.request_scan_rate)
        self.generation = 0  # bumped on every change: decision caches key on it
        self._index: dict[str, dict[str, ClaimRecord | _Pending]] = {}
        self._owned: dict[tuple[str, str], set[str]] = {}
        # (tenant, bucket of a client id, or -1 for "*") -> sorted topics of the claims whose
        # permissions name a client of that bucket: a claims request reads its bucket instead
        # of scanning the tenant's claims (bounded keys: see _bucket)
        self._naming: dict[tuple[str, int], list[str]] = {}
        # tenant -> topic -> what its record is charged of max_claims_bytes (claims/pool.py);
        # _pool: tenant -> the sum of its charges ("" -> every tenant's)
        self._charges: dict[str, dict[str, int]] = {}
        self._pool: dict[str, int] = {"": 0}
        # (tenant, topic) -> (sequence, owner or None for an unclaim, charge reserved)
        self._inflight: dict[tuple[str, str], tuple[int, str | None, int]] = {}
        self._seq = 0
        self._tasks: set[asyncio.Task[str | None]] = set()
        self._pending: dict[tuple[str, str], None] = {}  # (tenant, topic) still to verify
        self.load_report = self._load(lazy)

    # -- start-up ---------------------------------------------------------------------------------

    def _load(self, lazy: bool) -> LoadReport:
        started = time.perf_counter()
        quarantined: list[tuple[str, str, str]] = []
        for tenant, topic, value in self.store.records():
            if lazy:
                self._set(tenant, topic, _Pending(value), document_charge(value))
                self._pending[(tenant, topic)] = None
            else:
                record = self._verified(tenant, topic, value, quarantined)
                self._set(tenant, topic, record, _charge(record, value))
        loaded = len(self) - len(quarantined) - len(self._pending)
        return LoadReport(
            loaded, tuple(quarantined), time.perf_counter() - started, len(self._pending)
        )

    @staticmethod
    def _verified(
        tenant: str, topic: str, value: Any, quarantined: list[tuple[str, str, str]]
    ) -> ClaimRecord:
        try:
            return verify_record(topic, value)
        except ClaimError as exc:
            quarantined.append((tenant, topic, exc.message))
            return Quarantined(topic, exc.message)

    def _resolve(self, tenant: str, topic: str, record: _Pending) -> ClaimRecord:
        """Verify one pending record in place (first use, or the background pass)."""
        found: list[tuple[str, str, str]] = []
        verified = self._verified(tenant, topic, record.value, found)
        self._index[tenant][topic] = verified
        self._recharge(tenant, topic, _charge(verified, record.value))
        self._name(tenant, topic, verified, True)
        self._pending.pop((tenant, topic), None)
        if found:
            report = self.load_report
            self.load_report = LoadReport(
                report.loaded, report.quarantined + tuple(found), report.seconds, report.pending
            )
        return verified

    def verify_all(self) -> None:
        """Verify every pending record now (listings, tools)."""
        for tenant, topic in list(self._pending):
            record = self._index.get(tenant, {}).get(topic)
            if isinstance(record, _Pending):
                self._resolve(tenant, topic, record)
            else:
                self._pending.pop((tenant, topic), None)

    async def verify_pending(self, batch: int = 64) -> LoadReport:
        """Verify every pending record, ``batch`` per event-loop turn, so that the broker keeps
        serving meanwhile; return the final ``load_report`` (``pending`` 0)."""
        started = time.perf_counter()
        while self._pending:
            keys = list(self._pending)  # a snapshot: popping from a dict's front while
            for i, (tenant, topic) in enumerate(keys):  # iterating it again is quadratic
                record = self._index.get(tenant, {}).get(topic)
                if isinstance(record, _Pending):
                    self._resolve(tenant, topic, record)
                else:
                    self._pending.pop((tenant, topic), None)
                if i % batch == batch - 1:
                    await asyncio.sleep(0)  # serve clients between batches
            await asyncio.sleep(0)
        report = self.load_report
        in_service = sum(
            1 for table in self._index.values() for r in table.values() if isinstance(r, Claim)
        )
        self.load_report = LoadReport(
            in_service,
            report.quarantined,
            report.seconds + time.perf_counter() - started,
            0,
        )
        return self.load_report

    @property
    def pending(self) -> int:
        """Records read at start-up and not verified yet."""
        return len(self._pending)

    # -- reading ----------------------------------------------------------------------------------

    def lookup(self, topic: str, tenant: str = DEFAULT_TENANT) -> ClaimRecord | None:
        """The claim (or quarantined record) on ``topic``, verified before it is returned."""
        record = self._index.get(tenant, _EMPTY).get(topic)
        if isinstance(record, _Pending):
            return self._resolve(tenant, topic, record)
        return record

    def decide(self, identity: Identity, topic: str, activity: Activity) -> AccessResult:
        """SMOKER.md "Access decision" for ``identity`` on a concrete topic, as of now."""
        tenant = identity.tenant
        return decide(identity.smoker_id, topic, activity, lambda t: self.lookup(t, tenant))

    def owned_claims(self, owner: str, tenant: str = DEFAULT_TENANT) -> list[Claim]:
        self.verify_all()
        table = self._index.get(tenant, _EMPTY)
        records = (table.get(t) for t in self._owned.get((tenant, owner), ()))
        return sorted((r for r in records if isinstance(r, Claim)), key=_topic_of)

    def tenants(self) -> list[str]:
        return sorted(t for t, table in self._index.items() if table)

    def records(self, tenant: str = DEFAULT_TENANT) -> list[ClaimRecord]:
        """Every claim and quarantined record of ``tenant``."""
        self.verify_all()
        return [r for r in self._index.get(tenant, _EMPTY).values() if not isinstance(r, _Pending)]

    def quarantined(self, tenant: str = DEFAULT_TENANT) -> list[Quarantined]:
        self.verify_all()
        return [r for r in self._index.get(tenant, _EMPTY).values() if isinstance(r, Quarantined)]

    def quarantined_count(self) -> int:
        """Quarantined records found so far (pending ones are not verified for this)."""
        return sum(
            1
            for table in self._index.values()
            for r in table.values()
            if isinstance(r, Quarantined)
        )

    def live_topics(self, tenant: str, owner: str) -> Collection[str]:
        """The owner's topics in the index plus claims of it still being written."""
        owned = self._owned.get((tenant, owner), set())
        writing = {
            topic
            for (t, topic), (_, who, _) in self._inflight.items()
            if t == tenant and who == owner and topic not in owned
        }
        return owned | writing if writing else owned

    def live_total(self) -> int:
        return sum(len(t) for t in self._index.values()) + sum(
            1 for _, who, _ in self._inflight.values() if who is not None
        )

    def live_in_tenant(self, tenant: str) -> int:
        """The live claims of ``tenant``, those still being written included."""
        return len(self._index.get(tenant, _EMPTY)) + sum(
            1 for (t, _), (_, who, _) in self._inflight.items() if t == tenant and who is not None
        )

    def pool_used(self, tenant: str | None = None) -> int:
        """Bytes of ``max_claims_bytes`` charged to the live claims (of ``tenant``), those
        still being written included."""
        stored = self._pool.get("" if tenant is None else tenant, 0)
        return stored + sum(
            charge for (t, _), (_, _, charge) in self._inflight.items() if tenant in (None, t)
        )

    def pool_stored(self, tenant: str | None = None) -> int:
        """Bytes charged to the claims in the index (of ``tenant``): what a restart recharges."""
        return self._pool.get("" if tenant is None else tenant, 0)

    def released_by(self, tenant: str, topic: str) -> int:
        """What a new claim on ``topic`` frees of the pool: the charge of the record it replaces,
        none while another write of the topic is in flight (its reservation stays until it
        lands)."""
        if (tenant, topic) in self._inflight:
            return 0
        return self._charges.get(tenant, {}).get(topic, 0)

    def __len__(self) -> int:
        return sum(len(t) for t in self._index.values())

    # -- claim, unclaim, request ------------------------------------------------------------------

    async def claim(self, publisher: Identity, qos: int, payload: bytes) -> ClaimOutcome:
        """Evaluate a PUBLISH to ``access/claim`` and store it; 0x00 only once durable."""
        tenant = publisher.tenant
        outcome = evaluate_claim(publisher, qos, payload, _TenantQuota(self, tenant), self._clock())
        claim = outcome.claim
        if claim is None:
            return outcome
        value = record_value(claim, self._wall_clock(), tenant)
        failed = await asyncio.shield(
            self._start_write(tenant, claim.topic_name, claim, value, claim_charge(claim))
        )
        if failed is not None:
            return ClaimOutcome(ReasonCode.UNSPECIFIED_ERROR, failed)
        return outcome

    async def unclaim(self, publisher: Identity, qos: int, payload: bytes) -> UnclaimOutcome:
        """Evaluate a PUBLISH to ``access/unclaim``; 0x00 once the removal is durable."""
        outcome = evaluate_unclaim(publisher, qos, payload)
        topic = outcome.topic
        if topic is None:
            return outcome
        tenant = publisher.tenant
        if self.lookup(topic, tenant) is None and (tenant, topic) not in self._inflight:
            return outcome  # nothing stored, nothing being written: already durably absent
        failed = await asyncio.shield(self._start_write(tenant, topic, None, None))
        if failed is not None:
            return UnclaimOutcome(ReasonCode.UNSPECIFIED_ERROR, failed)
        return outcome

    async def revoke(self, tenant: str, topic: str) -> bool | str:
        """An operator's revocation (the admin API): the claim on ``topic`` removed as its
        owner's unclaim removes it. False when there is none; the store's refusal as text."""
        if self.lookup(topic, tenant) is None and (tenant, topic) not in self._inflight:
            return False
        failed = await asyncio.shield(self._start_write(tenant, topic, None, None))
        return failed if failed is not None else True

    def claims_request(
        self,
        identity: Identity,
        topic: str,
        response_topic: str | None,
        payload: bytes = b"",
        may_receive: Callable[[str], bool] | None = None,
    ) -> tuple[InfoRequestOutcome, bytes | None]:
        """A PUBLISH to ``access/claims/…``: the PUBACK outcome and, when due, one page of the
        answer (info.py). Checked before anything is built: the request itself, whether the
        requester would receive the answer (``may_receive(response_topic)``; 0x10 if not),
        the per-client request rate (0x97), the page cursor in ``payload`` (0x99)."""
        outcome = check_claims_request(identity.smoker_id, topic, response_topic)
        if outcome.response_topic is None or identity.smoker_id is None:
            return outcome, None
        if may_receive is not None and not may_receive(outcome.response_topic):
            return InfoRequestOutcome(
                ReasonCode.NO_MATCHING_SUBSCRIBERS,
                f"not subscribed to {outcome.response_topic}: subscribe to it first, the answer "
                "is published there",
            ), None
        limits = self.guard.limits
        wait = self.requests.take(identity.smoker_id, self._clock())
        if wait is not None:
            return InfoRequestOutcome(
                ReasonCode.QUOTA_EXCEEDED,
                f"claims requests over {limits.request_rate:g}/s (burst {limits.request_burst:g}, "
                f"claims.request_rate); retry in {wait:.1f} s",
                limit="claims.request_rate",
            ), None
        cursor = parse_page_request(payload)
        if isinstance(cursor, str):
            return InfoRequestOutcome(ReasonCode.PAYLOAD_FORMAT_INVALID, cursor), None
        me, tenant = identity.smoker_id, identity.tenant
        now = self._clock()
        wait = self.request_scans.take(me, now, 0.0)
        if wait is not None:  # this client's earlier requests spent its scan budget
            return InfoRequestOutcome(
                ReasonCode.QUOTA_EXCEEDED,
                f"claims requests of {me} examined over {limits.request_scan_rate:g} claims/s "
                f"(claims.request_scan_rate, per client); retry in {wait:.1f} s",
                limit="claims.request_scan_rate",
            ), None
        self.verify_all()
        table = self._index.get(tenant, _EMPTY)
        after_owned = cursor.topic if cursor is not None and cursor.section == OWNED else None
        skip_owned = cursor is not None and cursor.section == INVOLVED
        owned_topics = (
            ()
            if skip_owned
            else sorted(
                t
                for t in self._owned.get((tenant, me), ())
                if after_owned is None or t > after_owned
            )
        )
        examined = [len(owned_topics)]
        owned = (r for r in (table.get(t) for t in owned_topics) if isinstance(r, Claim))
        after_involved = cursor.topic if cursor is not None and cursor.section == INVOLVED else None
        involved = self._involving(tenant, me, after_involved, examined)
        page = claims_info_page(
            me, owned, involved, limits.request_page_claims, limits.request_page_bytes
        )
        # charged after the fact (bounded by a page plus the client's own claims), so a client
        # may end one request in debt and wait for its next one
        self.request_scans.charge(me, now, examined[0])
        return outcome, page.payload

    # -- internals --------------------------------------------------------------------------------

    def _start_write(
        self, tenant: str, topic: str, claim: Claim | None, value: Any, charge: int = 0
    ) -> asyncio.Task[str | None]:
        """Register the write as in flight *now* (limits and unclaims see it at once, the
        claim's ``charge`` is reserved of the pool) and run it as its own task, so that
        cancelling the caller cannot stop it half-way."""
        key = (tenant, topic)
        self._seq += 1
        self._inflight[key] = (self._seq, None if claim is None else claim.owner, charge)
        task = asyncio.get_running_loop().create_task(
            self._write(tenant, topic, claim, value, self._seq, charge)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _write(
        self, tenant: str, topic: str, claim: Claim | None, value: Any, seq: int, charge: int
    ) -> str | None:
        key = (tenant, topic)
        try:
            if claim is None:
                await self.store.delete(tenant, topic)
            else:
                await self.store.put(tenant, topic, value)
        except StoreError as exc:
            what = "claim" if claim is not None else "unclaim"
            return f"the claim store could not make the {what} durable: {exc}"
        finally:
            if self._inflight.get(key, (0, None, 0))[0] == seq:
                del self._inflight[key]
        self._set(tenant, topic, claim, charge)
        return None

    async def drain(self) -> None:
        """Wait for every claim and unclaim write in flight (shutdown, tests)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _set(
        self, tenant: str, topic: str, record: ClaimRecord | _Pending | None, charge: int = 0
    ) -> None:
        """Put ``record`` (``None``: nothing) on ``topic``, charged ``charge`` of the pool."""
        if type(record) is not _Pending:
            self._pending.pop((tenant, topic), None)
        self._recharge(tenant, topic, None if record is None else charge)
        table = self._index.setdefault(tenant, {})
        self._name(tenant, topic, table.get(topic), False)
        self._name(tenant, topic, record, True)
        owner = owner_segment(topic) or ""
        owned = self._owned.setdefault((tenant, owner), set())
        if record is None:
            table.pop(topic, None)
            owned.discard(topic)
            if not owned:
                del self._owned[(tenant, owner)]
        else:
            table[topic] = record
            owned.add(topic)
        self.generation += 1

    def _recharge(self, tenant: str, topic: str, charge: int | None) -> None:
        """Release the charge of ``topic``'s record, then charge ``charge`` (``None``: gone)."""
        charges = self._charges.setdefault(tenant, {})
        delta = -charges.pop(topic, 0)
        if charge is not None:
            charges[topic] = charge
            delta += charge
        elif not charges:
            del self._charges[tenant]
        pool = self._pool
        pool[""] += delta
        left = pool.get(tenant, 0) + delta
        if left or charge is not None:
            pool[tenant] = left
        else:
            pool.pop(tenant, None)

    def _name(self, tenant: str, topic: str, record: object, add: bool) -> None:
        """Add (or remove) ``topic`` to the sorted list of every bucket its claim names."""
        if not isinstance(record, Claim):
            return
        for bucket in {_bucket(p.client_id) for p in record.restriction.permissions}:
            key = (tenant, bucket)
            topics = self._naming.get(key)
            if add:
                if topics is None:
                    self._naming[key] = [topic]
                elif (i := bisect_left(topics, topic)) == len(topics) or topics[i] != topic:
                    topics.insert(i, topic)
            elif topics is not None:
                i = bisect_left(topics, topic)
                if i < len(topics) and topics[i] == topic:
                    del topics[i]
                    if not topics:
                        del self._naming[key]

    def _named_after(self, tenant: str, client: str, after: str | None) -> Iterator[str]:
        topics = self._naming.get((tenant, _bucket(client)), [])
        start = 0 if after is None else bisect_right(topics, after)
        return (topics[i] for i in range(start, len(topics)))

    def _involving(
        self, tenant: str, me: str, after: str | None, examined: list[int]
    ) -> Iterator[Claim]:
        """Claims of others that name ``me`` or ``*``, in topic order past ``after``; each
        topic read adds one to ``examined[0]``. Reads only two lists (the client's bucket and
        ``*``), from the cursor on, as far as the caller consumes (SMOKER.md claims requests);
        a claim in the bucket that names another client of it is read and skipped."""
        table = self._index.get(tenant, _EMPTY)
        last = None
        for topic in heapq.merge(*(self._named_after(tenant, c, after) for c in (me, ANY_CLIENT))):
            examined[0] += 1
            if topic == last:
                continue  # in both lists: names a client of the bucket and "*"
            last = topic
            record = table.get(topic)
            if isinstance(record, Claim) and is_involved(record, me):
                yield record


def _charge(record: ClaimRecord, value: Any) -> int:
    """A verified claim is charged as it was admitted; a quarantined record as its document."""
    return claim_charge(record) if isinstance(record, Claim) else document_charge(value)


def _topic_of(claim: Claim) -> str:
    return claim.topic_name


NAMING_BUCKETS = 4096
"""Buckets of the involvement index per tenant. Keyed by client id, the index could hold one
list per distinct SMOKER ID named anywhere (up to ~1.5 million for 10,000 maximum-size claims,
~150 bytes each); by bucket it holds at most 4,097 lists per tenant and 8 bytes per (claim,
bucket) pair. The bucket comes from Python's per-process salted string hash, so nobody can
aim claims at another client's bucket."""


def _bucket(client_id: str) -> int:
    return -1 if client_id == ANY_CLIENT else hash(client_id) % NAMING_BUCKETS

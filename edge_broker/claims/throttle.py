"""Flood throttling for claims (SMOKER.md "Flood throttling"; seed 002 "Claim flooding").

Five limits, checked in this order, each answered with 0x97 Quota exceeded before the store is
touched: claim size, live claims per client (and in total), the bytes of the live claims (the
pool, and the tenant's share of it), the client's token bucket, the global store write budget
(a token bucket in writes per second). Tokens are taken only when every limit passes, so a
refused claim costs the client nothing but its time.

Defaults (``ThrottleLimits()``) are sized for a Raspberry Pi Zero 2 W (4 slow cores, 512 MB RAM,
a micro-SD card where an fsync costs 5–30 ms):

- ``max_claim_bytes`` 16 KiB: a claim naming ~67 clients on a topic of 100 bytes (each
  permission is ~215 bytes on the wire, as the signature attaches the restriction a second
  time in base64; ``*`` names them all), the size the SMOKER clients were built against.
- ``client_rate`` 1 claim/s with ``client_burst`` 20: provisioning a device claims a handful of
  topics at once, then changes them rarely.
- ``max_claims_per_client`` 256 live claims; ``max_claims_total`` 10,000 live claims; and
  ``max_claims_bytes`` 4 MiB, the byte pool of the live claims: each is charged about 1.7 KB +
  1.6 × its size (claims/pool.py; the parsed permissions plus the log's in-memory document,
  measured through the broker by ``scripts/bench_limits_memory.py --only claim``: 2.2 KB for
  the shortest, 4.8 KB for one of 1.9 KB, 25 KB for one of 16 KiB). The pool, not the largest
  claim times the largest count (266 MiB), is what the memory budget (``edge-broker check``)
  counts under the unit's ``MemoryMax=200M``: ~1,760 short claims or ~150 of 16 KiB, in any
  mix. Start-up re-verifies every claim (~0.3 ms each on x86, several times that on a Zero
  2). Figures: ``scripts/bench_claims.py``.
- ``store_writes_per_second`` 50 with ``store_burst`` 200: group commit puts many claims in
  one fsync, and 50 records/s keep the SD card's write amplification and wear low while
  leaving the I/O to retained messages and sessions.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..mqtt.reason_codes import ReasonCode
from .errors import ClaimError

_PRUNE_FLOOR = 1024


@dataclass(frozen=True, slots=True)
class ThrottleLimits:
    max_claim_bytes: int = 16 * 1024
    max_claims_per_client: int = 256
    max_claims_total: int = 10_000
    max_claims_bytes: int = 4 * 1024 * 1024
    client_rate: float = 1.0
    client_burst: float = 20.0
    store_writes_per_second: float = 50.0
    store_burst: float = 200.0
    # claims information requests (info.py): per-client rate, and the size of one answer page
    request_rate: float = 1.0
    request_burst: float = 10.0
    request_page_claims: int = 50
    request_page_bytes: int = 64 * 1024
    # claims one client's requests may examine per second (issue 31 item 6: per requester, so
    # no client spends another's): a request reads the involvement index from its cursor on
    # (~12 µs per claim at the maximum claim size on this machine)
    request_scan_rate: float = 10_000.0
    # of max_claims_total and of max_claims_bytes, what one tenant's live claims may hold
    # (``[limits] tenant_share``, docs/limits-quotas.md): throw-away SMOKER keys of one
    # tenant cannot fill another's
    tenant_share: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "max_claim_bytes",
            "max_claims_per_client",
            "max_claims_total",
            "max_claims_bytes",
            "client_rate",
            "client_burst",
            "store_writes_per_second",
            "store_burst",
            "request_rate",
            "request_burst",
            "request_page_claims",
            "request_page_bytes",
            "request_scan_rate",
            "tenant_share",
        ):
            value = getattr(self, name)
            if not value > 0:
                raise ClaimError(
                    ReasonCode.UNSPECIFIED_ERROR,
                    f"claims throttle limit {name} must be greater than 0, got {value!r}",
                )
        for rate, burst in (
            ("client_rate", "client_burst"),
            ("store_writes_per_second", "store_burst"),
            ("request_rate", "request_burst"),
        ):
            if getattr(self, burst) < 1:
                raise ClaimError(
                    ReasonCode.UNSPECIFIED_ERROR,
                    f"claims throttle limit {burst} must be at least 1 (one {rate} token), "
                    f"got {getattr(self, burst)!r}",
                )


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket's state: ``tokens`` available at time ``stamp`` (monotonic seconds)."""

    tokens: float
    stamp: float


def refill(bucket: Bucket, rate: float, burst: float, now: float) -> Bucket:
    """The bucket at ``now``: ``rate`` tokens per second accrue, never beyond ``burst``.

    A clock that goes backwards adds nothing (and does not move ``stamp`` back).
    """
    if now <= bucket.stamp:
        return bucket
    return Bucket(min(burst, bucket.tokens + (now - bucket.stamp) * rate), now)


def full_bucket(burst: float, now: float) -> Bucket:
    return Bucket(burst, now)


class FloodGuard:
    """The throttle state of one claim service: per-client buckets and the global budget.

    Who owns what is not kept here: the caller passes the owner's live topics (durable or being
    written) and the total number of live claims from its claim index.
    """

    __slots__ = ("limits", "_buckets", "_store", "_prune_at")

    def __init__(self, limits: ThrottleLimits, now: float = 0.0) -> None:
        self.limits = limits
        self._buckets: dict[str, Bucket] = {}
        self._store = full_bucket(limits.store_burst, now)
        self._prune_at = _PRUNE_FLOOR

    def admit(
        self,
        owner: str,
        topic: str,
        size: int,
        now: float,
        owned: Collection[str],
        total: int,
        tenant: tuple[str, int] | None = None,
        pool: tuple[int, int, int] | None = None,
    ) -> str | None:
        """``None`` and take one client and one store token, or the reason for 0x97.

        ``owned`` are the owner's live topics, ``total`` the live claims of every owner,
        ``tenant`` the owner's tenant and its live claims; a claim on a topic the owner already
        holds replaces it and does not count against any of these limits. ``pool`` is the
        claim's charge (claims/pool.py), the bytes charged to every live claim and to the
        tenant's, both without the claim it replaces: checked against ``max_claims_bytes`` and
        the tenant's share of it, replacements included (a bigger claim takes more bytes).
        """
        limits = self.limits
        if size > limits.max_claim_bytes:
            return f"claim has {size} bytes; the limit is {limits.max_claim_bytes}"
        if topic not in owned:
            if len(owned) >= limits.max_claims_per_client:
                return (
                    f"client already has {len(owned)} live claims; the limit is "
                    f"{limits.max_claims_per_client} (unclaim a topic first)"
                )
            if total >= limits.max_claims_total:
                return f"the broker holds its maximum of {limits.max_claims_total} live claims"
            if tenant is not None and limits.tenant_share < 1.0:
                share = max(1, int(limits.max_claims_total * limits.tenant_share))
                if tenant[1] >= share:
                    return (
                        f"tenant {tenant[0]!r} holds {tenant[1]} live claims; its share is "
                        f"{share} (limits.tenant_share {limits.tenant_share:g} of "
                        f"claims.max_claims_total {limits.max_claims_total})"
                    )
        if pool is not None:
            refusal = self._pool_refusal(pool, tenant)
            if refusal is not None:
                return refusal
        client = refill(
            self._buckets.get(owner) or full_bucket(limits.client_burst, now),
            limits.client_rate,
            limits.client_burst,
            now,
        )
        if client.tokens < 1:
            self._buckets[owner] = client
            return (
                f"claim rate over {limits.client_rate:g}/s (burst {limits.client_burst:g}); "
                f"retry in {(1 - client.tokens) / limits.client_rate:.1f} s"
            )
        store = refill(self._store, limits.store_writes_per_second, limits.store_burst, now)
        if store.tokens < 1:
            self._store = store
            self._buckets[owner] = client
            return f"the claim store's write budget ({limits.store_writes_per_second:g}/s) is spent"
        self._store = Bucket(store.tokens - 1, store.stamp)
        self._buckets[owner] = Bucket(client.tokens - 1, client.stamp)
        self._forget_full(now)
        return None

    def _pool_refusal(
        self, pool: tuple[int, int, int], tenant: tuple[str, int] | None
    ) -> str | None:
        limits = self.limits
        charge, used, tenant_used = pool
        if used + charge > limits.max_claims_bytes:
            return (
                f"the live claims would hold {used + charge} B (this claim {charge} B); "
                f"claims.max_claims_bytes is {limits.max_claims_bytes} (unclaim a topic first)"
            )
        if tenant is not None and limits.tenant_share < 1.0:
            share = int(limits.max_claims_bytes * limits.tenant_share)
            if tenant_used + charge > share:
                return (
                    f"tenant {tenant[0]!r} would hold {tenant_used + charge} B of live claims "
                    f"(this claim {charge} B); its share is {share} B (limits.tenant_share "
                    f"{limits.tenant_share:g} of claims.max_claims_bytes {limits.max_claims_bytes})"
                )
        return None

    def tracked_clients(self) -> int:
        return len(self._buckets)

    def _forget_full(self, now: float) -> None:
        """Drop buckets that have refilled: a full bucket is the same as no bucket.

        Done when the map doubles past a floor, so that the cost is amortised O(1) per admit
        and memory stays proportional to the clients active within ``burst / rate`` seconds.
        """
        if len(self._buckets) < self._prune_at:
            return
        limits = self.limits
        self._buckets = {
            owner: bucket
            for owner, bucket in self._buckets.items()
            if refill(bucket, limits.client_rate, limits.client_burst, now).tokens
            < limits.client_burst
        }
        self._prune_at = max(_PRUNE_FLOOR, 2 * len(self._buckets))


class ClientBuckets:
    """One token bucket per client (claims information requests), pruned like FloodGuard's:
    a full bucket is forgotten, so memory follows the clients active within ``burst / rate``.
    A single key (``"*"``) makes it a global budget."""

    __slots__ = ("rate", "burst", "_buckets", "_prune_at")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._buckets: dict[str, Bucket] = {}
        self._prune_at = _PRUNE_FLOOR

    def take(self, client: str, now: float, cost: float = 1.0) -> float | None:
        """``None`` and ``cost`` tokens taken (at most ``burst``), or the seconds until there
        are enough."""
        cost = min(cost, self.burst)
        bucket = refill(
            self._buckets.get(client) or full_bucket(self.burst, now), self.rate, self.burst, now
        )
        if bucket.tokens < cost:
            self._buckets[client] = bucket
            return (cost - bucket.tokens) / self.rate
        self._buckets[client] = Bucket(bucket.tokens - cost, bucket.stamp)
        if len(self._buckets) >= self._prune_at:
            self._buckets = {
                c: b
                for c, b in self._buckets.items()
                if refill(b, self.rate, self.burst, now).tokens < self.burst
            }
            self._prune_at = max(_PRUNE_FLOOR, 2 * len(self._buckets))
        return None

    def charge(self, client: str, now: float, cost: float) -> None:
        """Take ``cost`` tokens for work already done; the bucket may go below zero (the
        client then waits for its next :meth:`take` until it has paid)."""
        if cost <= 0:
            return
        bucket = refill(
            self._buckets.get(client) or full_bucket(self.burst, now), self.rate, self.burst, now
        )
        self._buckets[client] = Bucket(bucket.tokens - cost, bucket.stamp)

    def __len__(self) -> int:
        return len(self._buckets)

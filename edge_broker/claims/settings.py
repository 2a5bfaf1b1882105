"""``[claims]``: the SMOKER claims section (SMOKER.md), its type and parser, and what the
claim runtime reads of the assembled configuration (``config.py`` assembles the sections; the
claims package imports nothing of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..config_section import Section
from .throttle import ThrottleLimits

_LIMITS = ThrottleLimits()  # the flood guard's defaults are the section's: one place for each


@dataclass(frozen=True, slots=True)
class ClaimsConfig:
    """``[claims]``: SMOKER claims (SMOKER.md). ``enabled`` ``None`` means "when a listener
    accepts the ``smoker`` method". ``store_dir`` ``None`` means the broker's state directory.
    The limits are ``claims.throttle.ThrottleLimits`` (defaults sized for a Pi Zero 2 W)."""

    enabled: bool | None = None
    store_dir: str | None = None
    fsync: str = "always"  # always | never (tests, benchmarks): a claim's PUBACK waits for it
    max_claim_bytes: int = _LIMITS.max_claim_bytes
    max_claims_per_client: int = _LIMITS.max_claims_per_client
    max_claims_total: int = _LIMITS.max_claims_total
    max_claims_bytes: int = (
        _LIMITS.max_claims_bytes
    )  # what live claims are charged (claims/pool.py)
    client_rate: float = _LIMITS.client_rate
    client_burst: float = _LIMITS.client_burst
    store_writes_per_second: float = _LIMITS.store_writes_per_second
    store_burst: float = _LIMITS.store_burst
    verify_batch: int = 64  # stored claims re-verified per event-loop turn after start-up
    request_rate: float = _LIMITS.request_rate  # claims information requests per second and client
    request_burst: float = _LIMITS.request_burst
    request_page_claims: int = _LIMITS.request_page_claims  # claims in one answer page ("nextPage")
    request_page_bytes: int = _LIMITS.request_page_bytes  # and about this many bytes (at least one)
    request_scan_rate: float = (
        _LIMITS.request_scan_rate
    )  # claims one client's requests may examine/s


class ClaimStoreSettings(Protocol):
    """``[persistence]`` as the claim store reads it: where it lives, what to do when damaged."""

    @property
    def state_dir(self) -> str | None: ...
    @property
    def on_damage(self) -> str: ...


class CacheBudget(Protocol):
    """``[limits]`` as the claims gate and the claims flood guard read it."""

    @property
    def decision_cache_bytes(self) -> int: ...
    @property
    def tenant_share(self) -> float: ...


class ClaimsSections(Protocol):
    """What the claim runtime reads of the assembled configuration (``config.Config`` is one)."""

    @property
    def claims(self) -> ClaimsConfig: ...
    @property
    def persistence(self) -> ClaimStoreSettings: ...
    @property
    def limits(self) -> CacheBudget: ...


def parse_claims(s: Section) -> ClaimsConfig:
    d = ClaimsConfig()
    enabled = s.get("enabled", None, bool, "true or false") if "enabled" in s.table else None
    s.used.add("enabled")
    store_dir = s.file_path("store_dir")
    if store_dir == "":
        s.problem("store_dir", 'empty: write a directory, e.g. "/var/lib/edge-broker/claims"')
        store_dir = None
    rate = s.number("client_rate", d.client_rate, 0.001, 1_000_000)
    burst = s.number("client_burst", d.client_burst, 1, 1_000_000)
    writes = s.number("store_writes_per_second", d.store_writes_per_second, 0.001, 1_000_000)
    store_burst = s.number("store_burst", d.store_burst, 1, 1_000_000)
    return ClaimsConfig(
        enabled=enabled,
        store_dir=store_dir,
        fsync=s.choice("fsync", d.fsync, ("always", "never")),
        max_claim_bytes=s.integer("max_claim_bytes", d.max_claim_bytes, 64, 268_435_455),
        max_claims_per_client=s.integer(
            "max_claims_per_client", d.max_claims_per_client, 1, 10_000_000
        ),
        max_claims_total=s.integer("max_claims_total", d.max_claims_total, 1, 100_000_000),
        max_claims_bytes=s.integer("max_claims_bytes", d.max_claims_bytes, 4096, 1 << 40),
        client_rate=rate,
        client_burst=burst,
        store_writes_per_second=writes,
        store_burst=store_burst,
        verify_batch=s.integer("verify_batch", d.verify_batch, 1, 1_000_000),
        request_rate=s.number("request_rate", d.request_rate, 0.001, 1_000_000),
        request_burst=s.number("request_burst", d.request_burst, 1, 1_000_000),
        request_page_claims=s.integer("request_page_claims", d.request_page_claims, 1, 1_000_000),
        request_page_bytes=s.integer("request_page_bytes", d.request_page_bytes, 1024, 1 << 28),
        request_scan_rate=s.number("request_scan_rate", d.request_scan_rate, 1, 1e9),
    )

"""The claims of a running broker: the store it opens, the service, the gate, verification.

``ClaimsRuntime.open(config)`` opens the claim store (``<store_dir>/claims.log``; by default
``<state dir>/claims.log``), reports what recovery dropped (torn tail, flipped bits: logged, never
fatal), and builds the :class:`ClaimService` lazily: the broker serves at once and the stored
claims are re-verified by a background task (``start``), each one before its first use at the
latest (SMOKER.md "Claim store"; issue 6, lead's note on Pi start-up time). ``close`` waits for
claim writes in flight and closes the log (fsynced).

Claims are on when ``[claims] enabled`` says so, or, when it is absent, when some listener
accepts the ``smoker`` method (``config.claims_enabled``).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..matching.decision_cache import DEFAULT_MAX_BYTES
from ..store import StoreError
from ..store.damage import damage_hint, open_or_set_aside
from ..store.errors import StoreOpenError
from ..store.state_dir import state_dir
from .gate import ClaimsGate
from .persistence import CLAIMS_LOG, KeyedClaimStore
from .service import ClaimService, LoadReport
from .throttle import ThrottleLimits

if TYPE_CHECKING:
    from .settings import ClaimsConfig, ClaimsSections

log = logging.getLogger("edge_broker.claims")


@dataclass(frozen=True, slots=True)
class ClaimsStats:
    """For ``$SYS`` and metrics: claims in the index (``pending`` not yet re-verified,
    ``quarantined`` compromised), clients the flood guard tracks, the store's health, and the
    bytes of ``[claims] max_claims_bytes`` the live claims are charged (claims/pool.py)."""

    claims: int
    pending: int
    quarantined: int
    throttled_clients: int
    store_healthy: bool
    store_error: str | None
    pool_bytes: int
    pool_limit: int


def store_path(config: ClaimsSections) -> Path:
    directory = config.claims.store_dir
    base = Path(directory) if directory is not None else state_dir(config)
    return base / CLAIMS_LOG  # what ``edge-broker claim list --store DIR`` reads


def throttle_limits(claims: ClaimsConfig, tenant_share: float = 1.0) -> ThrottleLimits:
    """The flood guard's limits: ``[claims]`` and ``[limits] tenant_share``."""
    return ThrottleLimits(
        max_claim_bytes=claims.max_claim_bytes,
        max_claims_per_client=claims.max_claims_per_client,
        max_claims_total=claims.max_claims_total,
        max_claims_bytes=claims.max_claims_bytes,
        client_rate=claims.client_rate,
        client_burst=claims.client_burst,
        store_writes_per_second=claims.store_writes_per_second,
        store_burst=claims.store_burst,
        request_rate=claims.request_rate,
        request_burst=claims.request_burst,
        request_page_claims=claims.request_page_claims,
        request_page_bytes=claims.request_page_bytes,
        request_scan_rate=claims.request_scan_rate,
        tenant_share=tenant_share,
    )


class ClaimsRuntime:
    """Service, store and gate of one broker (hangs off ``Broker.claims``)."""

    __slots__ = ("service", "store", "gate", "path", "verify_batch", "_verifier")

    def __init__(
        self,
        service: ClaimService,
        store: KeyedClaimStore,
        path: Path,
        verify_batch: int = 64,
        cache_bytes: int = DEFAULT_MAX_BYTES,  # [limits] decision_cache_bytes
    ) -> None:
        self.service = service
        self.store = store
        self.gate = ClaimsGate(service, cache_bytes=cache_bytes)
        self.path = path
        self.verify_batch = verify_batch
        self._verifier: asyncio.Task[LoadReport] | None = None

    @classmethod
    def open(cls, config: ClaimsSections) -> ClaimsRuntime:
        """Open the store and read every claim (verification comes later, see ``start``)."""
        path = store_path(config)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreOpenError(
                f"cannot create the claim store directory {str(path.parent)!r}: {exc.strerror}; "
                "set [claims] store_dir (or the state directory) to a writable directory"
            ) from exc
        fsync = "always" if config.claims.fsync == "always" else "never"
        try:
            store = open_or_set_aside(
                path,
                lambda: KeyedClaimStore.open(str(path), fsync=fsync),
                config.persistence.on_damage,
                log,
            )
        except (StoreError, OSError) as exc:
            raise StoreOpenError(
                f"cannot open the claim store {str(path)!r}: {exc}; check that no other broker "
                "uses it and that the directory is writable, or set [claims] store_dir"
                + damage_hint(path)
            ) from exc
        report = store.keyed.report
        if not report.clean:
            log.warning(
                f"claim store recovery: {report}",
                extra={
                    "event": "claims_recovery",
                    "path": str(path),
                    "bytes_dropped": report.bytes_dropped,
                    "tail_bytes_dropped": report.tail_bytes_dropped,
                },
            )
        service = ClaimService(
            store, throttle_limits(config.claims, config.limits.tenant_share), lazy=True
        )
        log.info(
            f"claim store {path}: {service.load_report.pending} claims read, verifying",
            extra={
                "event": "claims_loaded",
                "path": str(path),
                "claims": service.load_report.pending,
                "seconds": round(service.load_report.seconds, 3),
            },
        )
        return cls(
            service, store, path, config.claims.verify_batch, config.limits.decision_cache_bytes
        )

    def start(self) -> None:
        """Re-verify the stored claims in the background (call with the loop running)."""
        self._verifier = asyncio.get_running_loop().create_task(self._verify())

    async def _verify(self) -> LoadReport:
        report = await self.service.verify_pending(self.verify_batch)
        for tenant, topic, why in report.quarantined:
            log.warning(
                f"claim on {topic!r} (tenant {tenant!r}) quarantined: {why}",
                extra={
                    "event": "claim_quarantined",
                    "tenant": tenant,
                    "topic": topic,
                    "reason": why,
                },
            )
        log.info(
            f"claims verified: {report.loaded} in service, {len(report.quarantined)} "
            f"quarantined, {report.seconds:.3f} s",
            extra={
                "event": "claims_verified",
                "claims": report.loaded,
                "quarantined": len(report.quarantined),
                "seconds": round(report.seconds, 3),
            },
        )
        return report

    async def verified(self) -> LoadReport:
        """Wait for the background verification (tests, tools)."""
        if self._verifier is None:
            return await self.service.verify_pending(self.verify_batch)
        return await self._verifier

    def stats(self) -> ClaimsStats:
        service = self.service
        health = self.store.keyed.health()
        return ClaimsStats(
            claims=len(service),
            pending=service.pending,
            quarantined=service.quarantined_count(),
            throttled_clients=service.guard.tracked_clients(),
            store_healthy=health.healthy,
            store_error=health.error,
            pool_bytes=service.pool_used(),
            pool_limit=service.guard.limits.max_claims_bytes,
        )

    async def close(self) -> None:
        if self._verifier is not None and not self._verifier.done():
            self._verifier.cancel()
        await self.service.drain()
        await self.store.aclose()

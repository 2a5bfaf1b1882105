"""Start-up of the claims in a broker: lazy re-verification (a pending record is verified before
any use), the ``[claims]`` config section, the store location, and a store that cannot open."""

from __future__ import annotations

from pathlib import Path

import pytest
from claims_helpers import (
    OTHER,
    OWNER,
    OWNER_KEY,
    claim_payload,
    restriction,
    smoker_identity,
)

from edge_broker.claims.access import Quarantined
from edge_broker.claims.model import Activity, Claim, RestrictionType
from edge_broker.claims.persistence import CLAIMS_LOG, KeyedClaimStore
from edge_broker.claims.runtime import ClaimsRuntime, store_path
from edge_broker.claims.service import ClaimService
from edge_broker.claims.throttle import ThrottleLimits
from edge_broker.config import ConfigError, claims_enabled, loads_config
from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.store.errors import StoreOpenError

TOPICS = [f"restricted/{OWNER}/t{i}" for i in range(40)]


async def make_store(path: Path, tamper: int | None = None) -> None:
    store = KeyedClaimStore.open(str(path), fsync="never")
    service = ClaimService(store, ThrottleLimits(client_burst=1000, client_rate=1000))
    for t in TOPICS:
        r = restriction(t, RestrictionType.WHITELIST, (OTHER, Activity.SUBSCRIBE))
        assert (
            await service.claim(smoker_identity(), 1, claim_payload(r, OWNER_KEY))
        ).reason_code == ReasonCode.SUCCESS
    if tamper is not None:
        [(tenant, topic, doc)] = [r for r in store.records() if r[1] == TOPICS[tamper]]
        store.put_sync(
            tenant,
            topic,
            {
                **doc,
                "type": doc["type"],
                "restriction": doc["restriction"].replace("WHITELIST", "BLACKLIST"),
            },
        )
    await store.aclose()


async def test_lazy_load_serves_before_verifying_and_verifies_before_use(tmp_path: Path) -> None:
    path = tmp_path / "claims.log"
    await make_store(path, tamper=5)
    store = KeyedClaimStore.open(str(path), readonly=True)
    service = ClaimService(store, lazy=True)
    assert service.pending == len(TOPICS) and service.load_report.pending == len(TOPICS)
    assert service.load_report.loaded == 0
    # a decision on a pending record verifies it first: the tampered one is 0x83 at once
    other = smoker_identity(OTHER)
    assert service.decide(other, TOPICS[5], Activity.SUBSCRIBE).reason_code == 0x83
    assert service.decide(other, TOPICS[6], Activity.SUBSCRIBE).allowed
    assert service.pending == len(TOPICS) - 2
    assert isinstance(service.lookup(TOPICS[7]), Claim)
    report = await service.verify_pending(batch=8)
    assert service.pending == 0 and report.pending == 0
    assert report.loaded == len(TOPICS) - 1
    assert [t for _, t, _ in report.quarantined] == [TOPICS[5]]
    assert isinstance(service.lookup(TOPICS[5]), Quarantined)
    store.close()


async def test_listings_never_show_unverified_records(tmp_path: Path) -> None:
    path = tmp_path / "claims.log"
    await make_store(path, tamper=0)
    store = KeyedClaimStore.open(str(path), readonly=True)
    service = ClaimService(store, lazy=True)
    owned = service.owned_claims(OWNER)
    assert len(owned) == len(TOPICS) - 1 and service.pending == 0
    assert [q.topic_name for q in service.quarantined()] == [TOPICS[0]]
    assert all(isinstance(r, Claim | Quarantined) for r in service.records())
    store.close()


async def test_a_claim_or_unclaim_during_verification_wins(tmp_path: Path) -> None:
    path = tmp_path / "claims.log"
    await make_store(path, tamper=3)
    store = KeyedClaimStore.open(str(path), fsync="never")
    service = ClaimService(store, lazy=True)
    fresh = restriction(TOPICS[3], RestrictionType.BLACKLIST)
    assert (
        await service.claim(smoker_identity(), 1, claim_payload(fresh))
    ).reason_code == ReasonCode.SUCCESS
    payload = TOPICS[4].encode()
    assert (await service.unclaim(smoker_identity(), 1, payload)).reason_code == ReasonCode.SUCCESS
    report = await service.verify_pending()
    assert report.quarantined == ()  # the owner replaced the tampered record before it was used
    assert service.lookup(TOPICS[4]) is None
    assert service.decide(smoker_identity(OTHER), TOPICS[3], Activity.PUBLISH).allowed
    await store.aclose()


def test_claims_config_section_and_errors(tmp_path: Path) -> None:
    cfg = loads_config('[claims]\nstore_dir = "/x"\nclient_rate = 2\nmax_claims_total = 5\n')
    assert cfg.claims.store_dir == "/x" and cfg.claims.client_rate == 2.0
    assert cfg.claims.max_claims_total == 5 and cfg.claims.fsync == "always"
    assert not claims_enabled(cfg)  # no listener accepts smoker
    smoker = loads_config('[[listeners]]\nname = "a"\nauth_methods = ["smoker"]\n')
    assert claims_enabled(smoker)
    off = loads_config(
        '[[listeners]]\nname = "a"\nauth_methods = ["smoker"]\n[claims]\nenabled = false\n'
    )
    assert not claims_enabled(off)
    with pytest.raises(ConfigError) as bad:
        loads_config(
            '[claims]\nenabled = "yes"\nclient_burst = 0\nfsync = "sometimes"\n'
            'store_dir = ""\nmax_claim_bytes = 1\nnope = 1\n'
        )
    keys = sorted(p.key for p in bad.value.problems)
    assert keys == [
        "claims.client_burst",
        "claims.enabled",
        "claims.fsync",
        "claims.max_claim_bytes",
        "claims.nope",
        "claims.store_dir",
    ]


def test_store_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = loads_config(f'[claims]\nstore_dir = "{tmp_path}/c"\n')
    assert store_path(explicit) == tmp_path / "c" / CLAIMS_LOG
    monkeypatch.setenv("EDGE_BROKER_STATE_DIR", str(tmp_path / "state"))
    assert store_path(loads_config("")) == tmp_path / "state" / CLAIMS_LOG


async def test_a_store_that_cannot_be_opened_is_a_clear_start_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cfg = loads_config(f'[claims]\nenabled = true\nstore_dir = "{blocker}/sub"\n')
    with pytest.raises(StoreOpenError, match="store_dir"):
        ClaimsRuntime.open(cfg)
    held = loads_config(f'[claims]\nenabled = true\nstore_dir = "{tmp_path}"\n')
    first = ClaimsRuntime.open(held)
    stats = first.stats()
    assert (stats.claims, stats.pending, stats.quarantined) == (0, 0, 0)
    assert stats.store_healthy and stats.store_error is None
    try:
        with pytest.raises(StoreOpenError, match="no other broker"):
            ClaimsRuntime.open(held)  # the log's lock: one broker per store
    finally:
        await first.close()


def test_run_exits_1_with_the_reason_when_the_claim_store_cannot_open(tmp_path: Path) -> None:
    import subprocess
    import sys

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    config = tmp_path / "broker.toml"
    config.write_text(
        '[[listeners]]\nname = "a"\nport = 0\nauth_methods = ["smoker"]\n'
        f'[claims]\nstore_dir = "{blocker}/sub"\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert run.returncode == 1
    assert "claim store directory" in run.stderr and "store_dir" in run.stderr
    assert "Traceback" not in run.stderr

"""Flood throttling (SMOKER.md "Flood throttling"): buckets, live-claim limits, size, budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.claims.errors import ClaimError
from edge_broker.claims.throttle import Bucket, FloodGuard, ThrottleLimits, refill


def test_refill_adds_rate_times_elapsed_up_to_burst() -> None:
    assert refill(Bucket(0.0, 10.0), rate=2.0, burst=5.0, now=11.0) == Bucket(2.0, 11.0)
    assert refill(Bucket(0.0, 10.0), rate=2.0, burst=5.0, now=10.25) == Bucket(0.5, 10.25)
    assert refill(Bucket(4.0, 10.0), rate=2.0, burst=5.0, now=20.0) == Bucket(5.0, 20.0)


def test_refill_ignores_a_clock_going_backwards() -> None:
    assert refill(Bucket(1.0, 10.0), rate=2.0, burst=5.0, now=9.0) == Bucket(1.0, 10.0)


@settings(max_examples=300, deadline=None)
@given(
    tokens=st.floats(0, 50),
    rate=st.floats(0.01, 100),
    burst=st.floats(1, 50),
    steps=st.lists(st.floats(0, 10), max_size=10),
)
def test_refill_never_exceeds_burst_and_is_monotonic(
    tokens: float, rate: float, burst: float, steps: list[float]
) -> None:
    bucket = Bucket(min(tokens, burst), 0.0)
    now = 0.0
    for step in steps:
        now += step
        nxt = refill(bucket, rate, burst, now)
        assert bucket.tokens <= nxt.tokens <= burst
        bucket = nxt


class Guard:
    """A FloodGuard with a fixed view of who owns what (the claim service supplies the real one)."""

    def __init__(self, limits: ThrottleLimits, owned: dict[str, set[str]], total: int) -> None:
        self.inner = FloodGuard(limits, now=0.0)
        self.owned = owned
        self.total = total

    def admit(self, owner: str, topic: str, size: int, now: float, charge: int = 0) -> str | None:
        return self.inner.admit(owner, topic, size, now, self.owned.get(owner, set()), self.total)

    def tracked_clients(self) -> int:
        return self.inner.tracked_clients()


def guard(
    limits: ThrottleLimits, owned: dict[str, set[str]] | None = None, total: int = 0
) -> Guard:
    return Guard(limits, owned if owned is not None else {}, total)


def test_token_bucket_burst_then_rate() -> None:
    g = guard(ThrottleLimits(client_rate=2.0, client_burst=3.0, store_burst=1000))
    assert [g.admit("A", f"t{i}", 10, 0.0) for i in range(3)] == [None, None, None]
    refusal = g.admit("A", "t3", 10, 0.0)
    assert refusal is not None and "claim rate over 2/s" in refusal and "retry in 0.5 s" in refusal
    assert g.admit("A", "t3", 10, 0.4) is not None  # 0.8 tokens
    assert g.admit("A", "t3", 10, 0.5) is None  # 1.0 token
    assert g.admit("A", "t4", 10, 0.5) is not None
    assert g.admit("B", "t0", 10, 0.5) is None  # buckets are per client


def test_a_refused_claim_spends_no_tokens() -> None:
    limits = ThrottleLimits(client_rate=1.0, client_burst=1.0, max_claim_bytes=100)
    g = guard(limits)
    assert g.admit("A", "t", 101, 0.0) is not None  # too big
    assert g.admit("A", "t", 100, 0.0) is None  # the token was still there


def test_size_limit() -> None:
    g = guard(ThrottleLimits(max_claim_bytes=1000))
    refusal = g.admit("A", "t", 1001, 0.0)
    assert refusal is not None and "1001 bytes" in refusal and "1000" in refusal
    assert g.admit("A", "t", 1000, 0.0) is None


def test_live_claim_limit_per_client_counts_only_new_topics() -> None:
    owned = {"A": {"t0", "t1"}}
    g = guard(ThrottleLimits(max_claims_per_client=2), owned)
    refusal = g.admit("A", "t2", 10, 0.0)
    assert refusal is not None and "2 live claims" in refusal and "unclaim" in refusal
    assert g.admit("A", "t1", 10, 0.0) is None  # an update replaces, it does not add
    assert g.admit("B", "t2", 10, 0.0) is None


def test_total_live_claim_limit() -> None:
    g = guard(ThrottleLimits(max_claims_total=5), {"A": {"t0"}}, total=5)
    refusal = g.admit("B", "t", 10, 0.0)
    assert refusal is not None and "maximum of 5 live claims" in refusal
    assert g.admit("A", "t0", 10, 0.0) is None  # an update of an existing claim still works


def test_global_store_write_budget_spans_clients() -> None:
    g = guard(ThrottleLimits(store_writes_per_second=10.0, store_burst=3.0))
    assert [g.admit(c, "t", 10, 0.0) for c in "ABC"] == [None, None, None]
    refusal = g.admit("D", "t", 10, 0.0)
    assert refusal is not None and "write budget" in refusal
    assert g.admit("D", "t", 10, 0.1) is None  # one write's worth after 0.1 s at 10/s
    assert g.admit("E", "t", 10, 0.1) is not None


def test_budget_refusal_does_not_spend_the_clients_token() -> None:
    g = guard(
        ThrottleLimits(
            client_burst=1.0, client_rate=0.001, store_burst=1.0, store_writes_per_second=1.0
        )
    )
    assert g.admit("A", "t", 1, 0.0) is None
    assert g.admit("B", "t", 1, 0.0) is not None  # budget spent
    assert g.admit("B", "t", 1, 1.0) is None  # B's own token was kept


def test_thousands_of_claims_per_second_from_one_client_mostly_refused() -> None:
    g = guard(ThrottleLimits())
    admitted = sum(g.admit("A", f"t{i % 50}", 500, i / 5000) is None for i in range(5000))
    # one second of 5000 claims/s: the burst of 20 plus ~1 refill
    assert 20 <= admitted <= 22


def test_full_buckets_are_forgotten() -> None:
    g = guard(
        ThrottleLimits(
            client_rate=100.0, client_burst=2.0, store_burst=100000, store_writes_per_second=100000
        )
    )
    for i in range(3000):  # all at once: nobody's bucket refills, so every one is kept
        assert g.admit(f"client-{i}", "t", 1, 0.0) is None
    assert g.tracked_clients() == 3000
    for i in range(3000):  # 0.1 s apart: each bucket is full again 0.01 s after its claim
        assert g.admit(f"later-{i}", "t", 1, 1.0 + i / 10) is None
    assert g.tracked_clients() < 1024
    # a client whose bucket was forgotten is not treated more leniently: it was full anyway
    assert g.admit("later-0", "t", 1, 1000.0) is None


@pytest.mark.parametrize(
    "bad",
    [
        {"max_claim_bytes": 0},
        {"client_rate": 0},
        {"client_rate": -1.0},
        {"client_burst": 0.5},
        {"store_burst": 0.2},
        {"max_claims_total": -5},
    ],
)
def test_limits_are_validated_with_the_key_named(bad: dict[str, float]) -> None:
    with pytest.raises(ClaimError) as err:
        ThrottleLimits(**bad)  # type: ignore[arg-type]
    assert next(iter(bad)) in str(err.value)


def test_the_claims_section_defaults_are_the_flood_guards() -> None:
    """``[claims]`` left out gives the flood guard exactly its own defaults (the two were
    written twice once, and could drift)."""
    from edge_broker.claims.runtime import throttle_limits
    from edge_broker.claims.settings import ClaimsConfig

    assert throttle_limits(ClaimsConfig()) == ThrottleLimits()

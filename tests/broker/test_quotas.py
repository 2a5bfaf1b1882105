"""The quota accounting (broker/limits/quotas.py): releases are exact, whatever the order of
charges and releases; shares refuse with a Reason String naming the limit and who; the
``[limits]`` keys parse and ``check`` prints them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.broker.limits.quotas import (
    RETAINED_BYTES,
    SUBSCRIPTIONS,
    UNATTRIBUTED,
    Ledger,
    Quotas,
    quota_report,
)
from edge_broker.broker.message import Message
from edge_broker.broker.ownership import Principal
from edge_broker.config import ConfigError, LimitsConfig, loads_config

PRINCIPALS = [Principal("password", "dave"), Principal("token", "sub x"), UNATTRIBUTED]
TENANTS = ["~", "acme", "globex"]


def _sums(ledger: Ledger) -> tuple[dict[str, int], dict[Principal, int], int]:
    tenants: dict[str, int] = {}
    principals: dict[Principal, int] = {}
    for tenant, principal, amount in ledger.holders.values():
        tenants[tenant] = tenants.get(tenant, 0) + amount
        principals[principal] = principals.get(principal, 0) + amount
    return tenants, principals, sum(tenants.values())


operations = st.lists(
    st.tuples(
        st.sampled_from(["hold", "release"]),
        st.integers(0, 5),  # holder
        st.sampled_from(TENANTS),
        st.sampled_from(PRINCIPALS),
        st.integers(0, 1000),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_random_charges_and_releases_never_drift(ops) -> None:
    ledger = Ledger(SUBSCRIPTIONS)
    for op, holder, tenant, principal, amount in ops:
        if op == "hold":
            ledger.hold(holder, tenant, principal, amount)
        else:
            ledger.release(holder)
        assert (ledger.tenants, ledger.principals, ledger.total) == _sums(ledger)
        assert all(v > 0 for v in ledger.tenants.values())
        assert all(v > 0 for v in ledger.principals.values())
    for holder in list(ledger.holders):
        ledger.release(holder)
    assert ledger.tenants == {} and ledger.principals == {} and ledger.total == 0


retained_ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "delete"]),
        st.sampled_from(TENANTS),
        st.sampled_from(["a", "b", "c/d"]),
        st.sampled_from(PRINCIPALS),
        st.binary(min_size=1, max_size=50),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(retained_ops)
def test_retained_charges_follow_the_store_exactly(ops) -> None:
    """Set and delete as the retained budget reports them (a replacement is removed, then
    added): what each tenant and principal holds is what the store holds of theirs."""
    quotas = Quotas()
    store: dict[tuple[str, str], tuple[Principal, Message]] = {}
    for op, tenant, topic, principal, payload in ops:
        old = store.get((tenant, topic))
        if old is not None:
            quotas.retained_removed(tenant, old[1])
            del store[(tenant, topic)]
        if op == "set":
            message = Message(topic, payload, 0, True)
            quotas.retaining = principal
            quotas.retained_added(tenant, message)
            quotas.retaining = None
            store[(tenant, topic)] = (principal, message)
        by_principal: dict[Principal, int] = {}
        for owner, message in store.values():
            by_principal[owner] = by_principal.get(owner, 0) + message.size
        assert quotas.retained_bytes.principals == by_principal
        assert quotas.retained_messages.total == len(store)
    for (tenant, _), (_, message) in list(store.items()):
        quotas.retained_removed(tenant, message)
    for ledger in quotas.ledgers():
        assert ledger.total == 0 and not ledger.holders and not ledger.tenants
    assert quotas.retained_owners == {}


def test_shares_refuse_naming_the_limit_and_who() -> None:
    limits = LimitsConfig(max_subscriptions_total=100, tenant_share=0.5, principal_share=0.25)
    ledger = Ledger(SUBSCRIPTIONS)
    dave, erin = Principal("password", "dave"), Principal("password", "erin")
    ledger.hold("s1", "acme", dave, 25)
    key, reason = ledger.refusal(limits, "acme", dave, 1) or ("", "")
    assert key == "principal_share"
    assert "password 'dave' holds 25 subscriptions; its share is 25" in reason
    assert "limits.principal_share 0.25 of limits.max_subscriptions_total 100" in reason
    assert ledger.refusal(limits, "acme", erin, 1) is None  # another principal: its own share
    ledger.hold("s2", "acme", erin, 25)
    key, reason = ledger.refusal(limits, "acme", Principal("password", "fay"), 1) or ("", "")
    assert key == "tenant_share" and "tenant 'acme' holds 50 subscriptions" in reason
    assert ledger.refusal(limits, "globex", Principal("password", "fay"), 1) is None
    off = replace(limits, tenant_share=1.0, principal_share=1.0)
    assert ledger.refusal(off, "acme", dave, 50) is None


def test_a_replaced_retained_message_charges_only_the_difference() -> None:
    limits = LimitsConfig(max_retained_bytes=1000, tenant_share=1.0, principal_share=0.5)
    quotas = Quotas()
    dave, erin = Principal("password", "dave"), Principal("password", "erin")
    old = Message("t", b"x" * 400, 0, True)
    quotas.retaining = dave
    quotas.retained_added("~", old)
    bigger = Message("t", b"x" * 450, 0, True)
    assert quotas.retained_refusal(limits, "~", dave, bigger, old) is None  # 50 bytes more
    refused = quotas.retained_refusal(limits, "~", dave, Message("u", b"x" * 200, 0, True), None)
    assert refused is not None and refused[0] == "principal_share"
    # erin replacing dave's message is charged the whole message; dave gets his back
    assert quotas.retained_refusal(limits, "~", erin, bigger, old) is None
    assert RETAINED_BYTES.total(limits) == 1000


def test_limits_keys_parse_and_are_checked() -> None:
    config = loads_config("[limits]\ntenant_share = 0.6\nprincipal_share = 0.2\n")
    assert config.limits.tenant_share == 0.6 and config.limits.principal_share == 0.2
    defaults = loads_config("")
    assert (defaults.limits.tenant_share, defaults.limits.principal_share) == (0.5, 0.25)
    with pytest.raises(ConfigError, match="principal_share"):
        loads_config("[limits]\ntenant_share = 0.3\nprincipal_share = 0.5\n")
    with pytest.raises(ConfigError, match="tenant_share"):
        loads_config("[limits]\ntenant_share = 0\n")
    # a principal share without a tenant share is fine, and the reverse
    loads_config("[limits]\ntenant_share = 1.0\nprincipal_share = 0.5\n")
    loads_config("[limits]\ntenant_share = 0.5\nprincipal_share = 1.0\n")


def test_check_report_prints_every_share() -> None:
    lines = quota_report(LimitsConfig())
    text = "\n".join(lines)
    assert "limits.tenant_share 0.5" in text and "limits.principal_share 0.25" in text
    retained = next(line for line in lines if "retained bytes" in line)
    assert "12,582,912" in retained and "6,291,456" in retained and "3,145,728" in retained
    assert len(lines) == 6

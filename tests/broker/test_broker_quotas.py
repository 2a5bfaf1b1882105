"""Quotas per tenant and per principal (docs/limits-quotas.md), adversary and victim side by
side on the in-memory broker (engine_harness.py: the real Broker, its password method and
Connections, with no socket; they ran against a broker process before, assertions unchanged).
Each test fails on a broker without the shares: there the adversary takes the whole broker-wide
total and the victim is refused.

Small totals keep the tests fast; the shares are the defaults (a tenant at most half of each
total, a principal at most a quarter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from engine_harness import MemoryBroker, MemoryClient

from edge_broker.auth.password import set_user, write_password_file
from edge_broker.mqtt.packets import Properties, Puback, Publish, Suback

USERS = {  # user -> tenant (the password entry names it: verified)
    "acme-dev": "acme",
    "acme-ops": "acme",
    "acme-lab": "acme",
    "globex-dev": "globex",
    "dave": "",
    "erin": "",
}


def _broker(memory_broker_factory: Any, tmp_path: Path, limits: str) -> MemoryBroker:
    entries: dict = {}
    for user, tenant in USERS.items():
        entries = set_user(entries, user, "pw", tenants=(tenant,) if tenant else ())
    passwd = tmp_path / "passwd"
    write_password_file(passwd, entries)
    return memory_broker_factory(
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
        'auth_methods = ["password"]\n'
        f'[passwords]\nfile = "{passwd}"\n'
        f"[limits]\nconnect_rate = 10000\nconnect_burst = 10000\n{limits}\n"
    )


def _client(b: MemoryBroker, user: str, client_id: str, **kw) -> MemoryClient:
    c = b.client()
    ack = c.connect(client_id, username=user, password=b"pw", **kw)
    assert ack.reason_code == 0, ack
    return c


def _retain(c: MemoryClient, topic: str, payload: bytes, pid: int) -> Puback:
    c.send(Publish(topic, payload, 1, True, packet_id=pid))
    return c.expect(Puback)


def _fill_retained(c: MemoryClient, prefix: str, payload: bytes, most: int) -> Puback:
    """Retain new topics until refused; the refusing PUBACK."""
    for i in range(most):
        ack = _retain(c, f"{prefix}/{i}", payload, i % 60000 + 1)
        if ack.reason_code == 0x97:
            return ack
        assert ack.reason_code in (0x00, 0x10), ack
    raise AssertionError(f"never refused after {most} retained messages")


def _retained(b: MemoryBroker, user: str, topic: str) -> list[bytes]:
    with _client(b, user, f"reader-{user}") as c:
        c.subscribe(topic, 1)
        return [p.payload for p in c.publishes(0.5)]


def test_a_full_tenant_cannot_refuse_another_tenants_retained_status(
    memory_broker_factory, tmp_path
):
    """One client id in acme fills the retained bytes (stopped at its principal's share), a
    second acme principal fills the rest of acme's share, a third is refused by the tenant's
    share; globex's status is still kept."""
    b = _broker(memory_broker_factory, tmp_path, "max_retained_bytes = 65536")
    blob = b"x" * 4000
    with _client(b, "acme-dev", "acme-1") as adversary:
        ack = _fill_retained(adversary, "fill", blob, 40)
    reason = ack.properties.reason_string or ""
    assert "password 'acme-dev'" in reason and "limits.principal_share" in reason
    assert "limits.max_retained_bytes 65536" in reason
    with _client(b, "acme-ops", "acme-2") as second:
        _fill_retained(second, "more", blob, 40)
    with _client(b, "acme-lab", "acme-3") as third:
        ack = _fill_retained(third, "lab", blob, 40)
    reason = ack.properties.reason_string or ""
    assert "tenant 'acme'" in reason and "limits.tenant_share" in reason
    with _client(b, "globex-dev", "valve-7") as victim:
        ack = _retain(victim, "status/valve-7", b"open", 1)
        assert ack.reason_code in (0x00, 0x10), ack
    assert _retained(b, "globex-dev", "status/valve-7") == [b"open"]


def test_one_user_with_many_client_ids_stops_at_its_share(memory_broker_factory, tmp_path):
    """19 client ids x 30 topics of one user would pass max_retained_messages (400): the user
    stops at its quarter; another principal's retained message is kept."""
    b = _broker(memory_broker_factory, tmp_path, "max_retained_messages = 400")
    stored = 0
    refused = None
    for n in range(19):
        with _client(b, "dave", f"dave-{n}") as c:
            for i in range(30):
                ack = _retain(c, f"d/{n}/{i}", b"v", i + 1)
                if ack.reason_code == 0x97:
                    refused = ack
                    break
                stored += 1
        if refused is not None:
            break
    assert stored == 100  # 0.25 x 400, whatever the client id
    reason = refused.properties.reason_string or ""
    assert "password 'dave' holds 100 retained messages" in reason
    with _client(b, "erin", "erin-1") as victim:
        assert _retain(victim, "e/status", b"ok", 1).reason_code in (0x00, 0x10)
    assert _retained(b, "erin", "e/status") == [b"ok"]


def test_subscriptions_per_principal(memory_broker_factory, tmp_path):
    b = _broker(memory_broker_factory, tmp_path, "max_subscriptions_total = 100")
    granted = 0
    codes = []
    for n in range(4):
        kept = Properties(session_expiry_interval=600)
        with _client(b, "dave", f"dave-s{n}", clean=False, properties=kept) as c:
            for i in range(10):
                suback = c.subscribe(f"s/{n}/{i}", 1, packet_id=i + 1)
                codes.append(suback.reason_codes[0])
                if suback.reason_codes[0] == 0x97:
                    reason = suback.properties.reason_string or ""
                    assert "password 'dave'" in reason and "limits.principal_share" in reason
                else:
                    granted += 1
    assert granted == 25 and codes.count(0x97) == 15
    with _client(b, "erin", "erin-s") as victim:
        suback = victim.subscribe("e/cmd", 1)
        assert isinstance(suback, Suback) and suback.reason_codes == (1,)


def test_connections_per_principal(memory_broker_factory, tmp_path):
    b = _broker(memory_broker_factory, tmp_path, "max_connections = 8")
    held = [_client(b, "dave", f"dave-c{n}") for n in range(2)]
    try:
        third = b.client()
        ack = third.connect("dave-c2", username="dave", password=b"pw")
        third.close()
        assert ack.reason_code == 0x97
        reason = ack.properties.reason_string or ""
        assert "password 'dave' holds 2 connections" in reason
        assert "limits.max_connections 8" in reason
        # taking over its own connection is no new one
        again = _client(b, "dave", "dave-c1")
        held.append(again)
        victim = _client(b, "erin", "erin-c")  # another principal still connects
        victim.close()
    finally:
        for c in held:
            c.close()
    # the connections released exactly: dave connects again
    _client(b, "dave", "dave-c3").close()


def test_queued_bytes_of_offline_sessions_per_principal(memory_broker_factory, tmp_path):
    """dave's offline sessions fill the queues; erin's offline session still gets its
    commands."""
    b = _broker(memory_broker_factory, tmp_path, "max_queued_bytes_total = 65536")
    expiry = Properties(session_expiry_interval=600)
    for cid, user, topic in (("dave-q", "dave", "flood/#"), ("erin-q", "erin", "cmd/erin")):
        with _client(b, user, cid, clean=False, properties=expiry) as c:
            c.subscribe(topic, 1)
    with _client(b, "dave", "dave-pub") as flooder:
        for i in range(80):
            flooder.send(Publish(f"flood/{i}", b"f" * 1000, 1, packet_id=i + 1))
            flooder.expect(Puback)
    with _client(b, "erin", "erin-pub") as sender:
        for i in range(5):
            sender.send(Publish("cmd/erin", b"cmd%d" % i, 1, packet_id=i + 1))
            sender.expect(Puback)
    with _client(b, "erin", "erin-q", clean=False, properties=expiry) as victim:
        got = [p.payload for p in victim.publishes(1.0)]
    assert got == [b"cmd%d" % i for i in range(5)]
    with _client(b, "dave", "dave-q", clean=False, properties=expiry) as attacker:
        flood = attacker.publishes(1.0)
    # a quarter of 64 KiB, 1,000 bytes and the entry's 120 B each, less what a message counts
    assert 10 <= len(flood) <= 16


@pytest.mark.parametrize("share", ["tenant_share = 1.0\nprincipal_share = 1.0"])
def test_shares_off_give_the_whole_total(memory_broker_factory, tmp_path, share):
    """With both shares at 1.0 one principal may take the whole total (as before)."""
    b = _broker(memory_broker_factory, tmp_path, f"max_retained_messages = 20\n{share}")
    with _client(b, "dave", "dave-all") as c:
        for i in range(20):
            assert _retain(c, f"all/{i}", b"v", i + 1).reason_code in (0x00, 0x10)
        ack = _retain(c, "all/20", b"v", 21)
    assert ack.reason_code == 0x97
    assert "limits.max_retained_messages" in (ack.properties.reason_string or "")

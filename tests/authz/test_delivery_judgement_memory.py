"""Issue 15: the revocation counters and audit records of a reload, on the in-memory broker
with a fake clock (engine_harness.py): the ``$SYS`` counters are read right after the update
that carries them instead of polling the wall clock for up to 6 s. Moved from
test_delivery_judgement.py, assertions unchanged."""

from __future__ import annotations

from pathlib import Path

from edge_broker.audit.log import read_records
from edge_broker.mqtt.packets import Disconnect, Puback, Publish
from tests.authz.session_support import (
    PASSWORDS,
    RULES_NO_ADMIN,
    RULES_WIDE,
    gateway_config,
    password_login,
    write_passwd,
)
from tests.broker.broker_raw import unique_id
from tests.broker.engine_harness import MemoryBroker, MemoryClient, memory_broker


def login(mb: MemoryBroker, user: str, cid: str, clean: bool = False) -> MemoryClient:
    return password_login(mb.client(), user, cid, clean)


def publish(mb: MemoryBroker, *topics: str) -> None:
    pub = login(mb, "bob", unique_id("pub-"), clean=True)  # bob: admin, may publish anything
    for i, topic in enumerate(topics, 1):
        pub.send(Publish(topic, topic.encode(), 1, packet_id=i))
        assert pub.expect(Puback).reason_code in (0, 0x10)  # 0x10: nobody may receive it
    pub.close()


def sys_counter(mb: MemoryBroker, name: str) -> str:
    """``$SYS/broker/authz/<name>`` (retained, refreshed every second) as bob reads it."""
    c = login(mb, "bob", unique_id("sys-"), clean=True)
    assert c.subscribe(f"$SYS/broker/authz/{name}", 0).reason_codes == (0,)
    got = c.publishes()
    c.close()
    return got[-1].payload.decode()


def test_revocations_are_counted_and_audited(tmp_path: Path) -> None:
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin"})
    admin = RULES_WIDE + ', { id = "sys", topic = "$SYS/#" }'

    def config(user_rules: str) -> str:
        return gateway_config(
            tmp_path, admin_rules=admin, user_rules=user_rules, sys_interval=1, audit=True
        )

    for mb in memory_broker(config(RULES_WIDE)):
        cid = unique_id("alice-")
        alice = login(mb, "alice", cid)
        assert alice.subscribe("admin/#", 1).reason_codes == (1,)
        alice.send(Disconnect(0))
        alice.close()
        publish(mb, "admin/counted")
        intruder = mb.client()  # another principal for alice's session
        assert (
            intruder.connect(
                cid, clean=False, username="bob", password=PASSWORDS["bob"].encode()
            ).reason_code
            == 0x87
        )
        intruder.close()
        assert mb.reload(tmp_path / "broker.toml", config(RULES_NO_ADMIN))
        mb.advance(1.0)  # the next $SYS update
        assert sys_counter(mb, "deliveries_revoked") == "1"
        assert sys_counter(mb, "sessions_refused") == "1"
        assert sys_counter(mb, "subscriptions_removed") == "1"
    records = [r for _, _, r in read_records(tmp_path / "audit") if r["type"] == "decision"]
    assert any(r["action"] == "deliver" and r["topic"] == "admin/counted" for r in records)
    assert any(r["action"] == "connect" and r.get("rule") == "session-ownership" for r in records)

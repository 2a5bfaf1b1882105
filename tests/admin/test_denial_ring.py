"""The denial ring (broker/operator.py): fed only while the admin listener runs, only with
denials, bounded in records and in text."""

from __future__ import annotations

import asyncio

from edge_broker.broker.operator import DENIAL_RING, DENIAL_TEXT, Operator, preview, redact
from edge_broker.broker.server import Broker
from edge_broker.config import Config


def test_ring_fed_only_with_denials_while_attached() -> None:
    async def run() -> None:
        broker = Broker(Config())
        assert broker.decisions.on_denial is None  # no admin: nothing on any decision path
        operator = Operator(broker)
        broker.decisions.decision(action="publish", client="a", topic="t/1", outcome="deny")
        assert not operator.denials
        operator.attach()
        broker.decisions.decision(action="publish", client="a", topic="t/2", outcome="allow")
        broker.decisions.decision(action="publish", client="a", topic="t/3", outcome="deny")
        broker.decisions.decision(
            action="subscribe", client="b", topic="x" * 70_000, outcome="deny"
        )
        assert [d["topic"][:3] for d in operator.denials] == ["t/3", "xxx"]
        assert len(operator.denials[-1]["topic"]) == DENIAL_TEXT + 1
        for i in range(DENIAL_RING + 10):
            broker.decisions.decision(action="publish", client="c", topic=f"n/{i}", outcome="deny")
        assert len(operator.denials) == DENIAL_RING
        newest = await operator.recent_denials(3)
        assert [d["topic"] for d in newest] == [f"n/{DENIAL_RING + 9 - i}" for i in range(3)]
        assert "DENIED" in newest[0]["explanation"]
        operator.detach()
        assert broker.decisions.on_denial is None
        broker.decisions.close()

    asyncio.run(run())


def test_preview_and_redaction() -> None:
    assert preview(b"21.5") == "21.5"
    assert preview(bytes([0xFF, 0, 1])) == "ff0001"
    assert preview("é".encode() * 40) == "é" * 32  # cut at 64 bytes, between characters
    assert preview(b"a" * 63 + "é".encode()) == "a" * 63  # a character cut by the limit
    value = redact({"password": "pw", "tls_key": None, "entries": {"u": b"$argon2"}, "n": 3})
    assert value == {"password": "***", "tls_key": None, "entries": {"u": "***"}, "n": 3}

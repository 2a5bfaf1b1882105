"""The broker's one clock (issue 21 item 2) beyond the session lifecycle: the uptime in
``$SYS`` and the throttling of limit-hit log lines follow ``Broker.clock``, so the in-memory
broker (engine_harness.py) shows them without waiting for the wall clock."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from engine_harness import memory_broker

from edge_broker.engine.connection import ConnectionEngine, Timeout
from edge_broker.mqtt.packets import (
    Disconnect,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from edge_broker.mqtt.reason_codes import ReasonCode


def test_sys_uptime_is_on_the_broker_clock() -> None:
    for mb in memory_broker({"sys": {"interval": 10}}):
        c = mb.client()
        c.connect("uptime-reader")
        c.send(Subscribe(1, (Subscription("$SYS/broker/uptime", 0),)))
        c.expect(Suback)
        c.nothing()  # the first update has not run yet
        mb.advance(40.0)
        seen = [c.expect(Publish).payload for _ in range(4)]  # at 0.5 (first tick), 10.5 ...
        assert seen[-1] == b"30 seconds"
        assert mb.broker.stats.uptime() == 40


def test_limit_hit_lines_are_throttled_on_the_broker_clock(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for mb in memory_broker({"limits": {"max_topic_levels": 3}}):
        c = mb.client()
        c.connect("deep-publisher")
        with caplog.at_level(logging.WARNING, logger="edge_broker.limits"):
            for pid in (1, 2):
                c.send(Publish("a/b/c/d", b"x", 1, packet_id=pid))
                assert c.expect(Puback).reason_code == ReasonCode.TOPIC_NAME_INVALID
            mb.advance(10.5)  # past the 10 s log interval, on the broker's clock only
            c.send(Publish("a/b/c/d", b"x", 1, packet_id=3))
            assert c.expect(Puback).reason_code == ReasonCode.TOPIC_NAME_INVALID
        lines = [r.getMessage() for r in caplog.records if r.name == "edge_broker.limits"]
        assert len(lines) == 2, lines
        assert lines[0].startswith("limits.max_topic_levels: ")
        assert lines[1].endswith("(1 more hit(s) since the last line about it)")
        assert mb.broker.limit_hits.counts == {"limits.max_topic_levels": 3}


def test_the_tick_looks_only_at_connections_whose_deadline_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[ConnectionEngine] = []
    timeout = ConnectionEngine.timeout

    def counting(engine: ConnectionEngine, now: float, connect_timeout: float) -> Timeout | None:
        asked.append(engine)
        return timeout(engine, now, connect_timeout)

    monkeypatch.setattr(ConnectionEngine, "timeout", counting)
    for mb in memory_broker():
        idle = [mb.client() for _ in range(20)]
        for i, c in enumerate(idle):
            c.connect(f"idle-{i}", keep_alive=60)
        short = mb.client()
        short.connect("short", keep_alive=1)
        mb.advance(1.0)  # two ticks; nobody's deadline has come (the earliest is 1.5 s)
        assert asked == []  # before: every connection at every tick (42 calls)
        mb.advance(1.0)
        got = short.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x8D
        assert len(asked) <= 2 and all(e is asked[0] for e in asked)  # only the short one
        for c in idle:
            c.nothing()  # still connected, never looked at


def test_stored_session_expiry_is_on_the_broker_clock(tmp_path: Path) -> None:
    """Persistence converts deadlines between the broker's clock and the wall clock on disk
    (persist_codec.now_pair): with a broker clock far from ``time.monotonic()`` a session
    parked for 60 s still has 60 s after a restart whose clock starts elsewhere again."""
    config = {"persistence": {"enabled": True, "state_dir": str(tmp_path), "durability": "none"}}
    for mb in memory_broker(config, clock_start=1e7):
        c = mb.client()
        c.connect("parked", clean=False, properties=Properties(session_expiry_interval=60))
        c.close()  # offline: expires 60 s from now on this clock, stored as a wall time
    for mb in memory_broker(config, clock_start=5.0):  # the restarted process's clock
        session = next(iter(mb.broker.sessions))
        assert session.expires_at is not None
        assert 5.0 + 59 < session.expires_at <= 5.0 + 60
        mb.advance(session.expires_at - mb.clock.now)
        assert len(mb.broker.sessions) == 0

"""LimitHits: every hit counted, at most one warning per limit and interval (issue 16)."""

from __future__ import annotations

import logging

import pytest

from edge_broker.broker.limits.limit_hits import LimitHits


def test_counts_every_hit_and_logs_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    hits = LimitHits(interval=10.0)
    with caplog.at_level(logging.WARNING, logger="edge_broker.limits"):
        for i in range(100):
            hits.hit("passwords.max_waiting", "CONNECT refused: busy", f"c{i}", now=1.0 + i * 0.01)
        hits.hit("limits.max_connections", "closed at accept", now=2.0)
        hits.hit("passwords.max_waiting", "CONNECT refused: busy", "late", now=12.0)
    assert hits.counts == {"passwords.max_waiting": 101, "limits.max_connections": 1}
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "CONNECT refused: busy",
        "closed at accept",
        "CONNECT refused: busy (99 more hit(s) since the last line about it)",
    ]
    assert caplog.records[0].limit == "passwords.max_waiting"  # type: ignore[attr-defined]

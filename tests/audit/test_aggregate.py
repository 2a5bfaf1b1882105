"""Repeated identical decisions aggregated per window (edge_broker/audit/aggregate.py), on a
fake clock, written through a real AuditLog and read back; plus the record format's new fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.audit.aggregate import DecisionWindow
from edge_broker.audit.log import AuditLog, read_records
from edge_broker.audit.record import AuditRecordError, decode_record


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _window(tmp_path: Path, **kw: Any) -> tuple[DecisionWindow, AuditLog, Clock]:
    clock = Clock()
    audit = AuditLog(tmp_path, "gw")
    return DecisionWindow(audit, clock=clock, wall=clock, **kw), audit, clock


def _records(audit: AuditLog, tmp_path: Path) -> list[dict[str, Any]]:
    audit.flush()
    return [r for _, _, r in read_records(tmp_path)]


DENY = {"action": "publish", "client": "c1", "topic": "a/b", "outcome": "deny", "rc": 0x87}


def test_first_written_at_once_repeats_counted_once_per_window(tmp_path: Path) -> None:
    window, audit, clock = _window(tmp_path, window=10)
    lines: list[tuple[int, float]] = []
    for _ in range(500):
        window.decision(lambda n, s: lines.append((n, s)), **DENY)
        clock.now += 0.01
    assert [r.get("count") for r in _records(audit, tmp_path)] == [None]
    assert lines == [(0, 0.0)]  # the first line at once
    clock.now = 1011.0
    window.expire(clock.now)
    records = _records(audit, tmp_path)
    assert [r.get("count") for r in records] == [None, 499]
    assert sum(r.get("count", 1) for r in records) == 500
    summary = records[1]
    assert summary["first_ts"] == pytest.approx(1000.01) and summary["last_ts"] == pytest.approx(
        1004.99
    )
    assert {k: summary[k] for k in DENY} == DENY
    assert lines[-1][0] == 499  # the summary line says how many
    # the key is forgotten: the next occurrence opens a new window and is written at once
    window.decision(**DENY)
    assert len(_records(audit, tmp_path)) == 3 and window.next_due() == pytest.approx(1021.0)


def test_distinct_keys_are_not_merged(tmp_path: Path) -> None:
    window, audit, _ = _window(tmp_path)
    window.decision(**DENY)
    window.decision(**{**DENY, "topic": "a/c"})
    window.decision(**{**DENY, "roles": ["b", "a"]})
    window.decision(**{**DENY, "rc": 0x97})
    window.decision(**DENY)  # a repeat: counted
    assert len(_records(audit, tmp_path)) == 4
    window.close()
    assert [r.get("count") for r in _records(audit, tmp_path)] == [None, None, None, None, 1]


def test_key_cap_counts_the_overflow_in_one_record(tmp_path: Path, caplog: Any) -> None:
    window, audit, clock = _window(tmp_path, window=5, max_keys=3)
    for i in range(10):
        window.decision(**{**DENY, "topic": f"t/{i}"})
    assert window.open_keys == 3  # memory bounded
    records = _records(audit, tmp_path)
    assert [r["topic"] for r in records] == ["t/0", "t/1", "t/2"]
    assert any(getattr(r, "event", None) == "audit_overflow" for r in caplog.records)
    clock.now += 5
    window.expire(clock.now)
    overflow = [r for r in _records(audit, tmp_path) if r.get("event") == "audit_overflow"]
    assert len(overflow) == 1 and overflow[0]["count"] == 7
    assert "aggregate_max_keys" in overflow[0]["detail"]
    assert window.next_due() is None and window.open_keys == 0


def test_window_zero_writes_every_one(tmp_path: Path) -> None:
    window, audit, _ = _window(tmp_path, window=0)
    for _ in range(5):
        window.decision(**DENY)
    assert len(_records(audit, tmp_path)) == 5


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.floats(0, 7, allow_nan=False)), min_size=1, max_size=80
    )
)
def test_counts_sum_to_the_requests_and_records_stay_bounded(
    events: list[tuple[int, float]],
) -> None:
    """Whatever the arrival times: summing ``count`` (absent: 1) per key gives the number of
    requests, and a key writes at most two records per window it opens."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        window, audit, clock = _window(Path(tmp), window=3, max_keys=10)
        sent: dict[str, int] = {}
        for key, step in events:
            clock.now += step
            window.expire(clock.now)
            window.decision(**{**DENY, "topic": f"t/{key}"})
            sent[f"t/{key}"] = sent.get(f"t/{key}", 0) + 1
        window.close()
        got: dict[str, int] = {}
        records = _records(audit, Path(tmp))
        for r in records:
            got[r["topic"]] = got.get(r["topic"], 0) + r.get("count", 1)
        assert got == sent
        openers = sum(1 for r in records if "count" not in r)
        assert len(records) <= 2 * openers


def test_new_fields_parse_and_older_records_still_do() -> None:
    line = json.dumps(
        {
            "v": 1,
            "ts": 1.0,
            "gw": "g",
            "type": "decision",
            "qos": 1,
            "retain": True,
            "roles": ["a", "b"],
            "cn": "dev",
            "iface": "eth0",
            "grants": "ab" * 32,
            "set": "own-data",
            "count": 3,
            "first_ts": 1,
            "last_ts": 2.5,
        }
    )
    assert decode_record(line)["retain"] is True
    old = '{"v":1,"ts":1.0,"gw":"g","type":"decision","action":"publish","rc":135}'
    assert decode_record(old)["rc"] == 135
    for bad, field in (
        ('"retain":1', "retain"),
        ('"roles":"a"', "roles"),
        ('"roles":[1]', "roles"),
        ('"count":true', "count"),
    ):
        with pytest.raises(AuditRecordError, match=field):
            decode_record('{"v":1,"ts":1,"gw":"g","type":"decision",' + bad + "}")

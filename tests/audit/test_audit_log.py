"""The audit record format and the rotating audit log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edge_broker.audit.log import AuditLog, list_segments, read_records
from edge_broker.audit.record import AuditRecordError, decode_record, encode_record


def test_records_roundtrip_and_drop_none(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, "gw-1")
    log.decision(
        action="publish",
        client="c1",
        tenant="~",
        topic="a/b",
        outcome="deny",
        gate="permissions",
        rule="perm-1",
        rc=0x87,
        reason="denied",
        user=None,
    )
    log.event("connect", client="c1", method="anonymous")
    log.close()
    records = [rec for _, _, rec in read_records(tmp_path)]
    assert [r["type"] for r in records] == ["decision", "event"]
    first = records[0]
    assert first["v"] == 1 and first["gw"] == "gw-1" and first["rc"] == 0x87
    assert "user" not in first
    assert records[1]["event"] == "connect"


def test_rotation_bounds_total_and_counts_drops(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, "gw", max_segment_bytes=2048, max_segments=3)
    for i in range(400):
        log.decision(action="publish", client=f"c{i}", topic="t/" + "x" * 40, outcome="deny")
        if i % 50 == 0:
            log.flush()
    log.close()
    segments = list_segments(tmp_path)
    assert len(segments) == 3
    assert all(path.stat().st_size <= 2048 for _, path in segments)
    stats = log.stats()
    kept = sum(1 for _ in read_records(tmp_path))
    assert stats.records_written == 400
    assert kept + stats.records_dropped == 400
    assert stats.records_dropped > 0
    # sequence numbers only grow, and the survivors are the newest records
    seqs = [seq for seq, _ in segments]
    assert seqs == sorted(seqs) and seqs[-1] == log.current_sequence
    last = list(read_records(tmp_path))[-1][2]
    assert last["client"] == "c399"


def test_reopen_continues_the_current_segment(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, "gw")
    log.event("connect", client="a")
    log.close()
    again = AuditLog(tmp_path, "gw")
    again.event("connect", client="b")
    again.close()
    assert [r["client"] for _, _, r in read_records(tmp_path)] == ["a", "b"]
    assert len(list_segments(tmp_path)) == 1


def test_reader_skips_torn_tail_and_garbage_and_resumes(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, "gw")
    for i in range(5):
        log.event("connect", client=f"c{i}")
    log.close()
    ((_, path),) = list_segments(tmp_path)
    with path.open("a") as handle:
        handle.write("not json\n")
        handle.write('{"v":1,"type":"event","ts":1.0,"gw":"gw","event":"conn')  # torn, no newline
    got = list(read_records(tmp_path))
    assert [r["client"] for _, _, r in got] == [f"c{i}" for i in range(5)]
    seq, line, _ = got[2]
    resumed = [r["client"] for _, _, r in read_records(tmp_path, after=(seq, line))]
    assert resumed == ["c3", "c4"]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[]", "must be a JSON object"),
        ('{"v":2,"type":"event"}', "unsupported format version"),
        ('{"v":1,"type":"other"}', "field 'type'"),
        ('{"v":1,"type":"event","rc":"x"}', "field 'rc' must be int"),
        ('{"v":1,"type":"event","ts":true}', "field 'ts' must be float"),
        ("{", "not JSON"),
    ],
)
def test_decode_rejects_bad_records(line: str, message: str) -> None:
    with pytest.raises(AuditRecordError, match=message):
        decode_record(line)


def test_encode_is_compact_json() -> None:
    line = encode_record({"v": 1, "type": "event", "topic": "ä/b", "rule": None})
    assert line == '{"v":1,"type":"event","topic":"ä/b"}'
    assert json.loads(line)["topic"] == "ä/b"

"""Audit upload batches (sync/upload.py) cut from a real audit log: one segment per batch, ids
naming the lines, resume after a cursor without gaps or repeats, segments rotated away counted;
and the sync state files (sync/state.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.audit.log import AuditLog
from edge_broker.sync.state import SyncStateDir, SyncStateError
from edge_broker.sync.upload import AuditBatch, next_batch


def fill(
    directory: Path, count: int, *, segment_bytes: int = 1024, segments: int = 100
) -> AuditLog:
    log = AuditLog(directory, "gw", max_segment_bytes=segment_bytes, max_segments=segments)
    for i in range(count):
        log.event("client_stats", client=f"c{i}", detail="x" * 40)
    log.flush()
    return log


def drain(
    directory: Path, cursor: tuple[int, int] | None, size: int
) -> tuple[list[AuditBatch], tuple[int, int] | None]:
    out = []
    while (batch := next_batch(directory, "gw", cursor, size)) is not None:
        out.append(batch)
        cursor = (batch.segment, batch.last)
    return out, cursor


def records(batches: list[AuditBatch]) -> list[str]:
    out = []
    for batch in batches:
        header, *lines = batch.payload.decode().splitlines()
        head = json.loads(header)
        assert head["batch"] == batch.batch_id and head["count"] == len(lines) == batch.count
        out.extend(json.loads(line)["client"] for line in lines)
    return out


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 120), size=st.integers(1, 50), split=st.integers(0, 120))
def test_every_record_once_in_order_across_segments(
    tmp_path_factory: pytest.TempPathFactory, count: int, size: int, split: int
) -> None:
    directory = tmp_path_factory.mktemp("audit")
    log = fill(directory, min(split, count))
    first, cursor = drain(directory, None, size)
    for i in range(min(split, count), count):
        log.event("client_stats", client=f"c{i}", detail="x" * 40)
    log.close()
    second, _ = drain(directory, cursor, size)
    batches = first + second
    assert records(batches) == [f"c{i}" for i in range(count)]
    assert all(b.count <= size and b.lost_segments == 0 for b in batches)
    assert len({b.batch_id for b in batches}) == len(batches)


def test_a_batch_stays_in_one_segment(tmp_path: Path) -> None:
    fill(tmp_path, 60).close()
    batches, _ = drain(tmp_path, None, 1000)
    assert len({b.segment for b in batches}) == len(batches) > 1
    assert batches[0].batch_id == f"{batches[0].segment:08d}:1-{batches[0].last}"


def test_segments_rotated_away_before_upload_are_counted(tmp_path: Path) -> None:
    log = fill(tmp_path, 10, segments=2)
    batches, cursor = drain(tmp_path, None, 100)
    assert cursor is not None
    for i in range(200):  # the uplink is down: rotation deletes what was never sent
        log.event("client_stats", client=f"late{i}", detail="x" * 40)
    log.close()
    first = next_batch(tmp_path, "gw", cursor, 100)
    assert first is not None and first.lost_segments > 0
    assert (
        json.loads(first.payload.decode().splitlines()[0])["lost_segments"] == first.lost_segments
    )
    rest, _ = drain(tmp_path, (first.segment, first.last), 100)
    assert all(b.lost_segments == 0 for b in rest)
    never = next_batch(tmp_path, "gw", None, 100)  # a gateway that never uploaded
    assert never is not None and never.lost_segments == never.segment - 1 > 0


def test_state_files(tmp_path: Path) -> None:
    state = SyncStateDir.open(tmp_path / "s")
    assert state.load_bundle() is None and state.load_cursor() is None
    state.save_bundle(b"\x01\x02")
    state.save_cursor(3, 17)
    again = SyncStateDir.open(tmp_path / "s")
    assert again.load_bundle() == b"\x01\x02" and again.load_cursor() == (3, 17)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == [
        "audit-cursor.json",
        "bundle.cbor",
    ]
    (tmp_path / "s" / "audit-cursor.json").write_text("{")
    with pytest.raises(SyncStateError, match="audit-cursor.json is damaged"):
        again.load_cursor()
    (tmp_path / "file").write_text("")
    with pytest.raises(SyncStateError, match="set \\[sync\\] state_dir"):
        SyncStateDir.open(tmp_path / "file" / "sub")

"""Power-loss simulation: torn tails and flipped bytes never stop the open, and lose only the
records they touched; recovery reports what it dropped."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_broker.store import KeyedLog, StoreError
from edge_broker.store.frame import FRAME_MAGIC, HEADER, HEADER_SIZE, Damage, encode_frame, scan

RECORDS = 60

# Many small logs: on tmpfs when there is one, so fsync does not dominate the run time.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None


def build_log(directory: Path) -> tuple[bytes, list[tuple[int, int]]]:
    """A log of RECORDS puts with distinct keys; returns its bytes and each frame's span."""
    path = directory / "source.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    spans = []
    for i in range(RECORDS):
        start = keyed.stats().file_size
        # Values of varied length, some containing the frame magic, to exercise resync.
        keyed.table("t").put_sync(
            i, {"i": i, "pad": "p" * (i * 7 % 50), "m": FRAME_MAGIC * (i % 3)}
        )
        spans.append((start, keyed.stats().file_size))
    keyed.close()
    return path.read_bytes(), spans


@pytest.fixture(scope="module")
def source() -> tuple[bytes, list[tuple[int, int]]]:
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as directory:
        return build_log(Path(directory))


def open_bytes(data: bytes, directory: Path, readonly: bool = False) -> tuple[KeyedLog, Path]:
    path = directory / "damaged.log"
    path.write_bytes(data)
    return KeyedLog.open(str(path), fsync="never", readonly=readonly), path


def present(keyed: KeyedLog) -> set[object]:
    return set(keyed.table("t").keys())


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_cut_at_any_offset_keeps_every_whole_record(
    source: tuple[bytes, list[tuple[int, int]]], cut: int
) -> None:
    data, spans = source
    cut = min(cut, len(data))
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as directory:
        check_cut(data, spans, cut, Path(directory))


def check_cut(data: bytes, spans: list[tuple[int, int]], cut: int, directory: Path) -> None:
    keyed, path = open_bytes(data[:cut], directory)
    whole = {i for i, (_, end) in enumerate(spans) if end <= cut}
    assert present(keyed) == whole
    report = keyed.report
    last_end = max((spans[i][1] for i in whole), default=HEADER_SIZE)
    if cut > last_end and cut >= HEADER_SIZE:
        assert report.truncated_to == last_end
        assert report.tail_bytes_dropped == cut - last_end
        assert report.damaged[-1].tail and "torn" in report.damaged[-1].reason
    elif cut >= HEADER_SIZE:
        assert report.clean
    keyed.table("t").put_sync("after", "cut")
    keyed.close()
    # After the repair the log is clean and keeps appending where the intact part ended.
    again = KeyedLog.open(str(path), fsync="never")
    assert again.report.clean
    assert present(again) == whole | {"after"}
    again.close()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    flips=st.lists(
        st.tuples(st.integers(min_value=HEADER_SIZE, max_value=10_000), st.integers(1, 255)),
        min_size=1,
        max_size=4,
    )
)
def test_flipped_bytes_lose_only_the_frames_they_hit(
    source: tuple[bytes, list[tuple[int, int]]], flips: list[tuple[int, int]]
) -> None:
    data, spans = source
    damaged = bytearray(data)
    for offset, mask in flips:
        damaged[HEADER_SIZE + (offset - HEADER_SIZE) % (len(data) - HEADER_SIZE)] ^= mask
    hit_offsets = {i for i in range(len(data)) if damaged[i] != data[i]}
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as directory:
        check_flips(data, spans, bytes(damaged), hit_offsets, Path(directory))


def check_flips(
    data: bytes,
    spans: list[tuple[int, int]],
    damaged: bytes,
    hit_offsets: set[int],
    directory: Path,
) -> None:
    keyed, _ = open_bytes(damaged, directory)
    hit = {i for i, (start, end) in enumerate(spans) if any(start <= o < end for o in hit_offsets)}
    assert present(keyed) == set(range(RECORDS)) - hit
    report = keyed.report
    assert report.bytes_dropped == sum(spans[i][1] - spans[i][0] for i in hit)
    for offset in hit_offsets:
        assert any(d.offset <= offset < d.offset + d.length for d in report.damaged), str(report)
    last_hit = max(hit, default=-1) == RECORDS - 1
    assert (report.truncated_to is not None) == last_hit
    keyed.close()


def test_damage_in_the_middle_is_kept_out_and_reported_again(tmp_path: Path) -> None:
    data, spans = build_log(tmp_path)
    damaged = bytearray(data)
    start, end = spans[20]
    damaged[start + 12] ^= 0x40
    keyed, path = open_bytes(bytes(damaged), tmp_path)
    assert present(keyed) == set(range(RECORDS)) - {20}
    assert keyed.report.damaged == (Damage(start, end - start, "CRC mismatch"),)
    assert "dropped" in str(keyed.report) and "middle" in str(keyed.report)
    keyed.table("t").put_sync(20, "rewritten")
    keyed.close()
    again = KeyedLog.open(str(path), fsync="never")
    assert again.table("t")[20] == "rewritten" and len(again.table("t")) == RECORDS
    assert len(again.report.damaged) == 1  # still in the file until a compaction
    again.compact()
    again.close()
    clean = KeyedLog.open(str(path), fsync="never")
    assert clean.report.clean and len(clean.table("t")) == RECORDS
    clean.close()


def test_damaged_file_header_is_repaired_when_records_follow(tmp_path: Path) -> None:
    data, _ = build_log(tmp_path)
    damaged = bytearray(data)
    damaged[2] ^= 0xFF
    keyed, path = open_bytes(bytes(damaged), tmp_path)
    assert present(keyed) == set(range(RECORDS))
    assert keyed.report.header_repaired and "bad file header" in keyed.report.damaged[0].reason
    keyed.close()
    assert path.read_bytes()[:HEADER_SIZE] == HEADER


@pytest.mark.parametrize("length", range(0, HEADER_SIZE))
def test_crash_while_creating_the_header(tmp_path: Path, length: int) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(HEADER[:length])
    keyed = KeyedLog.open(str(path))
    assert keyed.report.records == 0 and keyed.report.header_repaired == (length > 0)
    keyed.table("t").put_sync("k", "v")
    keyed.close()
    assert KeyedLog.open(str(path), readonly=True).table("t")["k"] == "v"


def test_readonly_open_changes_nothing(tmp_path: Path) -> None:
    data, spans = build_log(tmp_path)
    damaged = data[:-5]
    keyed, path = open_bytes(damaged, tmp_path, readonly=True)
    assert present(keyed) == set(range(RECORDS - 1))
    assert keyed.report.truncated_to is None and keyed.report.damaged[-1].tail
    keyed.close()
    assert path.read_bytes() == damaged


def test_garbage_appended_after_the_last_record_is_truncated(tmp_path: Path) -> None:
    data, _ = build_log(tmp_path)
    keyed, path = open_bytes(data + os.urandom(333), tmp_path)
    assert present(keyed) == set(range(RECORDS))
    assert keyed.report.truncated_to == len(data) and keyed.report.tail_bytes_dropped == 333
    keyed.close()
    assert path.read_bytes() == data


def test_crc_valid_frame_that_is_not_a_record_is_rejected(tmp_path: Path) -> None:
    data, _ = build_log(tmp_path)
    not_cbor = encode_frame(b"\xff\xff\xff")
    not_keyed = encode_frame(b"\x83\x01\x02\x03")  # the CBOR array [1, 2, 3]
    keyed, _ = open_bytes(data + not_cbor + not_keyed + data[HEADER_SIZE:], tmp_path)
    reasons = [d.reason for d in keyed.report.damaged]
    assert any("undecodable CBOR" in r for r in reasons), reasons
    assert any("malformed keyed-log op" in r for r in reasons), reasons
    assert present(keyed) == set(range(RECORDS))
    keyed.close()


def test_a_length_over_the_limit_is_damage_not_a_huge_read(tmp_path: Path) -> None:
    data, spans = build_log(tmp_path)
    damaged = bytearray(data)
    start, _ = spans[5]
    damaged[start + 6 : start + 10] = b"\xff\xff\xff\xf0"  # the length field
    items = list(scan(bytes(damaged), HEADER_SIZE, 1 << 20))
    assert any(isinstance(i, Damage) and "over the maximum" in i.reason for i in items)
    keyed, _ = open_bytes(bytes(damaged), tmp_path)
    assert present(keyed) == set(range(RECORDS)) - {5}
    keyed.close()


def test_version_mismatch_message_says_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(HEADER[:8] + b"\x00\x07\x00\x00")
    with pytest.raises(StoreError, match="upgrade edge-broker or move the file away"):
        KeyedLog.open(str(path))


def test_a_partial_compaction_file_left_by_a_crash_is_removed(tmp_path: Path) -> None:
    data, _ = build_log(tmp_path)
    path = tmp_path / "a.log"
    path.write_bytes(data)
    (tmp_path / "a.log.compact").write_bytes(data[: len(data) // 2])
    keyed = KeyedLog.open(str(path))
    assert keyed.report.stale_files_removed == (str(path) + ".compact",)
    assert present(keyed) == set(range(RECORDS)) and keyed.report.damaged == ()
    keyed.close()
    assert not (tmp_path / "a.log.compact").exists()
    # A read-only open leaves such a file alone (the writer may be compacting right now).
    (tmp_path / "a.log.compact").write_bytes(b"partial")
    reader = KeyedLog.open(str(path), readonly=True)
    assert reader.report.stale_files_removed == ()
    reader.close()
    assert (tmp_path / "a.log.compact").exists()

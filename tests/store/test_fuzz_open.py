"""Opening never crashes: arbitrary file contents and arbitrary CRC-valid CBOR records either
load (what is a valid keyed record) or are reported as damage; the only exception an open may
raise is StoreError, and only for a file that is not a log at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import cbor2
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.store import KeyedLog, StoreError
from edge_broker.store.frame import HEADER, encode_frame

FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=4) | st.binary(max_size=4)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(scalars, inner),
    max_leaves=8,
)
# Records that look like keyed-log ops often enough to reach every branch of the reducer.
ops = st.one_of(
    values,
    st.tuples(st.integers(0, 7), values, values, values).map(list),
    st.tuples(st.integers(0, 7), st.text(max_size=3), values).map(list),
    st.tuples(st.integers(0, 7), st.text(max_size=3)).map(list),
    st.tuples(st.just(5), st.lists(values, max_size=3)).map(list),
    st.tuples(st.just(6), st.text(max_size=3), st.integers(), st.binary(max_size=8)).map(list),
)


def open_bytes(data: bytes) -> KeyedLog | StoreError:
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as directory:
        path = Path(directory) / "fuzz.log"
        path.write_bytes(data)
        try:
            keyed = KeyedLog.open(str(path), fsync="never")
        except StoreError as exc:
            return exc
        for name in keyed.tables():  # every value that loaded can be read
            list(keyed.table(name).items())
        keyed.close()
        return keyed


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=8))
def test_any_crc_valid_records_load_or_are_reported(records: list[Any]) -> None:
    data = HEADER + b"".join(encode_frame(cbor2.dumps(record)) for record in records)
    result = open_bytes(data)
    assert isinstance(result, KeyedLog)
    assert result.report.records + len(result.report.damaged) == len(records)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_after_a_header_open(tail: bytes) -> None:
    assert isinstance(open_bytes(HEADER + tail), KeyedLog)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_file_opens_or_is_refused_with_a_store_error(data: bytes) -> None:
    result = open_bytes(data)
    if isinstance(result, StoreError):
        assert "edge-broker log" in str(result) or "format version" in str(result)

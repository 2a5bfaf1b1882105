"""KeyedLog against a dict model: any sequence of puts, deletes, table drops, batches,
compactions and reopens leaves the log equal to the model, in memory and after reopen, down to
the order of tables and keys (first insertion, as a dict keeps it: session queues rely on it)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.store import CreateTable, Delete, DropTable, KeyedLog, Op, Put

tables = st.sampled_from(["a", "b", "c"])
keys = st.one_of(st.integers(-3, 3), st.sampled_from(["x", "y", ""]), st.just(b"k"))
values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
ops = st.one_of(
    st.builds(Put, tables, keys, values),
    st.builds(Delete, tables, keys),
    st.builds(CreateTable, tables),
    st.builds(DropTable, tables),
)
steps = st.lists(
    st.one_of(
        ops.map(lambda op: [op]),
        st.lists(ops, min_size=2, max_size=4),
        st.sampled_from(["compact", "reopen-plain", "reopen-encoded"]),
    ),
    max_size=40,
)

# Many small logs: on tmpfs when there is one, so fsync does not dominate the run time.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None


def apply_model(model: dict[str, dict[Any, Any]], op: Op) -> None:
    if isinstance(op, Put):
        model.setdefault(op.table, {})[op.key] = op.value
    elif isinstance(op, Delete):
        model.get(op.table, {}).pop(op.key, None)
    elif isinstance(op, CreateTable):
        model.setdefault(op.table, {})
    else:
        model.pop(op.table, None)


def state(keyed: KeyedLog) -> list[tuple[str, list[tuple[Any, Any]]]]:
    """Order-sensitive: tables and keys in first-insertion order, as a Python dict keeps them."""
    return [(name, list(keyed.table(name).items())) for name in keyed.tables()]


def model_state(model: dict[str, dict[Any, Any]]) -> list[tuple[str, list[tuple[Any, Any]]]]:
    return [(name, list(table.items())) for name, table in model.items()]


@settings(max_examples=150, deadline=None)
@given(steps=steps, encoded=st.booleans())
def test_keyed_log_matches_a_dict_model(steps: list[Any], encoded: bool) -> None:
    """Also across ``encoded_values`` switched on and off between opens: one file, both kinds."""
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as directory:
        path = str(Path(directory) / "model.log")
        keyed = KeyedLog.open(
            path, fsync="never", compact_min_bytes=64, compact_ratio=0.5, encoded_values=encoded
        )
        model: dict[str, dict[Any, Any]] = {}
        for step in steps:
            if step == "compact":
                keyed.compact()
            elif step in ("reopen-plain", "reopen-encoded"):
                keyed.close()
                keyed = KeyedLog.open(
                    path,
                    fsync="never",
                    compact_min_bytes=64,
                    encoded_values=step == "reopen-encoded",
                )
                assert keyed.report.clean
            else:
                keyed.commit_sync(step)
                for op in step:
                    apply_model(model, op)
            assert state(keyed) == model_state(model)
            stats = keyed.stats()
            assert 0 <= stats.live_bytes <= stats.file_size
        keyed.close()
        again = KeyedLog.open(path, fsync="never")
        assert again.report.clean and state(again) == model_state(model)
        again.close()

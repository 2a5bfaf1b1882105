"""Audit upload batches (DESIGN.md "gateway operations"; issue 9 "Audit upload").

The uploader reads the audit log from its cursor, cuts batches of at most ``max_records``
records from one segment, and hands them to the uplink as one QoS 1 PUBLISH on
``edge/<gateway>/audit``. A batch payload is JSON lines: a header line, then the records as
written (format in ``edge_broker/audit/record.py``)::

    {"batch": "00000003:1-200", "gw": "gw-0042", "segment": 3, "first": 1, "last": 200,
     "count": 200, "lost_segments": 0}
    {"v": 1, "ts": ..., "type": "decision", ...}
    ...

The batch id ``segment:first-last`` names the lines exactly, so the cloud can drop a batch it
already stored. The cursor moves (and is persisted) only when a collector confirms the batch
stored, by publishing its id on ``edge/<gateway>/audit/stored`` (:func:`stored_topic`); the
cloud broker's PUBACK is not enough (with no collector subscribed it drops the message). A batch
not confirmed is sent again with the same id (at least once): after a wait, on reconnect, and
when a collector announces itself on :data:`COLLECTORS_ONLINE`; collectors store by batch id, so
a batch sent twice is stored once. Records wait in the audit log itself, whose rotation bounds
the disk used; segments that rotation deleted before they were uploaded are counted in
``lost_segments`` of the next batch and in ``UploadStatus.segments_lost``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..audit.log import list_segments, read_records
from ..audit.record import encode_record

COLLECTORS_ONLINE = "edge/collectors/online"
"""A collector publishes here (QoS 1, its client id) once subscribed: gateways resend at once
the batch they wait on, so a collector that starts after them gets it without delay."""


def audit_topic(gateway: str) -> str:
    """Where ``gateway`` publishes its batches."""
    return f"edge/{gateway}/audit"


def stored_topic(gateway: str) -> str:
    """Where a collector confirms a batch of ``gateway`` stored (payload: the batch id)."""
    return f"edge/{gateway}/audit/stored"


@dataclass(frozen=True, slots=True)
class AuditBatch:
    segment: int
    first: int
    last: int
    count: int
    lost_segments: int
    payload: bytes

    @property
    def batch_id(self) -> str:
        return f"{self.segment:08d}:{self.first}-{self.last}"


class UploadStatus:
    """Counters for metrics (owned by the sync service)."""

    __slots__ = ("batches_acked", "records_acked", "segments_lost", "pending")

    def __init__(self) -> None:
        self.batches_acked = 0
        self.records_acked = 0
        self.segments_lost = 0
        self.pending: AuditBatch | None = None


def next_batch(
    directory: str | os.PathLike[str],
    gateway: str,
    cursor: tuple[int, int] | None,
    max_records: int,
) -> AuditBatch | None:
    """The batch after ``cursor`` (records of one segment), or None when everything is sent."""
    segments = [seq for seq, _ in list_segments(directory)]
    lost = 0
    if segments:  # whole segments rotated away unsent (numbering starts at 1)
        lost = max(0, segments[0] - (cursor[0] if cursor is not None else 0) - 1)
    records: list[str] = []
    segment = first = last = -1
    for seq, line, record in read_records(directory, after=cursor):
        if segment == -1:
            segment, first = seq, line
        elif seq != segment:
            break
        records.append(encode_record(record))
        last = line
        if len(records) >= max_records:
            break
    if not records:
        return None
    header = {
        "batch": f"{segment:08d}:{first}-{last}",
        "gw": gateway,
        "segment": segment,
        "first": first,
        "last": last,
        "count": len(records),
        "lost_segments": lost,
    }
    lines = [json.dumps(header, separators=(",", ":"))] + [r.rstrip("\n") for r in records]
    return AuditBatch(segment, first, last, len(records), lost, ("\n".join(lines) + "\n").encode())

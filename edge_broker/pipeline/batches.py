"""From uploaded audit batches to the audit job's input (``edge-broker-pipeline collect``).

Gateways upload their audit log as batches on ``edge/<gateway>/audit`` (``edge_broker/sync/
upload.py``): JSON lines, a header ``{"batch": "00000003:1-200", "gw": ...}`` then the records.
Uploads are at least once, so the same batch can arrive twice. :func:`store_batch` writes a
batch to ``<dir>/<gateway>/<segment>-<first>-<last>.jsonl``: the file name is the batch id, so
a repeated batch overwrites itself instead of doubling its records. The ``audit`` and ``whatif``
jobs read such folders directly: they skip header lines and, should two files still hold the
same (gateway, batch id) (e.g. stored by another tool), read only one of them.

``collect`` subscribes with a persistent session (QoS 1, clean start off) so that batches
published while it is away wait for it on the cloud broker.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from .spark import PipelineError, progress

BATCH_ID = re.compile(r"^(\d{8}):(\d{1,12})-(\d{1,12})$")
GATEWAY = re.compile(r"^[A-Za-z0-9_.@~-]{1,128}$")


def store_batch(payload: bytes, directory: str | Path) -> Path:
    """Write one uploaded batch under ``directory``; raises ValueError for a payload that is not
    a batch (the message says what is wrong)."""
    text = payload.decode("utf-8", errors="strict")
    first, _, _ = text.partition("\n")
    try:
        header = json.loads(first)
    except ValueError as exc:
        raise ValueError(f"the first line is not a batch header: {exc}") from exc
    if not isinstance(header, dict):
        raise ValueError("the first line is not a batch header object")
    match = BATCH_ID.match(str(header.get("batch", "")))
    gateway = str(header.get("gw", ""))
    if match is None or not GATEWAY.match(gateway):
        raise ValueError(
            f"batch header {first[:200]!r}: needs batch SEGMENT:FIRST-LAST and a gateway id gw"
        )
    target = Path(directory) / gateway / f"{match.group(1)}-{match.group(2)}-{match.group(3)}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    partial.write_bytes(payload if payload.endswith(b"\n") else payload + b"\n")
    partial.replace(target)  # a reader never sees half a batch
    return target


def collect(
    broker: str,
    directory: str,
    *,
    count: int | None = None,
    idle: float | None = None,
    client_id: str = "edge-broker-pipeline-collect",
) -> int:
    """Store batches from ``edge/+/audit`` until ``count`` were stored or nothing came for
    ``idle`` seconds (both None: until interrupted). Returns the number stored."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    host, _, port = broker.rpartition(":")
    if not host or not port.isdigit():
        raise PipelineError(f"--broker {broker!r}: write HOST:PORT")
    stored = [0]
    last = [time.monotonic()]

    def on_message(client: Any, userdata: Any, message: Any) -> None:
        last[0] = time.monotonic()
        try:
            path = store_batch(message.payload, directory)
        except (ValueError, UnicodeDecodeError) as exc:
            progress(f"skipped a message on {message.topic}: {exc}")
            return
        stored[0] += 1
        progress(f"stored {path}")

    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        protocol=mqtt.MQTTv311,
        clean_session=False,
    )
    client.on_message = on_message
    client.on_connect = lambda c, u, f, rc, p: c.subscribe("edge/+/audit", qos=1)
    try:
        client.connect(host, int(port))
    except OSError as exc:
        raise PipelineError(f"--broker {broker}: {exc}") from exc
    client.loop_start()
    try:
        while count is None or stored[0] < count:
            if idle is not None and time.monotonic() - last[0] > idle:
                break
            time.sleep(0.05)
    finally:
        client.loop_stop()
        client.disconnect()
    return stored[0]

"""From uploaded audit batches to the audit job's input (``edge-broker-pipeline collect``).

Gateways upload their audit log as batches on ``edge/<gateway>/audit`` (``edge_broker/sync/
upload.py``): JSON lines, a header ``{"batch": "00000003:1-200", "gw": ...}`` then the records.
Uploads are at least once, so the same batch can arrive twice. :func:`store_batch` writes a
batch to ``<dir>/<gateway>/<segment>-<first>-<last>.jsonl`` and syncs it to disk: the file name
is the batch id, so a repeated batch replaces itself instead of doubling its records. The
``audit`` and ``whatif`` jobs read such folders directly: they skip header lines and, should
two files still hold the same (gateway, batch id) (e.g. stored by another tool), read only one.

Nothing is lost whatever starts first (the uplink contract, ``sync/upload.py``): a gateway moves
its cursor only when a collector confirms a batch stored on ``edge/<gateway>/audit/stored``,
which :func:`collect` publishes *after* the file is on disk. A batch published while no
collector runs is dropped by the cloud broker but not by the gateway, which sends it again; a
collector announces itself on ``edge/collectors/online`` once subscribed, so the waiting
gateways resend at once. Collectors therefore need no persistent session (each connects with a
clean start and its own client id), and several of them share the load through an MQTT 5 shared
subscription ``$share/<group>/edge/+/audit``: the cloud broker hands each batch to one member of
the group; a batch that reaches two (a resend) is stored once, under its id.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .spark import PipelineError, progress

BATCH_ID = re.compile(r"^(\d{8}):(\d{1,12})-(\d{1,12})$")
GATEWAY = re.compile(r"^[A-Za-z0-9_.@~-]{1,128}$")
SHARE_GROUP = re.compile(r"^[^/+#\s]{1,64}$")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def parse_batch(payload: bytes) -> tuple[str, str, Path]:
    """(gateway, batch id, relative file) of an uploaded batch; ValueError saying what is
    wrong for a payload that is not one."""
    text = payload.decode("utf-8", errors="strict")
    first, _, _ = text.partition("\n")
    try:
        header = json.loads(first)
    except ValueError as exc:
        raise ValueError(f"the first line is not a batch header: {exc}") from exc
    if not isinstance(header, dict):
        raise ValueError("the first line is not a batch header object")
    batch_id = str(header.get("batch", ""))
    match = BATCH_ID.match(batch_id)
    gateway = str(header.get("gw", ""))
    if match is None or not GATEWAY.match(gateway):
        raise ValueError(
            f"batch header {first[:200]!r}: needs batch SEGMENT:FIRST-LAST and a gateway id gw"
        )
    name = f"{match.group(1)}-{match.group(2)}-{match.group(3)}.jsonl"
    return gateway, batch_id, Path(gateway) / name


def store_batch(payload: bytes, directory: str | Path, *, sync: bool = False) -> Path:
    """Write one uploaded batch under ``directory`` (``sync``: on disk, directory entry
    included, before returning); raises ValueError for a payload that is not a batch (the
    message says what is wrong)."""
    _, _, relative = parse_batch(payload)
    target = Path(directory) / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with open(partial, "wb") as fh:
        fh.write(payload if payload.endswith(b"\n") else payload + b"\n")
        if sync:
            fh.flush()
            os.fsync(fh.fileno())
    partial.replace(target)  # a reader never sees half a batch
    if sync:
        _fsync_dir(target.parent)
    return target


@dataclass
class CollectStats:
    stored: int = 0  # batches stored for the first time by this process
    repeats: int = 0  # batches received again (already stored: replaced by the same bytes)
    refused: int = 0  # messages that are not batches (never confirmed)


def default_client_id() -> str:
    """One per process: collectors share the work through the shared subscription, and a
    client id shared by two of them would make the broker disconnect one for the other."""
    return f"edge-broker-collect-{socket.gethostname()[:40]}-{os.getpid()}"


def collect(
    broker: str,
    directory: str,
    *,
    count: int | None = None,
    idle: float | None = None,
    client_id: str | None = None,
    group: str | None = "collectors",
    username: str | None = None,
    password: str | None = None,
    stats: CollectStats | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Store batches from ``edge/+/audit`` (through ``$share/<group>/`` unless ``group`` is
    None), confirming each on ``edge/<gateway>/audit/stored`` once it is on disk, until
    ``count`` new batches were stored, nothing came for ``idle`` seconds, or ``stop`` is set
    (all None: until interrupted). Returns the number of new batches stored."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    from ..mqtt.names import SHARE_PREFIX
    from ..sync.upload import COLLECTORS_ONLINE, stored_topic

    host, _, port = broker.rpartition(":")
    if not host or not port.isdigit():
        raise PipelineError(f"--broker {broker!r}: write HOST:PORT")
    if group is not None and not SHARE_GROUP.match(group):
        raise PipelineError(
            f"--group {group!r}: a shared subscription group name is 1-64 characters, "
            "without / + # or spaces"
        )
    Path(directory).mkdir(parents=True, exist_ok=True)
    topic = "edge/+/audit" if group is None else f"{SHARE_PREFIX}{group}/edge/+/audit"
    counters = stats if stats is not None else CollectStats()
    acks: list[Any] = []
    last = [time.monotonic()]
    failure: list[str] = []
    ident = client_id or default_client_id()

    def on_message(client: Any, userdata: Any, message: Any) -> None:
        last[0] = time.monotonic()
        sender = message.topic.split("/")[1] if message.topic.count("/") == 2 else ""
        try:
            gateway, batch_id, relative = parse_batch(message.payload)
            if gateway != sender:
                raise ValueError(f"its header names gateway {gateway!r}")
            existed = (Path(directory) / relative).exists()
            store_batch(message.payload, directory, sync=True)
        except (ValueError, UnicodeDecodeError) as exc:
            counters.refused += 1
            progress(f"skipped a message on {message.topic}: {exc}")
            return
        except OSError as exc:  # disk full, permissions: do not confirm; the gateway resends
            counters.refused += 1
            progress(f"could not store a batch from {message.topic}: {exc}")
            return
        if existed:
            counters.repeats += 1
        else:
            counters.stored += 1
        acks.append(client.publish(stored_topic(gateway), batch_id.encode(), qos=1))
        while len(acks) > 1000:  # keep only the recent ones, for the wait at the end
            acks.pop(0)

    def on_connect(client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        if reason.is_failure:
            failure.append(f"the broker refused the connection: {reason}")
            return
        client.subscribe(topic, qos=1)

    def on_subscribe(client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
        if any(code.is_failure for code in codes):
            failure.append(
                f"the broker refused the subscription {topic!r}: {codes[0]} (shared "
                "subscriptions need MQTT 5; --group none subscribes without one)"
            )
            return
        client.publish(COLLECTORS_ONLINE, ident.encode(), qos=1)  # waiting gateways resend

    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=ident, protocol=mqtt.MQTTv5)
    if username is not None:
        client.username_pw_set(username, password)
    client.on_message = on_message
    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    connect_props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    connect_props.SessionExpiryInterval = 0
    try:
        client.connect(host, int(port), clean_start=True, properties=connect_props)
    except OSError as exc:
        raise PipelineError(f"--broker {broker}: {exc}") from exc
    client.loop_start()
    try:
        while count is None or counters.stored < count:
            if failure:
                raise PipelineError(f"--broker {broker}: {failure[0]}")
            if stop is not None and stop.is_set():
                break
            if idle is not None and time.monotonic() - last[0] > idle:
                break
            time.sleep(0.05)
    finally:
        for info in list(acks):  # the confirmations of what was stored go out before we leave
            if not info.is_published():
                try:
                    info.wait_for_publish(5)
                except (RuntimeError, ValueError):
                    break
        client.disconnect()
        client.loop_stop()
    return counters.stored

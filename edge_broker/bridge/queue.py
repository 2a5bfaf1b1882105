"""The bounded outbound queue of one bridge (issue 19 "store-and-forward").

Messages wait in ``pending`` (oldest first) until the link sends them; QoS 1/2 then move to
``inflight`` under their packet id until the remote acknowledges them (PUBACK, or PUBCOMP after
PUBREC). Both count against the bounds in messages and bytes. One FIFO per bridge sends every
topic's messages in the order they arrived; after a reconnect the in-flight ones go first, with
DUP and their packet ids (MQTT 5 §4.4), then ``pending`` continues.

Overflow (``overflow``): ``drop-oldest`` drops the oldest message not yet sent (in-flight ones
are owed to the remote and never dropped; when every queued message is in flight the new one is
dropped); ``drop-newest`` refuses the new message. Either way the count goes to ``dropped``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

ENTRY_OVERHEAD = 48  # bytes counted per message beyond topic and payload (as Message.size)


class Entry:
    """One queued message, already rewritten to its remote topic. Mutable by design: the link
    sets ``pid`` when it first sends a QoS 1/2 message and ``released`` on PUBREC. ``size``
    (what the queue's byte bound counts) is computed once: topic and payload never change."""

    __slots__ = ("seq", "topic", "payload", "qos", "retain", "props", "pid", "released", "size")

    def __init__(
        self,
        seq: int,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        props: Any = None,
        pid: int | None = None,
        released: bool = False,
    ) -> None:
        self.seq = seq
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.props = (
            props  # None or [user_properties, content_type, format, response_topic, correlation]
        )
        self.pid = pid
        self.released = released
        self.size = len(topic) + len(payload) + ENTRY_OVERHEAD


_NONE_DROPPED: list[Entry] = []  # push's answer when nothing was dropped (never mutated)


class OutboundQueue:
    __slots__ = ("max_messages", "max_bytes", "drop_oldest", "pending", "inflight", "bytes")

    def __init__(self, max_messages: int, max_bytes: int, overflow: str = "drop-oldest") -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.drop_oldest = overflow == "drop-oldest"
        self.pending: deque[Entry] = deque()
        self.inflight: dict[int, Entry] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.pending) + len(self.inflight)

    def _full(self, size: int) -> bool:
        # (len(self) spelled out: push asks this for every message)
        return (
            len(self.pending) + len(self.inflight) >= self.max_messages
            or self.bytes + size > self.max_bytes
        )

    def push(self, entry: Entry) -> list[Entry]:
        """Queue ``entry``; return what the overflow policy dropped (maybe ``entry`` itself)."""
        size = entry.size
        if not self._full(size):  # room: the common case, without a list of what was dropped
            self.pending.append(entry)
            self.bytes += size
            return _NONE_DROPPED
        if size > self.max_bytes:
            return [entry]
        dropped: list[Entry] = []
        while self._full(size):
            if not self.drop_oldest or not self.pending:
                dropped.append(entry)
                return dropped
            old = self.pending.popleft()
            self.bytes -= old.size
            dropped.append(old)
        self.pending.append(entry)
        self.bytes += size
        return dropped

    def restore(self, entry: Entry) -> None:
        """Recovery: an entry from the log, in sequence order (bounds were checked when queued)."""
        if entry.pid is not None:
            self.inflight[entry.pid] = entry
        else:
            self.pending.append(entry)
        self.bytes += entry.size

    def take(self) -> Entry | None:
        """The next message to send (the caller sends it; QoS 1/2 go to :meth:`fly`)."""
        if not self.pending:
            return None
        entry = self.pending.popleft()
        if entry.qos == 0:
            self.bytes -= entry.size
        return entry

    def fly(self, entry: Entry, pid: int) -> None:
        entry.pid = pid
        self.inflight[pid] = entry

    def finish(self, pid: int) -> Entry | None:
        """The remote completed the flow of ``pid`` (PUBACK, PUBCOMP, or an error code)."""
        entry = self.inflight.pop(pid, None)
        if entry is not None:
            self.bytes -= entry.size
        return entry

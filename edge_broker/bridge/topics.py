"""Which local topics a bridge forwards, how they are rewritten, and loop prevention.

A mapping forwards local topic ``t`` (matched by ``local``) as ``remote_prefix +
t[len(local_prefix):]`` and brings remote topic ``r`` (matched by the mapping's remote filter) in as
``local_prefix + r[len(remote_prefix):]``. The first mapping that matches decides, so one message
crosses a bridge at most once.

Loops (docs/bridge.md "Loop prevention"):

- a message that came in over a bridge carries that bridge's :func:`origin_marker` as its
  ``Message.origin``; the same bridge never forwards it back out;
- MQTT 5 remotes: the bridge subscribes with No Local (the remote does not echo what the bridge
  published) and every forwarded PUBLISH gets one more user property ``ORIGIN_PROPERTY`` = the
  bridge's client id (the origin path; brokers keep user properties when they forward). A
  message whose path names any bridge of this broker left it before: it is neither forwarded
  again nor brought in again (a ring of brokers stops after one turn);
- MQTT 3.1.1 remotes have neither No Local nor user properties: :class:`EchoFilter` remembers
  what was sent and drops the copy the remote echoes back.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Sequence

from ..matching.mqtt_topics import topic_matches
from .config import TopicMapping

ORIGIN_PROPERTY = "edge-bridge-origin"
ECHO_WINDOW = 60.0  # seconds an echo is expected within
ECHO_CAPACITY = 65_536  # fingerprints kept (24 bytes each + dict overhead)


def origin_marker(bridge: str) -> str:
    """``Message.origin`` of messages a bridge brought in. MQTT client ids are UTF-8 strings
    without U+0000 (MQTT 5 §1.5.4), so no client can publish with this origin."""
    return "\x00bridge/" + bridge


class TopicMap:
    """The mappings of one bridge, split by direction (module docstring)."""

    __slots__ = ("outbound", "inbound", "_separator")

    def __init__(self, mappings: Sequence[TopicMapping], separator: str = "/") -> None:
        self.outbound = tuple(m for m in mappings if m.outbound)
        self.inbound = tuple(m for m in mappings if m.inbound)
        self._separator = separator

    def outbound_for(self, tenant: str, topic: str) -> TopicMapping | None:
        for mapping in self.outbound:
            if mapping.tenant == tenant and topic_matches(mapping.local, topic, self._separator):
                return mapping
        return None

    @staticmethod
    def to_remote(mapping: TopicMapping, topic: str) -> str:
        return mapping.remote_prefix + topic[len(mapping.local_prefix) :]

    def inbound_for(self, remote_topic: str) -> tuple[TopicMapping, str] | None:
        """The mapping and the local topic of a message from the remote, or None."""
        for mapping in self.inbound:
            if topic_matches(mapping.remote, remote_topic):
                return mapping, mapping.local_prefix + remote_topic[len(mapping.remote_prefix) :]
        return None


class EchoFilter:
    """Fingerprints (topic, payload) of what was sent to a 3.1.1 remote, each consumed by the
    first identical message coming back within ``window`` seconds. Bounded: the oldest
    fingerprints are forgotten first. A cloud message identical in topic and payload to one this
    gateway sent within the window is taken for the echo (documented limitation)."""

    __slots__ = ("window", "capacity", "_seen")

    def __init__(self, window: float = ECHO_WINDOW, capacity: int = ECHO_CAPACITY) -> None:
        self.window = window
        self.capacity = capacity
        self._seen: OrderedDict[bytes, tuple[int, float]] = OrderedDict()

    @staticmethod
    def _key(topic: str, payload: bytes) -> bytes:
        return hashlib.blake2b(topic.encode() + b"\x00" + payload, digest_size=16).digest()

    def sent(self, topic: str, payload: bytes, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        key = self._key(topic, payload)
        count, _ = self._seen.pop(key, (0, 0.0))
        self._seen[key] = (count + 1, now)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)

    def is_echo(self, topic: str, payload: bytes, now: float | None = None) -> bool:
        if not self._seen:
            return False
        now = time.monotonic() if now is None else now
        key = self._key(topic, payload)
        found = self._seen.get(key)
        if found is None:
            return False
        count, at = found
        if now - at > self.window:
            del self._seen[key]
            return False
        if count <= 1:
            del self._seen[key]
        else:
            self._seen[key] = (count - 1, at)
        return True

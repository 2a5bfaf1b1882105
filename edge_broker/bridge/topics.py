"""Which local topics a bridge forwards, how they are rewritten, and loop prevention.

A mapping forwards local topic ``t`` (matched by ``local``) as ``remote_prefix +
t[len(local_prefix):]`` and brings remote topic ``r`` (matched by the mapping's remote filter) in as
``local_prefix + r[len(remote_prefix):]``. The first mapping that matches decides, so one message
crosses a bridge at most once.

Loops (docs/bridge.md "Loop prevention"), without ever guessing which message is an echo:

- a message that came in over a bridge carries that bridge's :func:`origin_marker` as its
  ``Message.origin``; the same bridge never forwards it back out;
- the remote does not send back what the bridge published: MQTT 5 subscriptions carry No Local;
  a 3.1.1 CONNECT carries the bridge protocol flag (:func:`with_bridge_flag`, Mosquitto's
  ``try_private``), or the config has no out and in mappings sharing remote topics
  (config/bridges.py ``echo_problem``, refused otherwise);
- MQTT 5: every forwarded PUBLISH gets one more user property ``ORIGIN_PROPERTY`` (the origin
  path; brokers keep user properties when they forward). Its value is the bridge's client id and
  a keyed tag (:func:`origin_value`) that only this broker process can make, so a local client
  cannot name one of our bridges to hide a message from it (issue 31 item 7): a message whose
  path holds one of our values left this broker before and is neither forwarded again nor
  brought in again (a ring of brokers stops after one turn); an entry that names one of our
  bridges without the tag is stripped at client ingress (:func:`strip_forged_origins`).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Collection, Sequence

from ..config.bridges import TopicMapping
from ..matching.mqtt_topics import topic_matches

ORIGIN_PROPERTY = "edge-bridge-origin"
ORIGIN_KEY_BYTES = 16
BRIDGE_FLAG = 0x80  # on the CONNECT protocol level byte: "this client is a bridge"


def origin_value(client_id: str, key: bytes) -> str:
    """``<client id> <tag>``: the tag is a keyed BLAKE2b of the client id under this broker's
    per-process ``key``; a client that never saw the value cannot make it."""
    tag = hashlib.blake2b(
        client_id.encode("utf-8"), key=key, digest_size=12, person=b"edge-bridge"
    ).digest()
    return f"{client_id} {base64.urlsafe_b64encode(tag).decode('ascii')}"


def origin_name(value: str) -> str:
    """The client id an origin value names (the value itself when it has no tag)."""
    return value.rsplit(" ", 1)[0]


def strip_forged_origins(
    user_properties: tuple[tuple[str, str], ...],
    own_names: Collection[str],
    own_values: Collection[str],
) -> tuple[tuple[str, str], ...] | None:
    """The user properties of a client's PUBLISH without the ``ORIGIN_PROPERTY`` entries that
    name one of this broker's bridges but are not its value (forged), or None if there are none.
    Entries of other brokers' bridges pass: they are how a ring of brokers stops (each broker
    checks only its own, with its own key)."""
    forged = [
        (k, v)
        for k, v in user_properties
        if k == ORIGIN_PROPERTY and v not in own_values and origin_name(v) in own_names
    ]
    if not forged:
        return None
    return tuple(p for p in user_properties if p not in forged)


def with_bridge_flag(connect: bytes) -> bytes:
    """A 3.1.1 CONNECT packet with the bridge protocol flag set on its protocol level byte
    (``0x84``): Mosquitto then neither sends the bridge its own messages back nor clears the
    retain flag of what it forwards to it (its ``try_private`` bridge option)."""
    length_bytes = 1
    while connect[length_bytes] & 0x80:
        length_bytes += 1
    level_at = 1 + length_bytes + 6  # fixed header, then u16 length + "MQTT"
    if connect[level_at - 4 : level_at] != b"MQTT":
        raise ValueError("not an MQTT 3.1.1 CONNECT")
    flagged = bytearray(connect)
    flagged[level_at] |= BRIDGE_FLAG
    return bytes(flagged)


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

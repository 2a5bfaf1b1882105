"""Building decoded packets without the frozen-dataclass ``__init__`` (the decoder's hot path).

A frozen dataclass ``__init__`` pays one ``object.__setattr__`` per field; writing the slots
through their member descriptors costs about half as much. Each constructor checks, once at
import, that the class still has exactly the fields it writes, so a field added later cannot be
left unset silently. The result is an ordinary instance, equal to one built by ``__init__``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TypeVar

from .packets import Properties, Puback, Pubcomp, Publish, Pubrec, Pubrel


def _publish_constructor() -> Callable[
    [str, bytes, int, bool, bool, int | None, Properties], Publish
]:
    """``Publish(topic, payload, qos, retain, dup, packet_id, properties)``, faster."""
    names = ("topic", "payload", "qos", "retain", "dup", "packet_id", "properties")
    if tuple(f.name for f in fields(Publish)) != names:
        raise RuntimeError("Publish fields changed: update fast_construct._publish_constructor")
    new = object.__new__
    set_topic, set_payload, set_qos, set_retain, set_dup, set_pid, set_props = (
        getattr(Publish, name).__set__ for name in names
    )

    def make(
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        dup: bool,
        packet_id: int | None,
        properties: Properties,
    ) -> Publish:
        publish: Publish = new(Publish)
        set_topic(publish, topic)
        set_payload(publish, payload)
        set_qos(publish, qos)
        set_retain(publish, retain)
        set_dup(publish, dup)
        set_pid(publish, packet_id)
        set_props(publish, properties)
        return publish

    return make


new_publish = _publish_constructor()


AckType = TypeVar("AckType", Puback, Pubrec, Pubrel, Pubcomp)


def _ack_constructor(cls: type[AckType]) -> Callable[[int, int, Properties], AckType]:
    """A faster ``cls(packet_id, reason_code, properties)``; see ``_publish_constructor``."""
    names = ("packet_id", "reason_code", "properties")
    if tuple(f.name for f in fields(cls)) != names:
        raise RuntimeError(f"{cls.__name__} fields changed: update fast_construct._ack_constructor")
    new = object.__new__
    set_pid, set_code, set_props = (getattr(cls, name).__set__ for name in names)

    def make(packet_id: int, reason_code: int, properties: Properties) -> AckType:
        ack: AckType = new(cls)
        set_pid(ack, packet_id)
        set_code(ack, reason_code)
        set_props(ack, properties)
        return ack

    return make


new_puback = _ack_constructor(Puback)
new_pubrec = _ack_constructor(Pubrec)
new_pubrel = _ack_constructor(Pubrel)
new_pubcomp = _ack_constructor(Pubcomp)

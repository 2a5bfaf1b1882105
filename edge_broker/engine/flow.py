"""``QosFlow``: a session's QoS 1/2 state in both directions (MQTT 5 §4.3, §4.4, §4.9; 3.1.1
§4.3), with no socket and no clock: packet-identifier allocation, the outgoing in-flight table
and the incoming QoS 2 packet ids held until PUBREL, the outgoing Receive Maximum window, and
what a resumed session sends again.

``broker/session.py``'s ``Session`` is a ``QosFlow``: the tables stay plain attributes of the
session (``inflight``, ``qos2_incoming``, ``next_packet_id``) because the persistence layer
(``broker/persist/persistence.py``, ``broker/journal.py``) reads and restores them as they are.
The connection engine (``engine/connection.py``) moves them: it puts a PUBLISH in flight under
a fresh packet id, and each PUBACK / PUBREC / PUBREL / PUBCOMP, and a QoS 2 PUBLISH, goes
through its acknowledgement calls, which change these tables, write the reply and say what
happened (``engine/events.py`` ``Flow``). The broker's connection only supplies the encoded
PUBLISH variant (its topic alias and remaining expiry are the connection's) and writes the
journal at the same points as before.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, Protocol, TypeVar

from ..mqtt.packet_ids import MAX_PACKET_ID, free_packet_id
from .publish import pubrel


class PublishBytes(Protocol):
    """A PUBLISH encoded once, written under any packet id (``mqtt/publish_template.py``)."""

    def for_packet_id(self, packet_id: int, dup: bool = False) -> bytes: ...


class _HasQos(Protocol):
    @property
    def qos(self) -> int: ...


Out = TypeVar("Out", bound=_HasQos)


class Inflight(Generic[Out]):
    """An outgoing QoS 1/2 message sent and not yet completed (MQTT 5 §4.3, §4.4)."""

    __slots__ = ("outgoing", "released")

    def __init__(self, outgoing: Out) -> None:
        self.outgoing = outgoing
        self.released = False  # QoS 2: PUBREC received and PUBREL sent, awaiting PUBCOMP


class _NoInflight(OrderedDict[int, Any]):
    """The in-flight table of every flow that has sent no QoS 1/2 message yet: one shared
    instance, always empty (an ``OrderedDict`` of its own costs an idle session 128 B).
    Reading it is reading an empty table; writing to it is a bug, so it raises."""

    __slots__ = ()

    def __setitem__(self, key: int, value: Any) -> NoReturn:
        raise TypeError("the shared empty in-flight table: write to QosFlow.open_inflight()")


class _NoIds(set[int]):
    """The incoming QoS 2 ids of every flow that has held none yet (a ``set`` of its own
    costs 216 B): shared, always empty; adding to it raises."""

    __slots__ = ()

    def add(self, element: int) -> NoReturn:
        raise TypeError("the shared empty id set: use QosFlow.hold_incoming()")


NO_INFLIGHT: OrderedDict[int, Any] = _NoInflight()
NO_IDS: set[int] = _NoIds()


@dataclass(frozen=True, slots=True)
class Resend:
    """What :meth:`QosFlow.resend` wrote: ``data`` holds ``publishes`` PUBLISH (DUP set) and
    the PUBREL of every released message, in the order first sent; ``dropped`` are the packet
    ids that could not be sent again (expired, too large) and are no longer in flight."""

    data: bytes
    publishes: int
    dropped: tuple[int, ...]


class QosFlow(Generic[Out]):
    """See the module docstring. ``Out`` is what the broker sends (``session.Outgoing``)."""

    __slots__ = ("inflight", "qos2_incoming", "next_packet_id")

    def __init__(self) -> None:
        # packet id -> message, in the order sent (a resumed session resends in this order);
        # both tables are shared empty ones until first written (open_inflight, hold_incoming):
        # most sessions of a gateway are idle devices that never need them
        self.inflight: OrderedDict[int, Inflight[Out]] = NO_INFLIGHT
        self.qos2_incoming: set[int] = NO_IDS  # the client's QoS 2 packet ids awaiting PUBREL
        self.next_packet_id = 1

    def open_inflight(self) -> OrderedDict[int, Inflight[Out]]:
        """The in-flight table to write to: the flow's own, made on the first message."""
        inflight = self.inflight
        if inflight is NO_INFLIGHT:
            inflight = self.inflight = OrderedDict()
        return inflight

    def hold_incoming(self, packet_id: int) -> None:
        """Hold the client's QoS 2 ``packet_id`` until its PUBREL (the set made on first use)."""
        held = self.qos2_incoming
        if held is NO_IDS:
            held = self.qos2_incoming = set()
        held.add(packet_id)

    # -- outgoing ---------------------------------------------------------------------------

    def window_open(self, send_quota: int) -> bool:
        """True while fewer messages are in flight than ``send_quota`` (the client's Receive
        Maximum, capped by ``limits.max_inflight``): beyond it messages wait in the queue."""
        return len(self.inflight) < send_quota

    def allocate_packet_id(self) -> int:
        """A packet id not in use by an outgoing message (MQTT 5 §2.2.1), round robin."""
        pid = self.next_packet_id
        if pid in self.inflight:  # the search only when the next one is taken (hot path)
            found = free_packet_id(pid, self.inflight)
            if found is None:
                raise RuntimeError("no free packet identifier")  # impossible: inflight is bounded
            pid = found
        self.next_packet_id = pid % MAX_PACKET_ID + 1
        return pid

    def resend(self, encode: Callable[[Out], PublishBytes | None]) -> Resend:
        """Everything in flight again, for a resumed session (MQTT 5 §4.4, 3.1.1 §4.4): a
        PUBLISH with DUP set (§3.3.1.1) where no PUBREC came yet, else the PUBREL. ``encode``
        gives a message's PUBLISH for this connection, None if it can no longer be sent: that
        message leaves the flow without an acknowledgement."""
        out: list[bytes] = []
        dropped: list[int] = []
        publishes = 0
        for pid, inflight in list(self.inflight.items()):
            if inflight.released:
                out.append(pubrel(pid))  # reason 0x00 left out: read alike by 3.1.1
                continue
            encoded = encode(inflight.outgoing)
            if encoded is None:
                del self.inflight[pid]
                dropped.append(pid)
            else:
                out.append(encoded.for_packet_id(pid, True))
                publishes += 1
        return Resend(b"".join(out), publishes, tuple(dropped))

    def sent(self, pid: int, outgoing: Out) -> None:
        """``outgoing`` went out under ``pid`` and awaits its acknowledgement."""
        self.open_inflight()[pid] = Inflight(outgoing)

    def unsent(self, pid: int) -> None:
        """Take ``pid`` out of flight without an acknowledgement (expired or too large when it
        was to be resent, or revoked)."""
        self.inflight.pop(pid, None)

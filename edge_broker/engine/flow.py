"""``QosFlow``: a session's QoS 1/2 state in both directions (MQTT 5 §4.3, §4.4, §4.9; 3.1.1
§4.3), with no socket and no clock: packet-identifier allocation, the outgoing in-flight table
and its PUBACK / PUBREC / PUBREL / PUBCOMP transitions, and the incoming QoS 2 packet ids held
until PUBREL; each direction's Receive Maximum window is checked here.

``broker/session.py``'s ``Session`` is a ``QosFlow``: the tables stay plain attributes of the
session (``inflight``, ``qos2_incoming``, ``next_packet_id``) because the persistence layer
(``broker/persist/persistence.py``, ``broker/journal.py``) reads and restores them as they are. The
send side returns the bytes to send (:meth:`QosFlow.publish`, :meth:`QosFlow.resend`): the
PUBLISH under its packet id, the DUP flag of a resend and the PUBREL of a released message are
written here; the broker's connection only supplies the encoded PUBLISH variant (its topic
alias and remaining expiry are the connection's) and writes the journal at the same points as
before. The receive side only changes state and says what happened.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, Protocol, TypeVar

from ..mqtt.packet_ids import MAX_PACKET_ID, free_packet_id

PUBREL_HEAD = b"\x62\x02"  # PUBREL, reason 0x00 omitted (MQTT 5 §3.6.2.1): read alike by 3.1.1


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


class PubrecOutcome(Enum):
    """What a PUBREC from the client did to the outgoing flow (:meth:`QosFlow.pubrec`)."""

    UNKNOWN = "no QoS 2 message in flight under this packet id"  # PUBREL 0x92 (5), PUBREL (3.x)
    REFUSED = "the client refused the message: the flow ends"  # reason code >= 0x80 (§4.3.3)
    RELEASED = "released: send PUBREL, await PUBCOMP"


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
        # packet id -> message, in the order sent (a resumed session resends in this order)
        self.inflight: OrderedDict[int, Inflight[Out]] = OrderedDict()
        self.qos2_incoming: set[int] = set()  # the client's QoS 2 packet ids awaiting PUBREL
        self.next_packet_id = 1

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

    def publish(self, outgoing: Out, encoded: PublishBytes) -> tuple[int, bytes]:
        """Send ``outgoing`` (QoS 1/2) under a fresh packet id: the id and the PUBLISH bytes;
        it is in flight until its PUBACK / PUBCOMP (MQTT 5 §4.3.2, §4.3.3). The caller checked
        the window (:meth:`window_open`) and the client's Maximum Packet Size."""
        pid = self.allocate_packet_id()
        self.inflight[pid] = Inflight(outgoing)
        return pid, encoded.for_packet_id(pid)

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
                out.append(PUBREL_HEAD + pid.to_bytes(2, "big"))
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
        self.inflight[pid] = Inflight(outgoing)

    def puback(self, pid: int) -> bool:
        """A PUBACK: True if it completed a QoS 1 message in flight (anything else is ignored,
        as MQTT 5 §4.3.2 allows)."""
        inflight = self.inflight.get(pid)
        if inflight is None or inflight.outgoing.qos != 1:
            return False
        del self.inflight[pid]
        return True

    def pubrec(self, pid: int, reason_code: int) -> PubrecOutcome:
        """A PUBREC; see :class:`PubrecOutcome`. A repeated PUBREC of a released message releases it
        again (the PUBREL may have been lost)."""
        inflight = self.inflight.get(pid)
        if inflight is None or inflight.outgoing.qos != 2:
            return PubrecOutcome.UNKNOWN
        if reason_code >= 0x80:
            del self.inflight[pid]
            return PubrecOutcome.REFUSED
        inflight.released = True
        return PubrecOutcome.RELEASED

    def pubcomp(self, pid: int) -> bool:
        """A PUBCOMP: True if it completed a released QoS 2 message."""
        inflight = self.inflight.get(pid)
        if inflight is None or not inflight.released:
            return False
        del self.inflight[pid]
        return True

    def unsent(self, pid: int) -> None:
        """Take ``pid`` out of flight without an acknowledgement (expired or too large when it
        was to be resent, or revoked)."""
        self.inflight.pop(pid, None)

    # -- incoming QoS 2 ---------------------------------------------------------------------

    def duplicate(self, pid: int) -> bool:
        """A QoS 2 PUBLISH under a packet id still held: a resend, acknowledged, not routed."""
        return pid in self.qos2_incoming

    def incoming_window_full(self, receive_maximum: int) -> bool:
        """True when ``receive_maximum`` QoS 2 messages already await PUBREL: one more is a
        Receive Maximum violation (0x93, MQTT 5 §3.3.4)."""
        return len(self.qos2_incoming) >= receive_maximum

    def hold(self, pid: int) -> None:
        """A QoS 2 message was accepted: its packet id is held until PUBREL (method B of
        MQTT 5 §4.3.3, so a DUP resend is never routed twice)."""
        self.qos2_incoming.add(pid)

    def pubrel(self, pid: int) -> bool:
        """A PUBREL: True if it released a held packet id (else PUBCOMP 0x92 in MQTT 5)."""
        if pid in self.qos2_incoming:
            self.qos2_incoming.discard(pid)
            return True
        return False

"""``ConnectionEngine``: the sans-io core of one server-side MQTT connection (the shape of
aioquic's ``QuicConnection``: ``receive(data, now)`` and ``handle_timer(now)`` return events,
``data_to_send()`` the bytes the engine decided to send).

It frames the bytes into packets (``mqtt/reader.py``), holds the connection's state and moves
it only along ``engine/states.py``'s transitions, bounds what an unauthenticated client
may send (issue 16), and knows when the connection's time is up: the keep-alive deadline, one
and a half times the Keep Alive after the last packet (MQTT 5 §3.1.2.10, 3.1.1 §3.1.2.10), and
the connect timeout before CONNACK, and the expiry of the token that admitted the client.

What the protocol alone decides is answered here, in the client's protocol version: a framing
error or a refused packet (CONNACK or DISCONNECT with reason code and Reason String, or a
silent close before any CONNECT), the pre-authentication budget (CONNACK 0x97), a keep-alive
timeout (DISCONNECT 0x8D), and the broker's own refusals and closes (:meth:`refuse_connect`,
:meth:`disconnect`). The broker's ``Connection`` (an ``asyncio.Protocol``) feeds it, hands the
packets to their handlers, writes ``data_to_send()`` and closes the transport on
:class:`~edge_broker.engine.events.ConnectionEnded`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..mqtt.codec import encode
from ..mqtt.errors import ProtocolError
from ..mqtt.packets import Connack, Connect, Disconnect, Properties
from ..mqtt.reader import PacketReader
from ..mqtt.reason_codes import ConnackReturnCode, ReasonCode
from .aliases import InboundAliases, OutboundAliases
from .events import (
    ConnectionEnded,
    ConnectRefused,
    Event,
    Flow,
    PreAuthExceeded,
    ProtocolViolation,
    TimedOut,
)
from .events import Timeout as Timeout
from .flow import NO_INFLIGHT, Inflight, PublishBytes, QosFlow, Resend
from .negotiation import NO_PACKET_LIMIT, Agreement
from .publish import pubcomp, pubcomp_unknown, publish_ack, pubrec, pubrel, pubrel_unknown
from .states import READER_ADMITS, ConnState, Trigger, next_state

_CONNECTED = ConnState.CONNECTED
_CLOSED = ConnState.CLOSED
_DELIVERED, _UNKNOWN = Flow.DELIVERED, Flow.UNKNOWN

RECEIVE_MAXIMUM_EXCEEDED = ProtocolViolation(
    ReasonCode.RECEIVE_MAXIMUM_EXCEEDED,
    "more unacknowledged QoS 2 messages than the Receive Maximum",
)
"""A QoS 2 PUBLISH beyond the Receive Maximum we announced (MQTT 5 §3.3.4): 0x93."""


def _nothing() -> None:
    return None


# MQTT 5 reason code -> MQTT 3.x CONNACK return code (3.1.1 §3.2.2.3).
V3_CONNACK_CODES: dict[int, int] = {
    ReasonCode.UNSUPPORTED_PROTOCOL_VERSION: ConnackReturnCode.UNACCEPTABLE_PROTOCOL_VERSION,
    ReasonCode.CLIENT_IDENTIFIER_NOT_VALID: ConnackReturnCode.IDENTIFIER_REJECTED,
    ReasonCode.BAD_USER_NAME_OR_PASSWORD: ConnackReturnCode.BAD_USERNAME_OR_PASSWORD,
    ReasonCode.NOT_AUTHORIZED: ConnackReturnCode.NOT_AUTHORIZED,
    ReasonCode.BAD_AUTHENTICATION_METHOD: ConnackReturnCode.NOT_AUTHORIZED,
    ReasonCode.BANNED: ConnackReturnCode.NOT_AUTHORIZED,
    ReasonCode.SERVER_UNAVAILABLE: ConnackReturnCode.SERVER_UNAVAILABLE,
    ReasonCode.SERVER_BUSY: ConnackReturnCode.SERVER_UNAVAILABLE,
    ReasonCode.QUOTA_EXCEEDED: ConnackReturnCode.SERVER_UNAVAILABLE,
    ReasonCode.CONNECTION_RATE_EXCEEDED: ConnackReturnCode.SERVER_UNAVAILABLE,
}


class ConnectionEngine:
    """See the module docstring. ``now`` is the broker's clock (``Broker.clock``)."""

    __slots__ = (
        "reader",
        "state",
        "created",
        "last_rx",
        "keep_alive",
        "token_deadline",
        "pre_auth_bytes",
        "aliases_in",
        "aliases_out",
        "level",
        "problem_information",
        "ending",
        "send_quota",
        "client_max_packet",
        "out",
        "flow",
        "wake",
        "_pre_auth_budget",
        "_max_connect_packet_size",
        "_max_packet_size",
    )

    def __init__(
        self,
        now: float,
        max_connect_packet_size: int,
        max_packet_size: int,
        topic_alias_maximum: int = 0,
    ) -> None:
        # Until CONNACK the client has proved nothing: a CONNECT (and whatever it pipelines
        # after it) is bounded by the small pre-authentication limit, raised to
        # max_packet_size when the connection is accepted (issue 16).
        self.reader = PacketReader(
            side="server",
            max_packet_size=min(max_connect_packet_size, max_packet_size),
            admitted=READER_ADMITS,
        )
        self.state = ConnState.AWAIT_CONNECT
        self.created = self.last_rx = now
        self.keep_alive = 0  # seconds, as agreed at CONNACK (0: none)
        self.token_deadline: float | None = None  # when the admitting token expires
        self.pre_auth_bytes = 0
        # topic aliases (engine/aliases.py): ours as announced in CONNACK; the client's
        # outbound maximum is known only from its CONNECT (None: it takes none)
        self.aliases_in = InboundAliases(topic_alias_maximum)
        self.aliases_out: OutboundAliases | None = None
        # the format refusals are written in: the CONNECT's protocol level and its Request
        # Problem Information (MQTT 5 §3.1.2.11.7; default 1), learnt when it is decoded
        self.level = 4
        self.problem_information = True
        # True once receive() returned more than packets (a violation, a refusal): the
        # connection is ending. One attribute read tells the broker's hot path it may hand
        # the list straight to the handlers (issue 21: CPU per message must not rise).
        self.ending = False
        # agreed at CONNACK (engine/negotiation.py): how many QoS 1/2 messages may be in flight
        # to the client, and the largest packet it takes
        self.send_quota = 0
        self.client_max_packet = NO_PACKET_LIMIT
        # the connection's one output buffer: the broker's connection appends what its
        # handlers send, the engine its own answers; whoever flushes takes it all, in order
        self.out: list[bytes] = []
        # called when the engine's own answer lands in an empty buffer (the broker schedules
        # a write then; appending to ``out`` directly, it checks emptiness itself)
        self.wake: Callable[[], None] = _nothing
        # the session's QoS 1/2 flow (engine/flow.py), from when the session is attached to this
        # connection until it leaves it: the acknowledgement calls below move it
        self.flow: QosFlow[Any] | None = None
        self._pre_auth_budget = 2 * max_connect_packet_size
        self._max_connect_packet_size = max_connect_packet_size
        self._max_packet_size = max_packet_size

    # -- input ------------------------------------------------------------------------------

    def receive(self, data: bytes | bytearray | memoryview, now: float) -> list[Event]:
        """The events ``data`` brings: the packets it completes, in order, then at most one of
        a :class:`ProtocolViolation` (answered at once when no packet precedes it in this read;
        otherwise the broker handles those packets first and then calls :meth:`answer`) or a
        :class:`PreAuthExceeded` (answered; its packets are dropped); :attr:`ending` says
        whether it did. Any bytes keep the connection alive; after the end nothing is
        decoded."""
        self.last_rx = now
        if self.state is not _CONNECTED:
            return self._receive_unauthenticated(data)
        try:
            return self.reader.feed(data)  # type: ignore[return-value]  # list is invariant
        except ProtocolError as exc:
            return self._framing_error(exc)

    def _receive_unauthenticated(self, data: bytes | bytearray | memoryview) -> list[Event]:
        if self.state is _CLOSED:
            return []  # an ended connection takes nothing more (bytes still in flight)
        over_budget = self.pre_auth_exceeded(len(data))
        try:
            packets = self.reader.feed(data)
        except ProtocolError as exc:
            return self._framing_error(exc)
        first = packets[0] if packets else None
        if isinstance(first, Connect) and self.state is ConnState.AWAIT_CONNECT:
            self.learn_level(first)
        if over_budget:
            return self._refuse_pre_auth(first)
        return packets  # type: ignore[return-value]  # list is invariant

    def _framing_error(self, exc: ProtocolError) -> list[Event]:
        self.ending = True
        violation = self.violation_of(exc)
        before = exc.packets_before_error
        if before:
            return [*before, violation]
        return [violation, *self.answer(violation)]

    def violation_of(self, exc: ProtocolError) -> ProtocolViolation:
        """``exc`` as an event; a packet too large before CONNACK names the limit that applies
        then (``limits.max_connect_packet_size``), not the one after."""
        code = int(exc.reason_code)
        reason = exc.message
        if code == ReasonCode.PACKET_TOO_LARGE and self.state is not _CONNECTED:
            reason = (
                f"{reason}: limits.max_connect_packet_size is {self._max_connect_packet_size} "
                f"bytes before authentication"
            )
        return ProtocolViolation(code, reason, exc.protocol_level)

    def pre_auth_exceeded(self, size: int) -> bool:
        """Count ``size`` bytes received before CONNACK (the WebSocket upgrade request too);
        True once past twice the pre-authentication budget (one CONNECT plus as much pipelined
        after it). Reading pauses while authentication runs, so this bounds the one read that
        may come first."""
        self.pre_auth_bytes += size
        return self.pre_auth_bytes > self._pre_auth_budget

    def _refuse_pre_auth(self, first: object) -> list[Event]:
        limit = self._max_connect_packet_size
        reason = (
            f"more than {2 * limit} bytes sent before the CONNACK "
            f"(limits.max_connect_packet_size = {limit})"
        )
        client_id = ""
        if self.state is ConnState.AWAIT_CONNECT and isinstance(first, Connect):
            client_id = first.client_id
            self.trigger(Trigger.CONNECT)
        event = PreAuthExceeded(reason, client_id)
        self.ending = True
        if self.state is ConnState.AWAIT_CONNECT:
            # no CONNECT decoded: no protocol level to answer in
            return [event, *self.disconnect(None, reason)]
        return [event, *self.refuse_connect(ReasonCode.QUOTA_EXCEEDED, reason)]

    # -- state ------------------------------------------------------------------------------

    def trigger(self, event: Trigger) -> ConnState:
        """Move along ``event`` (ValueError for a move the table does not have); return the
        new state."""
        state = self.state = next_state(self.state, event)
        if state is _CONNECTED:
            self.reader.max_packet_size = self._max_packet_size  # past the pre-auth bound
        return state

    def accept(self, agreement: Agreement, session_present: bool, properties: Properties) -> None:
        """CONNACK 0x00 (``properties``: the capabilities MQTT 5 announces; 3.x sends none)
        into the output buffer, and from now on what ``agreement`` settled
        (engine/negotiation.py): the Keep Alive enforced, the send window, the client's packet
        size and topic aliases; the packet-size bound rises to ``max_packet_size``."""
        self.keep_alive = agreement.keep_alive
        self.send_quota = agreement.send_quota
        self.client_max_packet = agreement.client_max_packet
        maximum = agreement.topic_alias_maximum
        self.aliases_out = OutboundAliases(maximum) if maximum > 0 else None
        self.trigger(Trigger.CONNACK_SUCCESS)
        self._write(encode(Connack(session_present, ReasonCode.SUCCESS, properties), self.level))

    def learn_level(self, connect: Connect) -> None:
        """The client's protocol level and Request Problem Information (MQTT 5 §3.1.2.11.7;
        default 1) from its CONNECT: every answer from now on is written in that format."""
        self.level = connect.protocol_level
        if self.level == 5:
            self.problem_information = connect.properties.request_problem_information != 0

    # -- acknowledgement flows (MQTT 5 §4.3, §4.4; 3.1.1 §4.3) -----------------------------

    def _write(self, data: bytes) -> None:
        """One answer of the engine into the output buffer (nothing once the connection
        ended); the broker is woken when the buffer was empty."""
        if self.state is _CLOSED:
            return
        out = self.out
        if not out:
            self.wake()
        out.append(data)

    def puback_received(self, packet_id: int) -> Flow:
        """A PUBACK: :attr:`Flow.DELIVERED` if it completed a QoS 1 message in flight, else
        :attr:`Flow.UNKNOWN` (ignored, as MQTT 5 §4.3.2 allows)."""
        flow = self.flow
        if flow is not None:
            inflight = flow.inflight.get(packet_id)
            if inflight is not None and inflight.outgoing.qos == 1:
                del flow.inflight[packet_id]
                return _DELIVERED
        return _UNKNOWN

    def pubcomp_received(self, packet_id: int) -> Flow:
        """A PUBCOMP: :attr:`Flow.DELIVERED` if it completed a released QoS 2 message, else
        :attr:`Flow.UNKNOWN` (ignored)."""
        flow = self.flow
        if flow is not None:
            inflight = flow.inflight.get(packet_id)
            if inflight is not None and inflight.released:
                del flow.inflight[packet_id]
                return _DELIVERED
        return _UNKNOWN

    def pubrec_received(self, packet_id: int, reason_code: int, reply_now: bool = True) -> Flow:
        """A PUBREC: :attr:`Flow.RELEASED` with PUBREL written (``reply_now`` False: the
        broker stores the release first, then calls :meth:`send_pubrel`), again for a repeated
        PUBREC (the PUBREL may have been lost); :attr:`Flow.REFUSED` for a reason code >= 0x80
        (the flow ends, MQTT 5 §4.3.3); :attr:`Flow.UNKNOWN` with PUBREL 0x92 (3.x: a plain
        PUBREL) when no QoS 2 message is in flight under the id."""
        flow = self.flow
        inflight = None if flow is None else flow.inflight.get(packet_id)
        if flow is None or inflight is None or inflight.outgoing.qos != 2:
            self._write(pubrel_unknown(packet_id, self.level == 5))
            return _UNKNOWN
        if reason_code >= 0x80:
            del flow.inflight[packet_id]
            return Flow.REFUSED
        inflight.released = True
        if reply_now:
            self._write(pubrel(packet_id))
        return Flow.RELEASED

    def pubrel_received(self, packet_id: int, reply_now: bool = True) -> Flow:
        """A PUBREL: :attr:`Flow.RELEASE` when it released a held packet id, with PUBCOMP
        written (``reply_now`` False: the broker stores the release first, then calls
        :meth:`send_pubcomp`); else :attr:`Flow.UNKNOWN` with PUBCOMP 0x92 (3.x: a plain
        PUBCOMP)."""
        flow = self.flow
        if flow is not None and packet_id in flow.qos2_incoming:
            flow.qos2_incoming.discard(packet_id)
            if reply_now:
                self._write(pubcomp(packet_id))
            return Flow.RELEASE
        self._write(pubcomp_unknown(packet_id, self.level == 5))
        return _UNKNOWN

    def qos2_publish_received(
        self, packet_id: int, receive_maximum: int, reply_now: bool = True
    ) -> Flow | ProtocolViolation:
        """A QoS 2 PUBLISH before it is judged: :attr:`Flow.DUPLICATE` under a packet id still
        held (a resend: PUBREC written, or by :meth:`send_pubrec` once the broker's earlier
        changes are stored; not routed again, method B of MQTT 5 §4.3.3);
        :data:`RECEIVE_MAXIMUM_EXCEEDED` when ``receive_maximum`` messages already await PUBREL
        (the broker ends the connection with it); else :attr:`Flow.NEW`, and the broker calls
        :meth:`hold` once it accepted the message."""
        flow = self.flow
        if flow is None:
            return Flow.NEW
        held = flow.qos2_incoming
        if packet_id in held:
            if reply_now:
                self._write(pubrec(packet_id))
            return Flow.DUPLICATE
        if len(held) >= receive_maximum:
            return RECEIVE_MAXIMUM_EXCEEDED
        return Flow.NEW

    def hold(self, packet_id: int) -> None:
        """The QoS 2 message under ``packet_id`` was accepted: its id is held until PUBREL,
        so a DUP resend is never routed twice."""
        flow = self.flow
        if flow is not None:
            flow.hold_incoming(packet_id)

    def unhold(self, packet_id: int) -> None:
        """Let go of a held packet id without PUBREL (the accepted message could not be
        stored: the client may send it again)."""
        flow = self.flow
        if flow is not None:
            flow.qos2_incoming.discard(packet_id)

    def send_publish_ack(self, qos: int, packet_id: int, routed: int) -> None:
        """PUBACK (QoS 1) or PUBREC (QoS 2) for an accepted PUBLISH; MQTT 5 says 0x10 when
        nobody subscribed (``routed`` 0)."""
        self._write(publish_ack(qos, packet_id, routed, self.level == 5))

    def send_pubrec(self, packet_id: int) -> None:
        """The PUBREC :meth:`qos2_publish_received` left to the broker (``reply_now`` False)."""
        self._write(pubrec(packet_id))

    def send_pubrel(self, packet_id: int) -> None:
        """The PUBREL :meth:`pubrec_received` left to the broker (``reply_now`` False)."""
        self._write(pubrel(packet_id))

    def send_pubcomp(self, packet_id: int) -> None:
        """The PUBCOMP :meth:`pubrel_received` left to the broker (``reply_now`` False)."""
        self._write(pubcomp(packet_id))

    def send_publish(self, outgoing: Any, encoded: PublishBytes) -> int:
        """A QoS 1/2 message to the client under a fresh packet id, in flight until its
        PUBACK / PUBCOMP: its PUBLISH into the output buffer; the packet id. The broker checked
        the window (``flow.window_open(send_quota)``) and the client's Maximum Packet Size."""
        flow = self.flow
        assert flow is not None, "no session attached"
        pid = flow.allocate_packet_id()
        inflight = flow.inflight
        if inflight is NO_INFLIGHT:  # the session's first message in flight (engine/flow.py)
            inflight = flow.open_inflight()
        inflight[pid] = Inflight(outgoing)
        self._write(encoded.for_packet_id(pid))
        return pid

    def resend(self, encode_publish: Callable[[Any], PublishBytes | None]) -> Resend:
        """A resumed session's messages in flight again (engine/flow.py ``QosFlow.resend``):
        PUBLISH with DUP set, or PUBREL, into the output buffer."""
        flow = self.flow
        assert flow is not None, "no session attached"
        resend = flow.resend(encode_publish)
        if resend.data:
            self._write(resend.data)
        return resend

    # -- output -----------------------------------------------------------------------------

    def data_to_send(self) -> bytes:
        """The bytes to send since the last call, in order (then empty): the engine's
        answers and everything the broker appended to :attr:`out`. One chunk is returned as
        it is, not copied."""
        out = self.out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        return data

    def answer(self, violation: ProtocolViolation) -> list[Event]:
        """Answer ``violation`` as the state allows and end the connection (nothing if it has
        ended already): before CONNECT a CONNACK when the client's protocol level is known
        (MQTT 5, or a version we do not speak: 3.1.1 §3.1.2.2), else a silent close; a packet
        too large while authenticating a CONNACK 0x95 in its format; once connected a
        DISCONNECT (MQTT 5 only: 3.x has none)."""
        state = self.state
        if state is _CLOSED:
            return []
        code, reason = violation.reason_code, violation.reason
        if code == ReasonCode.PACKET_TOO_LARGE and state in (
            ConnState.CONNECTING,
            ConnState.AUTHENTICATING,
        ):
            return self.refuse_connect(code, reason)  # the CONNECT is known: its format
        if state is ConnState.AWAIT_CONNECT:
            level = violation.protocol_level or self.reader.protocol_level
            if code == ReasonCode.UNSUPPORTED_PROTOCOL_VERSION:
                self.level = 5 if level == 5 else 4
                return self.refuse_connect(code, reason)
            if level == 5:
                self.level = 5
                return self.refuse_connect(code, reason)
        return self.disconnect(code, reason)

    def refuse_connect(self, reason_code: int, reason: str) -> list[Event]:
        """CONNACK with an error (5: the reason code, with ``reason`` unless the client asked
        for no problem information; 3.x: the mapped return code), then the end."""
        if self.state is _CLOSED:
            return []
        if self.level == 5:
            props = Properties(reason_string=reason) if self.problem_information else Properties()
            self.out.append(encode(Connack(False, reason_code, props), 5))
        else:
            code = V3_CONNACK_CODES.get(reason_code, ConnackReturnCode.NOT_AUTHORIZED)
            self.out.append(encode(Connack(False, code), self.level))
        self.state = _CLOSED
        return [ConnectRefused(reason_code, reason), ConnectionEnded(reason)]

    def disconnect(self, reason_code: int | None, reason: str) -> list[Event]:
        """End the connection; an MQTT 5 client past CONNACK gets DISCONNECT ``reason_code``
        first (None: no DISCONNECT, e.g. after the client's own)."""
        if self.state is _CLOSED:
            return []
        if reason_code is not None and self.level == 5 and self.state is _CONNECTED:
            props = Properties(reason_string=reason) if self.problem_information else Properties()
            self.out.append(encode(Disconnect(reason_code, props), 5))
        self.state = _CLOSED
        return [ConnectionEnded(reason)]

    # -- time -------------------------------------------------------------------------------

    def next_deadline(self, connect_timeout: float) -> float | None:
        """The earliest moment :meth:`timeout` could report something, if any: the broker
        looks again then and not before. Bytes received only move it later, so a deadline
        computed earlier is never too late; a new Keep Alive or token deadline must be asked
        for again (the broker does at CONNACK and at every token change)."""
        state = self.state
        if state is _CONNECTED:
            deadline = self.token_deadline
            keep_alive = self.keep_alive
            if keep_alive:
                at = self.last_rx + keep_alive * 1.5
                if deadline is None or at < deadline:
                    return at
            return deadline
        if state is _CLOSED:
            return None
        return self.created + connect_timeout

    def timeout(self, now: float, connect_timeout: float) -> Timeout | None:
        """What has run out of time at ``now``, if anything (a question: nothing changes)."""
        state = self.state
        if state is _CONNECTED:
            keep_alive = self.keep_alive
            if keep_alive and now - self.last_rx > keep_alive * 1.5:
                return Timeout.KEEP_ALIVE
            deadline = self.token_deadline
            if deadline is not None and now >= deadline:
                return Timeout.TOKEN
        elif state is not _CLOSED and now - self.created > connect_timeout:
            return Timeout.CONNECT
        return None

    def handle_timer(self, now: float, connect_timeout: float) -> list[Event]:
        """The timer entry: what ran out at ``now`` as events. A keep-alive timeout is
        answered here (DISCONNECT 0x8D, MQTT 5 §3.1.2.10) and ends the connection; the connect
        timeout and an expired token are reported for the broker to answer."""
        what = self.timeout(now, connect_timeout)
        if what is None:
            return []
        if what is Timeout.KEEP_ALIVE:
            return [
                TimedOut(what),
                *self.disconnect(ReasonCode.KEEP_ALIVE_TIMEOUT, "keep alive timeout"),
            ]
        return [TimedOut(what)]

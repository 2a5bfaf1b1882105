"""One client network connection: an ``asyncio.Protocol`` around the sans-io codec.

``data_received`` → ``PacketReader.feed`` → one handler per packet type (``handle_connect``,
``handle_publish``, ``handle_subscribe`` … in the ``handle_*`` modules). A handler either finishes
synchronously (the hot path) or returns an awaitable (authentication, async authorizers): then
later packets wait in a backlog, reading pauses, and processing resumes in order when the
awaitable is done.

Outgoing bytes are appended to a per-connection list and written once per event-loop iteration
(``Broker.schedule_flush``), so a burst of deliveries costs one ``transport.write``. When the
transport's buffer passes the high-water mark the connection is ``paused`` (slow consumer): its
QoS 0 messages are dropped and counted, QoS 1/2 wait in the session queue (bounded).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ..audit import events as audit_events
from ..auth.method_api import Authenticator, ConnectionInfo
from ..engine.connection import ConnectionEngine
from ..engine.events import (
    ENGINE_EVENTS,
    ConnectionEnded,
    ConnectRefused,
    Event,
    PreAuthExceeded,
    ProtocolViolation,
)
from ..engine.negotiation import Agreement
from ..engine.states import ConnState, Trigger
from ..identity import Identity
from ..mqtt.codec import encode
from ..mqtt.errors import ProtocolError
from ..mqtt.packets import Connect, Packet, Properties, Will
from ..mqtt.reason_codes import ReasonCode
from .dispatch import HANDLERS
from .graceful_close import Drain, close_gracefully
from .limits.publish_quota import PublishQuota
from .message import Message
from .session import Outgoing, Session

if TYPE_CHECKING:
    from ..auth.password import PasswordEntry
    from ..authz.decision import Decision
    from ..config import ListenerConfig
    from .handler_api import ConnectionHost
    from .limits.read_pool import Framing

log = logging.getLogger("edge_broker.broker")

AWAIT_CONNECT, CONNECTING, AUTHENTICATING, CONNECTED, CLOSED = (
    ConnState.AWAIT_CONNECT,
    ConnState.CONNECTING,
    ConnState.AUTHENTICATING,
    ConnState.CONNECTED,
    ConnState.CLOSED,
)  # short names for this module


class Connection(asyncio.BufferedProtocol):
    """See the module docstring. Attributes are public to the ``handle_*`` modules."""

    # one per socket: slots instead of an instance dict (about 1.2 KB less per idle client,
    # docs/performance.md); a new attribute must be named here
    __slots__ = (
        "assigned_client_id",
        "audit_reported",
        "auth_state",
        "authenticator",
        "backlog",
        "broker",
        "bytes_in",
        "bytes_out",
        "client_id",
        "closing",
        "connect_packet",
        "disconnect_reason",
        "drain",
        "engine",
        "framing",
        "gone",
        "held_back",
        "identity",
        "info",
        "listener",
        "lost",
        "msgs_in",
        "msgs_out",
        "password_entry",
        "paused",
        "pending",
        "publish_quota",
        "read_grant",
        "refusal",
        "session",
        "token_credential",
        "transport",
        "will",
        "write_held",
    )

    def __init__(self, broker: ConnectionHost, listener: ListenerConfig) -> None:
        self.broker = broker
        self.listener = listener
        self.transport: Any = None
        self.info = ConnectionInfo(listener.name, listener.transport)
        limits = broker.config.limits
        # framing, state, keep alive and the pre-authentication budget: engine/connection.py
        self.engine = ConnectionEngine(
            broker.clock(),
            limits.max_connect_packet_size,
            limits.max_packet_size,
            broker.config.broker.topic_alias_maximum,
        )
        # the engine's answers (acknowledgements, CONNACK) ask for a write when they land in
        # its empty output buffer, as send() does for the broker's own bytes
        self.engine.wake = self._wake  # a bound method: a quarter of a partial's memory
        self.lost = False  # the MQTT connection is over and the broker was told (_forget)
        self.gone = False  # connection_lost ran: the socket is closed
        self.drain: Drain | None = None  # the socket's bounded close (graceful_close.py)
        # bytes the socket's framing holds before they reach the MQTT reader (WebSocket)
        self.framing: Framing | None = None
        self.client_id = ""
        self.assigned_client_id: str | None = None
        self.identity: Identity | None = None
        self.session: Session | None = None
        self.connect_packet: Connect | None = None
        self.authenticator: Authenticator | None = None
        # the policy decision that refuses the CONNECT, and whom it judged (audit record)
        self.refusal: tuple[Decision, Identity | None] | None = None
        self.auth_state: object = None
        self.will: Will | None = None
        self.paused = False
        self.backlog: deque[Packet] | None = None
        self.pending: asyncio.Task[None] | None = None  # the handler awaited (authentication ...)
        self.closing = False
        self.disconnect_reason: str = "connection lost"
        # the password entry that admitted the client: a reload compares it (broker/rejudge.py)
        self.password_entry: PasswordEntry | None = None
        # the JWT that admitted a token client (CONNECT or the last re-authentication): a reload
        # verifies it again under the new keys (broker/rejudge.py). Kept here, never in the
        # Identity that authorizers see.
        self.token_credential: bytes | None = None
        self.publish_quota = PublishQuota.from_limits(broker.config.limits, self.engine.created)
        self.msgs_in = self.msgs_out = self.bytes_in = self.bytes_out = 0  # audit client_stats
        # issue 16: bytes reserved in the broker's read pool (read_pool.py), bytes the transport
        # held after our last write, and held back by max_write_buffer_total (write_budget.py)
        self.read_grant = self.write_held = 0
        self.held_back = False

    def _wake(self) -> None:
        self.broker.schedule_flush(self)

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.info = self.broker.connection_info(self.listener, transport)
        limits = self.broker.config.limits
        set_limits = getattr(transport, "set_write_buffer_limits", None)
        if set_limits is not None:
            set_limits(high=limits.write_buffer_high, low=limits.write_buffer_low)
        self.broker.connection_opened(self)

    @property
    def state(self) -> ConnState:
        """Where the connection is (engine/states.py); changed only by :meth:`trigger`."""
        return self.engine.state

    @property
    def awaiting_connect(self) -> bool:
        """No CONNECT read yet (a half-open socket, or an unfinished WebSocket upgrade)."""
        return self.engine.state is AWAIT_CONNECT

    @property
    def opened_at(self) -> float:
        """When the socket was accepted (broker clock)."""
        return self.engine.created

    @property
    def level(self) -> int:
        """The client's protocol level (3, 4, 5), as the engine learnt it from the CONNECT."""
        return self.engine.level

    @property
    def v5(self) -> bool:
        """MQTT 5 (the engine's protocol level)."""
        return self.engine.level == 5

    @property
    def send_quota(self) -> int:
        """How many QoS 1/2 messages may be in flight to the client (agreed at CONNACK)."""
        return self.engine.send_quota

    @property
    def problem_information(self) -> bool:
        """The client's MQTT 5 Request Problem Information (default 1): Reason Strings may be
        sent. Learnt by the engine from the CONNECT (engine/connection.py)."""
        return self.engine.problem_information

    @property
    def last_rx(self) -> float:
        """When the last bytes arrived, on the broker's clock."""
        return self.engine.last_rx

    @property
    def read_held(self) -> int:
        """Bytes read and not yet made packets: the MQTT reader's, and the WebSocket frame's
        being received (read_pool.py bounds them)."""
        held = self.engine.reader.buffered
        return held if self.framing is None else held + self.framing.held

    @property
    def read_needed(self) -> int:
        """What the unfinished packet (and the frame that carries it) will hold once read whole:
        the read pool reserves it before reading on."""
        reader = self.engine.reader
        if self.framing is None:
            return reader.pending_size
        return max(reader.pending_size, reader.buffered + self.framing.frame_size)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.drain is not None:  # read only to be thrown away: no reservation needed
            return self.broker.read_pool.view
        return self.broker.read_pool.buffer_for(self)  # bounded reads (read_pool.py)

    def buffer_updated(self, nbytes: int) -> None:
        if self.drain is not None:
            self.drain.discard(nbytes)
            return
        pool = self.broker.read_pool
        self.data_received(bytes(pool.view[:nbytes]))  # copied out before the next read
        pool.after_read(self)

    def data_received(self, data: bytes) -> None:
        if self.drain is not None:  # closing: counted by the socket's protocol (WebSocket)
            return
        self.broker.stats.bytes_received += len(data)
        self.bytes_in += len(data)
        engine = self.engine
        events = engine.receive(data, self.broker.clock())
        if engine.ending:  # a violation or a refusal among the events: not the hot path
            self.act(events)
            return
        if not events:
            return
        packets: list[Packet] = events  # type: ignore[assignment]  # only packets (above)
        if self.backlog is not None:
            self.backlog.extend(packets)
            return
        self.process(packets)

    def act(self, events: list[Event]) -> None:
        """Act on what the engine reported (engine/events.py), in order: packets go to their
        handlers (unless a handler is still awaited: they came before a violation that ends
        the connection anyway), the engine's bytes to the transport, and the connection is
        closed when the engine says it ended."""
        packets = [event for event in events if type(event) not in ENGINE_EVENTS]
        if packets and self.backlog is None:
            self.process(packets)  # type: ignore[arg-type]  # only packets (filtered)
        for event in events:
            if isinstance(event, ProtocolViolation):
                self._violated(event)
            elif isinstance(event, PreAuthExceeded):
                self.client_id = event.client_id or self.client_id
                self.broker.limit_hits.hit(
                    "limits.max_connect_packet_size",
                    f"connection refused before authentication: {event.reason}",
                    self.client_id,
                )
            elif isinstance(event, ConnectRefused):
                self._refused(event)
            elif isinstance(event, ConnectionEnded):
                self._ended(event.reason)

    def pre_auth_exceeded(self, size: int) -> bool:
        """Count bytes received before CONNACK (the WebSocket upgrade request too); True past
        the pre-authentication budget (engine/connection.py, issue 16)."""
        return self.engine.pre_auth_exceeded(size)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.gone:
            return
        self.gone = True
        if self.drain is not None:
            self.drain.finished()
        self._forget()
        self.broker.connection_closed(self)

    def discard(self, nbytes: int) -> None:
        """Bytes the socket read while closing and threw away (WebSocket: every byte)."""
        if self.drain is not None:
            self.drain.discard(nbytes)

    def _forget(self) -> None:
        """The MQTT connection is over (its last packet sent, or the socket gone): the broker
        detaches the session and stops counting the client, once."""
        if self.lost:
            return
        self.lost = True
        if self.pending is not None and self.identity is None:
            # Still authenticating and nobody is left to answer: stop waiting for an
            # authentication slot (a login storm's gone clients must not take the slow
            # password checks from those still waiting).
            self.pending.cancel()
        self.broker.read_pool.forget(self)
        self.broker.write_budget.forget(self)
        self.trigger(Trigger.CLOSE)
        self.broker.connection_ended(self)

    def trigger(self, event: Trigger) -> None:
        """Move to the state ``event`` leads to (engine/states.py); a closed connection
        handles no more packets and sends nothing more. CONNACK 0x00 is :meth:`accept`."""
        if self.engine.trigger(event) is CLOSED:
            self.closing = True

    def accept(self, agreement: Agreement, session_present: bool, properties: Properties) -> None:
        """CONNACK 0x00: the engine applies what the CONNECT and the server agreed
        (engine/negotiation.py) and writes the CONNACK; the deadlines may move earlier."""
        self.engine.accept(agreement, session_present, properties)  # wakes the flush
        self.broker.watch(self)  # the Keep Alive agreed at CONNACK: maybe an earlier deadline
        connect = self.connect_packet
        if connect is not None and connect.properties.authentication_method is None:
            # only re-authentication (MQTT 5 §4.12.1) reads the CONNECT after CONNACK, and
            # only with a method: an idle client need not keep it (issue 32: memory)
            self.connect_packet = None

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.lost:  # the last bytes of a closing socket: nothing is counted for it any more
            return
        self.broker.write_budget.resumed(self)
        session = self.session
        if session is not None and self.state == CONNECTED:
            self.broker.delivery.drain(session)

    # -- dispatch ---------------------------------------------------------------------------

    def process(self, packets: list[Packet]) -> None:
        for i, packet in enumerate(packets):
            if self.closing:
                return
            # the handlers of the engine's state now (before CONNECT, enhanced auth, connected)
            pending = HANDLERS[self.engine.state][type(packet)](self, packet)
            if pending is not None:
                self.backlog = deque(packets[i + 1 :])
                self.transport.pause_reading()
                self.pending = asyncio.get_running_loop().create_task(self._resume_after(pending))
                return

    async def _resume_after(self, pending: Awaitable[None]) -> None:
        try:
            await self._resume_loop(pending)
        finally:
            self.pending = None

    async def _resume_loop(self, pending: Awaitable[None]) -> None:
        while True:
            try:
                await pending
            except ProtocolError as exc:
                self.protocol_error(exc)
                return
            except Exception:
                log.exception("internal error handling a packet from %r", self.client_id)
                self.close(ReasonCode.UNSPECIFIED_ERROR, "internal error")
                return
            backlog = self.backlog
            assert backlog is not None
            next_pending: Awaitable[None] | None = None
            while backlog and not self.closing:
                packet = backlog.popleft()
                next_pending = HANDLERS[self.engine.state][type(packet)](self, packet)
                if next_pending is not None:
                    break
            if next_pending is None:
                self.backlog = None
                if not self.closing:
                    self.transport.resume_reading()
                return
            pending = next_pending

    # -- writing ----------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        if self.closing:
            return
        out = self.engine.out  # the connection's one output buffer
        if not out:
            self.broker.schedule_flush(self)
        out.append(data)

    def send_packet(self, packet: Packet) -> None:
        self.send(encode(packet, self.level))

    def flush(self) -> None:
        """Write what the one output buffer holds: the engine's answers and the handlers'
        bytes, in order (``ConnectionEngine.data_to_send``; a single chunk is written as it
        is)."""
        data = self.engine.data_to_send()
        if not data:
            return
        self.broker.stats.bytes_sent += len(data)
        self.bytes_out += len(data)
        if not self.transport.is_closing():
            self.transport.write(data)
            if self.write_held or self.transport.get_write_buffer_size():
                self.broker.write_budget.after_write(self)  # not all sent (write_budget.py)

    def send_publish(self, outgoing: Outgoing) -> bool:
        """Encode (cached per variant) and queue a QoS 0 PUBLISH; False if it could not be sent
        (expired, or larger than the client's Maximum Packet Size: dropped and counted). QoS 1/2
        go through :meth:`register_inflight` (packet id and in-flight: engine/flow.py)."""
        return self.send_message(outgoing.message, outgoing.retain, outgoing.sub_ids)

    def send_message(self, message: Message, retain: bool, sub_ids: tuple[int, ...]) -> bool:
        """:meth:`send_publish` without an :class:`Outgoing` (the QoS 0 fan-out path)."""
        template = self.publish_template(message, 0, retain, sub_ids)
        if template is None:
            return False
        # a QoS 0 template's head is the whole packet (mqtt/publish_template.py): read directly,
        # not through the .data property, so this path costs no more calls than before the
        # flow took QoS 1/2 (those are sent by register_inflight)
        self.send(template.head)
        self.broker.stats.messages_sent += 1
        self.msgs_out += 1
        return True

    def publish_template(
        self, message: Message, qos: int, retain: bool, sub_ids: tuple[int, ...]
    ) -> Any:
        """The PUBLISH variant this client gets (cached per variant in the message: its topic
        alias, its remaining expiry), or None when it cannot be sent: expired, or larger than
        the client's Maximum Packet Size (dropped and counted)."""
        expires_at = message.expires_at
        now = 0.0
        if expires_at is not None:  # the clock is read only for messages that can expire
            now = self.broker.clock()
            if now >= expires_at:
                return None
        engine = self.engine
        aliases = engine.aliases_out
        if aliases is None:
            alias = 0
            send_topic = True
        else:
            alias, send_topic = aliases.assign(message.topic)
        level = engine.level  # (``v5`` and ``level`` read once, not through the properties)
        if expires_at is None:  # the common case: the call as cheap as before the clock
            template = message.template(level == 5, qos, retain, sub_ids, alias, send_topic, level)
        else:
            template = message.template(
                level == 5, qos, retain, sub_ids, alias, send_topic, level, now
            )
        if template.size > engine.client_max_packet:
            if alias and send_topic and aliases is not None:
                aliases.unassign(message.topic)
            self.broker.stats.dropped_oversize += 1
            return None
        return template

    # -- closing ----------------------------------------------------------------------------

    def refuse_connect(self, reason_code: int, reason: str) -> None:
        """CONNACK with an error (5: reason code; 3.x: mapped return code), then close: the
        engine writes it (engine/connection.py)."""
        self.act(self.engine.refuse_connect(reason_code, reason))

    def close(self, reason_code: int | None, reason: str, will: bool = True) -> None:
        """Close the connection; MQTT 5 clients past CONNECT get DISCONNECT ``reason_code`` first.

        ``will`` False discards the will (normal DISCONNECT 0x00 from the client)."""
        if self.closing:
            return
        if not will:
            self.will = None
        self.act(self.engine.disconnect(reason_code, reason))

    def protocol_error(self, exc: ProtocolError) -> None:
        """A codec or protocol violation: MQTT 5 gets CONNACK/DISCONNECT with the code; close."""
        self.act([self.engine.violation_of(exc)])

    def violation(self, reason_code: int, reason: str) -> None:
        """A protocol rule broken by a well-formed packet (checked by the broker, not the codec)."""
        self.act([ProtocolViolation(reason_code, reason)])

    def _violated(self, violation: ProtocolViolation) -> None:
        code = violation.reason_code
        if code == ReasonCode.PACKET_TOO_LARGE and self.state is not CONNECTED:
            self.broker.limit_hits.hit(
                "limits.max_connect_packet_size",
                f"connection refused before authentication: {violation.reason}",
            )
        log.warning(
            "protocol error",
            extra={
                "event": "protocol_error",
                "client_id": self.client_id,
                "reason_code": f"0x{code:02X}",
                "reason": violation.reason,
                "remote": _addr(self.info.remote_address),
            },
        )
        self.broker.stats.protocol_errors += 1
        if not self.closing:
            self.act(self.engine.answer(violation))  # nothing if answered in receive()

    def _refused(self, refused: ConnectRefused) -> None:
        # logged and audited, aggregated (a login storm writes counts, not a flood)
        audit_events.connect_refused(
            self.broker.decisions, self, refused.reason_code, refused.reason
        )
        self.broker.stats.connections_refused += 1
        self.will = None  # a refused CONNECT's will is never published

    def _ended(self, reason: str) -> None:
        """The engine ended the connection: its last bytes out, then the transport closed."""
        if self.closing:
            return
        self.disconnect_reason = reason
        # the engine's last answer is in the one output buffer, after what was sent before
        if self.broker.persistence is not None:
            self.broker.persistence.before_send()  # write-ahead, as Broker._flush (issue 17)
        self.flush()
        self.trigger(Trigger.CLOSE)
        transport = self.transport
        if transport is None:
            return
        if not self.bytes_out:  # nothing sent that a reset could destroy (closed at accept)
            transport.close()
            return
        # send, half-close, drain for a bounded time, close (graceful_close.py); the session is
        # let go on the next loop iteration, as when the socket closed at once: never from
        # inside the handler that ended the connection (a takeover detaches it itself)
        self.drain = close_gracefully(transport)
        if self.drain is not None:
            transport.resume_reading()  # paused for an authentication or the read pool
            asyncio.get_running_loop().call_soon(self._forget)

    # -- outgoing flow ----------------------------------------------------------------------

    def resend_inflight(self) -> None:
        """Resume a session: resend unacknowledged PUBLISH with DUP and pending PUBREL
        (MQTT 5 §4.4); the bytes are the flow's (engine/flow.py)."""
        session = self.session
        assert session is not None
        resend = self.engine.resend(self._template_of)  # into the engine's output buffer
        for pid in resend.dropped:
            session.journal.completed(pid)
        if resend.publishes:
            self.broker.stats.messages_sent += resend.publishes
            self.msgs_out += resend.publishes

    def _template_of(self, outgoing: Outgoing) -> Any:
        return self.publish_template(
            outgoing.message, outgoing.qos, outgoing.retain, outgoing.sub_ids
        )

    def register_inflight(self, outgoing: Outgoing) -> None:
        """Send a QoS 1/2 message now: the flow gives it a packet id and its bytes."""
        session = self.session
        assert session is not None
        template = self.publish_template(
            outgoing.message, outgoing.qos, outgoing.retain, outgoing.sub_ids
        )
        if template is None:
            session.journal.dropped(outgoing)
            return
        pid = self.engine.send_publish(outgoing, template)  # engine/flow.py: in flight, written
        session.journal.sent(pid, outgoing)  # stored before this output is flushed
        self.broker.stats.messages_sent += 1
        self.msgs_out += 1


def _addr(address: tuple[str, int] | None) -> str | None:
    return f"{address[0]}:{address[1]}" if address else None

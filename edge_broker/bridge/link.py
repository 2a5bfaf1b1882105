"""One bridge's connection to its remote broker: an MQTT client on the sans-io codec
(``edge_broker.mqtt``), reconnecting with exponential backoff, jitter and a cap.

States: ``connecting`` → ``connected`` → ``disconnected`` (→ ``connecting`` …). Each change is
logged once; repeated failed attempts while disconnected are not logged again unless the reason
changes (``last_error`` and the metrics keep the latest). A connection:

1. CONNECT (clean start / session expiry as configured), wait for CONNACK;
   (3.1.1: with the bridge protocol flag when out and in mappings share remote topics,
   unless ``bridge_mode = false``; topics.py);
2. SUBSCRIBE to the remote filters of the ``in``/``both`` mappings (MQTT 5: No Local);
3. resend the in-flight QoS 1/2 messages with DUP and their packet ids, PUBREL for the ones the
   remote already answered with PUBREC (MQTT 5 §4.4);
4. send the queue in order, at most ``max_inflight`` (and the remote's Receive Maximum)
   unacknowledged, at most ``drain_rate`` messages per second;
5. PINGREQ when idle for ``keep_alive``; no packet for 1.5 × keep alive ends the connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.bridges import BridgeConfig, echo_pair
from ..mqtt.codec import PacketReader, ProtocolError, encode
from ..mqtt.packet_ids import MAX_PACKET_ID, free_packet_id
from ..mqtt.packets import (
    NO_PROPERTIES,
    Connack,
    Connect,
    Disconnect,
    PacketType,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
)
from ..mqtt.properties import encode_properties
from ..mqtt.reason_codes import ReasonCode
from ..mqtt.wire import encode_string, encode_varint
from .queue import Entry, OutboundQueue
from .topics import ORIGIN_PROPERTY, TopicMap, with_bridge_flag

log = logging.getLogger("edge_broker.bridge")

TOPIC_FIELDS = 1024  # encoded remote topic names kept per link (forgotten all at once beyond)

# What the link asks of the broker for a PUBLISH from the remote: None when handled (acknowledge
# now), an awaitable to wait for first (the local store), or False when it must not be
# acknowledged (the local store refused it: the remote resends it).
Inbound = Callable[["BridgeLink", Publish], "Awaitable[bool] | bool"]


class LinkError(Exception):
    """Why one connection attempt or connection ended (becomes ``last_error``)."""


@dataclass(slots=True)
class LinkStats:
    """Counters of one bridge ($SYS/broker/bridge/<name>/…, metrics)."""

    connected: bool = False
    state: str = "connecting"
    queued: int = 0  # messages accepted into the outbound queue
    sent: int = 0  # PUBLISH packets written to the remote (resends included)
    acknowledged: int = 0  # QoS 1/2 flows the remote completed; QoS 0 count when written
    dropped: int = 0  # refused or dropped by the queue's bounds (overflow policy)
    rejected: int = 0  # the remote answered with an error reason code
    denied_out: int = 0  # the bridge principal may not receive it: never forwarded
    received: int = 0  # PUBLISH packets from the remote
    denied_in: int = 0  # the bridge principal may not publish it locally
    echoes: int = 0  # came back from the remote (loop prevention)
    forged_origin: int = 0  # client PUBLISHes naming this bridge in a forged origin entry
    connects: int = 0
    last_error: str = ""


def backoff_delay(
    attempt: int, low: float, high: float, rand: Callable[[], float] = random.random
) -> float:
    """Full-jitter exponential backoff: uniform in [low, min(high, low * 2**attempt)]."""
    ceiling = min(high, low * float(2 ** min(attempt, 30)))
    return float(low + (ceiling - low) * rand())


CONNACK_3 = {
    1: "unacceptable protocol version",
    2: "identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorized",
}  # MQTT 3.1.1 §3.2.2.3


def connack_meaning(code: int, level: int) -> str:
    """The name of a CONNACK refusal code (MQTT 5 reason code or 3.1.1 return code)."""
    if level < 5:
        return CONNACK_3.get(code, "")
    try:
        return ReasonCode(code).name.lower().replace("_", " ")
    except ValueError:
        return ""


def describe(exc: BaseException, config: BridgeConfig) -> str:
    """A reader's text for why a connection ended (``last_error``, the log)."""
    if isinstance(exc, ssl.SSLError):
        detail = getattr(exc, "verify_message", None) or exc.reason or str(exc)
        return f"TLS: {detail} ({config.address}:{config.port})"
    if isinstance(exc, OSError) and exc.errno:
        return f"{os.strerror(exc.errno)} ({config.address}:{config.port})"
    if isinstance(exc, TimeoutError):
        return f"timed out ({config.address}:{config.port})"
    return str(exc) or type(exc).__name__


class BridgeLink:
    """The MQTT client side of one bridge (module docstring)."""

    def __init__(
        self,
        config: BridgeConfig,
        queue: OutboundQueue,
        store: Any,
        inbound: Inbound,
        topics: TopicMap,
        max_packet_size: int = 1 << 20,
        origin: str | None = None,
    ) -> None:
        self.config = config
        # this bridge's entry in the origin path (topics.py origin_value): client id and tag
        self.origin = origin if origin is not None else config.client_id
        self.max_packet_size = max_packet_size  # what we accept from the remote (bounded memory)
        self.queue = queue
        self.store = store
        self.inbound = inbound
        self.topics = topics
        self.stats = LinkStats()
        self.level = config.protocol
        # the sender's wait for work: one future per idle period, resolved by wake() (a new
        # message) or the receiver (acknowledgements freed the window); never a task per wait
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stream: Any = None
        self._next_pid = 1
        self._window = config.max_inflight
        self._keep_alive = config.keep_alive
        self._max_qos = 2
        self._max_packet = 0
        self._tokens = 0.0
        self._tokens_at = 0.0
        self._last_tx = 0.0
        self._last_rx = 0.0
        self._last_ping = 0.0
        self._qos2_in: set[int] = set()
        self._logged_error = ""
        self._pushback: list[Any] = []
        self._out: list[bytes] = []
        self._held: deque[int] = deque()  # in flight, not yet resent on this connection
        # the topic name field (length + UTF-8) of each remote topic, encoded once
        self._topic_fields: dict[str, bytes] = {}
        # a queue in memory (MemoryStore) needs no word of what was sent or acknowledged
        self._logged = bool(getattr(store, "durable", True))
        # the PUBLISH properties field of a message without properties of its own: the origin
        # path (topics.py) for MQTT 5, nothing for 3.1.1
        self._plain_properties = (
            encode_properties(
                Properties(user_properties=((ORIGIN_PROPERTY, self.origin),)),
                PacketType.PUBLISH,
            )
            if self.level == 5
            else b""
        )

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Graceful: DISCONNECT 0x00 to the remote (no will, MQTT 5 §3.14), then stop."""
        stream = self._stream
        if stream is not None and self.stats.connected:
            try:
                stream.write(encode(Disconnect(), self.level))
                await asyncio.wait_for(stream.drain(), 1.0)
            except (OSError, TimeoutError, ConnectionError):
                pass
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._task = None

    def wake(self) -> None:
        """There is something to send (a message queued, the window opened): the sender runs
        at the loop's next turn, once however many messages were queued before it."""
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _state(self, state: str, message: str, **extra: Any) -> None:
        if self.stats.state == state:
            return
        self.stats.state = state
        self.stats.connected = state == "connected"
        log.info(message, extra={"event": f"bridge_{state}", "bridge": self.config.name, **extra})

    async def _run(self) -> None:
        attempt = 0
        cfg = self.config
        while True:
            connects = self.stats.connects
            try:
                await self._connection()
            except asyncio.CancelledError:
                self._disconnect_quietly()
                raise
            except (OSError, ProtocolError, LinkError, TimeoutError, EOFError) as exc:
                error = describe(exc, cfg)
                self.stats.last_error = error
                if self.stats.state == "connected":
                    self._state(
                        "disconnected",
                        f"bridge {cfg.name} disconnected: {error}; reconnecting",
                        error=error,
                    )
                elif error != self._logged_error and self.stats.state != "disconnected":
                    self._state(
                        "disconnected",
                        f"bridge {cfg.name} cannot connect to "
                        f"{cfg.address}:{cfg.port}: {error}; retrying with backoff",
                        error=error,
                    )
                self._logged_error = error
                log.debug("bridge %s attempt failed: %s", cfg.name, error)
            except Exception as exc:  # a bug must not end the bridge for good
                self.stats.last_error = f"internal error: {exc!r}"
                log.exception("bridge %s failed", cfg.name)
                self._state("disconnected", f"bridge {cfg.name} disconnected: internal error")
            finally:
                self._disconnect_quietly()
            if self.stats.connects != connects:
                attempt = 0  # a connection that came up resets the backoff
            delay = backoff_delay(attempt, cfg.reconnect_min, cfg.reconnect_max)
            attempt += 1
            await asyncio.sleep(delay)

    def _disconnect_quietly(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:
                pass
            self._stream = None

    # -- one connection ---------------------------------------------------------------------

    def _connect_packet(self) -> Connect:
        cfg = self.config
        password: bytes | None = None
        if cfg.password is not None:
            password = cfg.password.encode()
        elif cfg.token_file is not None:
            try:
                password = Path(cfg.token_file).read_text(encoding="utf-8").strip().encode()
            except OSError as exc:
                raise LinkError(f"cannot read token_file {cfg.token_file}: {exc.strerror}") from exc
        props = NO_PROPERTIES
        if self.level == 5:
            props = Properties(
                session_expiry_interval=0 if cfg.clean_start else cfg.session_expiry,
                receive_maximum=min(cfg.max_inflight * 2, 65535),
                maximum_packet_size=self.max_packet_size,
                request_problem_information=1,
            )
        return Connect(
            self.level,
            cfg.client_id,
            cfg.clean_start,
            cfg.keep_alive,
            None,
            cfg.username,
            password,
            props,
        )

    def _send(self, packet: Any) -> None:
        """Buffer ``packet``; :meth:`_flush` writes the buffer with one system call."""
        self._out.append(encode(packet, self.level))

    def _flush(self) -> None:
        if self._out:
            data = b"".join(self._out) if len(self._out) > 1 else self._out[0]
            self._out.clear()
            self._stream.write(data)
            self._last_tx = time.monotonic()

    async def _connection(self) -> None:
        from .transport import open_stream

        cfg = self.config
        if self.stats.state != "disconnected":
            self._state("connecting", f"bridge {cfg.name} connecting to {cfg.address}:{cfg.port}")
        self._stream = stream = await open_stream(cfg)
        reader = PacketReader(
            side="client", protocol_level=self.level, max_packet_size=self.max_packet_size
        )
        self._out.clear()
        connect = encode(self._connect_packet(), self.level)
        flagged = self.level == 4 and cfg.bridge_mode and echo_pair(cfg.topics) is not None
        self._out.append(with_bridge_flag(connect) if flagged else connect)
        self._flush()
        await stream.drain()
        connack = await asyncio.wait_for(self._first_packet(reader), cfg.connect_timeout)
        if not isinstance(connack, Connack):
            raise LinkError(f"expected CONNACK, got {type(connack).__name__}")
        if connack.reason_code != 0:
            why = connack.properties.reason_string or connack_meaning(
                connack.reason_code, self.level
            )
            hint = ""
            if flagged and connack.reason_code == 0x01:
                # no silent fallback: without the flag the remote echoes, and nothing in a 3.1.1
                # PUBLISH tells the echo from a message the remote really sent
                hint = (
                    "; it does not accept the bridge protocol flag (bridge_mode = true): use "
                    'protocol = "5", or set bridge_mode = false with out and in mappings whose '
                    "remote topics are disjoint"
                )
            raise LinkError(
                f"the remote refused the connection (reason code 0x{connack.reason_code:02X}"
                + (f": {why})" if why else ")")
                + hint
            )
        self._session_limits(connack)
        self.stats.connects += 1
        self.stats.last_error = ""
        self._logged_error = ""
        self._last_rx = time.monotonic()
        self._state(
            "connected",
            f"bridge {cfg.name} connected to {cfg.address}:{cfg.port}"
            f" (session present: {int(connack.session_present)}, queued: {len(self.queue)})",
            session_present=connack.session_present,
        )
        self._subscribe()
        self._resend_inflight()
        self._flush()
        await stream.drain()
        # one long-lived task each for sending, reading and the keep alive, for the whole
        # connection: a wake costs the sender one future, a read no future of the link's own
        loop = asyncio.get_running_loop()
        tasks = {
            loop.create_task(self._sender()),
            loop.create_task(self._receiver(reader)),
            loop.create_task(self._keeper()),
        }
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # raises what ended the connection
            raise LinkError("the link stopped")
        finally:
            self._waiter = None
            for task in tasks:
                task.cancel()
            for task in tasks:
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass

    async def _first_packet(self, reader: PacketReader) -> Any:
        while True:
            data = await self._stream.read()
            if not data:
                raise LinkError("the remote closed the connection before CONNACK")
            packets = reader.feed(data)
            if packets:
                self._pushback = packets[1:]
                return packets[0]

    def _session_limits(self, connack: Connack) -> None:
        props = connack.properties
        self._keep_alive = self.config.keep_alive
        window = self.config.max_inflight
        if props.receive_maximum is not None:
            window = min(window, props.receive_maximum)
        self._window = max(1, window)
        self._max_qos = 2 if props.maximum_qos is None else props.maximum_qos
        self._max_packet = props.maximum_packet_size or 0
        if props.server_keep_alive is not None:  # MQTT 5 §3.2.2.3.14: the server's value rules
            self._keep_alive = props.server_keep_alive or self.config.keep_alive
        if not connack.session_present:
            self._qos2_in.clear()  # the remote forgot its QoS 2 flows: so do we

    def _subscribe(self) -> None:
        subs = tuple(
            Subscription(m.remote, m.qos, no_local=self.level == 5) for m in self.topics.inbound
        )
        if subs:
            self._send(Subscribe(self._pid(), subs))

    def _resend_inflight(self) -> None:
        """Resend what is in flight, oldest first, as far as the remote's Receive Maximum
        allows (MQTT 5 §4.9: PUBREL flows count too); the rest waits in ``_held``."""
        self._held.clear()
        for pid in list(self.queue.inflight):
            self._held.append(pid)
        self._resend_held()

    def _resend_held(self) -> None:
        inflight = self.queue.inflight
        held = self._held
        while held and len(inflight) - len(held) < self._window:
            pid = held.popleft()
            entry = inflight.get(pid)
            if entry is None:
                continue
            if entry.released:
                self._send(Pubrel(pid))
            else:
                self._publish(entry, pid, dup=True)

    def _pid(self) -> int:
        pid = free_packet_id(self._next_pid, self.queue.inflight)
        if pid is None:
            raise LinkError("no free packet identifier")
        self._next_pid = pid % MAX_PACKET_ID + 1
        return pid

    def _publish(self, entry: Entry, pid: int | None, dup: bool = False) -> None:
        qos = min(entry.qos, self._max_qos)
        if entry.props is None:  # the common case: the properties field is the same every time
            first = 0x30 | (qos << 1) | (0x01 if entry.retain else 0) | (0x08 if dup and qos else 0)
            topic = entry.topic
            field = self._topic_fields.get(topic)
            if field is None:
                field = encode_string(topic, "topic name")
                if len(self._topic_fields) >= TOPIC_FIELDS:
                    self._topic_fields.clear()
                self._topic_fields[topic] = field
            plain = self._plain_properties
            payload = entry.payload
            length = len(field) + len(plain) + len(payload)
            if qos:
                length += 2
            # the fixed header (its Remaining Length inline below 16 KiB: a bridged message
            # with the origin property is often over 127 bytes), then the parts as they are:
            # _flush joins everything buffered at once
            if length < 0x80:
                header = bytes((first, length))
            elif length < 0x4000:
                header = bytes((first, (length & 0x7F) | 0x80, length >> 7))
            else:
                header = bytes((first,)) + encode_varint(length)
            if qos:
                self._out += (header, field, (pid or 0).to_bytes(2, "big"), plain, payload)
            else:
                self._out += (header, field, plain, payload)
            self.stats.sent += 1
            return
        props = NO_PROPERTIES
        if self.level == 5:
            user: tuple[tuple[str, str], ...] = ()
            content_type = payload_format = response_topic = correlation = None
            if entry.props is not None:
                upl, content_type, payload_format, response_topic, correlation = entry.props
                user = tuple((k, v) for k, v in upl)
            # the origin path: one property per bridge crossed (topics.py "Loops")
            user += ((ORIGIN_PROPERTY, self.origin),)
            props = Properties(
                payload_format_indicator=payload_format,
                content_type=content_type,
                response_topic=response_topic,
                correlation_data=correlation,
                user_properties=user,
            )
        self._send(
            Publish(entry.topic, entry.payload, qos, entry.retain, dup, pid if qos else None, props)
        )
        self.stats.sent += 1

    def _take_token(self) -> float:
        """0 when a message may be sent now, else the seconds to wait (token bucket)."""
        rate = self.config.drain_rate
        if rate <= 0:
            return 0.0
        now = time.monotonic()
        burst = max(float(self._window), rate / 10.0)
        self._tokens = min(burst, self._tokens + (now - self._tokens_at) * rate)
        self._tokens_at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / rate

    def _fill(self) -> tuple[int, float]:
        """Move what the window and ``drain_rate`` allow from the queue into ``_out``: (how
        many, seconds until the rate allows the next one or 0). At most 256 at once, so a long
        queue yields to the loop now and then."""
        queue = self.queue
        pending = queue.pending
        inflight = queue.inflight
        window = self._window
        store = self.store
        logged = self._logged
        rated = self.config.drain_rate > 0
        wait = 0.0
        sent = 0
        if self._held:
            self._resend_held()
        while pending and not self._held and len(inflight) < window:
            if rated:
                wait = self._take_token()
                if wait:
                    break
            entry = queue.take()
            assert entry is not None
            if self._max_packet and len(entry.topic) + len(entry.payload) + 64 > self._max_packet:
                self._drop_too_large(entry)
                continue
            if entry.qos == 0 or self._max_qos == 0:
                self._publish(entry, None)
                self.stats.acknowledged += 1
                if entry.qos:
                    queue.bytes -= entry.size
                if logged:
                    store.done(entry)
            else:
                pid = self._next_pid  # round robin (packet_ids.py): mostly free, else look
                if pid in inflight:
                    pid = self._pid()
                else:
                    self._next_pid = pid % MAX_PACKET_ID + 1
                queue.fly(entry, pid)
                if logged:
                    store.flying(entry)
                self._publish(entry, pid)
            sent += 1
            if sent >= 256:
                break
        return sent, wait

    async def _sender(self) -> None:
        """Sends what the queue holds whenever there is room; waits on one future while there
        is nothing to send (:meth:`wake`), or for ``drain_rate``'s next token."""
        queue = self.queue
        stream = self._stream
        loop = asyncio.get_running_loop()
        while True:
            sent, wait = self._fill()
            if self._out:
                self._flush()
                await stream.drain()
            if sent >= 256 and not wait:
                await asyncio.sleep(0)
                continue
            if queue.pending and not wait and not self._held and len(queue.inflight) < self._window:
                continue  # the queue grew while the write drained
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(wait, self.wake) if wait else None
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()

    async def _keeper(self) -> None:
        """The keep alive: PINGREQ when we were silent, and also when the remote was (QoS 0
        traffic has no acknowledgements: without a ping we could not tell a dead remote from a
        quiet one); no packet for 1.5 × keep alive ends the connection."""
        keep_alive = self._keep_alive
        while True:
            idle = time.monotonic() - self._last_tx
            await asyncio.sleep(max(0.05, min(keep_alive - idle, keep_alive / 2)))
            now = time.monotonic()
            if now - self._last_tx >= keep_alive or (
                now - self._last_rx >= keep_alive and now - self._last_ping >= keep_alive / 2
            ):
                self._send(Pingreq())
                self._last_ping = now
                self._flush()
                await self._stream.drain()
            if now - self._last_rx > keep_alive * 1.5:
                raise LinkError(
                    f"no packet from the remote for {keep_alive * 1.5:g} s (keep alive)"
                )

    def _drop_too_large(self, entry: Entry) -> None:
        self.stats.dropped += 1
        if entry.qos:
            self.queue.bytes -= entry.size
        self.store.done(entry)
        self.stats.last_error = (
            f"message on {entry.topic!r} exceeds the remote's maximum packet size"
        )

    async def _receiver(self, reader: PacketReader) -> None:
        """Reads, handles what was read, then writes the answers (and, when acknowledgements
        opened the window, the next messages) in one buffer."""
        stream = self._stream
        queue = self.queue
        pending, self._pushback = self._pushback, []
        while True:
            for packet in pending:
                if type(packet) is Puback:  # the bulk of what a remote sends: no coroutine
                    self._finished(packet.packet_id, packet.reason_code, packet.properties)
                else:
                    await self._handle(packet)
            if queue.pending or self._held:
                # acknowledgements opened the window: the next messages go with the answers;
                # the sender takes over what does not fit (256 at once) or must wait (rate)
                sent, wait = self._fill()
                if (sent >= 256 or wait) and queue.pending:
                    self.wake()
            if self._out:
                self._flush()
                await stream.drain()
            data = await stream.read()
            if not data:
                raise LinkError("the remote closed the connection")
            self._last_rx = time.monotonic()
            if data[0] == 0x40 and not reader.buffered:
                done = self._acknowledged(data)
                if done == len(data):
                    pending = []
                    continue
                if done:
                    data = data[done:]
            pending = reader.feed(data)

    def _acknowledged(self, data: bytes) -> int:
        """The plain PUBACKs (no reason code: success, the bulk of what a remote sends) at the
        start of ``data``, which begins a packet: handled without a packet object each (as
        :meth:`_finished` would). Returns the bytes they took; the reader gets the rest."""
        finish = self.queue.finish
        store = self.store
        logged = self._logged
        stats = self.stats
        end = len(data) - 3
        at = 0
        while at < end and data[at] == 0x40 and data[at + 1] == 0x02:
            pid = (data[at + 2] << 8) | data[at + 3]
            if not pid:
                break  # malformed: the reader refuses it
            at += 4
            entry = finish(pid)
            if entry is None:
                continue
            stats.acknowledged += 1
            if logged:
                store.done(entry)
        return at

    async def _handle(self, packet: Any) -> None:
        queue = self.queue
        kind = type(packet)
        if kind is Puback or kind is Pubcomp:
            self._finished(packet.packet_id, packet.reason_code, packet.properties)
        elif kind is Pubrec:
            entry = queue.inflight.get(packet.packet_id)
            if entry is None:
                self._send(Pubrel(packet.packet_id))
            elif packet.reason_code >= 0x80:
                self._finished(packet.packet_id, packet.reason_code, packet.properties)
            else:
                if not entry.released:
                    entry.released = True
                    self.store.released(entry)
                self._send(Pubrel(packet.packet_id))
        elif kind is Publish:
            await self._incoming(packet)
        elif kind is Pubrel:
            self._qos2_in.discard(packet.packet_id)
            self._send(Pubcomp(packet.packet_id))
        elif kind is Suback:
            for mapping, code in zip(self.topics.inbound, packet.reason_codes, strict=False):
                if code >= 0x80:
                    self.stats.last_error = (
                        f"the remote refused the subscription to {mapping.remote!r} (0x{code:02X})"
                    )
                    log.warning(
                        "bridge %s: %s",
                        self.config.name,
                        self.stats.last_error,
                        extra={"event": "bridge_subscribe_refused", "bridge": self.config.name},
                    )
        elif kind is Disconnect:
            why = packet.properties.reason_string
            raise LinkError(
                f"the remote sent DISCONNECT 0x{packet.reason_code:02X}"
                + (f": {why}" if why else "")
            )
        elif kind is Pingresp:
            pass

    def _finished(self, pid: int, code: int, props: Properties) -> None:
        entry = self.queue.finish(pid)
        if entry is None:
            return
        if code >= 0x80:
            self.stats.rejected += 1
            why = props.reason_string
            self.stats.last_error = f"the remote refused {entry.topic!r} (0x{code:02X}" + (
                f": {why})" if why else ")"
            )
        else:
            self.stats.acknowledged += 1
        self.store.done(entry)

    async def _incoming(self, packet: Publish) -> None:
        self.stats.received += 1
        pid = packet.packet_id
        if packet.qos == 2 and pid in self._qos2_in:  # a resend: acknowledged, not routed again
            self._send(Pubrec(pid))
            return
        ok = self.inbound(self, packet)
        if not isinstance(ok, bool):
            ok = await ok
        if not ok or pid is None:
            return
        if packet.qos == 1:
            self._send(Puback(pid))
        else:
            self._qos2_in.add(pid)
            self._send(Pubrec(pid))

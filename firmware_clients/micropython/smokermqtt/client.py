"""A blocking MQTT 5 client for MicroPython boards, with SMOKER enhanced authentication.

One socket, one request in flight, no threads: the shape umqtt.simple has, for MQTT 5.
- SMOKER (SMOKER.md "Enhanced authentication"): CONNECT names the method ``SMOKER``; the broker
  answers AUTH 0x18 with a 32-byte nonce; the client answers AUTH 0x18 with the libsodium
  attached signature (64-byte Ed25519 signature + nonce); CONNACK 0x00 ends the exchange.
- Claims (SMOKER.md "Claim payload"): QoS 1 PUBLISH to access/claim, the PUBACK reason code is
  the answer; unclaim likewise on access/unclaim.
- Keepalive (MQTT 5 §3.1.2.10): PINGREQ after half the keepalive of silence; a PINGRESP
  missing for a whole keepalive means the connection is dead.
- Reconnect: exponential backoff with jitter; subscriptions are renewed when the broker has no
  session for us.

Network failures raise OSError, MQTT failures MQTTError (with the reason code).
"""

import json
import random
import select

try:
    import socket
except ImportError:  # ports older than MicroPython 1.20 name it usocket only
    import usocket as socket  # type: ignore[no-redef]
try:
    import utime as time  # MicroPython; the tests give CPython a shim of the same name
except ImportError:
    import time  # type: ignore[no-redef]
try:  # type names for the host's checkers; MicroPython ignores annotations
    from collections.abc import Callable, Sequence
    from typing import Any

    from smokermqtt.claims import Signer
except Exception:  # no typing module on the board (or a stub without these)
    pass

from smokermqtt import claims, ids, packets
from smokermqtt.packets import MQTTError

SMOKER = "SMOKER"
NONCE_SIZE = 32

# CONNACK reasons that retrying cannot fix (MQTT 5 §3.2.2.2): the configuration must change.
PERMANENT_REFUSALS = (0x84, 0x85, 0x8C)


def backoff_ms(attempt: int, base_ms: int, max_ms: int, rand16: int) -> int:
    """Delay before retry ``attempt`` (0-based): exponential, capped, with "equal jitter".

    The delay lies in [cap/2, cap) where cap = min(max_ms, base_ms * 2**attempt), so a fleet
    that lost its broker at the same moment does not come back at the same moment.
    ``rand16`` is a random number in [0, 65536).
    """
    cap = min(max_ms, base_ms << min(attempt, 20))
    half = cap // 2
    return half + half * rand16 // 65536


class MQTTClient:
    """MQTT 5 over one TCP (or TLS) socket.

    With ``signing_key`` (an object with ``public_key`` and ``sign_attached``, e.g.
    smokermqtt.ed25519.SigningKey) the client authenticates with SMOKER and its client ID is
    the base32 of the public key. Without it, ``client_id`` and optionally ``username`` and
    ``password`` (a password or a token) are sent as in plain MQTT 5.

    ``callback(topic, payload)`` receives every application message.
    """

    def __init__(
        self,
        host: str,
        port: int = 1883,
        client_id: str | None = None,
        signing_key: "Signer | None" = None,
        username: str | None = None,
        password: str | bytes | None = None,
        keepalive: int = 60,
        clean_start: bool = True,
        session_expiry: int = 0,
        max_packet_size: int = 16384,
        timeout_ms: int = 10000,
        callback: "Callable[[str, bytes], None] | None" = None,
        ssl_context: "Any" = None,
        backoff_base_ms: int = 1000,
        backoff_max_ms: int = 60000,
        will: tuple[str, bytes, int, bool] | None = None,
    ) -> None:
        if signing_key is not None:
            derived = ids.client_id(signing_key.public_key)
            if client_id is not None and client_id != derived:
                raise ValueError(
                    "client_id %r is not the SMOKER ID %r of the signing key" % (client_id, derived)
                )
            client_id = derived
        if client_id is None:
            raise ValueError("give client_id, or signing_key for a SMOKER client")
        self.host = host
        self.port = port
        self.client_id = client_id
        self.signing_key = signing_key
        self.username = username
        self.password = password
        self.keepalive = keepalive
        self.clean_start = clean_start
        self.session_expiry = session_expiry
        self.max_packet_size = max_packet_size
        self.timeout_ms = timeout_ms
        self.callback = callback
        self.ssl_context = ssl_context
        self.backoff_base_ms = backoff_base_ms
        self.backoff_max_ms = backoff_max_ms
        self.will = will
        self.sleep_ms: Callable[[int], Any] = time.sleep_ms
        self.sock: Any = None
        self._poller: Any = None
        self._readinto: Any = None
        self._byte = bytearray(1)  # fixed-header bytes are read into this, one at a time
        self._byte_view = memoryview(self._byte)
        # topic filter -> options byte, renewed on reconnect
        self.subscriptions: dict[str, int] = {}
        self.smoker_authenticated = False
        self.server_keepalive = keepalive
        self.server_max_qos = 2
        self.last_reason_string: str | None = None
        self._packet_id = 0
        self._last_send = 0
        self._ping_sent: int | None = None
        self._qos2_received: set[int] = set()
        self._claims_answer: bytes | None = None  # set by _handle while request_claims waits
        self._reauthenticating = False  # cleared by _handle on AUTH 0x00
        self._claims_topic = claims.CLAIMS_RESPONSE % client_id

    # ------------------------------------------------------------ connection

    def connect(self) -> bool:
        """Open the socket, authenticate, and return CONNACK's session-present flag.
        On any failure the socket is closed again (``connected`` is False)."""
        try:
            return self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self) -> bool:
        self.close()
        addr = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)[0][-1]
        sock = socket.socket()
        self.sock = sock
        sock.settimeout(self.timeout_ms / 1000)
        sock.connect(addr)
        if self.ssl_context is not None:
            sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
            self.sock = sock
        self._poller = select.poll()
        self._poller.register(sock, select.POLLIN)
        readinto = getattr(sock, "recv_into", None)  # CPython; MicroPython has readinto
        self._readinto = readinto if readinto is not None else sock.readinto  # type: ignore[attr-defined]
        props: list[tuple[int, Any]] = [(packets.MAXIMUM_PACKET_SIZE, self.max_packet_size)]
        if self.session_expiry:
            props.append((packets.SESSION_EXPIRY, self.session_expiry))
        if self.signing_key is not None:
            props.append((packets.AUTH_METHOD, SMOKER))
        self._ping_sent = None
        self._qos2_received = set()
        self._reauthenticating = False
        self.smoker_authenticated = False
        self._send(
            packets.connect(
                self.client_id,
                self.keepalive,
                self.clean_start,
                props,
                self.username,
                self.password,
                self.will,
            )
        )
        answered_nonce = False
        while True:
            got = self._read_packet(self.timeout_ms, "CONNACK")
            assert got is not None  # _read_packet raises instead when something is owed
            ptype, _, body = got
            if ptype == packets.AUTH:
                self._answer_auth(body)
                answered_nonce = True
            elif ptype == packets.CONNACK:
                break
            else:
                raise MQTTError(
                    packets.PROTOCOL_ERROR,
                    "expected AUTH or CONNACK from the broker, got packet type %d" % ptype,
                )
        session_present, reason, answer = packets.parse_connack(body)
        self.last_reason_string = answer.get(packets.REASON_STRING)
        if reason:
            self.close()
            raise MQTTError(
                reason, "broker refused the connection%s" % _explain(self.last_reason_string)
            )
        if self.signing_key is not None:
            if not answered_nonce or answer.get(packets.AUTH_METHOD) != SMOKER:
                self.close()
                raise MQTTError(
                    packets.PROTOCOL_ERROR,
                    "broker accepted the connection without SMOKER authentication",
                )
            self.smoker_authenticated = True
        self.client_id = answer.get(packets.ASSIGNED_CLIENT_ID, self.client_id)
        self._claims_topic = claims.CLAIMS_RESPONSE % self.client_id
        self.server_keepalive = answer.get(packets.SERVER_KEEP_ALIVE, self.keepalive)
        self.server_max_qos = answer.get(packets.MAXIMUM_QOS, 2)
        if not session_present and self.subscriptions:
            for topic_filter, options in list(self.subscriptions.items()):
                self._subscribe_one(topic_filter, options)
        return session_present

    def _answer_auth(self, body: bytes | bytearray) -> None:
        """Answer the broker's SMOKER challenge (SMOKER.md steps 2-3)."""
        reason, props = packets.parse_reason_and_properties(body)
        method = props.get(packets.AUTH_METHOD)
        nonce = props.get(packets.AUTH_DATA)
        if self.signing_key is None or method != SMOKER:
            raise MQTTError(
                packets.PROTOCOL_ERROR,
                "broker sent AUTH for method %r; this client speaks only %r"
                % (method, SMOKER if self.signing_key else None),
            )
        if reason != packets.CONTINUE_AUTHENTICATION or nonce is None or len(nonce) != NONCE_SIZE:
            raise MQTTError(
                packets.PROTOCOL_ERROR,
                "SMOKER challenge must be AUTH 0x18 with a %d-byte nonce" % NONCE_SIZE,
            )
        self._send(
            packets.auth(
                packets.CONTINUE_AUTHENTICATION,
                [
                    (packets.AUTH_METHOD, SMOKER),
                    (packets.AUTH_DATA, self.signing_key.sign_attached(nonce)),
                ],
            )
        )

    def reauthenticate(self) -> None:
        """Prove the key again without dropping the session (MQTT 5 §4.12.1, SMOKER.md):
        AUTH 0x19 → the broker's fresh nonce (AUTH 0x18) → the signed nonce → AUTH 0x00.
        A broker that refuses closes the connection (DISCONNECT with the reason)."""
        if self.signing_key is None or not self.smoker_authenticated:
            raise MQTTError(
                packets.PROTOCOL_ERROR, "only a SMOKER-authenticated connection can re-authenticate"
            )
        self._reauthenticating = True
        self._send(packets.auth(packets.RE_AUTHENTICATE, [(packets.AUTH_METHOD, SMOKER)]))
        deadline = time.ticks_add(time.ticks_ms(), self.timeout_ms)
        while self._reauthenticating:
            left = time.ticks_diff(deadline, time.ticks_ms())
            got = self._read_packet(max(left, 0), "AUTH (re-authentication)")
            assert got is not None  # _read_packet raises instead when something is owed
            self._handle(*got)

    def connect_with_backoff(self, attempts: int = 0) -> bool:
        """connect(), retried with backoff_ms() delays; ``attempts`` 0 retries for ever.

        CONNACK reasons in PERMANENT_REFUSALS are raised at once: only a new configuration
        fixes them.
        """
        attempt = 0
        while True:
            try:
                return self.connect()
            except (OSError, MQTTError) as exc:
                self.close()
                if isinstance(exc, MQTTError) and exc.reason in PERMANENT_REFUSALS:
                    raise
                attempt += 1
                if attempts and attempt >= attempts:
                    raise
                self.sleep_ms(
                    backoff_ms(
                        attempt - 1,
                        self.backoff_base_ms,
                        self.backoff_max_ms,
                        random.getrandbits(16),
                    )
                )

    def reconnect(self, attempts: int = 0) -> bool:
        """Drop the current connection, then connect_with_backoff()."""
        self.close()
        return self.connect_with_backoff(attempts)

    def disconnect(self) -> None:
        """Send DISCONNECT 0x00 (no will) and close."""
        if self.sock is not None:
            try:
                self._send(packets.DISCONNECT_BYTES)
            except OSError:
                pass
        self.close()

    def close(self) -> None:
        """Close the socket without a DISCONNECT (the broker publishes our will)."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        self.sock = None
        self._poller = None
        self.smoker_authenticated = False

    @property
    def connected(self) -> bool:
        return self.sock is not None

    # ------------------------------------------------------------ application calls

    def publish(
        self,
        topic: str,
        payload: str | bytes,
        qos: int = 0,
        retain: bool = False,
        props: "Sequence[tuple[int, Any]]" = (),
    ) -> int | None:
        """Publish; returns the PUBACK reason code for QoS 1, None for QoS 0."""
        if qos not in (0, 1):
            raise ValueError("this client publishes at QoS 0 or 1, got %r" % (qos,))
        if qos > self.server_max_qos:
            raise MQTTError(0x9B, "broker's Maximum QoS is %d" % self.server_max_qos)
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        packet_id = self._next_id() if qos else 0
        header = packets.publish_header(topic, len(payload), qos, retain, False, packet_id, props)
        if len(header) + len(payload) > self.max_packet_size:
            # the broker would drop us for it; the device should learn here instead
            raise MQTTError(
                0x95,
                "PUBLISH of %d bytes exceeds max_packet_size %d"
                % (len(header) + len(payload), self.max_packet_size),
            )
        self._send(header)
        self._send(payload)
        if not qos:
            return None
        _, reason, answer = packets.parse_ack(self._wait_for(packets.PUBACK, packet_id))
        self.last_reason_string = answer.get(packets.REASON_STRING)
        return reason

    def claim(self, payload: bytes) -> int:
        """Publish a signed claim (bytes from smokermqtt.claims or a pre-signed file) to
        access/claim at QoS 1 and return the PUBACK reason code (0x00 = stored)."""
        return self._publish_qos1(claims.CLAIM_TOPIC, payload)

    def claim_topic(
        self,
        topic: str,
        restriction_type: str = "WHITELIST",
        permissions: "Sequence[tuple[str, str]]" = (),
    ) -> int:
        """Sign a claim on ``topic`` with this client's key and publish it."""
        if self.signing_key is None:
            raise ValueError("claims are signed: this client has no signing_key")
        return self.claim(
            claims.claim(self.signing_key, self.client_id, topic, restriction_type, permissions)
        )

    def unclaim(self, topic: str) -> int:
        """Remove our claim on ``topic``; returns the PUBACK reason code."""
        return self._publish_qos1(claims.UNCLAIM_TOPIC, claims.unclaim(topic, self.client_id))

    def _publish_qos1(
        self, topic: str, payload: bytes, props: "Sequence[tuple[int, Any]]" = ()
    ) -> int:
        reason = self.publish(topic, payload, qos=1, props=props)
        assert reason is not None  # QoS 1 always has a PUBACK reason
        return reason

    def request_claims(
        self, timeout_ms: int | None = None, after: str | None = None
    ) -> "dict[str, Any]":
        """The broker's claim information for this client (SMOKER.md "Optional: claim
        information request"): ``{"clientId", "ownedClaims", "involvedClaims"}``.

        Subscribes to ``restricted/<ID>/claims`` (kept for later calls), publishes the request
        with that Response Topic, and waits for the answer, which is not passed to the
        callback. MQTTError with the PUBACK reason if the broker refuses the request.
        edge-broker answers one page at a time: when the answer has ``"nextPage"``, call again
        with ``after=answer["nextPage"]`` for the next one (one page fits a small device's RAM).
        """
        if not self.smoker_authenticated:
            raise MQTTError(0x87, "only SMOKER-authenticated clients may request claims")
        answer_topic = self._claims_topic
        if answer_topic not in self.subscriptions:
            code = self.subscribe(answer_topic, qos=1)
            if code >= 0x80:
                raise MQTTError(
                    code, "SUBACK for %s%s" % (answer_topic, _explain(self.last_reason_string))
                )
        self._claims_answer = None
        request = b"" if after is None else json.dumps({"after": after}).encode()
        reason = self._publish_qos1(
            claims.CLAIMS_REQUEST % self.client_id,
            request,
            [(packets.RESPONSE_TOPIC, answer_topic)],
        )
        if reason >= 0x80:
            raise MQTTError(reason, "claims request refused%s" % _explain(self.last_reason_string))
        deadline = time.ticks_add(
            time.ticks_ms(), self.timeout_ms if timeout_ms is None else timeout_ms
        )
        while self._claims_answer is None:
            left = time.ticks_diff(deadline, time.ticks_ms())
            if left <= 0:
                raise OSError("no answer on %s in time" % answer_topic)
            self.wait_msg(left)
        result: dict[str, Any] = json.loads(self._claims_answer)
        self._claims_answer = None
        return result

    def subscribe(
        self,
        topic_filter: str,
        qos: int = 0,
        no_local: bool = False,
        retain_as_published: bool = False,
        retain_handling: int = 0,
    ) -> int:
        """Subscribe; returns the SUBACK reason code (granted QoS, or >= 0x80 refused).
        Granted subscriptions are renewed by reconnect when the broker lost our session."""
        options = packets.subscription_options(qos, no_local, retain_as_published, retain_handling)
        return self._subscribe_one(topic_filter, options)

    def _subscribe_one(self, topic_filter: str, options: int) -> int:
        packet_id = self._next_id()
        self._send(packets.subscribe(packet_id, [(topic_filter, options)]))
        _, codes, answer = packets.parse_suback(self._wait_for(packets.SUBACK, packet_id))
        self.last_reason_string = answer.get(packets.REASON_STRING)
        if len(codes) != 1:
            raise MQTTError(
                packets.PROTOCOL_ERROR, "SUBACK holds %d reason codes for 1 filter" % len(codes)
            )
        if codes[0] < 0x80:
            self.subscriptions[topic_filter] = options
        else:
            self.subscriptions.pop(topic_filter, None)
        return codes[0]

    def unsubscribe(self, topic_filter: str) -> int:
        """Unsubscribe; returns the UNSUBACK reason code."""
        packet_id = self._next_id()
        self.subscriptions.pop(topic_filter, None)
        self._send(packets.unsubscribe(packet_id, [topic_filter]))
        _, codes, _ = packets.parse_suback(self._wait_for(packets.UNSUBACK, packet_id))
        return codes[0] if codes else packets.PROTOCOL_ERROR

    def ping(self) -> None:
        """Send PINGREQ now; the PINGRESP is consumed by wait_msg()."""
        self._send(packets.PINGREQ_BYTES)
        if self._ping_sent is None:
            self._ping_sent = time.ticks_ms()

    def wait_msg(self, timeout_ms: int | None = None) -> bool:
        """Handle at most one incoming packet, waiting up to ``timeout_ms`` (None: until the
        next keepalive duty). Sends PINGREQ when due. Returns True if a packet was handled."""
        wait = self._keepalive_duty()
        if timeout_ms is not None and (wait is None or timeout_ms < wait):
            wait = timeout_ms
        got = self._read_packet(wait, None)
        if got is None:
            self._keepalive_duty()
            return False
        ptype, first, body = got
        self._handle(ptype, first, body)
        return True

    def check_msg(self) -> bool:
        """wait_msg() without waiting: for a main loop that does other work."""
        return self.wait_msg(0)

    def loop(self, duration_ms: int) -> None:
        """Handle incoming packets and keepalive for ``duration_ms``."""
        end = time.ticks_add(time.ticks_ms(), duration_ms)
        while True:
            left = time.ticks_diff(end, time.ticks_ms())
            if left <= 0:
                return
            self.wait_msg(left)

    # ------------------------------------------------------------ internals

    def _next_id(self) -> int:
        self._packet_id = self._packet_id % 65535 + 1
        return self._packet_id

    def _send(self, data: bytes) -> None:
        if self.sock is None:
            raise OSError("not connected: call connect() first")
        view = memoryview(data)
        while len(view):
            n = self.sock.send(view)
            if n is None or n <= 0:
                raise OSError("socket send made no progress")
            view = view[n:]
        self._last_send = time.ticks_ms()

    def _keepalive_duty(self) -> int | None:
        """Ping when half the keepalive passed in silence; raise when a ping went unanswered
        for a whole keepalive. Returns ms until the next duty, or None without keepalive."""
        ka = self.server_keepalive * 1000
        if not ka or self.sock is None:
            return None
        now = time.ticks_ms()
        if self._ping_sent is not None:
            late = time.ticks_diff(now, self._ping_sent)
            if late >= ka:
                self.close()
                raise OSError("no PINGRESP within the keepalive of %d s" % self.server_keepalive)
            return ka - late
        idle = time.ticks_diff(now, self._last_send)
        if idle >= ka // 2:
            self.ping()
            return ka
        return ka // 2 - idle

    def _recv_into(self, view: memoryview) -> None:
        """Fill ``view`` from the socket: readinto (MicroPython) / recv_into (CPython) write
        straight into the caller's buffer, so reading allocates no intermediate chunks."""
        got = 0
        n = len(view)
        while got < n:
            k = self._readinto(view[got:], n - got)
            if not k:
                self.close()
                raise OSError("connection closed by the broker")
            got += k

    def _recv_byte(self) -> int:
        self._recv_into(self._byte_view)
        return self._byte[0]

    def _readable(self, timeout_ms: int | None) -> bool:
        pending = getattr(self.sock, "pending", None)  # CPython TLS may buffer decrypted data
        if pending is not None and pending():
            return True
        return bool(self._poller.poll(-1 if timeout_ms is None else timeout_ms))

    def _read_packet(
        self, timeout_ms: int | None, expecting: str | None
    ) -> "tuple[int, int, bytes | bytearray] | None":
        """(type, first byte, body) of the next packet, or None when ``timeout_ms`` passed
        without one (then MQTTError if ``expecting`` names a packet the broker owes us)."""
        if self.sock is None:
            raise OSError("not connected: call connect() first")
        if not self._readable(timeout_ms):
            if expecting is not None:
                self.close()
                raise OSError("no %s from the broker within %s ms" % (expecting, timeout_ms))
            return None
        first = self._recv_byte()
        remaining = 0
        shift = 0
        while True:
            b = self._recv_byte()
            remaining |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 21:
                self.close()
                raise MQTTError(packets.MALFORMED, "remaining length longer than 4 bytes")
        if remaining + 5 > self.max_packet_size:
            self.close()
            raise MQTTError(
                0x95,
                "broker sent a %d-byte packet; max_packet_size is %d"
                % (remaining, self.max_packet_size),
            )
        body = bytearray(remaining)  # the one allocation per incoming packet
        if remaining:
            self._recv_into(memoryview(body))
        return first >> 4, first, body

    def _wait_for(self, ptype: int, packet_id: int) -> bytes | bytearray:
        """Body of the ack ``ptype`` for ``packet_id``; handles other packets meanwhile."""
        deadline = time.ticks_add(time.ticks_ms(), self.timeout_ms)
        while True:
            left = time.ticks_diff(deadline, time.ticks_ms())
            got = self._read_packet(max(left, 0), "acknowledgement %d" % packet_id)
            assert got is not None  # _read_packet raises instead when something is owed
            t, first, body = got
            if t == ptype and len(body) >= 2 and ((body[0] << 8) | body[1]) == packet_id:
                return body
            self._handle(t, first, body)

    def _handle(self, ptype: int, first: int, body: bytes | bytearray) -> None:
        if ptype == packets.PUBLISH:
            topic, payload, qos, _retain, packet_id, _props = packets.parse_publish(first, body)
            if qos == 1:
                self._send(packets.ack(packets.PUBACK, packet_id))
            elif qos == 2:
                self._send(packets.ack(packets.PUBREC, packet_id))
                if packet_id in self._qos2_received:
                    return  # a resend before PUBREL: delivered once already
                self._qos2_received.add(packet_id)
            if topic == self._claims_topic:
                self._claims_answer = payload
            elif self.callback is not None:
                self.callback(topic, payload)
        elif ptype == packets.PUBREL:
            packet_id, _, _ = packets.parse_ack(body)
            self._qos2_received.discard(packet_id)
            self._send(packets.ack(packets.PUBCOMP, packet_id))
        elif ptype == packets.PINGRESP:
            self._ping_sent = None
        elif ptype == packets.DISCONNECT:
            reason, props = packets.parse_reason_and_properties(body)
            self.close()
            raise MQTTError(
                reason, "broker sent DISCONNECT%s" % _explain(props.get(packets.REASON_STRING))
            )
        elif ptype == packets.AUTH:
            reason, props = packets.parse_reason_and_properties(body)
            if reason == 0 and props.get(packets.AUTH_METHOD) == SMOKER and self._reauthenticating:
                self._reauthenticating = False  # AUTH 0x00: re-authentication succeeded
            else:
                self._answer_auth(body)
        elif ptype in (
            packets.CONNECT,
            packets.SUBSCRIBE,
            packets.UNSUBSCRIBE,
            packets.PINGREQ,
            packets.CONNACK,
        ):
            self.close()
            raise MQTTError(packets.PROTOCOL_ERROR, "broker sent packet type %d" % ptype)
        # late acks of requests we stopped waiting for are dropped


def _explain(reason_string: str | None) -> str:
    return ": " + reason_string if reason_string else ""

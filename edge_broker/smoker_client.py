"""A small asyncio MQTT 5 client that speaks SMOKER (SMOKER.md), for tests, provisioning and users.

    key = edge_broker.keys.load_signing_key("owner.key")
    async with SmokerClient("gateway.local", 1883, key) as client:   # enhanced auth "SMOKER"
        ack = await client.claim(Restriction(...))                  # signed here; PUBACK code
        await client.subscribe(f"restricted/{client.client_id}/#")
        await client.publish(f"restricted/{client.client_id}/temperature", b"21.5", qos=1)
        message = await client.next_message(timeout=5)
        await client.unclaim(f"restricted/{client.client_id}/temperature")

Without a key it connects as a plain MQTT 5 client (any Client Identifier), which is what the
tests need to show that non-SMOKER clients cannot touch the restricted area. Built on the
project's sans-io codec (``edge_broker.mqtt.codec``); one reader task decodes what the broker
sends and resolves the waiting calls. QoS 1 and 2 both ways; keep-alive pings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from nacl.signing import SigningKey

from .claims.model import Restriction
from .claims.signature import sign_restriction
from .claims.smoker_id import smoker_id
from .claims.topics import (
    CLAIM_TOPIC,
    UNCLAIM_TOPIC,
    claims_request_topic,
    claims_response_topic,
)
from .mqtt.codec import PacketReader, ProtocolError, encode
from .mqtt.packet_ids import MAX_PACKET_ID, free_packet_id
from .mqtt.packets import (
    NO_PROPERTIES,
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
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
    Unsuback,
    Unsubscribe,
)
from .mqtt.reason_codes import ReasonCode

SMOKER_METHOD = "SMOKER"
LEVEL = 5


class SmokerClientError(Exception):
    """The broker refused something or went away; ``reason_code`` says what (MQTT 5 codes)."""

    def __init__(self, reason_code: int, message: str) -> None:
        super().__init__(message)
        self.reason_code = reason_code
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} (0x{self.reason_code:02X})"


@dataclass(frozen=True, slots=True)
class Ack:
    """The broker's answer to a QoS 1/2 PUBLISH (PUBACK or PUBREC): code and Reason String."""

    reason_code: int
    reason_string: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason_code < 0x80


@dataclass(frozen=True, slots=True)
class Message:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    properties: Properties


class SmokerClient:
    """One MQTT 5 connection; SMOKER-authenticated when given a signing key."""

    def __init__(
        self,
        host: str,
        port: int,
        signing_key: SigningKey | None = None,
        *,
        client_id: str | None = None,
        keep_alive: int = 60,
        clean_start: bool = True,
        session_expiry: int = 0,
        tenant: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        if client_id is None:
            if signing_key is None:
                raise ValueError("give a signing key (SMOKER client) or a client_id (plain client)")
            client_id = smoker_id(signing_key.verify_key)
        self.host = host
        self.port = port
        self.signing_key = signing_key
        self.client_id = client_id
        self.keep_alive = keep_alive
        self.clean_start = clean_start
        self.session_expiry = session_expiry
        self.tenant = tenant
        self.timeout = timeout
        self.connack: Connack | None = None
        self.disconnect_packet: Disconnect | None = None
        self._reader = PacketReader(side="client", protocol_level=LEVEL)
        self._transport_reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._waiting: dict[tuple[type, int], asyncio.Future[Packet]] = {}
        self._packets: asyncio.Queue[Packet] = asyncio.Queue()
        self._messages: asyncio.Queue[Message] = asyncio.Queue()
        self._incoming_qos2: dict[int, Publish] = {}
        self._next_id = 0
        self._closed = asyncio.Event()

    # -- connection -------------------------------------------------------------------------------

    async def connect(self) -> Connack:
        """CONNECT (with the SMOKER exchange when keyed); ``SmokerClientError`` if refused."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port), self.timeout
        )
        self._transport_reader, self._writer = reader, writer
        user = (("tenant", self.tenant),) if self.tenant is not None else ()
        props = Properties(
            session_expiry_interval=self.session_expiry or None,
            authentication_method=SMOKER_METHOD if self.signing_key else None,
            user_properties=user,
        )
        self._send(
            Connect(LEVEL, self.client_id, self.clean_start, self.keep_alive, properties=props)
        )
        self._tasks.append(asyncio.get_running_loop().create_task(self._read_loop()))
        try:
            packet = await self._handshake()
        except BaseException:
            await self._close_transport()
            raise
        self.connack = packet
        if packet.reason_code != ReasonCode.SUCCESS:
            await self._close_transport()
            raise SmokerClientError(
                packet.reason_code, packet.properties.reason_string or "connection refused"
            )
        if self.keep_alive:
            keep = packet.properties.server_keep_alive or self.keep_alive
            self._tasks.append(asyncio.get_running_loop().create_task(self._ping_loop(keep)))
        return packet

    async def _handshake(self) -> Connack:
        """Answer the broker's AUTH challenges until its CONNACK arrives."""
        while True:
            packet = await self._next_packet()
            if isinstance(packet, Auth):
                self._answer_challenge(packet)
            elif isinstance(packet, Connack):
                return packet
            else:
                raise SmokerClientError(
                    ReasonCode.PROTOCOL_ERROR, f"expected CONNACK or AUTH, got {packet!r}"
                )

    def _answer_challenge(self, packet: Auth) -> None:
        nonce = packet.properties.authentication_data
        if self.signing_key is None or packet.properties.authentication_method != SMOKER_METHOD:
            raise SmokerClientError(
                ReasonCode.BAD_AUTHENTICATION_METHOD,
                f"unexpected AUTH with method {packet.properties.authentication_method!r}",
            )
        if packet.reason_code != ReasonCode.CONTINUE_AUTHENTICATION or not nonce:
            raise SmokerClientError(ReasonCode.PROTOCOL_ERROR, "AUTH without a nonce")
        signed = bytes(self.signing_key.sign(nonce))  # attached: signature + nonce
        self._send(
            Auth(
                ReasonCode.CONTINUE_AUTHENTICATION,
                Properties(authentication_method=SMOKER_METHOD, authentication_data=signed),
            )
        )

    async def disconnect(self, reason_code: int = 0) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._send(Disconnect(reason_code))
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()
        await self._close_transport()

    async def __aenter__(self) -> SmokerClient:
        await self.connect()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.disconnect()

    # -- SMOKER -----------------------------------------------------------------------------------

    async def claim(self, restriction: Restriction, qos: int = 1) -> Ack:
        """Sign ``restriction`` with this client's key and publish it to ``access/claim``."""
        if self.signing_key is None:
            raise ValueError("a plain client has no key to sign claims with")
        payload = sign_restriction(self.signing_key, restriction).to_json().encode("utf-8")
        return await self.claim_payload(payload, qos)

    async def claim_payload(self, payload: bytes, qos: int = 1) -> Ack:
        """Publish an already signed claim (e.g. from ``edge-broker claim sign``)."""
        ack = await self.publish(CLAIM_TOPIC, payload, qos=qos)
        assert ack is not None or qos == 0
        return ack if ack is not None else Ack(ReasonCode.SUCCESS)

    async def unclaim(self, topic: str, qos: int = 1) -> Ack:
        ack = await self.publish(UNCLAIM_TOPIC, topic.encode("utf-8"), qos=qos)
        return ack if ack is not None else Ack(ReasonCode.SUCCESS)

    async def request_claims(self, timeout: float | None = None) -> dict[str, Any]:
        """The claim information of SMOKER.md (subscribes to the response topic first), every
        page of it: edge-broker answers in pages chained by ``nextPage`` (claims/info.py)."""
        response = claims_response_topic(self.client_id)
        await self.subscribe(response, qos=1)
        merged: dict[str, Any] | None = None
        payload = b""
        while True:
            ack = await self.publish(
                claims_request_topic(self.client_id),
                payload,
                qos=1,
                properties=Properties(response_topic=response),
            )
            if ack is not None and not ack.ok:
                raise SmokerClientError(
                    ack.reason_code, ack.reason_string or "claims request refused"
                )
            while True:
                message = await self.next_message(timeout)
                if message.topic == response:
                    break
            body: dict[str, Any] = json.loads(message.payload)
            cursor = body.pop("nextPage", None)
            if merged is None:
                merged = body
            else:
                merged["ownedClaims"] += body["ownedClaims"]
                merged["involvedClaims"] += body["involvedClaims"]
            if cursor is None:
                return merged
            payload = json.dumps({"after": cursor}).encode()

    # -- MQTT -------------------------------------------------------------------------------------

    async def publish(
        self,
        topic: str,
        payload: bytes,
        qos: int = 0,
        retain: bool = False,
        properties: Properties = NO_PROPERTIES,
    ) -> Ack | None:
        """PUBLISH; for QoS 1/2 wait for the PUBACK/PUBREC (and finish QoS 2) and return it."""
        if qos == 0:
            self._send(Publish(topic, payload, 0, retain, properties=properties))
            return None
        pid = self._packet_id()
        kind: type = Puback if qos == 1 else Pubrec
        future = self._expect(kind, pid)
        self._send(Publish(topic, payload, qos, retain, packet_id=pid, properties=properties))
        ack = await self._wait(future)
        assert isinstance(ack, Puback | Pubrec)
        if isinstance(ack, Pubrec) and ack.reason_code < 0x80:
            done = self._expect(Pubcomp, pid)
            self._send(Pubrel(pid))
            await self._wait(done)
        return Ack(ack.reason_code, ack.properties.reason_string)

    async def subscribe(
        self, topic_filter: str | Sequence[str], qos: int = 1, **options: Any
    ) -> tuple[int, ...]:
        """SUBSCRIBE to one or several filters; the SUBACK reason codes, one per filter."""
        filters = [topic_filter] if isinstance(topic_filter, str) else list(topic_filter)
        pid = self._packet_id()
        future = self._expect(Suback, pid)
        subs = tuple(Subscription(f, qos, **options) for f in filters)
        self._send(Subscribe(pid, subs))
        suback = await self._wait(future)
        assert isinstance(suback, Suback)
        return suback.reason_codes

    async def unsubscribe(self, topic_filter: str | Sequence[str]) -> tuple[int, ...]:
        filters = (topic_filter,) if isinstance(topic_filter, str) else tuple(topic_filter)
        pid = self._packet_id()
        future = self._expect(Unsuback, pid)
        self._send(Unsubscribe(pid, filters))
        unsuback = await self._wait(future)
        assert isinstance(unsuback, Unsuback)
        return unsuback.reason_codes

    async def next_message(self, timeout: float | None = None) -> Message:
        """The next message the broker delivered; ``TimeoutError`` when none comes in time."""
        getter = self._messages.get()
        if self._closed.is_set() and self._messages.empty():
            getter.close()
            raise self._gone()
        return await asyncio.wait_for(getter, timeout if timeout is not None else self.timeout)

    async def no_message(self, within: float = 0.3) -> None:
        """Assert that nothing is delivered ``within`` seconds (for leak tests)."""
        try:
            message = await self.next_message(within)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected message on {message.topic!r}: {message.payload[:80]!r}")

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # -- internals --------------------------------------------------------------------------------

    def _send(self, packet: Packet) -> None:
        if self._writer is None or self._writer.is_closing():
            raise self._gone()
        self._writer.write(encode(packet, LEVEL))

    def _packet_id(self) -> int:
        waiting = {pid for _, pid in self._waiting}
        pid = free_packet_id(self._next_id % MAX_PACKET_ID + 1, waiting)
        if pid is None:
            raise SmokerClientError(
                ReasonCode.RECEIVE_MAXIMUM_EXCEEDED, "no free packet identifier"
            )
        self._next_id = pid
        return pid

    def _expect(self, kind: type, pid: int) -> asyncio.Future[Packet]:
        future: asyncio.Future[Packet] = asyncio.get_running_loop().create_future()
        self._waiting[(kind, pid)] = future
        return future

    async def _wait(self, future: asyncio.Future[Packet]) -> Packet:
        try:
            return await asyncio.wait_for(future, self.timeout)
        finally:
            for key, waiting in list(self._waiting.items()):
                if waiting is future:
                    del self._waiting[key]

    async def _next_packet(self) -> Packet:
        getter = asyncio.ensure_future(self._packets.get())
        closed = asyncio.ensure_future(self._closed.wait())
        done, _ = await asyncio.wait(
            {getter, closed}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if getter in done:
            closed.cancel()
            return getter.result()
        getter.cancel()
        closed.cancel()
        if not done:
            raise SmokerClientError(ReasonCode.UNSPECIFIED_ERROR, "the broker did not answer")
        raise self._gone()

    def _gone(self) -> SmokerClientError:
        d = self.disconnect_packet
        if d is not None:
            return SmokerClientError(
                d.reason_code, d.properties.reason_string or "disconnected by the broker"
            )
        return SmokerClientError(ReasonCode.UNSPECIFIED_ERROR, "the connection is closed")

    async def _read_loop(self) -> None:
        assert self._transport_reader is not None
        try:
            while True:
                data = await self._transport_reader.read(65536)
                if not data:
                    break
                for packet in self._reader.feed(data):
                    self._dispatch(packet)
        except (ConnectionError, ProtocolError):
            pass
        finally:
            self._closed.set()
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(self._gone())

    def _dispatch(self, packet: Packet) -> None:
        if isinstance(packet, Publish):
            self._receive(packet)
            return
        if isinstance(packet, Pubrel):
            self._send(Pubcomp(packet.packet_id))
            held = self._incoming_qos2.pop(packet.packet_id, None)
            if held is not None:
                self._deliver(held)
            return
        if isinstance(packet, Disconnect):
            self.disconnect_packet = packet
            return
        if isinstance(packet, Pingresp):
            return
        pid = getattr(packet, "packet_id", None)
        if pid is not None:
            future = self._waiting.pop((type(packet), pid), None)
            if future is not None and not future.done():
                future.set_result(packet)
            return
        self._packets.put_nowait(packet)  # CONNACK, AUTH

    def _receive(self, packet: Publish) -> None:
        if packet.qos == 1 and packet.packet_id is not None:
            self._send(Puback(packet.packet_id))
        elif packet.qos == 2 and packet.packet_id is not None:
            self._incoming_qos2[packet.packet_id] = packet  # delivered once, at PUBREL
            self._send(Pubrec(packet.packet_id))
            return
        self._deliver(packet)

    def _deliver(self, packet: Publish) -> None:
        self._messages.put_nowait(
            Message(packet.topic, packet.payload, packet.qos, packet.retain, packet.properties)
        )

    async def _ping_loop(self, keep_alive: int) -> None:
        with contextlib.suppress(SmokerClientError, ConnectionError):
            while not self._closed.is_set():
                await asyncio.sleep(max(1.0, keep_alive * 0.5))
                self._send(Pingreq())

    async def _close_transport(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        self._closed.set()
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()

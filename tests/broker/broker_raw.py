"""A minimal blocking MQTT client over a raw socket, built on the project's codec, for
protocol tests that must send exactly the bytes they want and see exactly what comes back.

Beside it, the small helpers the broker tests share: :class:`RawClients` (a fixture's set of
clients, all closed at teardown), :func:`unique_id` (client ids and topics that no other test
uses) and :func:`rss_kib` (a broker process's resident memory)."""

from __future__ import annotations

import socket
import time
import uuid
from typing import Any, Protocol, TypeVar

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    NO_PROPERTIES,
    Connack,
    Connect,
    Packet,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from scripts.procs import rss_kib as rss_kib  # re-exported: the tests' one RSS reader

P = TypeVar("P")


class ClientPackets:
    """The packet-level steps RawClient (real sockets) and the in-memory harness's client share:
    they differ only in how bytes travel (``send`` / ``expect``)."""

    level: int

    def send(self, packet: Packet) -> None:
        raise NotImplementedError

    def expect(self, kind: type[P]) -> P:
        raise NotImplementedError

    def connect(
        self,
        client_id: str = "",
        clean: bool = True,
        keep_alive: int = 60,
        properties: Properties = NO_PROPERTIES,
        **kw: Any,
    ) -> Connack:
        name = "MQIsdp" if self.level == 3 else "MQTT"
        self.send(
            Connect(
                self.level,
                client_id,
                clean,
                keep_alive,
                properties=properties,
                protocol_name=name,
                **kw,
            )
        )
        return self.expect(Connack)

    def subscribe(self, topic_filter: str, qos: int = 0, packet_id: int = 1) -> Suback:
        """SUBSCRIBE to one filter with default options; returns the SUBACK (codes unchecked)."""
        self.send(Subscribe(packet_id, (Subscription(topic_filter, qos),)))
        return self.expect(Suback)


class RawClient(ClientPackets):
    def __init__(self, host: str, port: int, level: int = 5, timeout: float = 5.0) -> None:
        self.level = level
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = PacketReader(side="client", protocol_level=level)
        self.pending: list[Packet] = []
        self.eof = False

    def send(self, packet: Packet) -> None:
        self.sock.sendall(encode(packet, self.level))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 5.0) -> Packet:
        """The next packet; TimeoutError if none, EOFError if the broker closed."""
        deadline = time.monotonic() + timeout
        while not self.pending:
            if self.eof:
                raise EOFError("connection closed by the broker")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no packet from the broker")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                raise TimeoutError("no packet from the broker") from None
            except ConnectionResetError:
                data = b""
            if not data:
                self.eof = True
                continue
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def expect(self, kind: type[P], timeout: float = 5.0) -> P:
        packet = self.recv(timeout)
        assert isinstance(packet, kind), f"expected {kind.__name__}, got {packet!r}"
        return packet

    def nothing(self, timeout: float = 0.3) -> None:
        try:
            packet = self.recv(timeout)
        except TimeoutError:
            return
        raise AssertionError(f"unexpected packet {packet!r}")

    def publishes(self, window: float) -> list[Publish]:
        """Every PUBLISH that arrives in the next ``window`` seconds (other packets are
        dropped); QoS 1 ones are acknowledged with PUBACK, QoS 2 ones are left unanswered."""
        got: list[Publish] = []
        deadline = time.monotonic() + window
        while time.monotonic() < deadline:
            try:
                packet = self.recv(0.1)
            except TimeoutError:
                continue
            if isinstance(packet, Publish):
                got.append(packet)
                if packet.qos == 1 and packet.packet_id:
                    self.send(Puback(packet.packet_id))
        return got

    def closed(self, timeout: float = 5.0) -> list[Packet]:
        """Wait for the broker to close; return the packets it sent before closing."""
        got: list[Packet] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                got.append(self.recv(max(0.01, deadline - time.monotonic())))
            except EOFError:
                return got
            except TimeoutError:
                raise AssertionError(f"broker did not close; got {got!r}") from None

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BrokerAddress(Protocol):
    """What :class:`RawClients` needs of a broker (tests/conftest.py's RunningBroker and
    InProcessBroker both have it)."""

    host: str
    port: int


class RawClients:
    """Opens :class:`RawClient` connections to one broker and closes them all on exit, so a
    fixture can hand tests a factory::

        @pytest.fixture
        def client(module_broker):
            with RawClients(module_broker) as make:
                yield make          # make() / make(level=4) -> RawClient
    """

    def __init__(self, broker: BrokerAddress, level: int = 5) -> None:
        self.broker = broker
        self.level = level
        self.clients: list[RawClient] = []

    def __call__(self, level: int | None = None) -> RawClient:
        c = RawClient(self.broker.host, self.broker.port, self.level if level is None else level)
        self.clients.append(c)
        return c

    def close(self) -> None:
        for c in self.clients:
            c.close()

    def __enter__(self) -> RawClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def unique_id(prefix: str = "") -> str:
    """``prefix`` and 12 random hex digits: a client id (at most 23 characters, as MQTT 3.1
    requires, for a prefix of up to 11) or topic level that no other test, worker or run uses."""
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def raw_publish(
    topic: str, properties: bytes, payload: bytes = b"", qos: int = 0, packet_id: int = 0
) -> bytes:
    """An MQTT 5 PUBLISH with a raw property block (fast to build for megabyte blocks)."""
    t = topic.encode()
    body = len(t).to_bytes(2, "big") + t
    if qos:
        body += packet_id.to_bytes(2, "big")
    body += varint(len(properties)) + properties + payload
    return bytes((0x30 | qos << 1,)) + varint(len(body)) + body

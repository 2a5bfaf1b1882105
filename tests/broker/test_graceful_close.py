"""A server-initiated DISCONNECT or a refused CONNACK reaches a client that has sent more
packets behind the one that ended its connection (broker/graceful_close.py).

The broker used to close its socket at once: the client's next packet then met a closed socket,
the kernel answered with RST, and the client's next send failed with a broken pipe before it
read the reason code (an interop suite's flow-control test saw exactly that instead of 0x93).
Now the broker half-closes, reads and discards for a bounded time and number of bytes, then
closes: over TCP, TLS and WebSocket the client's sends go on succeeding until it reads the
DISCONNECT, and a client that abuses the wait loses the socket at the bound.

The clients are raw sockets (and the ``websockets`` sans-io client over one), so that each test
decides exactly when it reads. Between the packets a client sends after the broker's answer it
waits a few milliseconds, as a device publishing at a steady rate does: the reset of the old
close needs that long to come back over loopback.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any

import pytest
from broker_raw import unique_id
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from edge_broker.auth.password import PasswordEntry, hash_password, write_password_file
from edge_broker.broker.graceful_close import DRAIN_BYTES
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Disconnect,
    Packet,
    Publish,
    Pubrec,
    Subscribe,
    Subscription,
)
from tests.conftest import RunningBroker, start_broker
from tests.ops.tls_files import make_pki

RECEIVE_MAXIMUM = 4
LATER_SENDS = 8  # packets a client sends after the broker's answer, before it reads


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """One broker with a TCP, a TLS, a WebSocket and a password listener."""
    d = tmp_path_factory.mktemp("graceful")
    pki = make_pki(d, {"server": "localhost"})
    pw = d / "passwords"
    write_password_file(pw, {"dev": PasswordEntry("dev", hash_password("right"))})
    tls = {"tls_cert": str(pki / "server.pem"), "tls_key": str(pki / "server.key")}
    b = start_broker(
        d / "broker",
        {
            "listeners": [
                {"name": "tcp", "bind": "127.0.0.1", "port": 0},
                {"name": "tls", "bind": "127.0.0.1", "port": 0, "transport": "tls", **tls},
                {"name": "ws", "bind": "127.0.0.1", "port": 0, "transport": "websocket"},
                {"name": "pw", "bind": "127.0.0.1", "port": 0, "auth_methods": ["password"]},
            ],
            "passwords": {"file": str(pw)},
            "limits": {"receive_maximum": RECEIVE_MAXIMUM, "max_connections": 1},
        },
    )
    b.pki = pki  # type: ignore[attr-defined]
    yield b
    b.stop()


class Pipe:
    """One client connection that sends and reads only when the test says so."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = PacketReader(side="client", protocol_level=5)
        self.got: list[Packet] = []

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def chunks(self) -> Iterator[bytes]:
        """What arrives until the broker closes (EOF or reset)."""
        while True:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return
            if not data:
                return
            yield data

    def packets(self, data: bytes) -> list[Packet]:
        return self.reader.feed(data)

    def read_until_closed(self) -> list[Packet]:
        for data in self.chunks():
            self.got.extend(self.packets(data))
        return self.got

    def expect_connack(self) -> Connack:
        while not self.got:
            data = self.sock.recv(65536)
            assert data, "the broker closed before its CONNACK"
            self.got.extend(self.packets(data))
        first = self.got.pop(0)
        assert isinstance(first, Connack), first
        return first

    def wait_readable(self) -> None:
        """Until the broker's answer has arrived (nothing is read)."""
        assert select.select([self.sock], [], [], 10)[0], "nothing came from the broker"

    def close(self) -> None:
        self.sock.close()


class TlsPipe(Pipe):
    def chunks(self) -> Iterator[bytes]:
        try:
            yield from super().chunks()
        except (ssl.SSLError, OSError):
            return


class WebSocketPipe(Pipe):
    """MQTT over WebSocket with the ``websockets`` sans-io client over a raw socket."""

    def __init__(self, sock: socket.socket, url: str) -> None:
        super().__init__(sock)
        self.ws = ClientProtocol(parse_uri(url), subprotocols=["mqtt"])  # type: ignore[list-item]
        self.ws.send_request(self.ws.connect())
        self._flush()
        while not isinstance(self._events(sock.recv(65536))[0], Response):
            pass
        self.closed_by_broker = False
        self.answer_close = True  # False: a client that never answers the broker's Close frame

    def _flush(self) -> None:
        for chunk in self.ws.data_to_send():
            if chunk:
                self.sock.sendall(chunk)

    def _events(self, data: bytes) -> list[Any]:
        self.ws.receive_data(data)
        return list(self.ws.events_received())

    def send(self, data: bytes) -> None:
        self.sock.sendall(self._mask(data))

    def _mask(self, data: bytes) -> bytes:
        # the frame as the client protocol would send it, without asking the protocol, which
        # refuses to send data once it has seen the broker's Close frame
        frame = Frame(Opcode.BINARY, data)
        return frame.serialize(mask=True, extensions=[])

    def packets(self, data: bytes) -> list[Packet]:
        out: list[Packet] = []
        for event in self._events(data):
            if isinstance(event, Frame) and event.opcode is Opcode.BINARY:
                out.extend(self.reader.feed(bytes(event.data)))
            elif isinstance(event, Frame) and event.opcode is Opcode.CLOSE:
                self.closed_by_broker = True
        if self.answer_close:
            self._flush()  # the answer to the broker's Close frame
        return out


def open_pipe(b: RunningBroker, listener: str) -> Pipe:
    sock = b.connect_socket(listener, timeout=10)
    if listener == "tls":
        ctx = ssl.create_default_context(cafile=str(b.pki / "ca.pem"))  # type: ignore[attr-defined]
        return TlsPipe(ctx.wrap_socket(sock, server_hostname="localhost"))
    if listener == "ws":
        return WebSocketPipe(sock, f"ws://{b.host}:{b.ports['ws']}/mqtt")
    return Pipe(sock)


def publish(topic: str, pid: int) -> bytes:
    return encode(Publish(topic, b"x" * 100, 2, packet_id=pid), 5)


def keep_sending(pipe: Pipe, topic: str, first_pid: int) -> None:
    """What a pipelining client sends after the broker answered, before it reads: each send
    must succeed (it used to fail with a broken pipe)."""
    for pid in range(first_pid, first_pid + LATER_SENDS):
        time.sleep(0.02)
        try:
            pipe.send(publish(topic, pid))
        except OSError as exc:
            pytest.fail(f"send {pid - first_pid + 1} after the broker's answer failed: {exc!r}")


@pytest.mark.parametrize("listener", ["tcp", "tls", "ws"])
def test_receive_maximum_exceeded_reaches_a_client_that_kept_sending(
    broker: RunningBroker, listener: str
) -> None:
    """Receive Maximum + 1 QoS 2 PUBLISH without reading, more packets, then read: 0x93."""
    pipe = open_pipe(broker, listener)
    try:
        pipe.send(encode(Connect(5, unique_id("gc"), True, 60), 5))
        assert pipe.expect_connack().reason_code == 0
        topic = unique_id("gc/")
        pipe.send(b"".join(publish(topic, pid) for pid in range(1, RECEIVE_MAXIMUM + 2)))
        pipe.wait_readable()
        keep_sending(pipe, topic, RECEIVE_MAXIMUM + 2)
        got = pipe.read_until_closed()
    finally:
        pipe.close()
    assert [type(p) for p in got] == [Pubrec] * RECEIVE_MAXIMUM + [Disconnect], got
    disconnect = got[-1]
    assert isinstance(disconnect, Disconnect) and disconnect.reason_code == 0x93
    if isinstance(pipe, WebSocketPipe):
        assert pipe.closed_by_broker  # the WebSocket closing handshake, not a dropped socket


def test_refused_connack_reaches_a_client_that_pipelined(broker: RunningBroker) -> None:
    """CONNECT with a wrong password, SUBSCRIBE and PUBLISH behind it at once, more packets:
    the client reads CONNACK 0x86."""
    pipe = open_pipe(broker, "pw")
    topic = unique_id("gc/")
    try:
        connect = Connect(5, unique_id("gc"), True, 60, username="dev", password=b"wrong")
        subscribe = Subscribe(1, (Subscription(topic, 1),))
        pipe.send(encode(connect, 5) + encode(subscribe, 5) + publish(topic, 2))
        pipe.wait_readable()
        keep_sending(pipe, topic, 3)
        got = pipe.read_until_closed()
    finally:
        pipe.close()
    assert len(got) == 1 and isinstance(got[0], Connack), got
    assert got[0].reason_code == 0x86


def test_a_closing_client_is_no_longer_counted(broker: RunningBroker) -> None:
    """While the socket of a disconnected client drains, the client id and the connection
    slot (max_connections = 1 here) are free: the device reconnects at once."""
    client_id = unique_id("gc")
    old = open_pipe(broker, "tcp")
    new = None
    try:
        old.send(encode(Connect(5, client_id, True, 60), 5))
        assert old.expect_connack().reason_code == 0
        topic = unique_id("gc/")
        old.send(b"".join(publish(topic, pid) for pid in range(1, RECEIVE_MAXIMUM + 2)))
        got = old.read_until_closed()  # DISCONNECT and FIN; the old socket stays open
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x93
        new = open_pipe(broker, "tcp")
        new.send(encode(Connect(5, client_id, True, 60), 5))
        assert new.expect_connack().reason_code == 0
    finally:
        old.close()
        if new is not None:
            new.close()


def _send_until_refused(pipe: Pipe, chunk: bytes, limit: int, pause: float = 0.0) -> int:
    """Bytes sent before the broker dropped the socket (fails past ``limit``)."""
    sent = 0
    while sent <= limit:
        time.sleep(pause)
        try:
            pipe.sock.sendall(chunk)
        except OSError:
            return sent
        sent += len(chunk)
    pytest.fail(f"the broker still took bytes after {sent} sent to a closing connection")


@pytest.mark.parametrize("listener", ["tcp", "tls", "ws"])
def test_the_drain_is_bounded(broker: RunningBroker, listener: str) -> None:
    """A client that keeps sending after its DISCONNECT is cut off once the broker has read
    and discarded its bound; one that reads the DISCONNECT but never closes is cut off when the
    time bound passes (one byte every 10 ms, for at most 30 s: far past the bound, far below
    the byte bound). Over TLS the end of the broker's output, close_notify, comes at the time
    bound, and the socket goes a grace period later. Over WebSocket the client here never
    answers the broker's Close frame (it cannot flood: its bytes must be frames)."""
    for flood in (True, False) if listener != "ws" else (False,):
        pipe = open_pipe(broker, listener)
        if isinstance(pipe, WebSocketPipe):
            pipe.answer_close = False
        try:
            pipe.send(encode(Connect(5, unique_id("gc"), True, 60), 5))
            assert pipe.expect_connack().reason_code == 0
            pipe.send(b"".join(publish(unique_id("gc/"), pid) for pid in range(1, 7)))
            if flood:
                pipe.wait_readable()
                # far more than the bound and the kernel buffers on both sides together
                limit = 64 * DRAIN_BYTES
                assert _send_until_refused(pipe, b"\0" * 65536, limit) < limit
            else:
                got = pipe.read_until_closed()
                assert isinstance(got[-1], Disconnect), got
                if isinstance(pipe, WebSocketPipe):
                    assert pipe.closed_by_broker
                assert _send_until_refused(pipe, b"\0", 3000, pause=0.01) < 3000
        finally:
            pipe.close()


def test_a_websocket_that_sent_nothing_to_protect_is_closed_at_once(broker: RunningBroker) -> None:
    """A connection the broker ends before sending it any MQTT byte (here: PINGREQ before
    CONNECT) has nothing a reset could destroy: its socket is closed at once, not held open
    waiting for a client that never answers the Close frame."""
    pipe = open_pipe(broker, "ws")
    assert isinstance(pipe, WebSocketPipe)
    pipe.answer_close = False
    pipe.sock.settimeout(1.5)  # below the drain's time bound: it must not be what ends this
    try:
        pipe.send(bytes([0xC0, 0]))  # PINGREQ
        assert pipe.read_until_closed() == []
    finally:
        pipe.close()

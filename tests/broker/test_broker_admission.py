"""Connection admission under abuse (issue 16): what a client that has not authenticated can
make the broker hold, half-open WebSockets, login storms. Real broker, real sockets."""

from __future__ import annotations

import socket
import time

from broker_raw import RawClient, rss_kib
from nacl.signing import SigningKey

from edge_broker.claims.smoker_id import smoker_id
from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Auth, Connack, Connect, Properties


def smoker_broker(broker_factory, tmp_path, **limits):
    return broker_factory({
        "listeners": [{"name": "tcp", "bind": "127.0.0.1", "auth_methods": ["smoker", "anonymous"]}],
        "claims": {"store_dir": str(tmp_path / "claims"), "fsync": "never"},
        "broker": {"connect_timeout": 30},
        **({"limits": limits} if limits else {}),
    })


def smoker_connect(user_properties: int) -> bytes:
    cid = smoker_id(SigningKey.generate().verify_key)
    props = Properties(authentication_method="SMOKER",
                       user_properties=(("", ""),) * user_properties)
    return encode(Connect(5, cid, True, 60, properties=props), 5)


def send_quietly(sock: socket.socket, data: bytes) -> None:
    """The broker may close while we still send (that is the point): ignore it."""
    try:
        sock.sendall(data)
    except OSError:
        pass


def test_huge_unauthenticated_connects_cost_no_memory(broker_factory, tmp_path):
    """20 CONNECTs with 1 MB of user properties each, waiting on SMOKER authentication, used to
    hold +114-133 MB until the connect timeout. Now each is refused from its fixed header."""
    b = smoker_broker(broker_factory, tmp_path)
    with RawClient(b.host, b.port) as warm:  # imports and first-connection costs paid before
        assert warm.connect("warm").reason_code == 0
    time.sleep(0.3)
    before = rss_kib(b.pid)
    clients = []
    for _ in range(20):
        c = RawClient(b.host, b.port)
        clients.append(c)
        send_quietly(c.sock, smoker_connect(200_000))  # ~1 MB of ("", "") pairs
    answers = []
    for c in clients:
        try:
            answers.append(c.recv(10))
        except (EOFError, TimeoutError) as exc:
            answers.append(exc)
    grown = rss_kib(b.pid) - before
    for c in clients:
        c.close()
    refused = [a for a in answers if isinstance(a, Connack)]
    assert len(refused) == 20, answers
    assert {a.reason_code for a in refused} == {0x95}
    assert "limits.max_connect_packet_size" in (refused[0].properties.reason_string or "")
    assert grown < 16 * 1024, f"the broker grew by {grown} KiB"
    assert "connection refused before authentication" in b.log()  # the limit's warning


def test_too_many_connect_user_properties_refused(broker_factory, tmp_path):
    b = smoker_broker(broker_factory, tmp_path, max_connect_user_properties=8)
    with RawClient(b.host, b.port) as c:
        c.send_raw(smoker_connect(9))
        ack = c.expect(Connack)
        assert ack.reason_code == 0x97
        assert "limits.max_connect_user_properties" in (ack.properties.reason_string or "")
        c.closed()
    with RawClient(b.host, b.port) as c:  # at the limit: the SMOKER exchange starts
        c.send_raw(smoker_connect(8))
        assert c.expect(Auth).reason_code == 0x18


def test_bytes_pipelined_before_authentication_are_bounded(broker_factory, tmp_path):
    """While SMOKER authentication runs, a client may not stream data at the broker: past twice
    limits.max_connect_packet_size before CONNACK it is refused (or closed, if its CONNECT was
    not even decoded yet), never buffered."""
    b = smoker_broker(broker_factory, tmp_path, max_connect_packet_size=4096)
    with RawClient(b.host, b.port) as c:
        send_quietly(c.sock, smoker_connect(0) + b"\xc0\x00" * 20_000)  # 40 KB of PINGREQ
        try:
            got = c.closed(10)
        except ConnectionResetError:
            got = []
        connacks = [p for p in got if isinstance(p, Connack)]
        assert all(p.reason_code == 0x97 for p in connacks), got
    assert "more than 8192 bytes sent before the CONNACK" in b.log()

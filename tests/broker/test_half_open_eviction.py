"""WebSocket upgrades that never finish (and sockets that never send CONNECT) cannot keep a real
client out: at the connection cap, the one that has waited longest without a CONNECT (at least
EVICT_AFTER seconds) is closed to make room. Adversary and victim side by side."""

from __future__ import annotations

import socket
import time

from edge_broker.broker.limits.fd_budget import EVICT_AFTER
from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Connack, Connect
from edge_broker.mqtt.reader import PacketReader
from tests.conftest import BrokerFactory


def test_unfinished_websocket_upgrades_do_not_lock_out_a_connect(
    broker_factory: BrokerFactory,
) -> None:
    b = broker_factory(
        {
            "listeners": [
                {"name": "tcp", "transport": "tcp"},
                {"name": "ws", "transport": "websocket"},
            ],
            # at most 20 + 64 sockets open; every socket here comes from 127.0.0.1, so the
            # per-source share (tests/broker/test_source_shares.py) is off: this is the cap
            "limits": {"max_connections": 20, "source_connection_share": 1.0},
            "broker": {"connect_timeout": 60.0},
        }
    )
    ws_port = int(b.log().split("listener ws (websocket) listening on 127.0.0.1:")[1].split()[0])
    adversary = []
    try:
        for _ in range(90):  # all the room there is, each an upgrade request never finished
            sock = socket.create_connection((b.host, ws_port), timeout=10)
            sock.sendall(b"GET /mqtt HTTP/1.1\r\nHost: broker\r\n")
            adversary.append(sock)
        time.sleep(EVICT_AFTER + 0.5)  # the victim comes later than the flood
        with socket.create_connection((b.host, b.port), timeout=10) as victim:
            victim.sendall(encode(Connect(5, "victim"), 5))
            reader = PacketReader(side="client", protocol_level=5)
            packets: list[object] = []
            while not packets:
                data = victim.recv(4096)
                assert data, "the victim's connection was closed without a CONNACK"
                packets = reader.feed(data)
            assert isinstance(packets[0], Connack) and packets[0].reason_code == 0
        # the room was the oldest waiting socket's: closed by the broker
        adversary[0].settimeout(10)
        assert adversary[0].recv(1) == b""
    finally:
        for sock in adversary:
            sock.close()

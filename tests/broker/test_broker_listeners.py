"""TLS and WebSocket listeners, SIGTERM, and the logs."""

from __future__ import annotations

import signal
import ssl
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from broker_raw import RawClient
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Disconnect,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from tests.ops.tls_files import make_pki
from tests.waiting import paho_subscribe, wait_for, wait_for_log


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    return make_pki(d, {"server": "localhost", "client": "device-7"})


def tls_config(pki: Path, require: bool) -> dict:
    return {
        "listeners": [
            {
                "name": "tls",
                "transport": "tls",
                "tls_cert": str(pki / "server.pem"),
                "tls_key": str(pki / "server.key"),
                "tls_ca": str(pki / "ca.pem"),
                "require_client_cert": require,
            }
        ]
    }


def tls_client(pki: Path, cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if cert:
        ctx.load_cert_chain(str(pki / "client.pem"), str(pki / "client.key"))
    return ctx


def paho_roundtrip(host: str, port: int, configure) -> list[bytes]:
    got: list[bytes] = []
    c = paho.Client(
        paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5, **configure.get("ctor", {})
    )
    if "tls" in configure:
        c.tls_set_context(configure["tls"])
    if "ws_path" in configure:
        c.ws_set_options(path=configure["ws_path"])
    c.on_message = lambda cl, u, m: got.append(m.payload)
    c.connect(host, port)
    c.loop_start()
    try:
        paho_subscribe(c, "tls/test", 1)
        c.publish("tls/test", b"over the wire", qos=1).wait_for_publish(5)
        wait_for(lambda: got, 5, "the message back")
    finally:
        c.disconnect()
        c.loop_stop()
    return got


def test_tls_with_optional_client_certificate(broker_factory, pki):
    b = broker_factory(tls_config(pki, require=False))
    assert paho_roundtrip(b.host, b.port, {"tls": tls_client(pki, cert=False)}) == [
        b"over the wire"
    ]
    assert paho_roundtrip(b.host, b.port, {"tls": tls_client(pki, cert=True)}) == [b"over the wire"]


def test_tls_required_client_certificate(broker_factory, pki):
    b = broker_factory(tls_config(pki, require=True))
    assert paho_roundtrip(b.host, b.port, {"tls": tls_client(pki, cert=True)}) == [b"over the wire"]
    wait_for_log(b, "cert_cn=device-7")  # the certificate's CN reaches the Identity
    raw = __import__("socket").create_connection((b.host, b.port))
    ctx = tls_client(pki, cert=False)
    with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.sendall(encode(Connect(5, "nocert"), 5))
        if not s.recv(10):
            raise ConnectionResetError("closed")


def test_websocket_listener(broker_factory):
    b = broker_factory({"listeners": [{"name": "ws", "transport": "websocket"}]})
    got = paho_roundtrip(b.host, b.port, {"ctor": {"transport": "websockets"}, "ws_path": "/mqtt"})
    assert got == [b"over the wire"]


def test_websocket_subprotocol_and_path(broker_factory):
    b = broker_factory(
        {"listeners": [{"name": "ws", "transport": "websocket", "websocket_path": "/custom"}]}
    )
    url = f"ws://{b.host}:{b.port}/custom"
    with ws_connect(url, subprotocols=["mqtt"]) as ws:
        assert ws.subprotocol == "mqtt"
        ws.send(encode(Connect(4, "ws-raw"), 4))
        reader = PacketReader(side="client", protocol_level=4)
        packets = reader.feed(ws.recv(timeout=5))
        assert isinstance(packets[0], Connack) and packets[0].reason_code == 0
    with pytest.raises(InvalidStatus, match="404"):
        with ws_connect(f"ws://{b.host}:{b.port}/wrong", subprotocols=["mqtt"]):
            pass
    with pytest.raises(InvalidStatus, match="400"):
        with ws_connect(url):  # no mqtt subprotocol offered
            pass


def test_tcp_and_websocket_listeners_share_topics(broker_factory):
    b = broker_factory({"listeners": [{"name": "tcp"}, {"name": "ws", "transport": "websocket"}]})
    with ws_connect(f"ws://{b.host}:{b.ports['ws']}/mqtt", subprotocols=["mqtt"]) as ws:
        reader = PacketReader(side="client", protocol_level=5)
        ws.send(encode(Connect(5, "ws-sub"), 5))
        ws.send(encode(Subscribe(1, (Subscription("shared/x", 0),)), 5))
        packets: list = []
        while len(packets) < 2:
            packets += reader.feed(ws.recv(timeout=5))
        assert isinstance(packets[1], Suback)
        with RawClient(b.host, b.ports["tcp"]) as pub:
            pub.connect("tcp-pub")
            pub.send(Publish("shared/x", b"across", 0))
            packets = []
            while not packets:
                packets = reader.feed(ws.recv(timeout=5))
            assert packets[0].payload == b"across"


def test_sigterm_sends_0x8b_and_exits_zero(broker_factory):
    b = broker_factory(args=("--log-format", "json"))
    v5 = RawClient(b.host, b.port, 5)
    v5.connect("v5-client")
    v3 = RawClient(b.host, b.port, 4)
    v3.connect("v3-client")
    b.process.send_signal(signal.SIGTERM)
    got = v5.closed()
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x8B
    assert v3.closed() == []
    assert b.process.wait(10) == 0
    events = [r.get("event") for r in b.json_log()]
    assert "listening" in events and "connect" in events and "shutdown" in events


def test_json_log_has_protocol_errors_with_client_id_and_reason(broker_factory):
    b = broker_factory(args=("--log-format", "json"))
    with RawClient(b.host, b.port) as c:
        c.connect("bad-one")
        c.send_raw(b"\x30\x00")
        c.closed()
    wait_for(lambda: any(r.get("event") == "disconnect" for r in b.json_log()), what=b.log)
    errors = [r for r in b.json_log() if r.get("event") == "protocol_error"]
    assert errors and errors[0]["client_id"] == "bad-one" and errors[0]["reason_code"] == "0x81"
    disconnects = [r for r in b.json_log() if r.get("event") == "disconnect"]
    assert disconnects and disconnects[0]["client_id"] == "bad-one" and disconnects[0]["reason"]


def test_text_log_readable(broker_factory):
    b = broker_factory()
    with RawClient(b.host, b.port) as c:
        c.connect("texty")
    wait_for_log(b, "client connected client_id=texty")
    assert "interface=lo" in b.log()


def test_websocket_over_tls(broker_factory, pki):
    b = broker_factory(
        {
            "listeners": [
                {
                    "name": "wss",
                    "transport": "websocket",
                    "websocket_tls": True,
                    "tls_cert": str(pki / "server.pem"),
                    "tls_key": str(pki / "server.key"),
                }
            ]
        }
    )
    ctx = tls_client(pki, cert=False)
    with ws_connect(f"wss://localhost:{b.port}/mqtt", subprotocols=["mqtt"], ssl=ctx) as ws:
        ws.send(encode(Connect(5, "wss-client"), 5))
        packets = PacketReader(side="client", protocol_level=5).feed(ws.recv(timeout=5))
        assert isinstance(packets[0], Connack) and packets[0].reason_code == 0

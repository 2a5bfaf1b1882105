"""The bridge over TLS with mutual authentication to Mosquitto, and over WebSocket to a second
edge-broker (issue 19): certificates made with openssl as in
tests/broker/test_broker_listeners.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from bridge_support import Collector, gateway_toml, publish, sys_value, wait_log

from tests.ops.tls_files import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    return make_pki(d, {"server": "localhost", "client": "gw-0042"})


def mosquitto_tls(pki: Path) -> str:
    return (
        f"cafile {pki / 'ca.pem'}\ncertfile {pki / 'server.pem'}\nkeyfile {pki / 'server.key'}\n"
        "require_certificate true\nuse_identity_as_username true\n"
    )


def tls_bridge(port: int, pki: Path, **extra: object) -> dict:
    return {
        "name": "cloud",
        "address": "127.0.0.1",
        "port": port,
        "transport": "tls",
        "tls_ca": str(pki / "ca.pem"),
        "tls_cert": str(pki / "client.pem"),
        "tls_key": str(pki / "client.key"),
        "tls_server_name": "localhost",
        "client_id": "gw-tls",
        "topics": [
            {
                "direction": "both",
                "local": "tls/#",
                "local_prefix": "tls/",
                "remote_prefix": "site/",
                "qos": 1,
            }
        ],
        **extra,
    }


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_tls_mutual_authentication_round_trip(
    protocol, pki, broker_factory, mosquitto_factory, tmp_path
):
    cloud = mosquitto_factory(mosquitto_tls(pki))
    gw = broker_factory(gateway_toml([tls_bridge(cloud.port, pki, protocol=protocol)]))
    wait_log(gw, "bridge cloud connected")
    # Mosquitto took the client certificate's CN as the user name: mutual authentication happened
    assert "u'gw-0042'" in cloud.log()
    import threading

    import paho.mqtt.client as paho

    seen: list[tuple[str, bytes]] = []
    arrived = threading.Event()
    subscribed = threading.Event()
    cloud_client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    cloud_client.tls_set(
        ca_certs=str(pki / "ca.pem"),
        certfile=str(pki / "client.pem"),
        keyfile=str(pki / "client.key"),
    )
    cloud_client.on_message = lambda cl, u, m: (seen.append((m.topic, m.payload)), arrived.set())
    cloud_client.on_subscribe = lambda *a: subscribed.set()
    cloud_client.connect("localhost", cloud.port)
    cloud_client.loop_start()
    down = Collector(gw.port, [("tls/#", 1)])
    try:
        cloud_client.subscribe("site/#", 1)
        assert subscribed.wait(5)
        publish(gw.port, [("tls/up", b"over tls", 1)])
        assert arrived.wait(10)
        cloud_client.publish("site/down", b"from the cloud", 1).wait_for_publish(5)
        # the local copy of tls/up and the cloud's site/down; the cloud does not echo tls/up
        got = down.wait_for(2, 10)
    finally:
        down.close()
        cloud_client.loop_stop()
        cloud_client.disconnect()
    assert seen[0] == ("site/up", b"over tls")
    assert sorted(got) == [
        ("tls/down", b"from the cloud", 1, False),
        ("tls/up", b"over tls", 1, False),
    ]
    assert (
        sys_value(
            gw.port, "$SYS/broker/bridge/cloud/messages/acknowledged", until=lambda v: v == "1"
        )
        == "1"
    )


def test_tls_without_client_certificate_is_refused_and_reported(
    pki, broker_factory, mosquitto_factory
):
    cloud = mosquitto_factory(mosquitto_tls(pki))
    b = tls_bridge(cloud.port, pki)
    del b["tls_cert"], b["tls_key"]
    gw = broker_factory(gateway_toml([b]))
    text = wait_log(gw, "bridge cloud cannot connect")
    assert "bridge cloud connected" not in text
    assert sys_value(gw.port, "$SYS/broker/bridge/cloud/connected") == "0"
    assert sys_value(gw.port, "$SYS/broker/bridge/cloud/last_error", until=bool) != ""


def test_tls_server_name_is_checked(pki, broker_factory, mosquitto_factory):
    cloud = mosquitto_factory(mosquitto_tls(pki))
    gw = broker_factory(
        gateway_toml([tls_bridge(cloud.port, pki, tls_server_name="cloud.example.com")])
    )
    text = wait_log(gw, "bridge cloud cannot connect")
    assert "certificate" in text.lower() or "hostname" in text.lower()


def test_websocket_transport_to_a_second_edge_broker(broker_factory):
    cloud = broker_factory(
        {"listeners": [{"name": "ws", "transport": "websocket", "bind": "127.0.0.1"}]}
    )
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "transport": "websocket",
                    "websocket_path": "/mqtt",
                    "topics": [
                        {"direction": "out", "local": "ws/#", "remote_prefix": "site/", "qos": 1}
                    ],
                }
            ]
        )
    )
    wait_log(gw, "bridge cloud connected")
    import paho.mqtt.client as paho

    got: list[bytes] = []
    import threading

    event = threading.Event()
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, transport="websockets", protocol=paho.MQTTv5)
    c.ws_set_options(path="/mqtt")
    c.on_message = lambda cl, u, m: (got.append(m.payload), event.set())
    subscribed = threading.Event()
    c.on_subscribe = lambda *a: subscribed.set()
    c.connect("127.0.0.1", cloud.port)
    c.loop_start()
    try:
        c.subscribe("site/#", 1)
        assert subscribed.wait(5)
        publish(gw.port, [("ws/a", b"over websocket", 1)])
        assert event.wait(10)
    finally:
        c.loop_stop()
        c.disconnect()
    assert got == [b"over websocket"]


def test_websocket_handshake_refused_is_reported(broker_factory):
    cloud = broker_factory(
        {"listeners": [{"name": "ws", "transport": "websocket", "bind": "127.0.0.1"}]}
    )
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "transport": "websocket",
                    "websocket_path": "/wrong",
                    "topics": [{"direction": "out", "local": "ws/#", "qos": 1}],
                }
            ]
        )
    )
    text = wait_log(gw, "bridge cloud cannot connect")
    assert "WebSocket handshake" in text
    assert "Traceback" not in gw.log()

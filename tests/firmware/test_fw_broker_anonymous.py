"""Microcontroller clients against the real broker (tests/conftest.py), anonymous listener.

The firmware's own MQTT 5 client (without SMOKER), umqtt.simple and Adafruit MiniMQTT, each run
under CPython exactly as it runs on a board (umqtt.simple with the usocket/ustruct/ubinascii
shims), plus the umqtt-based example application in firmware_clients/micropython_basic.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from smokermqtt.client import MQTTClient
from smokermqtt.packets import MQTTError

from scripts.procs import free_port

from .fw_support import pump, umqtt_poll


def test_firmware_client_publish_subscribe(module_broker: Any) -> None:
    got: list[tuple[str, bytes]] = []
    sub = MQTTClient(
        module_broker.host,
        module_broker.port,
        client_id="fw-anon-sub",
        callback=lambda t, p: got.append((t, p)),
    )
    pub = MQTTClient(module_broker.host, module_broker.port, client_id="fw-anon-pub")
    sub.connect()
    pub.connect()
    assert sub.subscribe("fw/anon/#", qos=1) == 1
    assert pub.publish("fw/anon/a", b"q1", qos=1) == 0
    assert pub.publish("fw/anon/b", "q0 é") is None
    big = bytes(range(256)) * 40  # 10 KiB, under the 16 KiB default max_packet_size
    assert pub.publish("fw/anon/big", big, qos=1) == 0
    pump(lambda: sub.wait_msg(200), got, 3)
    assert got == [("fw/anon/a", b"q1"), ("fw/anon/b", "q0 é".encode()), ("fw/anon/big", big)]
    assert sub.unsubscribe("fw/anon/#") == 0
    pub.disconnect()
    sub.disconnect()


def test_firmware_client_keepalive_with_the_broker(module_broker: Any) -> None:
    c = MQTTClient(module_broker.host, module_broker.port, client_id="fw-ka", keepalive=1)
    c.connect()
    connected_at = c._last_send
    c.loop(2600)  # pings at ~0.5 s intervals; a missing PINGRESP would raise
    assert c.connected
    assert c._last_send != connected_at  # it did ping
    c.disconnect()


def test_firmware_client_reconnects_after_broker_restart(broker_factory: Any) -> None:
    port = free_port()
    config = {"listeners": [{"name": "tcp", "bind": "127.0.0.1", "port": port}]}
    broker = broker_factory(config)
    got: list[bytes] = []
    c = MQTTClient(
        "127.0.0.1",
        port,
        client_id="fw-restart",
        keepalive=5,
        backoff_base_ms=100,
        backoff_max_ms=800,
        callback=lambda t, p: got.append(p),
    )
    c.connect()
    assert c.subscribe("fw/restart", qos=1) == 1
    broker.stop()
    with pytest.raises((OSError, MQTTError)):  # DISCONNECT 0x8B, or the socket closes
        c.loop(3000)
        c.publish("fw/restart", b"lost", qos=1)
    restarted: list[Any] = []
    timer = threading.Timer(0.5, lambda: restarted.append(broker_factory(config)))
    timer.start()
    try:
        assert c.reconnect(attempts=40) is False  # fresh broker: no session
    finally:
        timer.join()
    assert c.subscriptions == {"fw/restart": 1}  # renewed by reconnect
    assert c.publish("fw/restart", b"back", qos=1) == 0
    pump(lambda: c.wait_msg(200), got)
    assert got == [b"back"]
    c.disconnect()


def test_umqtt_simple_publish_subscribe(module_broker: Any, umqtt: Any) -> None:
    got: list[tuple[bytes, bytes]] = []
    c = umqtt.MQTTClient("umqtt-anon", module_broker.host, module_broker.port, keepalive=30)
    c.set_callback(lambda t, m: got.append((t, m)))
    assert c.connect() == 0
    c.subscribe(b"fw/umqtt/#", qos=1)
    c.publish(b"fw/umqtt/x", b"hello", qos=1)
    c.publish(b"fw/umqtt/y", b"zero")
    pump(lambda: umqtt_poll(c), got, 2)
    assert got == [(b"fw/umqtt/x", b"hello"), (b"fw/umqtt/y", b"zero")]
    c.ping()
    c.disconnect()


def test_minimqtt_publish_subscribe(module_broker: Any) -> None:
    import adafruit_minimqtt.adafruit_minimqtt as minimqtt

    got: list[tuple[str, str]] = []
    c = minimqtt.MQTT(
        broker=module_broker.host,
        port=module_broker.port,
        client_id="minimqtt-anon",
        socket_pool=socket,
        is_ssl=False,
        keep_alive=30,
        connect_retries=1,
    )
    c.on_message = lambda client, topic, message: got.append((topic, message))
    c.connect()
    c.subscribe("fw/minimqtt/#", qos=1)
    c.publish("fw/minimqtt/a", "hi", qos=1)
    c.publish("fw/minimqtt/b", "zero", qos=0)
    pump(lambda: c.loop(timeout=1), got, 2)
    assert got == [("fw/minimqtt/a", "hi"), ("fw/minimqtt/b", "zero")]
    c.ping()
    c.disconnect()


def test_basic_example_app(
    module_broker: Any, basic_app: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = {
        "client_id": "basic-1",
        "host": module_broker.host,
        "port": module_broker.port,
        "publish_interval_ms": 300,
        "keepalive": 2,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    watcher = MQTTClient(module_broker.host, module_broker.port, client_id="basic-watch")
    seen: list[bytes] = []
    watcher.callback = lambda t, p: seen.append(p)
    watcher.connect()
    assert watcher.subscribe("devices/basic-1/telemetry", qos=1) == 1
    commands: list[tuple[bytes, bytes]] = []

    def send_command() -> None:
        time.sleep(0.4)
        cmd = MQTTClient(module_broker.host, module_broker.port, client_id="basic-cmd")
        cmd.connect()
        cmd.publish("devices/basic-1/cmd", b"blink", qos=1)
        cmd.disconnect()

    t = threading.Thread(target=send_command)
    t.start()
    basic_app.run(str(path), cycles=3, on_command=lambda tp, m: commands.append((tp, m)))
    t.join()
    watcher.loop(500)
    watcher.disconnect()
    assert [json.loads(p)["seq"] for p in seen] == [1, 2, 3]
    assert commands == [(b"devices/basic-1/cmd", b"blink")]
    # a board on a serial console says that it is up and what it sends (it was silent)
    out = capsys.readouterr().out
    assert f"connected to {module_broker.host}:{module_broker.port} as basic-1" in out
    assert "published reading 3 to devices/basic-1/telemetry" in out

"""A Debian Mosquitto as the "cloud broker" of sync tests, on a free loopback port, with
persistence so a subscriber's queued messages survive a restart (an uplink outage)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

MOSQUITTO = "/usr/sbin/mosquitto"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Mosquitto:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        directory.mkdir(parents=True, exist_ok=True)
        self.conf = directory / "mosquitto.conf"
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {directory}/\nlog_dest file {directory}/mosquitto.log\n")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"mosquitto did not start on {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        self.process = None


class CloudClient:
    """A paho client on the cloud broker that records what it receives (thread-safe)."""

    def __init__(self, port: int, client_id: str, subscriptions: list[str],
                 clean: bool = True) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.subscriptions = subscriptions
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv311, clean_session=clean)
        self.client.reconnect_delay_set(0.1, 0.3)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.connected = threading.Event()
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()
        assert self.connected.wait(10), "cloud client did not connect"

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                    properties: Any) -> None:
        for topic in self.subscriptions:
            client.subscribe(topic, qos=1)
        self.connected.set()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: Any) -> None:
        with self.lock:
            self.messages.append((message.topic, bytes(message.payload)))

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)

    def received(self, topic: str) -> list[bytes]:
        with self.lock:
            return [payload for t, payload in self.messages if t == topic]

    def wait_json(self, topic: str, predicate: Any, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for payload in reversed(self.received(topic)):
                data = json.loads(payload)
                if predicate(data):
                    return data  # type: ignore[no-any-return]
            time.sleep(0.05)
        raise AssertionError(f"nothing matching on {topic}: {self.received(topic)}")

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()

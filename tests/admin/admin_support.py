"""A real broker with ``[admin]`` and a small HTTP client for its API (tests/admin)."""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from tests.conftest import RunningBroker
from tests.waiting import wait_for_log_match

ADMIN_RE = re.compile(r"admin console on https?://([\d.]+):(\d+)/")


def write_users(path: Path, **users: tuple[str, str]) -> str:
    """users: name=(password, role), written with `edge-broker admin add`."""
    import sys

    for name, (password, role) in users.items():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "edge_broker",
                "admin",
                "add",
                str(path),
                name,
                "--role",
                role,
                "--password-stdin",
            ],
            input=password.encode(),
            check=True,
            capture_output=True,
        )
    return str(path)


def admin_port(b: RunningBroker) -> int:
    return int(wait_for_log_match(b, ADMIN_RE, 15).group(2))


class Answer:
    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        assert self.headers["content-type"] == "application/json; charset=utf-8", self.headers
        return json.loads(self.body)


class Api:
    """One logged-in (or not) user of the admin API: keeps the cookie and the CSRF token."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookie: str | None = None
        self.csrf: str | None = None

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        csrf: bool = True,
        raw: bytes | None = None,
    ) -> Answer:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {}
        if self.cookie:
            headers["Cookie"] = self.cookie
        if csrf and self.csrf and method in ("POST", "DELETE"):
            headers["X-CSRF-Token"] = self.csrf
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        answer = Answer(
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read(),
        )
        conn.close()
        cookie = answer.headers.get("set-cookie")
        if cookie:
            self.cookie = cookie.split(";", 1)[0]
        return answer

    def login(self, user: str, password: str) -> Answer:
        answer = self.request("POST", "/api/v1/login", {"user": user, "password": password})
        if answer.status == 200:
            self.csrf = answer.json()["csrf"]
        return answer

    def get(self, path: str) -> Any:
        answer = self.request("GET", path)
        assert answer.status == 200, (answer.status, answer.body)
        return answer.json()


class Client:
    """A paho client that records what it receives and how it was disconnected."""

    def __init__(
        self,
        b: RunningBroker,
        client_id: str,
        v5: bool = True,
        clean: bool = True,
        expiry: int = 0,
    ) -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self.disconnects: list[int] = []
        self.connected = threading.Event()
        self.gone = threading.Event()
        self.session_present: bool | None = None
        protocol = mqtt.MQTTv5 if v5 else mqtt.MQTTv311
        kwargs: dict[str, Any] = {} if v5 else {"clean_session": clean}
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=client_id, protocol=protocol, **kwargs
        )
        self.client.on_message = lambda c, u, m: self.messages.append(
            (m.topic, m.payload, bool(m.retain))
        )

        def on_connect(c: Any, u: Any, flags: Any, rc: Any, props: Any = None) -> None:
            self.session_present = bool(flags.session_present)
            self.connected.set()

        def on_disconnect(c: Any, u: Any, flags: Any, rc: Any, props: Any = None) -> None:
            self.disconnects.append(int(rc.value) if hasattr(rc, "value") else int(rc))
            self.gone.set()

        self.client.on_connect = on_connect
        self.client.on_disconnect = on_disconnect
        properties = None
        if v5:
            from paho.mqtt.packettypes import PacketTypes
            from paho.mqtt.properties import Properties

            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = expiry
            self.client.connect(
                b.host, b.port, keepalive=30, clean_start=clean, properties=properties
            )
        else:
            self.client.connect(b.host, b.port, keepalive=30)
        self.client.loop_start()
        assert self.connected.wait(10), f"{client_id} did not connect"

    def subscribe(self, topic: str, qos: int = 1) -> None:
        done = threading.Event()
        self.client.on_subscribe = lambda *a: done.set()
        self.client.subscribe(topic, qos)
        assert done.wait(10)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos, retain).wait_for_publish(10)

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

"""Real brokers for the bridge tests: Mosquitto (the Debian package) as the cloud, edge-broker
gateways with ``[[bridges]]`` (written as TOML text: conftest's ``to_toml`` has no nested
arrays of tables), and small paho helpers."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
import pytest

from scripts.procs import Mosquitto, free_port  # noqa: F401  (free_port: re-exported)
from tests.waiting import wait_for_log_match


@pytest.fixture
def mosquitto_factory(tmp_path: Path) -> Iterator[Any]:
    started: list[Mosquitto] = []

    def factory(extra: str = "", port: int | None = None) -> Mosquitto:
        m = Mosquitto(tmp_path / f"mosquitto{len(started)}", extra, port).start()
        started.append(m)
        return m

    yield factory
    for m in started:
        m.stop()


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(value)


def gateway_toml(
    bridges: list[dict[str, Any]],
    extra: str = "",
    sys_interval: int = 1,
    tenant_choice: str | None = None,
) -> str:
    """A gateway config: one TCP listener on a free port, ``[sys]``, then every bridge with its
    ``topics`` list as ``[[bridges.topics]]``. ``extra`` is appended TOML (other sections);
    ``tenant_choice = "open"`` lets the anonymous test clients name their tenant."""
    listener = ["[[listeners]]", 'name = "tcp"', "port = 0"]
    if tenant_choice is not None:
        listener.append(f"tenant_choice = {toml_value(tenant_choice)}")
    lines = [*listener, "", "[sys]", f"interval = {sys_interval}", ""]
    for bridge in bridges:
        lines.append("[[bridges]]")
        body = {"reconnect_min": 0.1, "reconnect_max": 1.0, "drain_rate": 0, **bridge}
        for key, value in body.items():
            if key != "topics":
                lines.append(f"{key} = {toml_value(value)}")
        for mapping in bridge["topics"]:
            lines.append("[[bridges.topics]]")
            lines.extend(f"{k} = {toml_value(v)}" for k, v in mapping.items())
        lines.append("")
    return "\n".join(lines) + "\n" + extra


class Collector:
    """A paho client that records (topic, payload, qos, retain) of every message."""

    def __init__(
        self,
        port: int,
        topics: list[tuple[str, int]],
        protocol: int = paho.MQTTv5,
        client_id: str = "",
        clean: bool = True,
        tenant: str | None = None,
    ) -> None:
        self.messages: list[tuple[str, bytes, int, bool]] = []
        self.cond = threading.Condition()
        kwargs: dict[str, Any] = {"protocol": protocol}
        if client_id:
            kwargs["client_id"] = client_id
        if protocol != paho.MQTTv5 and client_id:
            kwargs["clean_session"] = clean
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2, **kwargs)
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *a: subscribed.set()
        self.client.connect("127.0.0.1", port, properties=tenant_properties(tenant))
        self.client.loop_start()
        if topics:
            self.client.subscribe(topics)
            if not subscribed.wait(10):
                raise RuntimeError("no SUBACK")

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self.cond:
            self.messages.append((msg.topic, msg.payload, msg.qos, msg.retain))
            self.cond.notify_all()

    def wait_for(self, count: int, timeout: float = 15.0) -> list[tuple[str, bytes, int, bool]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.messages) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            return list(self.messages)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def tenant_properties(tenant: str | None) -> Any:
    """MQTT 5 CONNECT properties selecting ``tenant`` (AUTHZ.md §1), or None."""
    if tenant is None:
        return None
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    props = Properties(PacketTypes.CONNECT)
    props.UserProperty = [("tenant", tenant)]
    return props


def publish(
    port: int,
    messages: list[tuple[str, bytes, int]],
    protocol: int = paho.MQTTv5,
    retain: bool = False,
    tenant: str | None = None,
) -> None:
    """Publish and wait until every QoS 1/2 message was acknowledged."""
    client = paho.Client(paho.CallbackAPIVersion.VERSION2, protocol=protocol)
    client.max_inflight_messages_set(100)
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", port, properties=tenant_properties(tenant))
    client.loop_start()
    try:
        infos = [client.publish(t, p, q, retain) for t, p, q in messages]
        for info in infos:
            info.wait_for_publish(30)
            assert info.is_published()
    finally:
        client.loop_stop()
        client.disconnect()


def sys_value(port: int, topic: str, timeout: float = 10.0, until: Any = None) -> str:
    """The retained ``$SYS`` value (waits until ``until(value)`` holds, when given)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        c = Collector(port, [(topic, 0)])
        got = c.wait_for(1, 2.0)
        c.close()
        if got:
            last = got[-1][1].decode()
            if until is None or until(last):
                return last
        time.sleep(0.3)
    return last


def wait_log(b: Any, pattern: str, timeout: float = 15.0) -> str:
    """The broker's log once ``pattern`` (a regular expression) matches in it."""
    wait_for_log_match(b, pattern, timeout)
    return str(b.log())


METRICS = "\n[metrics]\nenabled = true\nport = 0\n"


def metrics_url(b: Any) -> str:
    """The metrics endpoint of a gateway started with :data:`METRICS` in its config."""
    text = wait_log(b, r"metrics on http://\S+/metrics")
    found = re.findall(r"metrics on (http://\S+/metrics)", text)
    return found[-1]


def bridge_status(
    b: Any, name: str = "cloud", until: Any = None, timeout: float = 10.0
) -> dict[str, Any]:
    """``edge-broker bridge status`` as data (through the metrics endpoint)."""
    import urllib.request

    from edge_broker.cli.bridge import parse_status

    url = metrics_url(b)
    deadline = time.monotonic() + timeout
    while True:
        with urllib.request.urlopen(url, timeout=5) as response:
            status = parse_status(response.read().decode()).get(name, {})
        if until is None or until(status) or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


def stopped_cloud_with_sink(mosquitto_factory: Any, workdir: Path, topic: str) -> Mosquitto:
    """A Mosquitto that keeps sessions on disk, holding the persistent session of a subscriber
    (``sink_of``) to ``topic``, then stopped: started again, it queues what the bridge sends
    for that subscriber even before the subscriber reconnects (no race with the bridge)."""
    cloud = mosquitto_factory(f"persistence true\npersistence_location {workdir}/\n")
    Collector(
        cloud.port, [(topic, 1)], protocol=paho.MQTTv311, client_id="cloud-sink", clean=False
    ).close()
    cloud.stop()
    return cloud


def sink_of(cloud: Mosquitto) -> Collector:
    return Collector(cloud.port, [], protocol=paho.MQTTv311, client_id="cloud-sink", clean=False)

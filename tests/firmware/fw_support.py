"""Helpers the firmware tests import by name (fixtures live in conftest.py, which tests must
not import: in a full run a bare ``conftest`` may be another directory's)."""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Callable, Iterator, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

try:  # `python -m pytest` (scripts/test) has the repository root on sys.path
    from tests.conftest import RunningBroker, start_broker
except ModuleNotFoundError:  # a bare `pytest`: tests/ is on sys.path, as the module conftest
    from conftest import RunningBroker, start_broker  # type: ignore[no-redef]

MicroPythonRunner = Callable[..., str]
"""``run(script, heap=..., timeout=..., mounts={host_dir: "/dir"}) -> stdout`` (conftest's
``micropython`` fixture)."""


@contextmanager
def running_broker(workdir: Path, config: dict[str, Any] | str) -> Iterator[RunningBroker]:
    """The real broker (tests/conftest.py's start_broker) for a module-scoped fixture: one
    start shared by the tests of a module that use distinct client ids and topics."""
    broker = start_broker(workdir, config)
    try:
        yield broker
    finally:
        broker.stop(signal.SIGTERM if broker.alive() else signal.SIGKILL, timeout=5)


def pump(step: Callable[[], object], got: Sized, n: int = 1, timeout: float = 5.0) -> None:
    """Call ``step`` (one receive call of a client whose callback fills ``got``) until ``got``
    holds ``n`` items or ``timeout`` seconds pass; the caller asserts what arrived."""
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        step()


def firmware_echo(
    host: str, port: int, client_id: str, password: str
) -> tuple[Any, list[tuple[str, bytes]]]:
    """The firmware's MQTT 5 client (smokermqtt) as ``client_id``, also its user name: it
    subscribes to devices/<id>/# (granted QoS 1), publishes b"1" to devices/<id>/telemetry at
    QoS 1 (PUBACK 0) and waits up to 5 s for it to come back. Returns the client, still
    connected, and what arrived."""
    from smokermqtt.client import MQTTClient

    got: list[tuple[str, bytes]] = []
    c = MQTTClient(
        host,
        port,
        client_id=client_id,
        username=client_id,
        password=password,
        callback=lambda t, p: got.append((t, p)),
    )
    c.connect()
    assert c.subscribe(f"devices/{client_id}/#", qos=1) == 1
    assert c.publish(f"devices/{client_id}/telemetry", b"1", qos=1) == 0
    pump(lambda: c.wait_msg(200), got)
    return c, got


def firmware_refusal(host: str, port: int, client_id: str, username: str, password: str) -> int:
    """The reason code with which the broker refuses the firmware client's CONNECT as
    ``client_id`` with ``username``/``password``: connect() must raise MQTTError and leave the
    client unconnected."""
    from smokermqtt.client import MQTTClient
    from smokermqtt.packets import MQTTError

    bad = MQTTClient(host, port, client_id=client_id, username=username, password=password)
    with pytest.raises(MQTTError) as info:
        bad.connect()
    assert not bad.connected
    return int(info.value.reason)


def basic_app_telemetry(basic_app: Any, config: Path, watcher: Any, cycles: int = 2) -> list[int]:
    """Run the basic example (firmware_clients/micropython_basic) with ``config`` for
    ``cycles`` readings while ``watcher``, a connected firmware client, subscribes to the
    device's devices/<client_id>/telemetry (granted QoS 1). Returns the ``seq`` of each reading
    the watcher received (waiting up to 5 s); the watcher is disconnected."""
    client_id = json.loads(config.read_text())["client_id"]
    seen: list[bytes] = []
    watcher.callback = lambda t, p: seen.append(p)
    assert watcher.subscribe(f"devices/{client_id}/telemetry", qos=1) == 1
    basic_app.run(str(config), cycles=cycles)
    pump(lambda: watcher.wait_msg(200), seen, cycles)
    watcher.disconnect()
    return [json.loads(p)["seq"] for p in seen]


def umqtt_poll(client: Any) -> None:
    """One receive step of umqtt.simple: ``check_msg`` does not block, so pause after it."""
    client.check_msg()
    time.sleep(0.02)


def umqtt_echo(
    umqtt: Any, host: str, port: int, client_id: str, password: str
) -> list[tuple[bytes, bytes]]:
    """umqtt.simple (MQTT 3.1.1) as ``client_id``, which is also its user name: CONNECT must be
    accepted (0); it subscribes to devices/<id>/cmd, publishes b"on" there at QoS 1, and
    returns what came back within 5 s."""
    got: list[tuple[bytes, bytes]] = []
    c = umqtt.MQTTClient(client_id, host, port, user=client_id, password=password, keepalive=30)
    c.set_callback(lambda t, m: got.append((t, m)))
    assert c.connect() == 0
    topic = f"devices/{client_id}/cmd".encode()
    c.subscribe(topic, qos=1)
    c.publish(topic, b"on", qos=1)
    pump(lambda: umqtt_poll(c), got)
    c.disconnect()
    return got


def umqtt_refusal(umqtt: Any, host: str, port: int, client_id: str, password: str) -> Any:
    """The CONNACK return code with which the broker refuses umqtt.simple's CONNECT as
    ``client_id`` (user name too) with ``password`` (the connect must raise MQTTException)."""
    bad = umqtt.MQTTClient(client_id, host, port, user=client_id, password=password)
    with pytest.raises(umqtt.MQTTException) as info:
        bad.connect()
    return info.value.args[0]


def minimqtt_echo(host: str, port: int, client_id: str, password: str) -> list[tuple[str, str]]:
    """Adafruit MiniMQTT (3.1.1) as ``client_id``, also its user name: subscribes to
    devices/<id>/#, publishes "ok" to devices/<id>/state at QoS 1, and returns what came back
    within 5 s."""
    import adafruit_minimqtt.adafruit_minimqtt as minimqtt

    got: list[tuple[str, str]] = []
    c = minimqtt.MQTT(
        broker=host,
        port=port,
        client_id=client_id,
        username=client_id,
        password=password,
        socket_pool=socket,
        is_ssl=False,
        keep_alive=30,
        connect_retries=1,
    )
    c.on_message = lambda client, topic, message: got.append((topic, message))
    c.connect()
    c.subscribe(f"devices/{client_id}/#", qos=1)
    c.publish(f"devices/{client_id}/state", "ok", qos=1)
    pump(lambda: c.loop(timeout=1), got)
    c.disconnect()
    return got


def minimqtt_refused(host: str, port: int, client_id: str, password: str) -> None:
    """Adafruit MiniMQTT's connect as ``client_id`` (user name too) with ``password`` must
    raise MMQTTException."""
    import adafruit_minimqtt.adafruit_minimqtt as minimqtt

    bad = minimqtt.MQTT(
        broker=host,
        port=port,
        client_id=client_id,
        username=client_id,
        password=password,
        socket_pool=socket,
        is_ssl=False,
        connect_retries=1,
    )
    with pytest.raises(minimqtt.MMQTTException):
        bad.connect()

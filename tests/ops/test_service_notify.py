"""The broker run as ``Type=notify`` service: READY after the listeners accept, WATCHDOG from a
timer on the event loop, STOPPING at shutdown (ops/service.py), seen on a fake NOTIFY_SOCKET."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest

from tests.conftest import BrokerFactory


def _collect(sock: socket.socket, until: float) -> list[bytes]:
    got: list[bytes] = []
    while time.monotonic() < until:
        sock.settimeout(max(0.01, until - time.monotonic()))
        try:
            got.append(sock.recv(4096))
        except TimeoutError:
            break
    return got


def test_ready_watchdog_stopping(
    tmp_path: Path, broker_factory: BrokerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "notify")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # systemd asks every 0.2 s: pings every 0.1 s
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    try:
        b = broker_factory()
        first = _collect(server, time.monotonic() + 1.0)
        assert first, "no notification at all"
        ready = first[0].decode()
        assert ready.startswith("READY=1\nSTATUS=serving 1 listener(s): tcp 127.0.0.1:")
        assert f":{b.port}" in ready
        # READY comes after the listener accepts: the socket is connectable now
        b.connect_socket().close()
        pings = [m for m in first[1:] if m == b"WATCHDOG=1"]
        assert len(pings) >= 5, first  # ~10 expected in a second at 0.1 s
        assert b.stop(signal.SIGTERM) == 0
        rest = _collect(server, time.monotonic() + 0.5)
        assert b"STOPPING=1" in rest
        assert rest.index(b"STOPPING=1") == len(rest) - 1  # nothing after STOPPING
    finally:
        server.close()


async def test_blocked_event_loop_sends_no_pings(tmp_path: Path) -> None:
    """The pings come from the event loop itself: while it is blocked none are sent, so systemd
    (WatchdogSec) restarts a hung broker."""
    import asyncio

    from edge_broker.ops.service import Watchdog
    from edge_broker.sdnotify import SystemdNotifier

    path = str(tmp_path / "notify")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    server.setblocking(False)
    notifier = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "100000"})
    watchdog = Watchdog(notifier, asyncio.get_running_loop())

    def drain() -> int:
        count = 0
        while True:
            try:
                assert server.recv(100) == b"WATCHDOG=1"
            except BlockingIOError:
                return count
            count += 1

    try:
        watchdog.start()
        await asyncio.sleep(0.5)
        assert drain() >= 5  # every 0.05 s
        time.sleep(0.5)  # the loop hangs
        assert drain() == 0
        await asyncio.sleep(0.3)
        assert drain() >= 2  # back when the loop runs again
        watchdog.stop()
        await asyncio.sleep(0.2)
        drain()
        await asyncio.sleep(0.2)
        assert drain() == 0
    finally:
        notifier.close()
        server.close()


def test_without_notify_socket_the_broker_runs_as_before(
    broker_factory: BrokerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    b = broker_factory()
    b.connect_socket().close()
    assert b.stop() == 0


def test_ready_after_the_persisted_bundle_is_applied(
    tmp_path: Path, broker_factory: BrokerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nacl.signing

    from edge_broker.keys import write_verify_key
    from edge_broker.sync.bundle import create_bundle

    key = nacl.signing.SigningKey.generate()
    write_verify_key(tmp_path / "cloud.pub", key.verify_key)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "bundle.cbor").write_bytes(
        create_bundle(
            key, version=5, gateway="gw-n", issued_at=1, policy={"acl": {"enabled": False}}
        )
    )
    path = str(tmp_path / "notify")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    try:
        broker_factory(f"""
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0

[sync]
source = "directory"
gateway_id = "gw-n"
trusted_keys = ["{tmp_path / "cloud.pub"}"]
directory = "{tmp_path / "inbox"}"
state_dir = "{tmp_path / "state"}"
""")
        first = _collect(server, time.monotonic() + 1.0)
        assert first and first[0].startswith(b"READY=1\nSTATUS=serving 1 listener(s)")
        assert first[0].endswith(b"; policy bundle v5"), first[0]
    finally:
        server.close()

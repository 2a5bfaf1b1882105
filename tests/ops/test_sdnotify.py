"""sd_notify datagrams reach a fake NOTIFY_SOCKET."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from edge_broker.sdnotify import SystemdNotifier


def test_notifications_reach_the_socket(tmp_path: Path) -> None:
    path = str(tmp_path / "notify")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(path)
    server.settimeout(2)
    try:
        notifier = SystemdNotifier(
            {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}
        )
        assert notifier.enabled and notifier.watchdog_interval == 2.0
        assert notifier.ready("serving 1 listener")
        assert server.recv(4096) == b"READY=1\nSTATUS=serving 1 listener"
        assert notifier.watchdog()
        assert server.recv(4096) == b"WATCHDOG=1"
        assert notifier.stopping()
        assert server.recv(4096) == b"STOPPING=1"
        notifier.close()
    finally:
        server.close()


def test_abstract_socket_address() -> None:
    name = f"edge-broker-test-{os.getpid()}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(b"\0" + name.encode())
    server.settimeout(2)
    try:
        notifier = SystemdNotifier({"NOTIFY_SOCKET": "@" + name})
        assert notifier.status("hello")
        assert server.recv(100) == b"STATUS=hello"
    finally:
        server.close()


def test_without_systemd_everything_is_a_noop() -> None:
    notifier = SystemdNotifier({})
    assert not notifier.enabled
    assert not notifier.ready() and not notifier.watchdog() and not notifier.stopping()
    assert notifier.watchdog_interval is None


def test_watchdog_for_another_pid_is_ignored() -> None:
    notifier = SystemdNotifier(
        {"NOTIFY_SOCKET": "/nonexistent", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}
    )
    assert notifier.watchdog_interval is None
    assert not notifier.ready()  # the socket does not exist: reported, not raised

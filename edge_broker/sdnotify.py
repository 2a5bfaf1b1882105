"""systemd service notifications (sd_notify(3)) without libsystemd.

The broker runs as ``Type=notify``: it says READY=1 once its listeners accept, WATCHDOG=1 at half
the interval systemd asks for (``WATCHDOG_USEC``), STATUS=... with a one-line summary, and
STOPPING=1 when it begins to shut down. Outside systemd (no ``NOTIFY_SOCKET``) every call is a
no-op, so the broker behaves the same from a terminal.
"""

from __future__ import annotations

import os
import socket


class SystemdNotifier:
    """Sends datagrams to ``$NOTIFY_SOCKET``; the environment is read once at construction."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        self._address: str | bytes | None = None
        if address.startswith("@"):
            self._address = b"\0" + address[1:].encode()  # abstract namespace socket
        elif address.startswith("/"):
            self._address = address
        self.watchdog_interval: float | None = None
        usec = env.get("WATCHDOG_USEC")
        pid = env.get("WATCHDOG_PID")
        if usec and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_interval = int(usec) / 1_000_000 / 2
        self._sock: socket.socket | None = None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def notify(self, *states: str) -> bool:
        """Send ``KEY=value`` lines; True when a datagram was sent."""
        if self._address is None:
            return False
        if self._sock is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        try:
            self._sock.sendto("\n".join(states).encode(), self._address)
        except OSError:
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

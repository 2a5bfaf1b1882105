"""CPython stand-in for MicroPython's usocket, for third-party firmware (umqtt.simple).

MicroPython sockets are streams: ``read(n)`` blocks until n bytes or end of stream, returns None
when non-blocking and nothing is there; ``write(buf, n)`` writes the first n bytes.
"""

import socket as _socket

AF_INET = _socket.AF_INET
SOCK_STREAM = _socket.SOCK_STREAM
getaddrinfo = _socket.getaddrinfo


class socket:  # noqa: N801 - MicroPython's name
    def __init__(self, *args: int) -> None:
        self._sock = _socket.socket(*args)
        self._blocking = True

    def connect(self, addr: tuple[str, int]) -> None:
        self._sock.connect(addr)

    def setblocking(self, flag: bool) -> None:
        self._blocking = flag
        self._sock.setblocking(flag)

    def settimeout(self, seconds: float | None) -> None:
        self._sock.settimeout(seconds)

    def read(self, n: int) -> bytes | None:
        if not self._blocking:
            try:
                first = self._sock.recv(n)
            except BlockingIOError:
                return None
            self._sock.setblocking(True)
            try:
                return first + self._read_blocking(n - len(first)) if first else first
            finally:
                self._sock.setblocking(False)
        return self._read_blocking(n)

    def _read_blocking(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                break
            buf += chunk
        return buf

    def write(self, data: bytes | str, n: int | None = None) -> int:
        if isinstance(data, str):  # MicroPython streams write str as UTF-8
            data = data.encode()
        view = memoryview(data)[: len(data) if n is None else n]
        self._sock.sendall(view)
        return len(view)

    def send(self, data: bytes) -> int:
        return self._sock.send(data)

    def recv(self, n: int) -> bytes:
        return self._sock.recv(n)

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()

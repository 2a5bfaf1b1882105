"""A MicroPython ``socket``/``usocket`` module over canned bytes, for running the firmware client
inside the WebAssembly port (which has no network). Test-only; copied to /shim by the test.

``SERVER`` holds what the server sends, handed out in order; everything the client sends is
appended to ``SENT``. The socket is an io.IOBase stream so that select.poll() can watch it.
"""

import io

SOCK_STREAM = 1
SERVER = bytearray()
SENT = bytearray()
_POLL = 3  # MP_STREAM_POLL
_POLLIN = 1


def getaddrinfo(host, port, af=0, kind=0):
    return [(2, SOCK_STREAM, 0, "", (host, port))]


class socket(io.IOBase):
    def __init__(self, *args):
        self.pos = 0

    def settimeout(self, seconds):
        pass

    def connect(self, addr):
        pass

    def recv(self, n):
        chunk = bytes(SERVER[self.pos : self.pos + n])
        self.pos += len(chunk)
        return chunk  # b"" at the end: the server closed

    def readinto(self, buf, n=-1):
        n = len(buf) if n < 0 else n
        chunk = self.recv(n)
        buf[: len(chunk)] = chunk
        return len(chunk)

    def send(self, data):
        SENT.extend(data)
        return len(data)

    # the stream methods umqtt.simple uses
    def read(self, n):
        return self.recv(n)

    def write(self, data, n=None):
        return self.send(data if n is None else data[:n])

    def setblocking(self, flag):
        pass

    def ioctl(self, req, arg):
        return arg & _POLLIN if req == _POLL else 0

    def close(self):
        pass

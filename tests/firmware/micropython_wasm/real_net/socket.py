"""A MicroPython ``socket`` module over a REAL TCP connection, for the firmware client inside
the WebAssembly port. Test-only; run_net.mjs provides ``js.mpnet`` (the blocking bridge to a
Node socket) and the test copies this file to /net.

The socket is an io.IOBase stream so that select.poll() can watch it through ioctl.
"""

import io

import js

SOCK_STREAM = 1
_POLL = 3  # MP_STREAM_POLL
_CLOSE = 4  # MP_STREAM_CLOSE
_POLLIN = 1
_ETIMEDOUT = 110

# Looked up once: each lookup of a JS function makes a proxy that this MicroPython build keeps
# for good (see run_net.mjs), and the test measures the heap.
_connect = js.mpnet.connect
_error = js.mpnet.error
_put = js.mpnet.put
_send = js.mpnet.send
_recv = js.mpnet.recv
_byte = js.mpnet.byte
_poll = js.mpnet.poll
_close = js.mpnet.close


def getaddrinfo(host, port, af=0, kind=0):
    return [(2, SOCK_STREAM, 0, "", (host, port))]


class socket(io.IOBase):
    def __init__(self, *args):
        self.timeout_ms = -1
        self.open = False

    def settimeout(self, seconds):
        self.timeout_ms = -1 if seconds is None else int(seconds * 1000)

    def setblocking(self, flag):
        self.timeout_ms = -1 if flag else 0

    def connect(self, addr):
        if _connect(addr[0], addr[1]) < 0:
            raise OSError(_error())
        self.open = True

    def recv(self, n):
        got = _recv(n, self.timeout_ms)
        if got == -1:
            raise OSError(_ETIMEDOUT)
        if got < 0:
            return b""  # the broker closed the connection
        return bytes([_byte(i) for i in range(got)])  # ints only: see run_net.mjs

    def readinto(self, buf, n=-1):
        n = len(buf) if n < 0 else n
        chunk = self.recv(n)
        buf[: len(chunk)] = chunk
        return len(chunk)

    def send(self, data):
        for b in data:  # ints only: see run_net.mjs
            _put(b)
        if _send():
            raise OSError("connection closed")
        return len(data)

    def read(self, n):
        return self.recv(n)

    def write(self, data, n=None):
        return self.send(data if n is None else data[:n])

    def ioctl(self, req, arg):
        if req == _POLL:
            # wait up to 1 ms for data, so that poll()'s loop does not spin the CPU
            return arg & _POLLIN if _poll(1) else 0
        if req == _CLOSE:
            self.close()
        return 0

    def close(self):
        if self.open:
            self.open = False
            _close()

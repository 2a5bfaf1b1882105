"""A scripted MQTT 5 server for testing the device client's side of the protocol.

It is not a broker: each accepted connection runs one script, a function that reads the client's
packets (decoded with the project's codec, edge_broker.mqtt) and answers exactly what the test
wants, including wrong answers. Failures inside a script are re-raised by ``close()``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from types import TracebackType

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Packet


class PeerConnection:
    """One accepted client connection, blocking calls with a timeout."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self.sock = sock
        sock.settimeout(timeout)
        self.reader = PacketReader(side="server")
        self.pending: list[Packet] = []

    def recv(self) -> Packet:
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("client closed the connection")
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def recv_raw(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            data = self.sock.recv(n - len(buf))
            if not data:
                raise ConnectionError("client closed the connection")
            buf += data
        return buf

    def send(self, packet: Packet) -> None:
        self.sock.sendall(encode(packet, 5))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def closed_by_client(self, timeout: float = 5.0) -> bool:
        """True when the client closes without sending anything more."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:  # closed with our data unread: RST instead of FIN
            return True
        except TimeoutError:
            return False


Script = Callable[[PeerConnection], None]


class ScriptedPeer:
    """Listens on 127.0.0.1:<free port>; connection number i runs ``scripts[i]``."""

    def __init__(self, *scripts: Script, timeout: float = 5.0) -> None:
        self.scripts = list(scripts)
        self.timeout = timeout
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.settimeout(timeout)
        self.port: int = self.listener.getsockname()[1]
        self.errors: list[BaseException] = []
        self.accepted = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            for script in self.scripts:
                try:
                    sock, _ = self.listener.accept()
                except OSError:
                    return
                self.accepted += 1
                with sock:
                    try:
                        script(PeerConnection(sock, self.timeout))
                    except BaseException as exc:  # reported by close()
                        self.errors.append(exc)
                        return
        finally:
            self.done.set()

    def close(self) -> None:
        self.done.wait(self.timeout * (len(self.scripts) + 1))
        self.listener.close()
        if self.errors:
            raise self.errors[0]

    def abort(self) -> None:
        """Stop listening; a script's failure, if any, is chained to the test's failure."""
        self.listener.close()
        self.done.wait(self.timeout)
        if self.errors:
            raise RuntimeError("the scripted peer failed first") from self.errors[0]

    def __enter__(self) -> ScriptedPeer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

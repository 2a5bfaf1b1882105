"""The broker in memory, driven by a fake clock (the shape of aioquic's ``client_and_server()``).

:class:`MemoryBroker` runs the real :class:`~edge_broker.broker.server.Broker` (its
connections, handlers, sessions and delivery) on a private event loop with no listener and no
socket: each :class:`MemoryClient` is a :class:`~edge_broker.broker.connection.Connection`
behind an in-memory transport, speaking through the project's codec. Time passes only when a
test says so: :meth:`MemoryBroker.advance` moves the broker's clock from one due time to the
next (``Broker.next_due``, broker/scheduler.py) and runs ``Broker.tick`` at each, as the
broker's timer does. A will delay, a session expiry or a keep-alive timeout therefore takes
no wall-clock time, fires exactly at its deadline, and cannot be late under load.

The client API follows ``broker_raw.RawClient`` (``connect``, ``send``, ``expect``,
``nothing``, ``closed`` …) so a protocol test moves here with its assertions unchanged; what
differs is that nothing waits: every call runs the broker until it has nothing left to do,
and ``expect`` fails at once if the packet is not there.

What stays on real sockets: TLS, WebSocket, listeners, signals, persistence and interop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from edge_broker.broker.connection import Connection
from edge_broker.broker.server import Broker
from edge_broker.config import ListenerConfig, loads_config, parse_config
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Packet, Puback, Publish
from tests.broker.broker_raw import ClientPackets

P = TypeVar("P")

_SETTLED_PASSES = 3  # loop iterations with nothing ready before the broker counts as idle
_MAX_PASSES = 100_000  # a broker that never goes idle is a bug: fail instead of hanging


class FakeClock:
    """The broker's clock: moves only by :meth:`advance`. It starts at ``start``, by default the
    real monotonic time (any value works: every deadline of the broker, and those persistence
    stores, are on this clock; a restart may start a new one elsewhere)."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.monotonic() if start is None else start

    def __call__(self) -> float:
        return self.now


class ThreadWork(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor, whose work the harness waits for: a password check
    (auth/password_method.py) or a reload's config parsing runs in a thread and comes back as
    a loop callback, so the broker is not idle while one runs."""

    def __init__(self) -> None:
        super().__init__(max_workers=2, thread_name_prefix="memory-broker")
        self.running: set[concurrent.futures.Future[Any]] = set()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        self.running.add(future)
        future.add_done_callback(self.running.discard)
        return future


class MemoryTransport(asyncio.Transport):
    """The broker's side of one in-memory connection: writes go to the client, ``close``
    reports ``connection_lost`` on the next loop iteration as a socket does, and reading can
    be paused (the connection pauses it while a handler awaits authentication)."""

    def __init__(self, client: MemoryClient, port: int) -> None:
        super().__init__()
        self.client = client
        self.protocol: Connection | None = None
        self.port = port
        self.closing = False
        self.paused = False
        self.inbox: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self.closing:
            self.client.received(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.client.eof = True
        assert self.protocol is not None
        asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False
        inbox, self.inbox = self.inbox, []
        for data in inbox:
            self.deliver(data)

    def is_reading(self) -> bool:
        return not self.paused

    def deliver(self, data: bytes) -> None:
        """Bytes from the client, as ``data_received`` would get them from a socket."""
        if self.closing:
            return
        if self.paused:
            self.inbox.append(data)
            return
        assert self.protocol is not None
        self.protocol.data_received(data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", self.port), "sockname": ("127.0.0.1", 1883)}.get(
            name, default
        )

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


class MemoryBroker:
    """The real broker on a private loop with a fake clock; see the module docstring."""

    def __init__(
        self, config: dict[str, Any] | str | None = None, clock_start: float | None = None
    ) -> None:
        """``config``: a dict as parsed from TOML, or TOML text (tests/auth/token_broker.py).
        With ``[persistence]`` enabled the store is opened and recovered as ``Broker.start``
        does (use durability ``none``: nothing here waits for an fsync thread)."""
        self.clock = FakeClock(clock_start)
        self.loop = asyncio.new_event_loop()
        self.threads = ThreadWork()
        self.loop.set_default_executor(self.threads)
        if isinstance(config, str):
            self.config = loads_config(config, "<test>")
        else:
            self.config = parse_config(config or {})
        self.listener = self.config.listeners[0]
        self.broker = self.loop.run_until_complete(self._make())
        self.clients: list[MemoryClient] = []
        self._ports = itertools.count(40000)

    async def _make(self) -> Broker:
        broker = Broker(self.config, clock=self.clock)
        if self.config.persistence.enabled:
            broker._open_persistence()  # as Broker.start, without the listeners
        return broker

    def settle(self) -> None:
        """Run the broker until it has nothing left to do now (no ready callback or task)."""
        self.loop.run_until_complete(self._settle())

    async def _settle(self) -> None:
        ready: Any = self.loop._ready  # type: ignore[attr-defined]  # CPython's run queue
        idle = 0
        for _ in range(_MAX_PASSES):
            await asyncio.sleep(0)
            if ready:
                idle = 0
            elif self.threads.running:  # its result will come back as a callback: wait for it
                concurrent.futures.wait(set(self.threads.running), timeout=30)
                idle = 0
            else:
                idle += 1
            if idle >= _SETTLED_PASSES:
                return
        raise AssertionError("the broker never went idle")

    def call(self, fn: Any, *args: Any) -> None:
        """``fn(*args)`` inside the loop (as a socket event would run), then settle."""
        self.loop.call_soon(fn, *args)
        self.settle()

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass: the clock jumps to each time the broker has something due
        before the end (keep alive, connect timeout, will delay, session expiry, its periodic
        duties) and ``tick`` runs there, exactly as the broker's timer wakes it; the clock
        then stops at the end. A deadline the scheduler does not know of is never reached."""
        end = self.clock.now + seconds
        ticked = None
        for _ in range(_MAX_PASSES):
            due = self.broker.next_due()
            if due is not None and due <= self.clock.now:
                due = self.clock.now
                if ticked == due:
                    # still due after a tick at this instant: the engine's timeouts are strict
                    # ("more than 1.5 × Keep Alive", engine/connection.py): the next instant
                    due = math.nextafter(due, math.inf)
            if due is None or due > end:
                break
            self.clock.now = ticked = due
            self.call(self.broker.tick, due)
        else:
            raise AssertionError("the broker's next deadline never moved past now")
        self.clock.now = end

    def reload(self, path: Path, text: str | None = None) -> bool:
        """``edge-broker reload`` (SIGHUP): write ``text`` to ``path`` when given, then let the
        broker load and apply it; whether it was applied."""
        if text is not None:
            path.write_text(text)
        result = self.loop.run_until_complete(self.broker.reload(str(path)))
        self.settle()
        return result.ok

    def client(self, level: int = 5, listener: str | None = None) -> MemoryClient:
        """A new client connection, to the first listener unless ``listener`` names another
        (its authentication methods, tenant choice ... apply)."""
        chosen = self.listener
        if listener is not None:
            chosen = next(lc for lc in self.config.listeners if lc.name == listener)
        c = MemoryClient(self, level, next(self._ports), chosen)
        self.clients.append(c)
        return c

    def __enter__(self) -> MemoryBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for c in self.clients:
            if not c.transport.closing:
                c.close()
        self.loop.run_until_complete(self.broker.shutdown())
        self.loop.close()


class MemoryClient(ClientPackets):
    """A client connection to a :class:`MemoryBroker`, with ``broker_raw.RawClient``'s API."""

    def __init__(
        self, harness: MemoryBroker, level: int, port: int, listener: ListenerConfig
    ) -> None:
        self.harness = harness
        self.level = level
        self.reader = PacketReader(side="client", protocol_level=level)
        self.pending: list[Packet] = []
        self.eof = False
        self.transport = MemoryTransport(self, port)
        self.connection = Connection(harness.broker, listener)
        self.transport.protocol = self.connection
        harness.call(self.connection.connection_made, self.transport)

    def received(self, data: bytes) -> None:
        self.pending.extend(self.reader.feed(data))

    def send(self, packet: Packet) -> None:
        self.send_raw(encode(packet, self.level))

    def send_raw(self, data: bytes) -> None:
        assert not self.eof, "the broker closed this connection"
        self.harness.call(self.transport.deliver, data)

    def recv(self, timeout: float | None = None) -> Packet:
        """The next packet the broker has sent; EOFError if it closed, AssertionError if
        nothing is there (the broker is idle: waiting would not change that). A ``timeout``
        (or ``window``) that a ``RawClient`` call names is accepted and unused: nothing waits."""
        self.harness.settle()
        if not self.pending:
            if self.eof:
                raise EOFError("connection closed by the broker")
            raise AssertionError("no packet from the broker")
        return self.pending.pop(0)

    def expect(self, kind: type[P], timeout: float | None = None) -> P:
        packet = self.recv()
        assert isinstance(packet, kind), f"expected {kind.__name__}, got {packet!r}"
        return packet

    def drain(self) -> list[Packet]:
        """Every packet the broker has sent by now, in order (it is idle: nothing more is on
        its way)."""
        self.harness.settle()
        got, self.pending = self.pending, []
        return got

    def publishes(self, window: float | None = None) -> list[Publish]:
        """Every PUBLISH the broker sends while this client reads and acknowledges, until it is
        idle (``RawClient.publishes`` without the window): QoS 1 ones are answered with PUBACK,
        QoS 2 ones left unanswered, other packets dropped."""
        got: list[Publish] = []
        while batch := [p for p in self.drain() if isinstance(p, Publish)]:
            for packet in batch:
                got.append(packet)
                if packet.qos == 1 and packet.packet_id and not self.eof:
                    self.send(Puback(packet.packet_id))
        return got

    def nothing(self, timeout: float | None = None) -> None:
        self.harness.settle()
        assert not self.pending, f"unexpected packet {self.pending[0]!r}"

    def closed(self, timeout: float | None = None) -> list[Packet]:
        """The packets the broker sent before it closed; fails if it has not closed."""
        self.harness.settle()
        got, self.pending = self.pending, []
        assert self.eof, f"broker did not close; got {got!r}"
        return got

    def close(self) -> None:
        """Network loss: the connection ends without DISCONNECT."""
        if self.transport.closing:
            return
        self.transport.closing = True
        self.eof = True
        self.harness.call(self.connection.connection_lost, None)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def memory_broker(
    config: dict[str, Any] | str | None = None, clock_start: float | None = None
) -> Iterator[MemoryBroker]:
    """For fixtures: a :class:`MemoryBroker`, shut down afterwards."""
    harness = MemoryBroker(config, clock_start)
    try:
        yield harness
    finally:
        harness.close()

"""Load generator for scripts/bench: pre-encoded MQTT 3.1.1 packets over raw sockets, from
several processes, so the generator is not the bottleneck.

Publishers send batches of pre-encoded PUBLISH packets with ``sendall``; subscribers count
deliveries by length (every packet of a scenario has the same size) and, for QoS 1, answer
with PUBACKs cut from the packet ids in place. End-to-end flow control (a window of in-flight
deliveries) keeps every broker out of its drop paths, so delivered == published × fan-out.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import selectors
import socket
import time
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Connect, Publish, Subscribe, Subscription

BATCH = 50
CTX = mp.get_context("fork")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _recv_exact(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


# (username, password) every client of a gated run logs in with; None: anonymous.
Auth = tuple[str, bytes] | None


def _connect(
    port: int, client_id: str, keep_alive: int = 0, auth: Auth = None, clean: bool = True
) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    user, password = auth if auth else (None, None)
    s.sendall(encode(Connect(4, client_id, clean, keep_alive, None, user, password), 4))
    ack = _recv_exact(s, 4)
    if ack[0] != 0x20 or ack[3] != 0:
        raise ConnectionError(f"CONNACK refused: {ack!r}")
    return s


def _subscribe(s: socket.socket, topic_filter: str, qos: int) -> None:
    s.sendall(encode(Subscribe(1, (Subscription(topic_filter, qos),)), 4))
    suback = _recv_exact(s, 5)
    if suback[0] != 0x90 or suback[4] >= 0x80:
        raise ConnectionError(f"SUBACK refused: {suback!r}")


def subscriber(
    port: int,
    conns: list[tuple[str, str]],
    qos: int,
    pkt_len: int,
    pid_off: int,
    delivered: Synchronized[int],
    ready: Any,
    go: Any,
    stop: Any,
    out: Any,
    auth: Auth = None,
    clean: bool = True,
) -> None:
    socks = []
    for client_id, topic_filter in conns:
        s = _connect(port, client_id, auth=auth, clean=clean)
        _subscribe(s, topic_filter, qos)
        s.setblocking(False)
        socks.append(s)
    ready.wait()
    go.wait()
    cpu0 = _cpu()
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    pending = {s: bytearray() for s in socks}
    leftover = dict.fromkeys(socks, 0)
    total = 0
    while not stop.is_set():
        for key, _ in sel.select(0.1):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                data = s.recv(1 << 18)
            except BlockingIOError:
                continue
            if not data:
                sel.unregister(s)
                continue
            if qos == 0:
                b = leftover[s] + len(data)
                n = b // pkt_len
                leftover[s] = b - n * pkt_len
            else:
                buf = pending[s]
                buf += data
                n = len(buf) // pkt_len
                acks = b"".join(
                    b"\x40\x02" + buf[i * pkt_len + pid_off : i * pkt_len + pid_off + 2]
                    for i in range(n)
                )
                del buf[: n * pkt_len]
                s.setblocking(True)
                s.sendall(acks)
                s.setblocking(False)
            total += n
            delivered.value = total
    out.put(("sub", _cpu() - cpu0, total))
    for s in socks:
        s.close()


def publisher(
    port: int,
    client_id: str,
    topic: str,
    qos: int,
    count: int,
    payload: bytes,
    sent: Synchronized[int],
    all_sent: list[Synchronized[int]],
    all_delivered: list[Synchronized[int]],
    fanout: int,
    window: int,
    ready: Any,
    go: Any,
    out: Any,
    auth: Auth = None,
) -> None:
    s = _connect(port, client_id, auth=auth)
    s.settimeout(None)  # blocking: sendall waits, recv(MSG_DONTWAIT) polls
    if qos == 0:
        chunks = [encode(Publish(topic, payload, 0), 4) * BATCH]
    else:
        chunks = [
            b"".join(
                encode(Publish(topic, payload, 1, packet_id=pid), 4)
                for pid in range(start, start + BATCH)
            )
            for start in range(1, 65536 - BATCH, BATCH)
        ]
    ready.wait()
    go.wait()
    cpu0 = _cpu()
    n = 0
    i = 0
    while n < count:
        while (
            sum(v.value for v in all_sent) * fanout - sum(d.value for d in all_delivered) > window
        ):
            time.sleep(0.0002)
            if qos:
                _drain(s)
        s.sendall(chunks[i])
        i = (i + 1) % len(chunks)
        n += BATCH
        sent.value = n
        if qos:
            _drain(s)
    out.put(("pub", _cpu() - cpu0, n))
    time.sleep(0.5)
    if qos:
        _drain(s)
    s.close()


def _drain(s: socket.socket) -> None:
    """Read and discard PUBACKs from the broker without blocking."""
    try:
        while s.recv(1 << 18, socket.MSG_DONTWAIT):
            pass
    except BlockingIOError:
        pass


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    publishers: int
    subscribers: int  # connections
    sub_processes: int
    qos: int
    wildcard: bool
    count: int  # messages per publisher (before scaling)
    payload: int = 64
    persistent: bool = False  # subscribers keep their session (3.1.1 clean session 0)
    idle: int = 0  # idle clients (one subscription each) connected before the load starts

    def deliveries_per_message(self) -> int:
        return self.subscribers


@dataclass(frozen=True, slots=True)
class Result:
    delivered: int
    expected: int
    seconds: float
    broker_cpu: float
    generator_cpu: float

    @property
    def rate(self) -> float:
        return self.delivered / self.seconds if self.seconds else 0.0

    @property
    def us_per_msg(self) -> float:
        return self.broker_cpu / self.delivered * 1e6 if self.delivered else float("nan")


def run(scenario: Scenario, port: int, broker_cpu: Any, scale: float, auth: Auth = None) -> Result:
    """Run one scenario against a broker listening on ``port``; ``broker_cpu()`` → seconds.
    ``auth``: every client logs in with this username and password."""
    if scenario.idle:
        with IdleClients(port, scenario.idle, auth):
            return _run(scenario, port, broker_cpu, scale, auth)
    return _run(scenario, port, broker_cpu, scale, auth)


def _run(scenario: Scenario, port: int, broker_cpu: Any, scale: float, auth: Auth) -> Result:
    count = max(BATCH, int(scenario.count * scale) // BATCH * BATCH)
    tag = f"s{time.monotonic_ns() % 10**9}"
    payload = b"x" * scenario.payload
    topics = [f"bench/{tag}/{i}/data" for i in range(scenario.publishers)]
    sub_filter = f"bench/{tag}/+/data" if scenario.wildcard else topics[0]
    sample = encode(
        Publish(topics[0], payload, scenario.qos, packet_id=1 if scenario.qos else None), 4
    )
    pkt_len = len(sample)
    pid_off = 2 + 2 + len(topics[0].encode())  # 1-byte remaining length below 128 bytes
    assert sample[1] < 128
    fanout = scenario.subscribers
    # Deliveries allowed in flight end to end: enough to keep a broker busy, few enough that
    # none of them reaches its drop paths (amqtt stalls under a large fan-out backlog).
    per_sub = 500 if scenario.qos else int(os.environ.get("BENCH_WINDOW", "1000"))
    window = min(per_sub * fanout, 4000)
    ready = CTX.Barrier(scenario.publishers + scenario.sub_processes + 1)
    go, stop = CTX.Event(), CTX.Event()
    out = CTX.Queue()
    delivered = [CTX.Value("q", 0, lock=False) for _ in range(scenario.sub_processes)]
    sent = [CTX.Value("q", 0, lock=False) for _ in range(scenario.publishers)]
    procs = []
    per = scenario.subscribers // scenario.sub_processes
    for k in range(scenario.sub_processes):
        conns = [(f"{tag}-s{k}-{j}", sub_filter) for j in range(per)]
        procs.append(
            CTX.Process(
                target=subscriber,
                args=(
                    port,
                    conns,
                    scenario.qos,
                    pkt_len,
                    pid_off,
                    delivered[k],
                    ready,
                    go,
                    stop,
                    out,
                    auth,
                    not scenario.persistent,
                ),
            )
        )
    for k in range(scenario.publishers):
        procs.append(
            CTX.Process(
                target=publisher,
                args=(
                    port,
                    f"{tag}-p{k}",
                    topics[k],
                    scenario.qos,
                    count,
                    payload,
                    sent[k],
                    sent,
                    delivered,
                    fanout,
                    window,
                    ready,
                    go,
                    out,
                    auth,
                ),
            )
        )
    for p in procs:
        p.start()
    ready.wait()
    time.sleep(0.2)
    expected = count * scenario.publishers * fanout
    cpu0 = broker_cpu()
    t0 = time.perf_counter()
    go.set()
    last, last_change = 0, time.perf_counter()
    while True:
        time.sleep(0.01)
        got = sum(d.value for d in delivered)
        now = time.perf_counter()
        if got >= expected:
            break
        if got != last:
            last, last_change = got, now
        elif now - last_change > 5:
            break  # stalled: report what arrived
    seconds = now - t0
    cpu1 = broker_cpu()
    stop.set()
    gen = 0.0
    for _ in procs:
        _, cpu, _ = out.get(timeout=30)
        gen += cpu
    for p in procs:
        p.join(10)
    return Result(got, expected, seconds, cpu1 - cpu0, gen)


def idle_worker(port: int, start: int, n: int, ready: Any, done: Any, auth: Auth = None) -> None:
    socks = []
    for i in range(n):
        s = _connect(port, f"idle-{start + i}", keep_alive=300, auth=auth)
        _subscribe(s, f"idle/{start + i}/cmd", 1)
        socks.append(s)
    ready.wait()
    done.wait()
    for s in socks:
        s.close()


class IdleClients:
    """``n`` idle clients (one subscription each, keep-alive 300 s) from ``processes`` worker
    processes, connected on entering the ``with`` block and closed on leaving it."""

    def __init__(self, port: int, n: int, auth: Auth = None, processes: int = 4) -> None:
        self.ready = CTX.Barrier(processes + 1)
        self.done = CTX.Event()
        per = n // processes
        self.procs = [
            CTX.Process(target=idle_worker, args=(port, k * per, per, self.ready, self.done, auth))
            for k in range(processes)
        ]

    def __enter__(self) -> IdleClients:
        for p in self.procs:
            p.start()
        self.ready.wait(120)
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        for p in self.procs:
            p.join(10)


def idle_connections(
    port: int, n: int, rss: Any, processes: int = 4, auth: Auth = None
) -> tuple[int, int]:
    """RSS (KiB) before and with ``n`` idle clients (each with one subscription)."""
    before = rss()
    with IdleClients(port, n, auth, processes):
        time.sleep(2.0)
        after = rss()
    return before, after

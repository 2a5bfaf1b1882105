"""kill -9 at random moments under mixed QoS 1/2 load, many cycles (issue 17).

Two persistent publishers (QoS 1 and QoS 2, each resending what it holds unacknowledged with
DUP=1 after every restart, as MQTT requires) and four persistent subscribers to ``rk/#`` at
QoS 2: one online, one slow (MQTT 5 Receive Maximum 1 or 2; slow acknowledgements in 3.1.1),
one offline except in some cycles, one churning (reconnecting every few hundred milliseconds).
Each cycle starts the broker on the same state directory, runs the load and kill -9s it at a
random moment. A last cycle without a kill lets the publishers finish and the subscribers drain.

Asserted for every subscriber: every message a publisher got PUBACK/PUBREC for arrived (no
loss); no QoS 2 message arrived twice, and the broker never sent a packet id the subscriber
still held for another message (tests/persistence/persist_support.py ``StrictReceiver``).
``test_random_kill_soak`` runs the same for many more cycles (``-m soak``).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from persist_support import RawClient, StrictReceiver, persistent_config, props_for, subscribe

from edge_broker.mqtt.packets import Puback, Pubcomp, Publish, Pubrec, Pubrel

WINDOW = 12  # unacknowledged publishes per publisher (below the broker's receive_maximum 32)
PACE = 0.004  # seconds between new publishes of one publisher (the slow one keeps up)
LINK_ERRORS = (EOFError, OSError)


class Publisher:
    """A persistent publisher; its state (held packet ids) survives broker restarts."""

    def __init__(self, name: str, qos: int, level: int) -> None:
        self.name, self.qos, self.level = name, qos, level
        self.count = 0
        self.unacked: dict[int, Publish] = {}
        self.released: set[int] = set()
        self.acked: list[bytes] = []
        self.refused: list[bytes] = []

    def _pid(self) -> int:
        pid = self.count % 60000 + 1
        while pid in self.unacked or pid in self.released:
            pid = pid % 60000 + 1
        return pid

    def run(self, b, stop: threading.Event, new: bool) -> None:
        try:
            c = RawClient(b.host, b.port, level=self.level, timeout=5.0)
            c.connect(
                self.name,
                clean=False,
                properties=props_for(self.level, session_expiry_interval=3600),
            )
            for packet in list(self.unacked.values()):
                c.send(replace(packet, dup=True))
            for pid in list(self.released):
                c.send(Pubrel(pid))
            next_at = time.monotonic()
            while not stop.is_set():
                while (
                    new
                    and len(self.unacked) + len(self.released) < WINDOW
                    and time.monotonic() >= next_at
                ):
                    next_at += PACE
                    self.count += 1
                    pid = self._pid()
                    packet = Publish(
                        f"rk/{self.qos}",
                        f"{self.name}-{self.count}".encode(),
                        self.qos,
                        packet_id=pid,
                    )
                    self.unacked[pid] = packet
                    c.send(packet)
                if not new and not self.unacked and not self.released:
                    return
                try:
                    packet = c.recv(PACE)
                except TimeoutError:
                    continue
                self._ack(c, packet)
        except LINK_ERRORS:
            return

    def _ack(self, c: RawClient, packet: object) -> None:
        if isinstance(packet, (Puback, Pubrec)):
            sent = self.unacked.pop(packet.packet_id, None)
            if sent is None:
                if isinstance(packet, Pubrec) and packet.packet_id in self.released:
                    c.send(Pubrel(packet.packet_id))
                return
            if packet.reason_code >= 0x80:
                self.refused.append(sent.payload)
                return
            self.acked.append(sent.payload)
            if isinstance(packet, Pubrec):
                self.released.add(packet.packet_id)
                c.send(Pubrel(packet.packet_id))
        elif isinstance(packet, Pubcomp):
            self.released.discard(packet.packet_id)


class Subscriber:
    """A persistent subscriber acting as a strict QoS 2 receiver across restarts."""

    def __init__(self, name: str, level: int, kind: str, rng: random.Random) -> None:
        self.name, self.level, self.kind, self.rng = name, level, kind, rng
        self.rx = StrictReceiver()
        self.receive_maximum = rng.choice((1, 2)) if kind == "slow" else 20

    def connect(self, b) -> RawClient:
        c = RawClient(b.host, b.port, level=self.level, timeout=5.0)
        c.connect(
            self.name,
            clean=False,
            properties=props_for(
                self.level, session_expiry_interval=3600, receive_maximum=self.receive_maximum
            ),
        )
        return c

    def run(self, b, stop: threading.Event) -> None:
        try:
            c = self.connect(b)
            until = time.monotonic() + self.rng.uniform(0.05, 0.3)
            while not stop.is_set():
                if self.kind == "churn" and time.monotonic() > until:
                    c.close()
                    c = self.connect(b)
                    until = time.monotonic() + self.rng.uniform(0.05, 0.3)
                try:
                    packet = c.recv(0.05)
                except TimeoutError:
                    continue
                if isinstance(packet, Publish):
                    self.rx.take(packet)
                    if self.kind == "slow":
                        time.sleep(0.005)
                    pid = packet.packet_id or 0
                    if packet.qos == 1:
                        c.send(Puback(pid))
                    elif packet.qos == 2:
                        c.send(Pubrec(pid))
                elif isinstance(packet, Pubrel):
                    self.rx.held.pop(packet.packet_id, None)
                    c.send(Pubcomp(packet.packet_id))
        except LINK_ERRORS:
            return


def _run(threads: list[threading.Thread]) -> None:
    for t in threads:
        t.daemon = True
        t.start()


def _random_kill(
    broker_factory, tmp_path: Path, level: int, durability: str, cycles: int, seed: int
) -> None:
    rng = random.Random(seed)
    config = {
        **persistent_config(tmp_path / "state", durability, interval_ms=50),
        "limits": {
            "max_queued_messages": 1_000_000,
            "max_queued_bytes": 1 << 30,
            "max_inflight": 8,
        },
    }
    pubs = [Publisher("rk-p1", 1, level), Publisher("rk-p2", 2, level)]
    subs = [
        Subscriber(f"rk-{kind}", level, kind, rng)
        for kind in ("online", "slow", "offline", "churn")
    ]
    b = broker_factory(config)
    for sub in subs:
        c = sub.connect(b)
        subscribe(c, ("rk/#", 2))
        c.close()
    b.stop()
    for cycle in range(cycles):
        b = broker_factory(config)
        stop = threading.Event()
        active = [s for s in subs if s.kind != "offline" or cycle % 3 == 2]
        threads = [threading.Thread(target=p.run, args=(b, stop, True)) for p in pubs]
        threads += [threading.Thread(target=s.run, args=(b, stop)) for s in active]
        _run(threads)
        time.sleep(rng.uniform(0.05, 0.8))
        b.process.send_signal(signal.SIGKILL)
        b.process.wait(10)
        stop.set()
        for t in threads:
            t.join(10)
    b = broker_factory(config)  # the last run: publishers finish, subscribers drain
    stop = threading.Event()
    pub_threads = [threading.Thread(target=p.run, args=(b, stop, False)) for p in pubs]
    sub_threads = [threading.Thread(target=s.run, args=(b, stop)) for s in subs]
    _run(pub_threads + sub_threads)
    for t in pub_threads:
        t.join(30)
    expected = {payload for p in pubs for payload in p.acked}
    for s in subs:
        s.kind = "drain" if s.kind == "slow" else s.kind  # no more pauses: catch up
    progress, idle_since = -1, time.monotonic()
    while time.monotonic() - idle_since < 10:  # until done, or nothing arrives for 10 s
        if all(expected <= set(s.rx.delivered) and not s.rx.held for s in subs):
            break
        now = sum(len(s.rx.delivered) for s in subs)
        if now != progress:
            progress, idle_since = now, time.monotonic()
        time.sleep(0.2)
    time.sleep(0.5)  # anything sent twice would arrive by now
    stop.set()
    for t in sub_threads:
        t.join(10)
    assert not any(p.unacked or p.released for p in pubs), "publishers could not finish"
    assert not any(p.refused for p in pubs), [p.refused[:3] for p in pubs]
    assert len(expected) > 0
    qos2 = {payload for payload in pubs[1].acked}
    for s in subs:
        assert not s.rx.errors, f"{s.name}: {s.rx.errors[:5]}"
        missing = expected - set(s.rx.delivered)
        assert not missing, (
            f"{s.name}: {len(missing)} acknowledged lost, e.g. {sorted(missing)[:5]}"
        )
        twice = [p for p in qos2 if s.rx.delivered.count(p) > 1]
        assert not twice, f"{s.name}: QoS 2 delivered twice: {twice[:5]}"


@pytest.mark.parametrize(("level", "durability"), [(5, "sync"), (4, "none")])
def test_random_kill(broker_factory, tmp_path, level, durability):
    _random_kill(broker_factory, tmp_path, level, durability, cycles=6, seed=level)


@pytest.mark.soak
@pytest.mark.parametrize("durability", ["sync", "interval", "none"])
@pytest.mark.parametrize("level", [5, 4])
def test_random_kill_soak(broker_factory, tmp_path, level, durability):
    _random_kill(
        broker_factory,
        tmp_path,
        level,
        durability,
        cycles=60,
        seed=hash((level, durability)) & 0xFFFF,
    )

"""docs/backup-and-upgrade.md says the state logs can be copied while the broker runs: the log is
append-only and a compaction renames a complete file over it, so any copy is the log at some
moment, at worst with a torn last record that the next open cuts off. This test copies
``broker.log`` repeatedly while a client keeps storing retained messages (with compactions
under way), then starts a broker on each copy: every copy opens, and holds a prefix of what was
acknowledged before the copy began."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from persist_support import RawClient, persistent_config

from edge_broker.mqtt.packets import Connect, Puback, Publish, Suback, Subscribe, Subscription
from tests.conftest import start_broker

COPIES = 2


def _retained(port: int) -> dict[str, bytes]:
    """Every retained message under bk/: topic → payload."""
    c = RawClient("127.0.0.1", port, timeout=20)
    got: dict[str, bytes] = {}
    try:
        c.send(Connect(5, "backup-reader", True, 60))
        c.recv()
        c.send(Subscribe(1, (Subscription("bk/#", 0),)))
        while True:  # until 3 s pass without a packet
            packet = c.recv(3.0)
            if isinstance(packet, Publish):
                got[packet.topic] = packet.payload
            elif not isinstance(packet, Suback):
                raise AssertionError(f"unexpected {packet!r}")
    except TimeoutError:
        return got
    finally:
        c.close()


def test_a_copy_taken_while_the_broker_writes_opens_and_holds_a_prefix(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # a small compaction threshold, so copies also race the compaction's rename
    live = start_broker(tmp_path / "live", persistent_config(state, compact_min_bytes=16_384))
    acked: list[int] = []  # index i acknowledged: topic bk/<i % 50> holds payload i
    stop = threading.Event()

    def publish() -> None:
        c = RawClient(live.host, live.port, timeout=20)
        c.send(Connect(5, "backup-writer", True, 60))
        c.recv()
        i = 0
        while not stop.is_set():
            c.send(Publish(f"bk/{i % 50}", str(i).encode() * 20, 1, retain=True, packet_id=1))
            assert isinstance(c.recv(10), Puback)
            acked.append(i)
            i += 1
        c.close()

    writer = threading.Thread(target=publish)
    writer.start()
    copies: list[tuple[Path, int]] = []
    try:
        for n in range(COPIES):
            while len(acked) < 150 * (n + 1):  # wait for progress, not for time
                assert writer.is_alive(), "the publisher stopped"
                stop.wait(0.01)
            before = acked[-1]  # acknowledged before the copy began: in the copy
            copy = tmp_path / f"copy{n}"
            copy.mkdir()
            shutil.copyfile(state / "broker.log", copy / "broker.log")
            copies.append((copy, before))
    finally:
        stop.set()
        writer.join(30)
        live.stop()
    for copy, before in copies:
        restored = start_broker(copy / "run", persistent_config(copy))
        try:
            got = _retained(restored.port)
        finally:
            assert restored.stop() == 0
        log = restored.log()
        assert "Traceback" not in log and "refused" not in log, log
        assert len(got) == 50, sorted(got)
        newest = {topic: int(payload[: len(payload) // 20]) for topic, payload in got.items()}
        # each topic holds the last value acknowledged before the copy, or a later one
        for i in range(before - 49, before + 1):
            assert newest[f"bk/{i % 50}"] >= i, (i, newest[f"bk/{i % 50}"])

"""With ``[persistence] durability = "sync"`` a local publisher's PUBACK means the bridged copy
is on disk (issue 19): the PUBACK waits for the bridge queue log's fsync, and a failing fsync
turns into a refusal, never a PUBACK 0x00/0x10 for a message that is not stored."""

from __future__ import annotations

import errno
import sys
import time
from pathlib import Path

from bridge_support import free_port, gateway_toml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from broker_raw import RawClient  # noqa: E402

from edge_broker.mqtt.packets import Puback, Publish  # noqa: E402
from edge_broker.mqtt.reason_codes import ReasonCode  # noqa: E402

DELAY = 0.5


def config(state: Path, durability: str = "sync") -> str:
    return gateway_toml(
        [
            {
                "name": "cloud",
                "address": "127.0.0.1",
                "port": free_port(),  # the cloud is down
                "topics": [{"direction": "out", "local": "up/#", "qos": 1}],
            }
        ],
        extra=f'[persistence]\nstate_dir = "{state}"\ndurability = "{durability}"\n',
    )


def test_puback_waits_for_the_bridge_log_fsync(inprocess_broker_factory, tmp_path, monkeypatch):
    from edge_broker.store import logfile

    real = logfile._fdatasync
    synced: list[float] = []

    def slow(fd: int) -> None:
        time.sleep(DELAY)
        real(fd)
        synced.append(time.monotonic())

    b = inprocess_broker_factory(config(tmp_path / "state"))
    pub = RawClient(b.host, b.port)
    pub.connect("device")
    monkeypatch.setattr(logfile, "_fdatasync", slow)
    started = time.monotonic()
    pub.send(Publish("up/1", b"to the cloud", 1, packet_id=1))
    ack = pub.expect(Puback, 10.0)
    acked = time.monotonic()
    monkeypatch.setattr(logfile, "_fdatasync", real)
    assert ack.reason_code in (0, ReasonCode.NO_MATCHING_SUBSCRIBERS)
    assert synced and synced[0] <= acked  # the fsync finished before the PUBACK arrived
    assert acked - started >= DELAY
    # a local subscriber-less QoS 1 message no bridge takes is not held up
    pub.send(Publish("elsewhere", b"x", 1, packet_id=2))
    started = time.monotonic()
    monkeypatch.setattr(logfile, "_fdatasync", slow)
    pub.expect(Puback, 10.0)
    assert time.monotonic() - started < DELAY
    monkeypatch.setattr(logfile, "_fdatasync", real)
    pub.close()
    b.stop()


def test_failing_fsync_refuses_the_publish(inprocess_broker_factory, tmp_path, monkeypatch):
    from edge_broker.store import logfile

    b = inprocess_broker_factory(config(tmp_path / "state"))
    pub = RawClient(b.host, b.port)
    pub.connect("device")
    real = logfile._fdatasync

    def failing(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(logfile, "_fdatasync", failing)
    pub.send(Publish("up/1", b"not stored", 1, packet_id=1))
    ack = pub.expect(Puback, 10.0)
    assert ack.reason_code == 0x97
    assert "disk is full" in (ack.properties.reason_string or "")
    monkeypatch.setattr(logfile, "_fdatasync", real)
    pub.send(Publish("up/2", b"stored", 1, packet_id=2))
    assert pub.expect(Puback, 10.0).reason_code in (0, ReasonCode.NO_MATCHING_SUBSCRIBERS)
    pub.close()
    b.stop()


def test_an_unusable_queue_log_stops_the_start_with_a_reason(tmp_path):
    import os
    import subprocess

    root = Path(__file__).resolve().parents[2]
    state = tmp_path / "state"
    (state / "bridge-cloud.log").mkdir(parents=True)  # a directory where the log file goes
    conf = tmp_path / "gw.toml"
    conf.write_text(config(state))
    out = subprocess.run(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(conf)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    assert out.returncode == 1
    assert "bridge cloud: cannot open its queue log" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout

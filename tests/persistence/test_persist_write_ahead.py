"""Nothing leaves on a socket that the log does not already hold (issue 17).

Each test makes the log's writes slow (``EDGE_BROKER_TEST_SLOW_WRITES``: while a flag file
exists every append first sleeps) and kill -9s the broker the moment a client holds bytes that
depend on a record. Before the write-ahead rule the record was still in memory or in the writer
thread then, and the restart contradicted what the client held; now the bytes leave only after
the record is in the OS, so the slow write only delays them. One test per window named in the
issue, over real sockets, MQTT 5 and 3.1.1, ``durability = "sync"`` and ``"none"``.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from persist_support import (
    RawClient,
    StrictReceiver,
    persistent_config,
    props_for,
    subscribe,
)

from edge_broker.mqtt.packets import Pubcomp, Publish, Pubrec, Pubrel

SLOW = "3"  # seconds each append sleeps while the flag exists


@pytest.fixture
def slow_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    flag = tmp_path / "slow-writes"
    monkeypatch.setenv("EDGE_BROKER_TEST_SLOW_WRITES", str(flag))
    return flag


def _kill(b) -> None:
    b.process.send_signal(signal.SIGKILL)
    b.process.wait(10)


def _client(b, level: int, cid: str, clean: bool = False, **props) -> RawClient:
    c = RawClient(b.host, b.port, level=level, timeout=15.0)
    props.setdefault("session_expiry_interval", 3600)
    ack = c.connect(
        cid, clean=clean, properties=props_for(level, **props) if not clean else props_for(level)
    )
    assert ack.reason_code == 0
    c.connack = ack  # type: ignore[attr-defined]
    return c


LEVELS = pytest.mark.parametrize("level", [5, 4])
MODES = pytest.mark.parametrize("durability", ["sync", "none"])


@LEVELS
@MODES
def test_qos2_resent_with_dup_after_kill_is_not_routed_again(
    broker_factory, tmp_path, slow_flag, level, durability
):
    """Window (a): a QoS 2 PUBLISH routed to a receiver, then kill -9 before its PUBREC: the
    publisher resends it with DUP=1 after the restart and it must not be routed again."""
    config = persistent_config(tmp_path / "state", durability)
    b = broker_factory(config)
    watcher = _client(b, level, "wa-watch", clean=True)
    subscribe(watcher, ("wa/#", 0))
    pub = _client(b, level, "wa-pub")
    slow_flag.write_text(SLOW)
    pub.send(Publish("wa/1", b"exactly once", 2, packet_id=7))
    assert watcher.expect(Publish, 15.0).payload == b"exactly once"
    _kill(b)
    slow_flag.unlink()
    b2 = broker_factory(config)
    watcher2 = _client(b2, level, "wa-watch2", clean=True)
    subscribe(watcher2, ("wa/#", 0))
    pub2 = _client(b2, level, "wa-pub")
    assert pub2.connack.session_present  # type: ignore[attr-defined]
    pub2.send(Publish("wa/1", b"exactly once", 2, dup=True, packet_id=7))
    assert pub2.expect(Pubrec, 10.0).packet_id == 7
    watcher2.nothing(1.0)  # routed once, before the kill
    pub2.send(Pubrel(7))
    assert pub2.expect(Pubcomp).packet_id == 7


@LEVELS
@MODES
def test_message_moved_into_flight_comes_back_in_flight(
    broker_factory, tmp_path, slow_flag, level, durability
):
    """Window (b): an acknowledged QoS 2 message queued while its subscriber was offline goes
    into flight when it reconnects; kill -9 right after the PUBLISH left: after the restart it
    is resent with the same packet id and DUP=1, not queued again under a new id."""
    config = persistent_config(tmp_path / "state", durability)
    b = broker_factory(config)
    sub = _client(b, level, "wb-sub")
    subscribe(sub, ("wb/#", 2))
    sub.close()
    pub = _client(b, level, "wb-pub", clean=True)
    pub.send(Publish("wb/1", b"queued", 2, packet_id=1))
    assert pub.expect(Pubrec).reason_code < 0x80  # acknowledged: the broker owns it now
    pub.send(Pubrel(1))
    pub.expect(Pubcomp)
    slow_flag.write_text(SLOW)
    sub = _client(b, level, "wb-sub")
    first = sub.expect(Publish, 15.0)
    assert (first.payload, first.dup) == (b"queued", False)
    _kill(b)
    slow_flag.unlink()
    b2 = broker_factory(config)
    sub2 = _client(b2, level, "wb-sub")
    assert sub2.connack.session_present  # type: ignore[attr-defined]
    again = sub2.expect(Publish, 10.0)
    assert (again.payload, again.packet_id, again.dup) == (b"queued", first.packet_id, True)
    sub2.send(Pubrec(again.packet_id or 0))
    assert sub2.expect(Pubrel).packet_id == first.packet_id
    sub2.send(Pubcomp(first.packet_id or 0))
    sub2.nothing(1.0)


@LEVELS
@MODES
def test_restored_packet_id_counter_skips_ids_the_client_holds(
    broker_factory, tmp_path, slow_flag, level, durability
):
    """Window (c): a subscriber holds packet ids of QoS 2 messages it received (no PUBREL
    yet) when the broker is killed; after the restart a new message must not get one of
    those ids (a strict client would drop it as a duplicate: lost), and the held messages
    are not delivered twice."""
    config = persistent_config(tmp_path / "state", durability)
    b = broker_factory(config)
    receiver = StrictReceiver()
    sub = _client(b, level, "wc-sub")
    subscribe(sub, ("wc/#", 2))
    pub = _client(b, level, "wc-pub")
    slow_flag.write_text(SLOW)
    pub.send(Publish("wc/1", b"m1", 2, packet_id=11))
    pub.send(Publish("wc/2", b"m2", 2, packet_id=12))
    for _ in range(2):
        receiver.take(sub.expect(Publish, 15.0))
    assert sorted(receiver.held.values()) == [b"m1", b"m2"]
    _kill(b)
    slow_flag.unlink()
    b2 = broker_factory(config)
    sub2 = _client(b2, level, "wc-sub")
    assert sub2.connack.session_present  # type: ignore[attr-defined]
    other = _client(b2, level, "wc-other", clean=True)
    other.send(Publish("wc/3", b"m3", 2, packet_id=1))  # a new message before any resend
    assert other.expect(Pubrec, 10.0).reason_code < 0x80
    other.send(Pubrel(1))
    other.expect(Pubcomp)
    pub2 = _client(b2, level, "wc-pub")  # resends what it holds unacknowledged, DUP=1
    for pid, payload in ((11, b"m1"), (12, b"m2")):
        pub2.send(Publish(f"wc/{pid - 10}", payload, 2, dup=True, packet_id=pid))
    recs = [pub2.expect(Pubrec, 10.0).packet_id for _ in range(2)]
    for pid in recs:
        pub2.send(Pubrel(pid))
    receiver.run(sub2, 1.5)
    assert not receiver.errors, receiver.errors
    assert sorted(receiver.delivered) == [b"m1", b"m2", b"m3"]
    assert not receiver.held

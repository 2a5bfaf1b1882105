"""Power-loss simulation for the broker store (issue 8): ``broker.log`` cut at random offsets
and with flipped bytes loads without crashing, keeps every intact record, and the broker
starts and reports what it dropped."""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
from pathlib import Path

import pytest
from persist_support import EXPIRY, RawClient, persistent_config, subscribe

from edge_broker.broker.persist.tables import BROKER_LOG
from edge_broker.broker.server import Broker
from edge_broker.config import loads_config
from edge_broker.mqtt.packets import Puback, Publish

N_MESSAGES = 120
N_RETAINED = 20


@pytest.fixture
def store(broker_factory, tmp_path: Path) -> bytes:
    """A broker.log written by a real broker: one offline persistent session with queued
    QoS 1 messages, retained messages; the broker stopped gracefully."""
    state = tmp_path / "written"
    b = broker_factory(persistent_config(state, durability="none"))
    try:
        sub = RawClient(b.host, b.port)
        sub.connect("sub", clean=False, properties=EXPIRY)
        subscribe(sub, ("t/#", 1))
        sub.close()
        pub = RawClient(b.host, b.port)
        pub.connect("pub")
        for i in range(N_MESSAGES):
            pub.send(Publish(f"t/{i}", f"m{i:04}".encode(), 1, packet_id=i + 1))
            pub.expect(Puback)
        for i in range(N_RETAINED):
            pub.send(Publish(f"r/{i}", f"v{i:04}".encode(), 1, retain=True, packet_id=1000 + i))
            pub.expect(Puback)
        pub.close()
    finally:
        b.stop()
    return (state / BROKER_LOG).read_bytes()


def _recover(state: Path) -> tuple[list[bytes] | None, dict[str, bytes]]:
    """Start an in-process broker on ``state``: the queue of session ``sub`` (None when the
    session did not survive) and the retained messages."""
    config = loads_config(
        f'[persistence]\nenabled = true\nstate_dir = "{state}"\n'
        '[[listeners]]\nname = "t"\nbind = "127.0.0.1"\nport = 0\n'
    )

    async def run() -> tuple[list[bytes] | None, dict[str, bytes]]:
        broker = Broker(config)
        await broker.start()
        try:
            session = broker.sessions.get("sub")
            queue = None if session is None else [o.message.payload for o in session.queue]
            space = broker.topic_space("~")
            if session is not None:  # where reload re-checks it, and routable again
                assert session in list(broker.sessions)
            if session is not None and session.subscriptions:
                assert any(session.client_id in hits for hits in space.match("t/new"))
            retained = {m.topic: m.payload for m in space.retained.matching("r/#", 0.0)}
            return queue, retained
        finally:
            await broker.shutdown()

    return asyncio.run(run())


def test_intact_store_loads_everything(store, tmp_path):
    state = tmp_path / "s"
    state.mkdir()
    (state / BROKER_LOG).write_bytes(store)
    queue, retained = _recover(state)
    assert queue == [f"m{i:04}".encode() for i in range(N_MESSAGES)]
    assert retained == {f"r/{i}": f"v{i:04}".encode() for i in range(N_RETAINED)}


def test_cut_at_random_offsets_keeps_a_growing_prefix(store, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="edge_broker.persistence")
    full = [f"m{i:04}".encode() for i in range(N_MESSAGES)]
    rng = random.Random(8)
    offsets = sorted(rng.sample(range(len(store)), 24)) + [len(store)]
    previous = -1
    for n, offset in enumerate(offsets):
        state = tmp_path / f"cut{n}"
        state.mkdir()
        (state / BROKER_LOG).write_bytes(store[:offset])
        queue, retained = _recover(state)
        kept = queue or []
        assert kept == full[: len(kept)], f"cut at {offset}: not a prefix of what was written"
        assert len(kept) >= previous, f"cut at {offset} kept fewer messages than a shorter cut"
        previous = len(kept)
        assert all(v == f"v{k[2:]:0>4}".encode() for k, v in retained.items())
        shutil.rmtree(state)
    assert previous == N_MESSAGES
    assert "broker store recovery" in caplog.text and "truncated to" in caplog.text


def test_flipped_bytes_lose_only_the_damaged_records(store, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="edge_broker.persistence")
    full = [f"m{i:04}".encode() for i in range(N_MESSAGES)]
    rng = random.Random(9)
    for n in range(24):
        data = bytearray(store)
        offset = rng.randrange(64, len(data))  # past the header, which is repaired separately
        data[offset] ^= 1 << rng.randrange(8)
        state = tmp_path / f"flip{n}"
        state.mkdir()
        (state / BROKER_LOG).write_bytes(bytes(data))
        queue, retained = _recover(state)
        if queue is not None:  # the session record itself may be the damaged one
            it = iter(full)
            assert all(any(m == x for x in it) for m in queue), "a message changed or reordered"
            assert len(queue) >= N_MESSAGES - 2, f"flip at {offset} lost {N_MESSAGES - len(queue)}"
        assert len(retained) >= N_RETAINED - 1
        assert all(v == f"v{k[2:]:0>4}".encode() for k, v in retained.items())
        shutil.rmtree(state)
    assert "broker store recovery" in caplog.text

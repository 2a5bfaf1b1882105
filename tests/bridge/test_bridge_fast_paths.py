"""The bridged message's shortcuts give what the general paths give (sans-io, no sockets):

- the queue log folds a turn's records into its reducer from the store's own lists: the state
  it holds at run time is the state a replay of the file builds (property);
- the link's uplink PUBLISH (topic field cached, header inline) is the codec's PUBLISH;
- the link's plain-PUBACK scan handles what the reader would, whatever the read boundaries,
  and leaves every other packet (reason codes, partial packets) to the reader;
- the bridge's remembered routes answer what the mappings answer, within their bound.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.bridge.link import TOPIC_FIELDS, BridgeLink
from edge_broker.bridge.queue import Entry, OutboundQueue
from edge_broker.bridge.service import ROUTES, Bridge
from edge_broker.bridge.store import BridgeStore, MemoryStore, read_queue
from edge_broker.bridge.topics import TopicMap
from edge_broker.config import parse_config
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Puback, Publish

# one turn of the store: ("queue", qos) a new message, ("send", i) the i-th unsent one goes
# in flight, ("release", i) the i-th in flight gets PUBREC, ("done", i) the i-th live one is done
OPS = st.lists(
    st.lists(
        st.one_of(
            st.tuples(st.just("queue"), st.integers(0, 2)),
            st.tuples(st.sampled_from(["send", "release", "done"]), st.integers(0, 50)),
        ),
        max_size=12,
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=30, deadline=None)
@given(turns=OPS)
def test_run_time_reducer_state_is_what_a_replay_builds(tmp_path_factory: Any, turns: Any) -> None:
    path = tmp_path_factory.mktemp("q") / "bridge-q.log"

    async def run() -> tuple[dict[int, tuple[Any, ...]], int]:
        store = BridgeStore(path, "never")
        store.write_ahead = True
        unsent: list[Entry] = []
        flying: list[Entry] = []
        seq = 0
        for turn in turns:
            for op, arg in turn:
                if op == "queue":
                    seq += 1
                    entry = Entry(seq, f"site/{seq % 4}", bytes(seq % 7), arg, seq % 2 == 0)
                    store.queued(entry)
                    unsent.append(entry)
                elif op == "send" and unsent:
                    entry = unsent.pop(arg % len(unsent))
                    entry.pid = seq % 65535 + 1
                    store.flying(entry)
                    flying.append(entry)
                elif op == "release" and flying:
                    entry = flying[arg % len(flying)]
                    entry.released = True
                    store.released(entry)
                elif op == "done" and (unsent or flying):
                    pool = unsent if arg % 2 and unsent or not flying else flying
                    store.done(pool.pop(arg % len(pool)))
            store.flush()  # the turn's end
        live = store._live
        state = {
            s: (e.topic, e.payload, e.qos, e.retain, e.pid, e.released)
            for s, (e, _) in live.messages.items()
        }
        await store.aclose()
        return state, live.max_seq

    state, max_seq = asyncio.run(run())
    replayed = read_queue(str(path))
    live = replayed._reducer  # type: ignore[attr-defined]
    assert {
        s: (e.topic, e.payload, e.qos, e.retain, e.pid, e.released)
        for s, (e, _) in live.messages.items()
    } == state
    assert live.max_seq == max_seq
    replayed.close()


def _link(level: int = 5) -> BridgeLink:
    bridge = {
        "name": "cloud",
        "address": "127.0.0.1",
        "protocol": "5" if level == 5 else "3.1.1",
        "topics": [{"direction": "out", "local": "bench/#", "remote_prefix": "site/"}],
    }
    config = parse_config({"bridges": [bridge]}).bridges[0]
    queue = OutboundQueue(10_000, 1 << 30)
    return BridgeLink(config, queue, MemoryStore(), lambda link, packet: True, TopicMap([]))


@settings(max_examples=60, deadline=None)
@given(
    topic=st.text(
        st.characters(exclude_categories=["Cs"], exclude_characters="\x00+#"),
        min_size=1,
        max_size=40,
    ),
    payload=st.binary(max_size=20_000),
    qos=st.integers(0, 1),
    retain=st.booleans(),
    dup=st.booleans(),
    level=st.sampled_from([4, 5]),
)
def test_uplink_publish_is_the_codecs(
    topic: str, payload: bytes, qos: int, retain: bool, dup: bool, level: int
) -> None:
    link = _link(level)
    pid = 4242 if qos else None
    link._publish(Entry(1, topic, payload, qos, retain), pid, dup)
    link._publish(Entry(2, topic, payload, qos, retain), pid, dup)  # the cached topic field
    data = b"".join(link._out)
    reader = PacketReader(side="client", protocol_level=level, max_packet_size=1 << 20)
    packets = reader.feed(data)
    assert len(packets) == 2
    for packet in packets:
        assert isinstance(packet, Publish)
        assert (packet.topic, packet.payload, packet.qos, packet.retain) == (
            topic,
            payload,
            qos,
            retain,
        )
        assert packet.dup == (dup and qos > 0)
        assert packet.packet_id == pid
    assert data[: len(data) // 2] == data[len(data) // 2 :]


def test_topic_fields_are_bounded() -> None:
    link = _link()
    for n in range(TOPIC_FIELDS * 2 + 5):
        link._publish(Entry(n, f"site/{n}", b"", 0, False), None)
    assert 0 < len(link._topic_fields) <= TOPIC_FIELDS


class _Stream:
    """Hands the link's receiver the given chunks, then reports the remote closed."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.written: list[bytes] = []

    async def read(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def write(self, data: bytes) -> None:
        self.written.append(data)

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


def _receive(link: BridgeLink, chunks: list[bytes]) -> None:
    link._stream = _Stream(chunks)
    reader = PacketReader(side="client", protocol_level=link.level)

    async def run() -> None:
        try:
            await link._receiver(reader)
        except Exception as exc:  # the end of the chunks: "the remote closed the connection"
            assert "closed" in str(exc)

    asyncio.run(run())


@settings(max_examples=80, deadline=None)
@given(
    codes=st.lists(st.sampled_from([None, 0x00, 0x10, 0x80, 0x97]), min_size=1, max_size=30),
    cuts=st.lists(st.integers(1, 400), max_size=8),
    unknown=st.booleans(),
)
def test_puback_scan_agrees_with_the_reader_at_any_read_boundary(
    codes: list[int | None], cuts: list[int], unknown: bool
) -> None:
    link = _link()
    queue = link.queue
    for pid in range(1, len(codes) + 1):
        entry = Entry(pid, f"site/{pid}", b"x" * pid, 1, False)
        queue.push(entry)
        queue.fly(queue.take(), pid)  # type: ignore[arg-type]
    packets = []
    for pid, code in enumerate(codes, 1):
        if code is None:  # 40 02 pid: the plain form
            packets.append(b"\x40\x02" + pid.to_bytes(2, "big"))
        else:
            packets.append(encode(Puback(pid, code), 5))
    if unknown:
        packets.insert(len(packets) // 2, b"\x40\x02\x7f\xff")  # nothing in flight under it
    data = b"".join(packets)
    chunks, at = [], 0
    for cut in sorted(set(cuts)):
        if at < cut < len(data):
            chunks.append(data[at:cut])
            at = cut
    chunks.append(data[at:])
    _receive(link, chunks)
    refused = sum(1 for code in codes if code is not None and code >= 0x80)
    assert (link.stats.acknowledged, link.stats.rejected) == (len(codes) - refused, refused)
    assert (len(queue), queue.bytes) == (0, 0)


def test_a_malformed_puback_goes_to_the_reader() -> None:
    link = _link()
    queue = link.queue
    queue.push(Entry(1, "site/1", b"x", 1, False))
    queue.fly(queue.take(), 1)  # type: ignore[arg-type]
    link._stream = _Stream([b"\x40\x02\x00\x01\x40\x02\x00\x00"])  # packet id 0: malformed
    reader = PacketReader(side="client", protocol_level=5)

    async def run() -> BaseException | None:
        try:
            await link._receiver(reader)
        except Exception as exc:
            return exc
        return None

    error = asyncio.run(run())
    assert link.stats.acknowledged == 1
    assert error is not None and "closed" not in str(error)  # the reader refused it


def _bridge() -> Bridge:
    bridge = {
        "name": "cloud",
        "address": "127.0.0.1",
        "topics": [
            {"direction": "out", "local": "a/+/x", "remote_prefix": "one/"},
            {"direction": "out", "local": "a/#", "local_prefix": "a/", "remote_prefix": "two/"},
            {"direction": "out", "local": "t/#", "tenant": "other"},
        ],
    }
    config = parse_config({"bridges": [bridge]}).bridges[0]
    return Bridge(config, MemoryStore(), "/", lambda link, packet: True)


def test_remembered_routes_answer_what_the_mappings_answer_within_their_bound() -> None:
    bridge = _bridge()
    topics = [f"a/{n}/x" for n in range(ROUTES)] + ["a/b", "t/1", "b/1", "a/1/x"]
    for tenant in ("", "other"):
        for _ in range(2):  # computed, then remembered (or forgotten and computed again)
            for topic in topics:
                mapping = bridge.topics.outbound_for(tenant, topic)
                expected = (
                    None if mapping is None else (mapping, TopicMap.to_remote(mapping, topic))
                )
                assert bridge.route(tenant, topic) == expected
    assert all(len(routes) <= ROUTES for routes in bridge._routes.values())


def test_bench_store_lists_stay_empty_between_turns(tmp_path: Path) -> None:
    async def run() -> None:
        store = BridgeStore(tmp_path / "bridge-b.log", "never")
        store.queued(Entry(1, "t", b"", 1, False))
        store.flush()
        assert (store._batch, store._queued, store._done) == ([], [], [])
        await store.aclose()

    asyncio.run(run())

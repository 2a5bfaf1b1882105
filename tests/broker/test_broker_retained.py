"""MemoryRetainedStore against the obvious oracle (a dict scanned with topic_matches)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.broker.message import Message
from edge_broker.broker.retained import MemoryRetainedStore
from edge_broker.matching.mqtt_topics import topic_matches

level = st.sampled_from(["a", "b", "", "$s"])
topics = st.lists(level, min_size=1, max_size=4).map("/".join)
filters = st.builds(
    lambda levels, tail: "/".join(levels + (["#"] if tail else [])) or "#",
    st.lists(st.sampled_from(["a", "b", "", "$s", "+"]), min_size=0, max_size=4),
    st.booleans(),
)
ops = st.lists(st.tuples(st.booleans(), topics), max_size=30)  # (set?, topic)


@settings(max_examples=400, deadline=None)
@given(ops=ops, probes=st.lists(filters, min_size=1, max_size=5))
def test_matches_oracle(ops, probes):
    store = MemoryRetainedStore()
    oracle: dict[str, Message] = {}
    for is_set, topic in ops:
        if is_set:
            m = Message(topic, topic.encode(), 0, True)
            store.set(m)
            oracle[topic] = m
        else:
            store.delete(topic)
            oracle.pop(topic, None)
    assert len(store) == len(oracle)
    for f in probes:
        got = sorted(m.topic for m in store.matching(f, 0.0))
        assert got == sorted(t for t in oracle if topic_matches(f, t)), f


def test_expired_dropped_and_branches_pruned():
    store = MemoryRetainedStore()
    store.set(Message("a/b/c", b"old", 0, True, expires_at=5.0))
    store.set(Message("a/x", b"new", 0, True))
    assert sorted(m.payload for m in store.matching("a/#", 1.0)) == [b"new", b"old"]
    assert [m.payload for m in store.matching("a/#", 6.0)] == [b"new"]
    assert len(store) == 1
    store.delete("a/x")
    assert len(store) == 0 and store.is_empty_structure()

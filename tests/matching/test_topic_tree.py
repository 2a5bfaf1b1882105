"""TopicTree (retained-message index) against a scan with the regex oracle."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mqtt_oracle import FILTER_LITERALS, TOPIC_LEVELS, oracle_matches

from edge_broker.matching import RuleError, TopicTree


@pytest.mark.parametrize("sep", ["/", "."])
def test_retained_examples(sep: str) -> None:
    tree: TopicTree[int] = TopicTree(sep)
    j = sep.join
    for n, topic in enumerate(
        ["a", j(["a", "b"]), j(["a", "b", "c"]), j(["$SYS", "x"]), j(["", "x"])]
    ):
        tree.set(topic, n)
    assert len(tree) == 5
    assert sorted(tree.matching(j(["a", "#"]))) == [
        ("a", 0),
        (j(["a", "b"]), 1),
        (j(["a", "b", "c"]), 2),
    ]
    assert sorted(v for _, v in tree.matching("#")) == [0, 1, 2, 4]  # not '$SYS/x'
    assert sorted(v for _, v in tree.matching(j(["+", "x"]))) == [4]  # the $ rule
    assert sorted(v for _, v in tree.matching(j(["$SYS", "#"]))) == [3]
    assert list(tree.matching(j(["a", "b"]))) == [(j(["a", "b"]), 1)]
    assert tree.get(j(["a", "b"])) == 1 and tree.get("zz") is None
    assert j(["a", "b"]) in tree and "a/zz" not in tree and 5 not in tree
    assert sorted(v for _, v in tree.items()) == [0, 1, 2, 3, 4]


def test_delete_prunes_and_rejects_bad_input() -> None:
    tree: TopicTree[str] = TopicTree()
    for t in ["a/b/c", "a/b", "x//y"]:
        tree.set(t, t)
    tree.set("a/b", "again")
    assert len(tree) == 3
    assert tree.delete("a/b/c") and tree.delete("a/b") and tree.delete("x//y")
    assert not tree.delete("a/b") and not tree.delete("q")
    assert len(tree) == 0 and tree.is_empty_structure()
    with pytest.raises(RuleError):
        tree.set("a/+", "wild")
    with pytest.raises(RuleError):
        list(tree.matching("a/#/b"))


@st.composite
def filters(draw: st.DrawFn) -> str:
    body = draw(st.lists(st.sampled_from([*FILTER_LITERALS, "+"]), max_size=4))
    if body in ([], [""]) or draw(st.booleans()):
        body = [*body, "#"]
    return "/".join(body)


topics = (
    st.lists(st.sampled_from(TOPIC_LEVELS), min_size=1, max_size=5)
    .filter(lambda t: t != [""])
    .map("/".join)
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), topics), max_size=40),
    st.lists(filters(), min_size=1, max_size=6),
)
def test_tree_equals_scan(ops: list[tuple[bool, str]], queries: list[str]) -> None:
    tree: TopicTree[int] = TopicTree()
    model: dict[str, int] = {}
    for n, (is_set, topic) in enumerate(ops):
        if is_set:
            tree.set(topic, n)
            model[topic] = n
        else:
            assert tree.delete(topic) == (topic in model)
            model.pop(topic, None)
        assert len(tree) == len(model)
    for q in queries:
        want = sorted((t, v) for t, v in model.items() if oracle_matches(q, t))
        assert sorted(tree.matching(q)) == want, q
    for topic in list(model):
        assert tree.delete(topic)
    assert tree.is_empty_structure()


deep_topics = (
    st.lists(st.sampled_from(["a", "b", "", "$s"]), min_size=1, max_size=10)
    .filter(lambda t: t != [""])
    .map("/".join)
)
deep_filters = st.builds(
    lambda body, tail: "/".join(body + (["#"] if tail else [])) or "#",
    st.lists(st.sampled_from(["a", "b", "", "$s", "+"]), max_size=10),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), deep_topics), max_size=40), st.lists(deep_filters))
def test_compressed_runs_split_and_merge_exactly(
    ops: list[tuple[bool, str]], queries: list[str]
) -> None:
    """Deep topics from a small alphabet share, split and re-merge compressed runs."""
    tree: TopicTree[str] = TopicTree()
    model: dict[str, str] = {}
    for is_set, topic in ops:
        if is_set:
            tree.set(topic, topic)
            model[topic] = topic
        else:
            assert tree.delete(topic) == (model.pop(topic, None) is not None)
        assert sorted(tree.items()) == sorted(model.items())
    for q in queries:
        want = sorted((t, v) for t, v in model.items() if oracle_matches(q, t))
        assert sorted(tree.matching(q)) == want, q
        assert sorted(tree.values_matching(q)) == [v for _, v in want], q
    for topic in list(model):
        assert tree.delete(topic)
    assert tree.is_empty_structure()


def test_a_retained_deep_topic_costs_about_its_bytes() -> None:
    import tracemalloc

    n = 300
    topics = ["/".join(f"{c:04d}" + "y" * 27 for _ in range(32))[:1000] for c in range(n)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tree: TopicTree[int] = TopicTree()
        for topic in topics:
            tree.set(topic, 1)
        per_topic = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert per_topic < 1000 + 400, per_topic

"""``ClientIdBindings`` (broker/ownership.py): the password file's ``clientids`` globs, compiled
with a literal-prefix index, answer exactly as ``fnmatchcase`` over every entry would."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from hypothesis import given
from hypothesis import strategies as st

from edge_broker.broker.ownership import ClientIdBindings


@dataclass(frozen=True)
class Entry:
    clientids: tuple[str, ...]
    tenants: tuple[str, ...] = ()


def test_exact_globs_and_tenants() -> None:
    bindings = ClientIdBindings(
        {
            "device": Entry(("valve-*",)),
            "pump": Entry(("pump-1",), ("plant",)),
            "odd": Entry(("s[ab]?",)),
        }
    )
    assert bindings.reserved("~", "valve-7") and bindings.reserved("acme", "valve-")
    assert not bindings.reserved("~", "valve") and not bindings.reserved("~", "xvalve-1")
    assert bindings.reserved("plant", "pump-1") and not bindings.reserved("~", "pump-1")
    assert bindings.reserved("~", "sa1") and not bindings.reserved("~", "sc1")
    assert not ClientIdBindings({}).reserved("~", "anything")


ALPHABET = "ab-*?[]!"
globs = st.text(ALPHABET, max_size=5)
ids = st.text("ab-[]", max_size=5)
tenants = st.sampled_from(["~", "t1", "t2"])


@given(
    st.lists(
        st.tuples(st.lists(globs, max_size=3), st.lists(st.sampled_from(["t1", "t2"]), max_size=2)),
        max_size=4,
    ),
    tenants,
    ids,
)
def test_same_answer_as_fnmatch_over_every_entry(entries, tenant, client_id) -> None:
    table = {f"u{i}": Entry(tuple(g), tuple(t)) for i, (g, t) in enumerate(entries)}
    expected = any(
        fnmatchcase(client_id, glob) and (not e.tenants or tenant in e.tenants)
        for e in table.values()
        for glob in e.clientids
    )
    assert ClientIdBindings(table).reserved(tenant, client_id) == expected

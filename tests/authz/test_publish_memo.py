"""A repeated PUBLISH costs one lookup under a configured policy (issue 32): the pipeline
remembers allowed publish decisions per (identity, topic, qos, retain, ACL kind) while every
gate's decision depends on those alone, and counts allowed decisions without building their
(gate, rule) key until someone reads ``hits``. Denials, claims, token clients and audited
allowed decisions are still judged every time."""

from __future__ import annotations

from typing import Any

from edge_broker.authz.decision import GateName
from edge_broker.authz.gates import GatePipeline
from edge_broker.authz.policy import build_pipeline
from edge_broker.broker.message import make_message
from edge_broker.config import loads_config
from edge_broker.identity import Identity
from edge_broker.mqtt.packets import NO_PROPERTIES
from scripts.bench_brokers import gated_policy

POLICY = gated_policy("alice")  # the gated policy of scripts/bench
ALICE = Identity(client_id="a", username="alice", method="password")


def message(topic: str, qos: int = 0, retain: bool = False, payload: bytes = b"x") -> Any:
    return make_message(topic, payload, qos, retain, NO_PROPERTIES, "a")


def pipeline(extra: str = "", claims: Any = None) -> GatePipeline:
    built = build_pipeline(loads_config(POLICY + extra), claims, None)
    assert built is not None
    return built


def counting(built: GatePipeline) -> list[str]:
    """Record every topic the permissions gate is asked about."""
    asked: list[str] = []
    gate = built.permissions
    assert gate is not None
    real = gate.check_publish

    def check(identity: Identity, topic: str, qos: int, retain: bool) -> Any:
        asked.append(topic)
        return real(identity, topic, qos, retain)

    gate.check_publish = check  # type: ignore[method-assign]
    return asked


def test_a_repeated_publish_is_judged_once_and_counted_every_time() -> None:
    built = pipeline()
    asked = counting(built)
    for _ in range(100):
        assert built.check_publish(ALICE, message("bench/1")).allowed  # type: ignore[union-attr]
    assert asked == ["bench/1"]
    assert built.hits == {(GateName.PERMISSIONS.value, "bench"): 100}
    # another qos, retain flag, topic or identity is judged on its own
    built.check_publish(ALICE, message("bench/1", qos=1))
    built.check_publish(ALICE, message("bench/1", retain=True))
    built.check_publish(ALICE, message("bench/2"))
    other = Identity(client_id="b", username="alice", method="password")
    built.check_publish(other, message("bench/1"))
    assert asked == ["bench/1"] * 3 + ["bench/2", "bench/1"]
    assert sum(built.hits.values()) == 104


def test_denials_are_judged_and_counted_every_time() -> None:
    built = pipeline()
    asked = counting(built)
    for _ in range(3):
        decision = built.check_publish(ALICE, message("admin/x"))
        assert not decision.allowed  # type: ignore[union-attr]
    assert asked == ["admin/x"] * 3
    assert built.denials == {(GateName.PERMISSIONS.value, "no-admin"): 3}


def test_a_reload_carries_the_counts_over() -> None:
    old, new = pipeline(), pipeline()
    for _ in range(5):
        old.check_publish(ALICE, message("bench/1"))
    new.hits, new.denials = old.hits, old.denials  # broker/reload.py
    new.check_publish(ALICE, message("bench/1"))
    assert new.hits == {(GateName.PERMISSIONS.value, "bench"): 6}


class ChangingGate:
    """A gate whose answer changes between two identical PUBLISHes (as claims do)."""

    gate = GateName.CLAIMS
    checks_every_delivery = False

    def __init__(self) -> None:
        self.deny = False

    def check_publish(self, identity: Identity, message: Any) -> Any:
        from edge_broker.authz.decision import deny

        return deny(GateName.CLAIMS, "r", "claimed") if self.deny else None

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        return False


def test_a_gate_that_may_change_its_answer_is_asked_every_time() -> None:
    gate = ChangingGate()
    built = pipeline(claims=gate)
    assert built.check_publish(ALICE, message("bench/1")).allowed  # type: ignore[union-attr]
    gate.deny = True
    assert not built.check_publish(ALICE, message("bench/1")).allowed  # type: ignore[union-attr]


def test_the_memo_is_bounded_in_bytes() -> None:
    built = pipeline("[limits]\ndecision_cache_bytes = 100000\n")
    for i in range(200):
        built.check_publish(ALICE, message(f"bench/{i}/" + "x" * 2000))
    assert built._memo_bytes <= 100_000
    assert len(built._memo or {}) < 50

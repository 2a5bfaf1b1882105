"""Which gates see deliveries (egress ACL, claims) is found once, when the pipeline is built
(issue 21): the broker's drain and routing read ``has_delivery_gates`` per message and a
subscription asks ``delivers_need_check``, neither of which may scan the gates again. A new
policy (reload, bundle) builds a new pipeline, so the answer follows it."""

from __future__ import annotations

from edge_broker.authz.decision import GateName
from edge_broker.authz.gates import GatePipeline
from edge_broker.authz.policy import Policy, build_pipeline
from edge_broker.config import loads_config
from edge_broker.identity import Identity

IDENTITY = Identity(client_id="c", method="anonymous")


class Gate:
    """A gate that counts how often it is asked whether it sees deliveries."""

    def __init__(self, delivers: bool) -> None:
        self.delivers = delivers
        self.asked = 0
        self.filters: list[str] = []

    @property
    def gate(self) -> GateName:
        return GateName.ACL

    @property
    def checks_every_delivery(self) -> bool:
        self.asked += 1
        return self.delivers

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        self.filters.append(topic_filter)
        return topic_filter == "secret/#"


def test_the_delivery_gates_are_found_once_when_the_pipeline_is_built() -> None:
    ingress, egress = Gate(False), Gate(True)
    pipeline = GatePipeline(gates=[ingress, egress])  # type: ignore[list-item]
    policy = Policy("/", pipeline)
    for _ in range(100):
        assert pipeline.has_delivery_gates and policy.has_delivery_gates
        assert policy.delivers_need_check(IDENTITY, "secret/#")
        assert not policy.delivers_need_check(IDENTITY, "open/#")
    assert (ingress.asked, egress.asked) == (1, 1)
    # only a gate that sees deliveries is asked about a subscription
    assert ingress.filters == [] and len(egress.filters) == 200


def test_without_a_delivery_gate_nothing_is_checked() -> None:
    pipeline = GatePipeline(gates=[Gate(False)])  # type: ignore[list-item]
    assert not pipeline.has_delivery_gates and pipeline.delivery_gates == ()
    assert not Policy("/", pipeline).delivers_need_check(IDENTITY, "secret/#")


def test_a_new_policy_finds_its_own_delivery_gates() -> None:
    """What a reload does (``Broker.build_policy``): an egress deny rule added to the site ACL
    makes the new pipeline's deliveries checked; the old pipeline keeps its answer."""
    acl = (
        '[acl]\nenabled = true\ndefault_permission = "allow"\n'
        '[[acl.rules]]\nid = "r"\nmessages = ["put"]\nflows = ["{flow}"]\n'
        'permission = "deny"\nkey_exprs = ["secret/**"]\n'
        '[[acl.subjects]]\nid = "all"\n[[acl.policies]]\nrules = ["r"]\nsubjects = ["all"]\n'
    )
    before = build_pipeline(loads_config(acl.format(flow="ingress")), None, None)
    after = build_pipeline(loads_config(acl.format(flow="egress")), None, None)
    assert before is not None and after is not None
    assert not before.has_delivery_gates and not Policy("/", before).has_delivery_gates
    assert after.has_delivery_gates and Policy("/", after).has_delivery_gates
    assert len(after.delivery_gates) == 1

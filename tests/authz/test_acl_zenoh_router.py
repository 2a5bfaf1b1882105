"""Differential test of the ACL semantics against a REAL Zenoh router (eclipse-zenoh, test-only):
seed 004's matching-table rows are enforced by a zenohd-equivalent router on loopback, and our
compiled ACL must predict exactly which subscriptions Zenoh lets through.

A second test pins down the one deliberate divergence (authz/acl.py docstring): with several
matching subjects Zenoh allows when any of them allows, edge-broker lets a deny win.

Each row gets its own key space (``rowN/`` in front of both key expressions; a shared literal
first chunk preserves inclusion both ways), so one router holds every row. A row's rule is a
``declare_subscriber`` rule (ingress); the row's request is the subscription's key expression.
A publisher then puts one concrete key inside the request on every row; the subscriber receives
it exactly when Zenoh accepted the subscription. Put itself is allowed everywhere.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from edge_broker.authz.acl import Acl
from edge_broker.authz.acl_config import AclMessage, Flow
from scripts.procs import free_port
from tests.seed004_tables import MATCHING_TABLE

zenoh = pytest.importorskip(
    "zenoh", reason="eclipse-zenoh (the test oracle) has no wheel for this platform"
)

TABLE = [(request, rule) for request, rule, _ in MATCHING_TABLE]  # Zenoh is the oracle


def concrete(expr: str) -> str:
    """One key inside ``expr`` (a, @demo and demo chunks kept; wildcards filled)."""
    out = []
    for chunk in expr.split("/"):
        if chunk in ("*", "**"):
            out.append("a")
        else:
            out.append(chunk.replace("$*", "emo"))
    return "/".join(out)


def acl_section(default: str) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    for i, (_, rule) in enumerate(TABLE):
        rules.append(
            {
                "id": f"row{i}",
                "messages": ["declare_subscriber"],
                "flows": ["ingress"],
                "permission": "deny" if default == "allow" else "allow",
                "key_exprs": [f"row{i}/{rule}"],
            }
        )
    if default == "deny":  # puts must pass: allow each published key exactly
        keys = [f"row{i}/{concrete(req)}" for i, (req, _) in enumerate(TABLE)]
        rules.append({"id": "puts", "messages": ["put"], "permission": "allow", "key_exprs": keys})
        # and every subscription the router propagates to the publisher's face (egress)
        rules.append(
            {
                "id": "egress-subs",
                "messages": ["declare_subscriber"],
                "flows": ["egress"],
                "permission": "allow",
                "key_exprs": [f"row{i}/{req}" for i, (req, _) in enumerate(TABLE)],
            }
        )
    return {
        "enabled": True,
        "default_permission": default,
        "rules": rules,
        "subjects": [{"id": "loopback", "interfaces": ["lo"]}],
        "policies": [{"rules": [r["id"] for r in rules], "subjects": ["loopback"]}],
    }


def zenoh_config(mode: str, port: int, acl: dict[str, Any] | None = None) -> Any:
    config = zenoh.Config()
    config.insert_json5("mode", json.dumps(mode))
    endpoint = json.dumps([f"tcp/127.0.0.1:{port}"])
    config.insert_json5("listen/endpoints" if mode == "router" else "connect/endpoints", endpoint)
    config.insert_json5("scouting/multicast/enabled", "false")
    if acl is not None:
        config.insert_json5("access_control", json.dumps(acl))
    return config


def deliveries(
    section: dict[str, Any], keys: list[str], subscriptions: list[str], awaited: set[str]
) -> set[str]:
    """Keys a loopback subscriber on each of ``subscriptions`` receives when a loopback client
    puts each of ``keys`` through a router with ``section``: puts repeat until ``awaited`` all
    arrived (at most 10 s), then a short grace period catches anything unexpected (a denied
    subscription must stay silent)."""
    port = free_port()
    router = zenoh.open(zenoh_config("router", port, section))
    publisher = zenoh.open(zenoh_config("client", port))
    subscriber = zenoh.open(zenoh_config("client", port))
    received: set[str] = set()
    lock = threading.Lock()

    def on_sample(sample: Any) -> None:
        with lock:
            received.add(str(sample.key_expr))

    try:
        subs = [subscriber.declare_subscriber(s, on_sample) for s in subscriptions]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for key in keys:
                publisher.put(key, b"1")
            time.sleep(0.3)
            with lock:
                if received >= awaited:
                    break
        for key in keys:
            publisher.put(key, b"1")
        time.sleep(0.5)
        for sub in subs:
            sub.undeclare()
        with lock:
            return set(received)
    finally:
        subscriber.close()
        publisher.close()
        router.close()


@pytest.mark.parametrize("default", ["allow", "deny"])
def test_real_zenoh_router_agrees_with_our_acl(default: str) -> None:
    section = acl_section(default)
    ours = Acl.load(section).for_subject("lo", None, None)
    expected = set()
    for i, (request, _) in enumerate(TABLE):
        if ours.allows(Flow.INGRESS, AclMessage.DECLARE_SUBSCRIBER, f"row{i}/{request}"):
            expected.add(f"row{i}/{concrete(request)}")
    assert 0 < len(expected) < len(TABLE)  # the table has both outcomes

    keys = [f"row{i}/{concrete(request)}" for i, (request, _) in enumerate(TABLE)]
    filters = [f"row{i}/{request}" for i, (request, _) in enumerate(TABLE)]
    assert deliveries(section, keys, filters, expected) == expected


@pytest.mark.parametrize("default", ["allow", "deny"])
def test_divergence_when_several_subjects_match(default: str) -> None:
    section = {
        "enabled": True,
        "default_permission": default,
        "rules": [
            {"id": "deny-secret", "messages": ["put"], "permission": "deny",
             "key_exprs": ["k/secret"]},
            {"id": "allow-all", "messages": ["put", "declare_subscriber"],
             "permission": "allow", "key_exprs": ["k/**"]},
        ],
        "subjects": [{"id": "lo", "interfaces": ["lo"]}, {"id": "anyone"}],
        "policies": [
            {"rules": ["deny-secret", "allow-all"], "subjects": ["lo"]},
            {"rules": ["allow-all"], "subjects": ["anyone"]},
        ],
    }  # fmt: skip
    # Zenoh: "anyone" allows, and any allowing subject wins.
    zenoh_view = {"k/secret", "k/open"}
    assert deliveries(section, ["k/secret", "k/open"], ["k/**"], zenoh_view) == zenoh_view
    # edge-broker: the deny of "lo" wins for a loopback client that matches both subjects.
    ours = Acl.load(section).for_subject("lo", None, None)
    assert not ours.allows(Flow.INGRESS, AclMessage.PUT, "k/secret")
    assert ours.allows(Flow.INGRESS, AclMessage.PUT, "k/open")


def test_interface_subjects_apply_only_on_their_interface() -> None:
    section = {
        "enabled": True,
        "default_permission": "allow",
        "rules": [
            {"id": "deny-secret", "messages": ["put"], "permission": "deny",
             "key_exprs": ["k/secret"]},
            {"id": "deny-other", "messages": ["put"], "permission": "deny",
             "key_exprs": ["k/other"]},
        ],
        "subjects": [{"id": "lo", "interfaces": ["lo"]},
                     {"id": "field", "interfaces": ["ebtest0"]}],
        "policies": [
            {"rules": ["deny-secret"], "subjects": ["lo"]},
            {"rules": ["deny-other"], "subjects": ["field"]},
        ],
    }  # fmt: skip
    keys = ["k/secret", "k/other", "k/open"]
    ours = Acl.load(section).for_subject("lo", None, None)
    expected = {k for k in keys if ours.allows(Flow.INGRESS, AclMessage.PUT, k)}
    assert expected == {"k/other", "k/open"}
    assert deliveries(section, keys, ["k/**"], expected) == expected


@pytest.mark.parametrize("flow", ["ingress", "egress"])
def test_flow_restricted_deny(flow: str) -> None:
    # Both clients are on loopback: an ingress deny stops the publisher's put at the router,
    # an egress deny stops the delivery to the subscriber; either way it never arrives.
    section = {
        "enabled": True,
        "default_permission": "allow",
        "rules": [{"id": "no-secret", "messages": ["put"], "flows": [flow], "permission": "deny",
                   "key_exprs": ["k/secret"]}],
        "subjects": [{"id": "lo", "interfaces": ["lo"]}],
        "policies": [{"rules": ["no-secret"], "subjects": ["lo"]}],
    }  # fmt: skip
    ours = Acl.load(section).for_subject("lo", None, None)
    denied_flow = Flow(flow)
    other_flow = Flow.EGRESS if denied_flow is Flow.INGRESS else Flow.INGRESS
    assert not ours.allows(denied_flow, AclMessage.PUT, "k/secret")
    assert ours.allows(other_flow, AclMessage.PUT, "k/secret")
    keys = ["k/secret", "k/open"]
    assert deliveries(section, keys, ["k/**"], {"k/open"}) == {"k/open"}

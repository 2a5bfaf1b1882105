#!/usr/bin/env python3
"""Site ACL decisions per second with 100 and 10k rules (seed 004, PATTERNS.md "Matching
structures": the cost must stay nearly flat as rules grow).

Usage: .venv/bin/python scripts/bench_acl.py [--rules 100,10000] [--requests 20000] [--seed 1]

For each rule count it builds an ``access_control`` section (a mix of exact keys, ``*``, ``**``
and ``$*`` rules, allow and deny, over a few subjects), compiles it, takes the identity's
``SubjectAcl`` once (as the broker does per connection) and times:

- ``decide(str)``: topic string -> key expression parse -> deny tree (+ allow tree);
- ``decide(KeyExpr)``: the same with the key already parsed;
- ``check_publish``: the MQTT path (PUBLISH -> message kind -> topic mapping -> decide);
- ``in+eg``: one PUBLISH mapped once, checked on ingress for the publisher and on egress for
  one subscriber of another subject (the broker's per-delivery check);
- ``linear``: a rule-by-rule scan with pairwise inclusion, the baseline the trees replace
  (run on fewer requests when the rule count is large).

Rates are per second of process CPU time (``time.process_time``), so other load on the machine
distorts them less than wall time would. Also prints compile time and the time to build one merged
``SubjectAcl`` and answer its first question (the trees of the asked (flow, message) are united on
first use).

``--broker``: the same ACLs in the live broker (``[acl] file =`` a Zenoh config.json5), driven
by the load generator of scripts/bench (scripts/bench_load.py, pre-encoded MQTT 3.1.1 over
loopback, several processes). Reports broker CPU µs per delivered message (utime+stime from
/proc) for: the ACL off; 100 and 10k rules "ingress only" (all rules ingress, default allow,
so deliveries are never checked); and "ingress + egress" (the same rules on both flows, default
deny: every PUBLISH is checked for the publisher and every delivery for the receiver). The
bench clients connect over 127.0.0.1 and match the catch-all subject ``all``.

    .venv/bin/python scripts/bench_acl.py --broker [--rules 100,10000] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from edge_broker.authz.acl import Acl
from edge_broker.authz.acl_config import AclMessage, Flow
from edge_broker.authz.acl_mqtt import check, check_publish, publish_request
from edge_broker.matching.keyexpr import KeyExpr
from edge_broker.mqtt.packets import Publish


def make_config(n_rules: int, rng: random.Random) -> dict[str, Any]:
    rules = []
    sites = max(1, n_rules // 10)
    for i in range(n_rules):
        site = rng.randrange(sites)
        shape = rng.random()
        if shape < 0.55:
            key = f"site{site}/dev{rng.randrange(50)}/temp"
        elif shape < 0.75:
            key = f"site{site}/*/status"
        elif shape < 0.85:
            key = f"site{site}/dev{rng.randrange(50)}/**"
        else:
            key = f"site{site}/d$*/cfg"
        rules.append(
            {
                "id": f"r{i}",
                "messages": ["put", "declare_subscriber"],
                "permission": "deny" if rng.random() < 0.2 else "allow",
                "key_exprs": [key],
            }
        )
    return {
        "enabled": True,
        "default_permission": "deny",
        "rules": rules,
        "subjects": [
            {"id": "field", "interfaces": ["wlan0"]},
            {"id": "ops", "usernames": ["ops"]},
            {"id": "all"},
        ],
        "policies": [
            {"rules": [r["id"] for r in rules[0::2]], "subjects": ["field"]},
            {"rules": [r["id"] for r in rules[1::2]], "subjects": ["ops", "all"]},
        ],
    }


def make_topics(n_rules: int, n: int, rng: random.Random) -> list[str]:
    sites = max(1, n_rules // 10)
    leaf = ["temp", "status", "cfg", "other"]
    return [
        f"site{rng.randrange(sites)}/dev{rng.randrange(60)}/{rng.choice(leaf)}" for _ in range(n)
    ]


def rate(fn: Callable[[Any], object], items: list[Any]) -> float:
    """Items per second of this process's CPU time (stable on a loaded machine)."""
    start = time.process_time()
    for item in items:
        fn(item)
    elapsed = time.process_time() - start
    return len(items) / elapsed


def bench_one(n_rules: int, n_requests: int, seed: int) -> str:
    rng = random.Random(seed)
    data = make_config(n_rules, rng)
    t0 = time.perf_counter()
    acl = Acl.load(data)
    compile_s = time.perf_counter() - t0
    topics = make_topics(n_rules, n_requests, rng)
    t0 = time.perf_counter()
    subject = acl.for_subject("wlan0", None, "ops")  # field + ops + all: a merged subject
    subject.decide(Flow.INGRESS, AclMessage.PUT, topics[0])  # unites the trees of this scope
    merge_ms = (time.perf_counter() - t0) * 1000
    keys = [KeyExpr.parse(t) for t in topics]
    publishes = [Publish(t, b"1") for t in topics]
    allowed = sum(subject.allows(Flow.INGRESS, AclMessage.PUT, k) for k in keys)
    r_str = rate(lambda t: subject.decide(Flow.INGRESS, AclMessage.PUT, t), topics)
    r_ke = rate(lambda k: subject.decide(Flow.INGRESS, AclMessage.PUT, k), keys)
    r_pub = rate(lambda p: check_publish(subject, p), publishes)
    receiver = acl.for_subject("eth0", None, None)  # the "all" subject only

    def ingress_and_egress(publish: Publish) -> bool:
        request = publish_request(publish)  # mapped once per message
        if not check(subject, Flow.INGRESS, request).allowed:
            return False
        return check(receiver, Flow.EGRESS, request).allowed

    r_both = rate(ingress_and_egress, publishes)
    rules = [(r["permission"], KeyExpr.parse(k)) for r in data["rules"] for k in r["key_exprs"]]

    def linear(key: KeyExpr) -> bool:
        if any(p == "deny" and k.includes(key) for p, k in rules):
            return False
        return any(p == "allow" and k.includes(key) for p, k in rules)

    sample = keys[: max(50, min(len(keys), 2_000_000 // max(1, n_rules)))]
    r_lin = rate(linear, sample)
    return (
        f"{n_rules:>7} {compile_s:>9.2f} {merge_ms:>8.1f} {r_str:>14,.0f} {r_ke:>13,.0f} "
        f"{r_pub:>15,.0f} {r_both:>10,.0f} {r_lin:>10,.0f} {allowed / len(keys):>8.0%}"
    )


def broker_acl(n_rules: int, flows: list[str], seed: int) -> dict[str, Any]:
    """``make_config`` with every rule on ``flows``, plus the rule the bench traffic needs:
    default deny when egress is checked (every delivery needs an egress allow), else allow."""
    data = make_config(n_rules, random.Random(seed))
    for rule in data["rules"]:
        rule["flows"] = flows
    data["rules"].append(
        {
            "id": "bench",
            "messages": ["put", "declare_subscriber"],
            "flows": flows,
            "permission": "allow",
            "key_exprs": ["bench/*/*/data"],
        }
    )
    data["policies"].append({"rules": ["bench"], "subjects": ["all"]})
    data["default_permission"] = "deny" if "egress" in flows else "allow"
    return data


def bench_broker(rule_counts: list[int], scale: float, seed: int) -> None:
    import json
    import sys
    import tempfile
    from pathlib import Path

    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    from bench_brokers import start_edge
    from bench_load import Scenario, run

    scenarios = [
        Scenario("1→1 QoS 0", 1, 1, 1, 0, False, 100_000),
        Scenario("1→10 fan-out QoS 0", 1, 10, 2, 0, False, 20_000),
    ]
    setups: list[tuple[str, dict[str, Any] | None]] = [("ACL off", None)]
    for n in rule_counts:
        setups.append((f"{n} rules, ingress only", broker_acl(n, ["ingress"], seed)))
        setups.append((f"{n} rules, ingress + egress", broker_acl(n, ["ingress", "egress"], seed)))
    print("| ACL | scenario | delivered/s | broker CPU µs/delivery | broker CPU µs/message in |")
    print("|---|---|---:|---:|---:|")
    for label, acl in setups:
        workdir = Path(tempfile.mkdtemp(prefix="bench-acl-"))
        extra = "[sys]\ninterval = 0\n"
        if acl is not None:
            (workdir / "zenoh.json5").write_text(json.dumps({"access_control": acl}))
            extra += f'[acl]\nfile = "{workdir / "zenoh.json5"}"\n'
        broker = start_edge(workdir, extra)
        try:
            for scenario in scenarios:
                r = run(scenario, broker.port, broker.cpu_seconds, scale)
                ok = "" if r.delivered >= r.expected else f" (only {r.delivered}/{r.expected})"
                per_in = (
                    r.broker_cpu / (r.delivered / scenario.subscribers) * 1e6
                    if r.delivered
                    else float("nan")
                )
                print(
                    f"| {label} | {scenario.name} | {r.rate:,.0f}{ok} | {r.us_per_msg:.2f} | "
                    f"{per_in:.2f} |",
                    flush=True,
                )
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rules", default="100,10000")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--broker", action="store_true", help="measure the live broker (see above)")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="--broker: multiply message counts"
    )
    args = parser.parse_args()
    if args.broker:
        bench_broker([int(x) for x in args.rules.split(",")], args.scale, args.seed)
        return
    print(
        f"{'rules':>7} {'compile s':>9} {'merge ms':>8} {'decide(str)/s':>14} "
        f"{'decide(ke)/s':>13} {'check_publish/s':>15} {'in+eg/s':>10} {'linear/s':>10} "
        f"{'allowed':>8}"
    )
    for n_rules in (int(x) for x in args.rules.split(",")):
        print(bench_one(n_rules, args.requests, args.seed))


if __name__ == "__main__":
    main()

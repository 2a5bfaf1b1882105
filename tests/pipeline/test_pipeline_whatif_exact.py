"""What-if is exact, as a property (issue 30): hypothesis draws a baseline and a candidate policy
(permission sets with QoS, retain and activity conditions and ``${clientid}``, assignments by
user name, role and client id, a site ACL with subjects by user name and interface) and a
sequence of publishes and subscribes by password clients; the traffic runs through a real
broker under the baseline, ``whatif`` replays that broker's real audit log against the
candidate, the same traffic runs through a real broker under the candidate, and whatif's diff
must equal the observed diff, request by request, with nothing "cannot judge".

Observed outcomes: SUBACK codes for subscribes (the wire), and for publishes (QoS 0 has no answer
on the wire) the broker's own decision records, checked against the PUBACK for QoS 1. A few
examples in CI; ``-m soak`` runs many more."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paho.mqtt.enums import CallbackAPIVersion

from edge_broker.audit.log import read_records
from edge_broker.auth.password import set_user, write_password_file
from edge_broker.pipeline.whatif import run_whatif
from edge_broker.sync.bundle import PolicyBundle
from tests.conftest import BrokerFactory

GW = "gw-exact"
# user -> (password, roles); client id -> user
USERS = {"u1": ("pw1", ("sensor",)), "u2": ("pw2", ()), "u3": ("pw3", ("ops", "sensor"))}
CLIENTS = {"c1": "u1", "c2": "u2", "c3": "u3"}
LEVELS = ("a", "b", "c1", "c2", "u1")

level = st.sampled_from(LEVELS)
topic_name = st.lists(level, min_size=1, max_size=3).map("/".join)


@st.composite
def topic_filter(draw: Any, placeholders: bool = False) -> str:
    choices = [*LEVELS, "+"] + (["${clientid}", "${username}"] if placeholders else [])
    levels = draw(st.lists(st.sampled_from(choices), min_size=1, max_size=3))
    if draw(st.booleans()):
        levels = [*levels[:2], "#"]
    return "/".join(levels)


@st.composite
def permission(draw: Any, rule_id: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"id": rule_id, "topic": draw(topic_filter(placeholders=True))}
    for key, values in (
        ("activity", ("PUBLISH", "SUBSCRIBE")),
        ("qos", ("ZERO", "ONE", "ZERO_ONE", "ONE_TWO", "TWO")),
        ("retain", ("RETAINED", "NOT_RETAINED")),
        ("type", ("DENY",)),
    ):
        if draw(st.booleans()):
            rule[key] = draw(st.sampled_from(values))
    return rule


@st.composite
def policy(draw: Any) -> dict[str, Any]:
    sets = {
        name: {"rules": [draw(permission(f"{name}-r{i}")) for i in range(draw(st.integers(0, 3)))]}
        for name in ("s0", "s1")
    }
    for body in sets.values():
        if draw(st.booleans()):
            body["default_behaviour"] = draw(st.sampled_from(("allow", "deny")))
    selectors = st.sampled_from(
        [
            {"username": "u1"},
            {"username": "u2"},
            {"username": "u*"},
            {"role": "sensor"},
            {"role": "ops"},
            {"client_id": "c3"},
            {"client_id": "c*"},
            {},
        ]
    )
    assign = [
        {**draw(selectors), "sets": draw(st.sampled_from((["s0"], ["s1"], ["s0", "s1"])))}
        for _ in range(draw(st.integers(1, 3)))
    ]
    out: dict[str, Any] = {
        "permissions": {
            "unassigned": draw(st.sampled_from(("allow", "deny"))),
            "sets": sets,
            "assign": assign,
        }
    }
    if draw(st.booleans()):
        rules = []
        for i in range(draw(st.integers(1, 2))):
            rules.append(
                {
                    "id": f"acl-{i}",
                    # any message kinds: each record says which kind its request was (msg)
                    "messages": draw(
                        st.lists(
                            st.sampled_from(
                                (
                                    "put",
                                    "delete",
                                    "query",
                                    "reply",
                                    "declare_subscriber",
                                    "declare_queryable",
                                )
                            ),
                            min_size=1,
                            max_size=6,
                            unique=True,
                        )
                    ),
                    "flows": ["ingress"],
                    "permission": draw(st.sampled_from(("allow", "deny"))),
                    "key_exprs": [draw(st.sampled_from(("a/**", "b/*", "*/a", "**", "c1/**")))],
                }
            )
        subject = draw(st.sampled_from(({"usernames": ["u1"]}, {"interfaces": ["lo"]})))
        out["acl"] = {
            "enabled": True,
            "default_permission": draw(st.sampled_from(("allow", "deny"))),
            "rules": rules,
            "subjects": [{"id": "who", **subject}],
            "policies": [{"rules": [r["id"] for r in rules], "subjects": ["who"]}],
        }
    return out


@st.composite
def traffic(draw: Any) -> list[tuple[str, str, str, int, bool]]:
    out = []
    for _ in range(draw(st.integers(4, 14))):
        client = draw(st.sampled_from(sorted(CLIENTS)))
        if draw(st.booleans()):
            out.append(
                (client, "publish", draw(topic_name), draw(st.integers(0, 2)), draw(st.booleans()))
            )
        else:
            out.append((client, "subscribe", draw(topic_filter()), draw(st.integers(0, 2)), False))
    return out


def _inline(value: Any) -> str:
    """A TOML inline value (tables nest inline: a policy's sets hold arrays of tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_inline(v)}" for k, v in value.items()) + "}"


def _config(passwd: Path, audit: Path, sections: dict[str, Any]) -> str:
    """The broker under ``sections``: password logins, every decision in the audit log.
    Top-level keys go first, before any table header."""
    policy = "".join(f"{name} = {_inline(body)}\n" for name, body in sections.items())
    return (
        policy
        + '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
        + 'auth_methods = ["password"]\n'
        + f'[sys]\ninterval = 0\n[passwords]\nfile = "{passwd}"\n'
        + f'[audit]\ndir = "{audit}"\ngateway_id = "{GW}"\nlog_allowed = true\n'
    )


def _run(
    broker_factory: BrokerFactory, config: str, requests: list[tuple[str, str, str, int, bool]]
) -> dict[tuple[str, str, str, int, bool], int]:
    """Run ``requests`` in order; the SUBACK code of each subscribe and the PUBACK code of each
    QoS 1 publish (what the wire tells)."""
    broker = broker_factory(config)
    clients: dict[str, mqtt.Client] = {}
    codes: dict[tuple[str, str, str, int, bool], int] = {}
    try:
        for cid, user in CLIENTS.items():
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=cid, protocol=mqtt.MQTTv5)
            c.username_pw_set(user, USERS[user][0])
            done = threading.Event()
            c.on_connect = lambda *a, done=done: done.set()
            c.connect(broker.host, broker.port)
            c.loop_start()
            assert done.wait(10), f"{cid} did not connect"
            clients[cid] = c
        answers: list[int] = []
        answered = threading.Event()

        def on_subscribe(cl: Any, u: Any, mid: int, rcs: Any, p: Any) -> None:
            answers.append(rcs[0].value)
            answered.set()

        def on_publish(cl: Any, u: Any, mid: int, rc: Any, p: Any) -> None:
            answers.append(rc.value)
            answered.set()

        for c in clients.values():
            c.on_subscribe = on_subscribe
            c.on_publish = on_publish
        for req in requests:  # one at a time: each answered before the next
            cid, action, topic, qos, retain = req
            answered.clear()
            answers.clear()
            if action == "subscribe":
                clients[cid].subscribe(topic, qos)
            else:
                clients[cid].publish(topic, b"x", qos, retain)
            assert answered.wait(10), f"no answer to {req}"
            got = answers
            if action == "subscribe" or qos == 1:
                codes[req] = got[0]
    finally:
        for c in clients.values():
            c.disconnect()
            c.loop_stop()
        time.sleep(0.2)
        broker.stop()
    return codes


def _observed(audit: Path) -> dict[tuple[str, str, str, int, bool], str]:
    out: dict[tuple[str, str, str, int, bool], str] = {}
    for _, _, r in read_records(audit):
        if r.get("type") != "decision" or r.get("action") not in ("publish", "subscribe"):
            continue
        if "qos" not in r:
            pytest.xfail(
                "the broker's decision records lack qos/retain/roles (the audit writing side, "
                "branch `audit`, is not merged yet)"
            )
        key = (r["client"], r["action"], r["topic"], int(r["qos"]), bool(r.get("retain")))
        assert out.get(key, r["outcome"]) == r["outcome"], f"two outcomes for {key}"
        out[key] = r["outcome"]
    return out


def _users(path: Path) -> Path:
    entries: dict[str, Any] = {}
    for user, (password, roles) in USERS.items():
        entries = set_user(entries, user, password, roles=roles)
    write_password_file(path, entries)
    return path


def check_exact(
    spark: Any,
    broker_factory: BrokerFactory,
    base: Path,
    baseline: dict[str, Any],
    candidate: dict[str, Any],
    requests: list[tuple[str, str, str, int, bool]],
) -> None:
    base.mkdir(parents=True)
    passwd = _users(base / "passwd")
    runs = {}
    for name, sections in (("baseline", baseline), ("candidate", candidate)):
        audit = base / name / "audit"
        codes = _run(broker_factory, _config(passwd, audit, sections), requests)
        observed = _observed(audit)
        for req in requests:
            assert req in observed, f"{name}: no decision record for {req}"
            if req in codes:  # the wire agrees with the record
                assert (codes[req] < 0x80) == (observed[req] == "allow"), (name, req, codes[req])
        runs[name] = observed
    expected = {
        key: (runs["baseline"][key], runs["candidate"][key])
        for key in set(requests)
        if runs["baseline"][key] != runs["candidate"][key]
    }
    bundle = PolicyBundle(2, GW, 0, candidate, "k", b"")
    result = run_whatif(spark, [str(base / "baseline" / "audit")], bundle, str(base / "wi"))
    assert result.unjudged == 0, result.unjudged_by_rule

    import pandas as pd

    changes = pd.read_parquet(base / "wi" / "changes")
    got = {
        (r["client"], r["action"], r["topic"], int(r["qos"]), bool(r["retain"])): (
            r["before_outcome"],
            r["after_outcome"],
        )
        for r in changes.to_dict("records")
    }
    assert got == expected, json.dumps(
        {"baseline": baseline, "candidate": candidate, "traffic": requests}, default=str
    )


_COUNTER = iter(range(10**9))


def _property(max_examples: int) -> Any:
    """The property with ``max_examples`` examples: a few in CI, many more under ``-m soak``."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(baseline=policy(), candidate=policy(), requests=traffic())
    def test(
        spark: Any,
        broker_factory: BrokerFactory,
        tmp_path: Path,
        baseline: dict[str, Any],
        candidate: dict[str, Any],
        requests: list[tuple[str, str, str, int, bool]],
    ) -> None:
        check_exact(
            spark, broker_factory, tmp_path / f"ex{next(_COUNTER)}", baseline, candidate, requests
        )

    return test


test_whatif_diff_equals_the_observed_diff = _property(3)
test_whatif_diff_equals_the_observed_diff_soak = pytest.mark.soak(_property(60))


def test_the_issues_qos_and_role_candidates(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """The issue's two misses as explicit examples: a candidate limiting own data to QoS 0
    (QoS 1 publishes newly refused) and the same sets assigned by role."""
    sets = {
        "sensor": {
            "rules": [
                {"id": "own-data", "topic": "${clientid}/#", "activity": "PUBLISH"},
                {"id": "cmds", "topic": "a/${clientid}", "activity": "SUBSCRIBE"},
            ]
        }
    }
    baseline = {
        "permissions": {
            "unassigned": "deny",
            "sets": sets,
            "assign": [{"username": "u1", "sets": ["sensor"]}],
        }
    }
    limited = json.loads(json.dumps(sets))
    limited["sensor"]["rules"][0]["qos"] = "ZERO"
    limited["sensor"]["rules"].append({"id": "b-too", "topic": "b/#", "activity": "PUBLISH"})
    candidate = {
        "permissions": {
            "unassigned": "deny",
            "sets": limited,
            "assign": [{"role": "sensor", "sets": ["sensor"]}],
        }
    }
    requests = [
        ("c1", "publish", "c1/t", 1, False),
        ("c1", "publish", "c1/t", 0, False),
        ("c3", "publish", "c3/t", 1, True),
        ("c3", "publish", "b/x", 0, False),
        ("c2", "publish", "c2/t", 0, False),
        ("c3", "subscribe", "a/c3", 1, False),
        ("c1", "subscribe", "a/c1", 0, False),
    ]
    check_exact(spark, broker_factory, tmp_path / "issue", baseline, candidate, requests)

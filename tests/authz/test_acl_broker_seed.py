"""Seed 004 over MQTT: the sample config, its worked example and every row of its matching
tables, reproduced with real paho-mqtt clients against a real broker, for default_permission
deny and allow (AUTHZ.md §2 gate 5).

Clients connect over 127.0.0.1, so their subject is the ``lo`` interface (the seed's "loopback
interface" subject). Observations are the broker's own answers: PUBACK reason codes (0x87 with
a Reason String naming the rule), SUBACK codes and deliveries.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.authz.acl_paho import (
    NOT_AUTHORIZED,
    AclClient,
    acl_json_file,
    toml_with_acl,
)
from tests.conftest import RunningBroker, start_broker
from tests.seed004_tables import MATCHING_TABLE

RULE = "allow pub/sub on test/demo"

SEED_SAMPLE: dict[str, Any] = {
    "enabled": True,
    "default_permission": "deny",
    "rules": [
        {
            "id": RULE,
            "messages": ["put", "delete", "declare_subscriber"],
            "flows": ["egress", "ingress"],
            "permission": "allow",
            "key_exprs": ["test/demo"],
        }
    ],
    "subjects": [
        {"id": "loopback interface", "interfaces": ["lo0", "lo"]},
        {"id": "usernames on any interface", "usernames": ["zenoh_instance_1", "zenoh_instance_2"]},
    ],
    "policies": [
        {"rules": [RULE], "subjects": ["loopback interface", "usernames on any interface"]}
    ],
}


def _broker(tmp: Path, access_control: dict[str, Any]) -> RunningBroker:
    acl_file = acl_json_file(tmp / "zenoh.json5", access_control)
    return start_broker(tmp, toml_with_acl(f'[acl]\nfile = "{acl_file}"\n'))


@pytest.fixture(scope="module")
def sample_deny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    b = _broker(tmp_path_factory.mktemp("seed-deny"), SEED_SAMPLE)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def sample_allow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    b = _broker(
        tmp_path_factory.mktemp("seed-allow"), {**SEED_SAMPLE, "default_permission": "allow"}
    )
    yield b
    b.stop()


# -- the sample config, default_permission deny ----------------------------------------------


def test_loopback_client_may_put_and_subscribe_test_demo(sample_deny: RunningBroker) -> None:
    with (
        AclClient(sample_deny.host, sample_deny.port) as sub,
        AclClient(sample_deny.host, sample_deny.port) as pub,
    ):
        assert sub.subscribe("test/demo") == 1  # declare_subscriber, ingress
        assert pub.publish_code("test/demo", b"hello") == 0  # put, ingress
        assert sub.received(1) == [("test/demo", b"hello")]  # put, egress


def test_delete_is_allowed_and_clears_the_retained_message(sample_deny: RunningBroker) -> None:
    with AclClient(sample_deny.host, sample_deny.port) as pub:
        assert pub.publish("test/demo", b"kept", retain=True)[0] in (0, 0x10)
        assert pub.publish("test/demo", b"", retain=True)[0] in (0, 0x10)  # delete
    with AclClient(sample_deny.host, sample_deny.port) as late:
        assert late.subscribe("test/demo") == 1
        assert late.received() == []


@pytest.mark.parametrize(
    ("kind", "kw"),
    [("query", {"response_topic": "test/demo"}), ("reply", {"correlation": b"c1"})],
)
def test_other_messages_are_denied_by_default(
    sample_deny: RunningBroker, kind: str, kw: Any
) -> None:
    """'if a node tries to send another message type (eg: query), it will be denied'."""
    with (
        AclClient(sample_deny.host, sample_deny.port) as sub,
        AclClient(sample_deny.host, sample_deny.port) as pub,
    ):
        sub.subscribe("test/demo")
        code, reason = pub.publish("test/demo", b"q", **kw)
        assert code == NOT_AUTHORIZED
        assert f"({kind})" in reason and "denied by acl default_permission" in reason
        assert sub.received() == []


def test_declare_queryable_is_denied_by_default(sample_deny: RunningBroker) -> None:
    with AclClient(sample_deny.host, sample_deny.port) as c:
        assert c.subscribe("test/demo", queryable=True) == NOT_AUTHORIZED
        assert c.subscribe("test/demo") == 1


@pytest.mark.parametrize("topic", ["test/demo/a", "test", "demo", "other/test/demo"])
def test_other_keys_are_denied(sample_deny: RunningBroker, topic: str) -> None:
    with AclClient(sample_deny.host, sample_deny.port) as c:
        code, reason = c.publish(topic)
        assert code == NOT_AUTHORIZED and "denied by acl default_permission" in reason


@pytest.mark.parametrize("topic_filter", ["test/#", "test/+", "#", "+/demo"])
def test_wider_subscriptions_are_denied(sample_deny: RunningBroker, topic_filter: str) -> None:
    """A request matches only by inclusion: a superset of test/demo is not allowed."""
    with AclClient(sample_deny.host, sample_deny.port) as c:
        assert c.subscribe(topic_filter) == NOT_AUTHORIZED


# -- the sample config with default_permission allow: allow rules are overlooked ---------------


@pytest.mark.parametrize("topic", ["test/demo", "test/demo/a", "anything"])
def test_default_allow_lets_everything_through(sample_allow: RunningBroker, topic: str) -> None:
    with (
        AclClient(sample_allow.host, sample_allow.port) as sub,
        AclClient(sample_allow.host, sample_allow.port) as pub,
    ):
        assert sub.subscribe("#") == 1
        assert pub.publish_code(topic, b"p") == 0
        assert pub.publish_code(topic, b"q", response_topic="r") == 0  # query: no rule, allowed
        assert sub.subscribe(topic, queryable=True) == 1
        assert {t for t, _ in sub.received(2)} == {topic}


# -- the seed's worked example: default allow with explicit deny rules --------------------------


@pytest.fixture(scope="module")
def worked_example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """'if the default permission is allow and the key-expressions in the explicit deny rules
    are any of test/demo/a, test/demo/* or test/demo/** then a request on test/demo/a will
    match ... and will be denied. However ... a request on test/** will not match'.
    One rule per deny expression, each under its own prefix (p0/, p1/, p2/)."""
    denies = ["test/demo/a", "test/demo/*", "test/demo/**"]
    config = {
        "enabled": True,
        "default_permission": "allow",
        "rules": [
            {
                "id": f"deny-{i}",
                "messages": ["put", "declare_subscriber"],
                "flows": ["ingress", "egress"],
                "permission": "deny",
                "key_exprs": [f"p{i}/{ke}"],
            }
            for i, ke in enumerate(denies)
        ],
        "subjects": [{"id": "everyone"}],
        "policies": [{"rules": [f"deny-{i}" for i in range(3)], "subjects": ["everyone"]}],
    }
    b = _broker(tmp_path_factory.mktemp("worked"), config)
    yield b
    b.stop()


@pytest.mark.parametrize("i", [0, 1, 2])
def test_worked_example(worked_example: RunningBroker, i: int) -> None:
    b = worked_example
    with AclClient(b.host, b.port) as sub, AclClient(b.host, b.port) as pub:
        code, reason = pub.publish(f"p{i}/test/demo/a")
        assert code == NOT_AUTHORIZED and f'denied by acl rule "deny-{i}"' in reason
        assert sub.subscribe(f"p{i}/test/#") == 1  # test/** is a superset: not matched, allowed
        assert sub.subscribe(f"p{i}/test/demo/a") == NOT_AUTHORIZED
        assert pub.publish_code(f"p{i}/test/other") == 0
        # egress: the wide subscription never carries what the deny covers
        assert sub.received(1) == [(f"p{i}/test/other", b"x")]


# -- every matching-table row, both default permissions -----------------------------------------

# (request, rule, match). Requests with `$*` (test/d$*/a) have no MQTT form: MQTT topics and
# filters only have `+` and `#`, and a `$` inside a level is refused (authz/acl_mqtt.py), so
# those rows are covered by tests/authz/test_acl_seed.py on the engine only.
TABLE = [row for row in MATCHING_TABLE if "$" not in row[0]]


def _table_config(default: str) -> dict[str, Any]:
    """Row n's rule is under prefix rN/ (a common literal first chunk keeps inclusion as it
    is); allow rules under default deny, deny rules under default allow."""
    permission = "allow" if default == "deny" else "deny"
    rules = [
        {
            "id": f"row-{n}",
            "messages": ["put", "declare_subscriber"],
            "flows": ["ingress"],
            "permission": permission,
            "key_exprs": [f"r{n}/{rule}"],
        }
        for n, (_, rule, _) in enumerate(TABLE)
    ]
    return {
        "enabled": True,
        "default_permission": default,
        "rules": rules,
        "subjects": [{"id": "all"}],
        "policies": [{"rules": [r["id"] for r in rules], "subjects": ["all"]}],
    }


@pytest.fixture(scope="module", params=["deny", "allow"])
def table_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, RunningBroker]]:
    default = str(request.param)
    b = _broker(tmp_path_factory.mktemp(f"table-{default}"), _table_config(default))
    yield default, b
    b.stop()


def _mqtt(request: str) -> tuple[str, bool]:
    """The MQTT form of a request: (topic or filter, is_filter)."""
    levels = request.split("/")
    if any(level in ("*", "**") for level in levels):
        return "/".join("+" if lv == "*" else "#" if lv == "**" else lv for lv in levels), True
    return request, False


@pytest.mark.parametrize(
    ("n", "row"), list(enumerate(TABLE)), ids=[f"{r[0]} vs {r[1]}" for r in TABLE]
)
def test_matching_table_row(
    table_broker: tuple[str, RunningBroker], n: int, row: tuple[str, str, bool]
) -> None:
    default, b = table_broker
    request, _, match = row
    name, is_filter = _mqtt(f"r{n}/{request}")
    allowed = match if default == "deny" else not match
    with AclClient(b.host, b.port) as c:
        if is_filter:
            code = c.subscribe(name)
            assert (code == 1) is allowed, f"SUBSCRIBE {name}: {code:#x}"
        else:
            code, reason = c.publish(name)
            assert (code != NOT_AUTHORIZED) is allowed, f"PUBLISH {name}: {code:#x} {reason}"
            if not allowed and match:
                assert f'denied by acl rule "row-{n}"' in reason
            if not allowed and not match:
                # an unmatched verbatim level no rule names is refused outright (acl_mqtt.py)
                assert "default_permission" in reason or "verbatim" in reason


@pytest.mark.parametrize(("topic", "accepted"), [("test/demo", True), ("test/other", False)])
def test_will_is_checked_at_connect(sample_deny: RunningBroker, topic: str, accepted: bool) -> None:
    """A will is an ingress put at CONNECT: outside test/demo the CONNECT is refused (0x87)."""
    import threading

    import paho.mqtt.client as paho

    c = paho.Client(
        paho.CallbackAPIVersion.VERSION2,
        client_id=f"will-{topic.replace('/', '-')}",
        protocol=paho.MQTTv5,
    )
    c.will_set(topic, b"gone", 1)
    answered = threading.Event()
    codes: list[int] = []

    def on_connect(cl: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        codes.append(int(getattr(rc, "value", rc)))
        answered.set()

    c.on_connect = on_connect
    c.connect(sample_deny.host, sample_deny.port)
    c.loop_start()
    try:
        assert answered.wait(5)
        assert codes[0] == (0 if accepted else NOT_AUTHORIZED)
    finally:
        c.disconnect()
        c.loop_stop()

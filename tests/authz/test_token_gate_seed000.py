"""Seed 000 end to end: every publish and subscribe example of the seed, over MQTT with real
clients (paho-mqtt, MQTT 5 and 3.1.1), against brokers configured with '/' and with '.'.

A client holds a token whose only rule is the example's rule. Allowed publishes reach a
subscriber of the same tenant; refused ones get PUBACK 0x87 (MQTT 5) or are acknowledged and
dropped (3.1.1, deny_action "reason") and never arrive. Subscriptions are granted or refused
(SUBACK 0x87 / 0x80) exactly as the seed's tables say, and an accepted pattern receives.
"""

from __future__ import annotations

import itertools
import queue
import sys
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from token_paho import V5, V311, TokenClient

from tests.conftest import RunningBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "matching"))
from test_token_rules_seed import PUB_EXAMPLES, SUB_EXAMPLES  # noqa: E402
from token_broker import grant, make_token  # noqa: E402

_tenants = itertools.count()


def by_rule(examples: list[tuple[str, str, bool]]) -> list[tuple[str, list[tuple[str, bool]]]]:
    rules: dict[str, list[tuple[str, bool]]] = {}
    for rule, what, allowed in examples:
        rules.setdefault(rule, []).append((what, allowed))
    return list(rules.items())


def new_tenant() -> str:
    return f"seed000-{next(_tenants)}"


@pytest.mark.parametrize("version", [V5, V311], ids=["v5", "v311"])
@pytest.mark.parametrize(("rule", "cases"), by_rule(PUB_EXAMPLES), ids=lambda v: str(v)[:24])
def test_seed_publish_examples_over_mqtt(seed001_broker, version, rule, cases):
    b, sep = seed001_broker
    tenant = new_tenant()
    rule = rule.replace(".", sep)
    publisher_token = make_token([grant([tenant], pub=[rule])], separator=sep)
    observer_token = make_token([grant([tenant], sub=["#"])], separator=sep)
    with (
        TokenClient(b.host, b.port, observer_token) as observer,
        TokenClient(b.host, b.port, publisher_token, version) as publisher,
    ):
        assert observer.subscribe("#") == [1]
        expected = []
        for channel, allowed in cases:
            channel = channel.replace(".", sep)
            code = publisher.publish(channel, channel.encode())
            if version == V5:
                assert code == (0 if allowed else 0x87), (rule, channel)
            if allowed:
                expected.append((channel, channel.encode()))
        assert sorted(observer.received(len(expected))) == sorted(expected), rule


@pytest.mark.parametrize("version", [V5, V311], ids=["v5", "v311"])
@pytest.mark.parametrize(("rule", "cases"), by_rule(SUB_EXAMPLES), ids=lambda v: str(v)[:24])
def test_seed_subscribe_examples_over_mqtt(seed001_broker, version, rule, cases):
    b, sep = seed001_broker
    tenant = new_tenant()
    rule = rule.replace(".", sep)
    token = make_token([grant([tenant], sub=[rule])], separator=sep)
    patterns = [pattern.replace(".", sep) for pattern, _ in cases]
    refused = 0x87 if version == V5 else 0x80
    with TokenClient(b.host, b.port, token, version) as subscriber:
        codes = subscriber.subscribe(*patterns)
    assert codes == [1 if allowed else refused for _, allowed in cases], (rule, patterns)


def _a_channel_for(pattern: str, sep: str) -> str:
    """A concrete channel the pattern matches (wildcards replaced by sample tokens)."""
    out = []
    for token in pattern.split(sep):
        if token in ("*", "+"):
            out.append("x1")
        elif token in ("#", ">"):
            out.append("deep")
        elif token[-1] in "*#>":
            out.append(token[:-1] + "9" + (sep + "deep" if token[-1] == ">" else ""))
        else:
            out.append(token)
    return sep.join(out)


@pytest.mark.parametrize(("rule", "cases"), by_rule(SUB_EXAMPLES), ids=lambda v: str(v)[:24])
def test_accepted_seed_patterns_receive_what_they_match(seed001_broker, rule, cases):
    b, sep = seed001_broker
    tenant = new_tenant()
    rule = rule.replace(".", sep)
    publisher = make_token([grant([tenant], pub=["#"])], separator=sep)
    with TokenClient(b.host, b.port, publisher) as pub:
        for pattern, allowed in cases:
            if not allowed:
                continue
            pattern = pattern.replace(".", sep)
            token = make_token([grant([tenant], sub=[rule])], separator=sep)
            with TokenClient(b.host, b.port, token) as sub:
                assert sub.subscribe(pattern) == [1]
                channel = _a_channel_for(pattern, sep)
                assert pub.publish(channel, b"m") == 0
                assert sub.received(1) == [(channel, b"m")], (rule, pattern, channel)


def _connack_with_will(b: RunningBroker, token: str, topic: str) -> int:
    connacks: queue.Queue[int] = queue.Queue()
    c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"will-{topic}", protocol=V5)
    c.username_pw_set("device", token)
    c.will_set(topic, b"gone")
    c.on_connect = lambda cl, u, f, rc, p: connacks.put(int(rc.value))
    c.connect(b.host, b.port)
    c.loop_start()
    try:
        return connacks.get(timeout=5)
    finally:
        c.disconnect()
        c.loop_stop()


def test_a_will_outside_the_publish_rules_is_refused_at_connect(seed001_broker):
    b, sep = seed001_broker
    token = make_token([grant([new_tenant()], pub=[f"status{sep}#"])], separator=sep)
    assert _connack_with_will(b, token, f"other{sep}lwt") == 0x87
    assert _connack_with_will(b, token, f"status{sep}lwt") == 0

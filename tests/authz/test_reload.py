"""Reload (SIGHUP, `edge-broker reload`): validate first, never fail open, re-check live
subscriptions, and keep the leak-free property for live and retained messages after narrowing."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.mqtt.packets import Puback, Publish, Suback, Subscribe, Subscription
from tests.broker.broker_raw import RawClient
from tests.conftest import start_broker
from tests.waiting import wait_for_log

BASE = """
[sys]
interval = 2
[[listeners]]
name = "tcp"
port = 0
[permissions.sets.main]
rules = [ {rules} ]
[[permissions.assign]]
sets = ["main"]
"""
WIDE = BASE.replace("{rules}", '{ id = "all", topic = "#" }')
NARROW = BASE.replace(
    "{rules}", '{ id = "no-admin", topic = "admin/#", type = "DENY" }, { id = "all", topic = "#" }'
)


def topics_received(c: RawClient) -> list[str]:
    return [p.topic for p in c.publishes(0.6)]


def publish(c: RawClient, topic: str, pid: int, retain: bool = False) -> int:
    c.send(Publish(topic, b"x", 1, retain=retain, packet_id=pid))
    return c.expect(Puback).reason_code


@pytest.fixture
def wide_broker(tmp_path: Path):
    config = tmp_path / "edge-broker.toml"
    config.write_text(WIDE)
    pid_file = tmp_path / "pid"
    b = start_broker(tmp_path / "run", WIDE, args=("--pid-file", str(pid_file)))
    b.config_path.write_text(WIDE)
    yield b, pid_file
    b.stop()


def test_narrowing_reload_removes_and_rechecks_subscriptions(wide_broker) -> None:
    b, pid_file = wide_broker
    with RawClient(b.host, b.port) as sub, RawClient(b.host, b.port) as pub:
        sub.connect("sub")
        pub.connect("pub")
        assert publish(pub, "admin/kept", 1, retain=True) == 0x10
        sub.send(Subscribe(1, (Subscription("admin/#", 1), Subscription("#", 1))))
        assert sub.expect(Suback).reason_codes == (1, 1)
        topics_received(sub)  # the retained message, through both subscriptions
        b.config_path.write_text(NARROW)
        result = subprocess.run(
            [sys.executable, "-m", "edge_broker", "reload", "--pid-file", str(pid_file)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 0, result.stderr
        wait_for_log(b, "policy applied")
        assert "1 removed" in b.log()
        assert publish(pub, "admin/new", 2) == 0x87  # publishing is narrowed too
        assert publish(pub, "open/t", 3) == 0
        # '#' survived but is rechecked per topic: admin/ never leaks through it
        assert topics_received(sub) == ["open/t"]
    with RawClient(b.host, b.port) as late:
        late.connect("late")
        late.subscribe("#", 1)
        assert "admin/kept" not in topics_received(late)  # retained, checked at delivery


def test_a_broken_file_keeps_the_running_policy(wide_broker) -> None:
    b, _ = wide_broker
    b.config_path.write_text(NARROW)
    b.process.send_signal(signal.SIGHUP)
    wait_for_log(b, "policy applied")
    b.config_path.write_text(WIDE.replace('topic = "#"', 'topic = "a/#/b"'))  # invalid rule
    b.process.send_signal(signal.SIGHUP)
    wait_for_log(b, "the running policy is kept")
    assert "'#' must be the last segment" in b.log()
    b.config_path.write_text("this is [not toml")
    b.process.send_signal(signal.SIGHUP)
    wait_for_log(b, "the running policy is kept", count=2)
    assert "invalid TOML" in b.log()
    with RawClient(b.host, b.port) as c:
        c.connect("after-bad-reloads")
        assert publish(c, "admin/x", 1) == 0x87  # still the narrow policy: not fail-open
        assert publish(c, "open/x", 2) == 0x10
    assert b.alive()


def test_widening_reload_lets_new_subscriptions_in(wide_broker) -> None:
    b, _ = wide_broker
    b.config_path.write_text(NARROW)
    b.process.send_signal(signal.SIGHUP)
    wait_for_log(b, "policy applied")
    with RawClient(b.host, b.port) as c:
        c.connect("widen")
        c.send(Subscribe(1, (Subscription("admin/#", 0),)))
        assert c.expect(Suback).reason_codes == (0x87,)
        b.config_path.write_text(WIDE)
        b.process.send_signal(signal.SIGHUP)
        wait_for_log(b, "policy applied", count=2)
        c.send(Subscribe(2, (Subscription("admin/#", 0),)))
        assert c.expect(Suback).reason_codes == (0,)

"""Tenants are isolated topic spaces (AUTHZ.md §1): subscriptions, retained messages, shared
groups and $SYS are per tenant; nothing crosses.

Anonymous clients prove no tenant, so these brokers opt in to ``tenant_choice = "open"``
(issue 15 item 7); test_tenant_choice.py covers the default."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from broker_raw import RawClient

from edge_broker.mqtt.packets import (
    Pingreq,
    Pingresp,
    Properties,
    Publish,
)
from tests.conftest import RunningBroker, start_broker

OPEN_LISTENER = {"name": "tcp", "bind": "127.0.0.1", "port": 0, "tenant_choice": "open"}


def tenant(name: str) -> Properties:
    return Properties(user_properties=(("tenant", name),))


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """The shared broker of this module, with open tenant choice."""
    b = start_broker(tmp_path_factory.mktemp("tenants"), {"listeners": [OPEN_LISTENER]})
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def test_messages_and_retained_do_not_cross_tenants(module_broker):
    t = f"shared/topic/{time.monotonic_ns()}"
    with (
        RawClient(module_broker.host, module_broker.port) as a,
        RawClient(module_broker.host, module_broker.port) as b,
        RawClient(module_broker.host, module_broker.port) as a2,
    ):
        a.connect("ten-a", properties=tenant("acme"))
        b.connect("ten-b", properties=tenant("globex"))
        a2.connect("ten-a2", properties=tenant("acme"))
        for c in (a, b, a2):
            c.subscribe(t)
        a.send(Publish(t, b"for acme", 0, retain=True))
        assert a2.expect(Publish).payload == b"for acme"
        assert a.expect(Publish).payload == b"for acme"
        b.nothing()
        with RawClient(module_broker.host, module_broker.port) as late_b:
            late_b.connect("ten-b2", properties=tenant("globex"))
            late_b.subscribe(t)
            late_b.nothing()  # acme's retained message is not globex's
        with RawClient(module_broker.host, module_broker.port) as default:
            default.connect("ten-default")  # tenant "~"
            default.subscribe("#")
            a.send(Publish(t, b"again", 0))
            a.send(Pingreq())
            a.expect(Publish)
            a.expect(Pingresp)
            default.nothing()


def test_invalid_tenant_refused(module_broker):
    with RawClient(module_broker.host, module_broker.port) as c:
        ack = c.connect("ten-bad", properties=tenant("no spaces allowed"))
        assert ack.reason_code == 0x87 and "tenant" in (ack.properties.reason_string or "")


# test_dot_separator: on the in-memory broker (test_tenants_memory.py)

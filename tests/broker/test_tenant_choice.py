"""Clients enter only tenants their credentials name (issue 15 item 7; AUTHZ.md §1).

Default (``tenant_choice = "credentials"``): an anonymous client, or a password entry without
``tenants``, may use only the default tenant ``~``; naming another in the CONNECT user property
``tenant`` is refused with CONNACK 0x87 and a Reason String naming the rule. An entry that names
tenants may use exactly those. ``tenant_choice = "open"`` restores free choice. The real broker
in memory (engine_harness.py; a broker process before, assertions unchanged), raw packets; a
bad ``tenant_choice`` is still refused by a broker process at start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_raw import unique_id
from engine_harness import MemoryBroker, memory_broker

from edge_broker.auth.password import set_user, write_password_file
from edge_broker.mqtt.packets import Properties

USERS = {
    "plain": ("plain-pw", ()),
    "acme-only": ("acme-pw", ("acme",)),
    "two": ("two-pw", ("acme", "globex")),
}


def tenant(name: str) -> Properties:
    return Properties(user_properties=(("tenant", name),))


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[MemoryBroker]:
    entries: dict = {}
    for user, (password, tenants) in USERS.items():
        entries = set_user(entries, user, password, tenants)
    passwd = tmp_path / "passwd"
    write_password_file(passwd, entries)
    methods = ["password", "anonymous"]
    yield from memory_broker(
        {
            "passwords": {"file": str(passwd)},
            "listeners": [
                {"name": "strict", "bind": "127.0.0.1", "port": 0, "auth_methods": methods},
                {
                    "name": "open",
                    "bind": "127.0.0.1",
                    "port": 0,
                    "auth_methods": methods,
                    "tenant_choice": "open",
                },
            ],
        }
    )


def _connect(b: MemoryBroker, listener: str, level: int = 5, **kw):
    with b.client(level, listener) as c:
        return c.connect(unique_id("t"), **kw)


def test_anonymous_client_cannot_choose_a_tenant_by_default(brokers):
    ack = _connect(brokers, "strict", properties=tenant("acme"))
    assert ack.reason_code == 0x87
    assert "tenant_choice" in (ack.properties.reason_string or "")
    assert _connect(brokers, "strict").reason_code == 0  # the default tenant "~"
    assert _connect(brokers, "strict", properties=tenant("~")).reason_code == 0


def test_password_entry_without_tenants_gets_only_the_default_tenant(brokers):
    ack = _connect(
        brokers, "strict", username="plain", password=b"plain-pw", properties=tenant("acme")
    )
    assert ack.reason_code == 0x87 and "'password'" in (ack.properties.reason_string or "")
    assert _connect(brokers, "strict", username="plain", password=b"plain-pw").reason_code == 0


def test_password_entry_with_tenants_enters_exactly_those(brokers):
    login = {"username": "acme-only", "password": b"acme-pw"}
    assert _connect(brokers, "strict", properties=tenant("acme"), **login).reason_code == 0
    assert _connect(brokers, "strict", **login).reason_code == 0  # its only tenant
    assert _connect(brokers, "strict", properties=tenant("globex"), **login).reason_code == 0x87
    two = {"username": "two", "password": b"two-pw"}
    assert _connect(brokers, "strict", properties=tenant("globex"), **two).reason_code == 0
    refused = _connect(brokers, "strict", **two)  # names two tenants, chose none: not "~"
    assert refused.reason_code == 0x87 and "name one" in (refused.properties.reason_string or "")
    assert _connect(brokers, "strict", level=4, **two).reason_code == 0x05  # 3.1.1


def test_open_tenant_choice_is_an_explicit_listener_option(brokers):
    assert _connect(brokers, "open", properties=tenant("acme")).reason_code == 0
    assert (
        _connect(
            brokers, "open", username="plain", password=b"plain-pw", properties=tenant("globex")
        ).reason_code
        == 0
    )
    # credentials that name tenants still bind them on an open listener
    assert (
        _connect(
            brokers, "open", username="acme-only", password=b"acme-pw", properties=tenant("globex")
        ).reason_code
        == 0x87
    )


def test_tenant_choice_must_be_credentials_or_open(broker_factory):
    with pytest.raises(RuntimeError, match="tenant_choice"):
        broker_factory({"listeners": [{"name": "x", "bind": "127.0.0.1", "tenant_choice": "any"}]})

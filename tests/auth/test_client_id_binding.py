"""A password entry may bind the client identifiers its user connects with (issue 15 item 8).

Without a binding a password user connects as ``sensor-7`` and publishes to
``sensors/sensor-7/#`` just by choosing that id. With ``clientids`` (globs) in the entry, any
other id is refused with CONNACK 0x85 (3.1.1: 0x02) and a Reason String, so ``${clientid}`` in
its permissions names an id the broker checked. The real broker in memory with its password
method (tests/broker/engine_harness.py; a broker process before, assertions unchanged), raw
packets.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_broker.auth.password import (
    load_password_file,
    parse_password_file,
    set_user,
    write_password_file,
)
from edge_broker.mqtt.packets import Puback, Publish
from tests.broker.engine_harness import MemoryBroker, memory_broker

PERMISSIONS = """
[permissions]
unassigned = "deny"

[permissions.sets.own]
rules = [{ id = "own", topic = "sensors/${clientid}/#", activity = "PUBLISH" }]

[[permissions.assign]]
role = "sensor"
sets = ["own"]
"""


@pytest.fixture
def bound_broker(tmp_path: Path) -> Iterator[MemoryBroker]:
    entries = set_user({}, "sensors", "pw", roles=("sensor",), clientids=("sensor-*", "probe-1"))
    entries = set_user(entries, "legacy", "pw", roles=("sensor",))  # binds no id
    passwd = tmp_path / "passwd"
    write_password_file(passwd, entries)
    listener = (
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\nauth_methods = ["password"]\n'
    )
    yield from memory_broker(f'{listener}\n[passwords]\nfile = "{passwd}"\n{PERMISSIONS}')


def _connect(b: MemoryBroker, client_id: str, user: str = "sensors", level: int = 5):
    c = b.client(level)
    return c, c.connect(client_id, username=user, password=b"pw")


def test_bound_entry_refuses_other_client_ids(bound_broker):
    c, ack = _connect(bound_broker, "sensor-8")  # another sensor's id is fine: it matches
    c.close()
    assert ack.reason_code == 0
    c, ack = _connect(bound_broker, "pump-1")
    c.close()
    assert ack.reason_code == 0x85
    reason = ack.properties.reason_string or ""
    assert "'pump-1'" in reason and "sensor-*" in reason
    c, ack = _connect(bound_broker, "pump-1", level=4)
    c.close()
    assert ack.reason_code == 0x02  # 3.1.1: identifier rejected


def test_clientid_placeholder_then_names_a_verified_id(bound_broker):
    c, ack = _connect(bound_broker, "probe-1")
    with c:
        assert ack.reason_code == 0
        c.send(Publish("sensors/probe-1/t", b"1", 1, packet_id=1))
        assert c.expect(Puback).reason_code in (0x00, 0x10)
        c.send(Publish("sensors/sensor-7/t", b"1", 1, packet_id=2))
        assert c.expect(Puback).reason_code == 0x87


def test_entry_without_clientids_keeps_connecting_with_any_id(bound_broker):
    c, ack = _connect(bound_broker, "anything-at-all", user="legacy")
    c.close()
    assert ack.reason_code == 0


def test_password_file_keeps_clientids(tmp_path: Path):
    entries = set_user({}, "u", "pw", ("acme",), ("r",), ("dev-*",))
    entries = set_user(entries, "v", "pw", clientids=("only-ids",))
    path = tmp_path / "passwd"
    write_password_file(path, entries)
    loaded = load_password_file(path)
    assert loaded["u"].clientids == ("dev-*",) and loaded["u"].tenants == ("acme",)
    assert loaded["v"].clientids == ("only-ids",) and loaded["v"].tenants == ()
    assert loaded["v"].allows_client_id("only-ids") and not loaded["v"].allows_client_id("x")
    assert "v:" in path.read_text() and path.read_text().count(":only-ids") == 1
    with pytest.raises(Exception, match="clientids"):
        parse_password_file("u:$argon2id$x:a:b:c:d\n")

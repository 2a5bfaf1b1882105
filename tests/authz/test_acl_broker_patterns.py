"""The site ACL on a listener accepting seed-001 runtime patterns (PATTERNS.md §2): a pattern
SUBSCRIBE is decided as its exact key expression (``p*`` -> ``p$*``, ``>`` -> ``*/**``) by
inclusion, and deliveries through it are still checked on egress."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.authz.acl_paho import NOT_AUTHORIZED, AclClient, acl_json_file, toml_with_acl
from tests.conftest import RunningBroker, start_broker

LISTENER = (
    '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\nsubscription_patterns = "seed001"\n'
)

SECTION = {
    "enabled": True,
    "default_permission": "deny",
    "rules": [
        {
            "id": "sensors",
            "messages": ["put", "declare_subscriber"],
            "permission": "allow",
            "key_exprs": ["sensors/**"],
        },
        {
            "id": "no-secrets-out",
            "messages": ["put"],
            "flows": ["egress"],
            "permission": "deny",
            "key_exprs": ["sensors/secret$*/**"],
        },
    ],
    "subjects": [{"id": "all"}],
    "policies": [{"rules": ["sensors", "no-secrets-out"], "subjects": ["all"]}],
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    d: Path = tmp_path_factory.mktemp("acl-patterns")
    path = acl_json_file(d / "zenoh.json5", SECTION)
    b = start_broker(d, toml_with_acl(f'[acl]\nfile = "{path}"\n', LISTENER))
    yield b
    b.stop()


def test_pattern_inside_the_allowed_area_is_granted(broker: RunningBroker) -> None:
    with AclClient(broker.host, broker.port) as sub, AclClient(broker.host, broker.port) as pub:
        assert sub.subscribe("sensors/t*") == 1
        pub.publish("sensors/temp", b"21")
        pub.publish("sensors/humidity", b"40")
        assert sub.received(1) == [("sensors/temp", b"21")]


def test_pattern_reaching_outside_is_refused(broker: RunningBroker) -> None:
    with AclClient(broker.host, broker.port) as c:
        assert c.subscribe("s*/temp") == NOT_AUTHORIZED  # s$*/temp is not inside sensors/**
        assert c.subscribe(">") == NOT_AUTHORIZED


def test_deliveries_through_a_pattern_are_checked_on_egress(broker: RunningBroker) -> None:
    with AclClient(broker.host, broker.port) as sub, AclClient(broker.host, broker.port) as pub:
        assert sub.subscribe("sensors/>") == 1
        pub.publish("sensors/secretA/x", b"s")
        pub.publish("sensors/open/x", b"o")
        assert sub.received(1) == [("sensors/open/x", b"o")]

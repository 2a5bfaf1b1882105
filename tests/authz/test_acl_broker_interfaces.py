"""Site ACL subjects by network interface, over real sockets (AUTHZ.md §2 gate 5, seed 004
"interfaces"): the test creates its own veth pair with an IPv4 and an IPv6 address, runs the
broker on the wildcard addresses, and the SAME client is allowed through ``lo`` and denied
through the veth interface (and the other way round for an allow rule under default deny).

Needs ``ip link add`` (root, as in CI); skipped with the reason otherwise. Only addresses this
test created are connected to; the interfaces are removed afterwards.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from edge_broker.broker.network_interfaces import InterfaceMap, list_interface_addresses
from tests.authz.acl_paho import NOT_AUTHORIZED, AclClient, acl_json_file, toml_with_acl
from tests.conftest import RunningBroker, start_broker


@dataclass(frozen=True)
class Veth:
    name: str
    ipv4: str
    ipv6: str


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)


def _free_addresses() -> tuple[str, str]:
    taken = {a.address for a in list_interface_addresses()}
    base = os.getpid() % 200
    for k in range(250):
        n = (base + k) % 250 + 1
        v4, v6 = f"10.213.{n}.1", f"fd00:eb:{n:x}::1"
        if v4 not in taken and v6 not in taken:
            return v4, v6
    raise RuntimeError("no free 10.213.x.1 address")


@pytest.fixture(scope="module")
def veth() -> Iterator[Veth]:
    name, peer = f"ebacl{os.getpid() % 100000}", f"ebacp{os.getpid() % 100000}"
    made = _ip("link", "add", name, "type", "veth", "peer", "name", peer)
    if made.returncode != 0:
        pytest.skip(
            f"cannot create a veth pair (needs root / CAP_NET_ADMIN): {made.stderr.strip()}"
        )
    try:
        v4, v6 = _free_addresses()
        for args in (
            ("addr", "add", f"{v4}/32", "dev", name),
            ("addr", "add", f"{v6}/128", "dev", name, "nodad"),
            ("link", "set", name, "up"),
            ("link", "set", peer, "up"),
        ):
            done = _ip(*args)
            assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"
        yield Veth(name, v4, v6)
    finally:
        _ip("link", "del", name)


LISTENERS = (
    '[[listeners]]\nname = "v4"\nbind = "0.0.0.0"\nport = 0\nauth_methods = ["anonymous"]\n\n'
    '[[listeners]]\nname = "v6"\nbind = "::"\nport = 0\nauth_methods = ["anonymous"]\n'
)


def _broker(tmp: Path, access_control: dict[str, object]) -> RunningBroker:
    path = acl_json_file(tmp / "zenoh.json5", access_control)
    return start_broker(tmp, toml_with_acl(f'[acl]\nfile = "{path}"\n', LISTENERS))


@pytest.fixture(scope="module")
def field_denied(veth: Veth, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """default allow; clients arriving on the veth ("field Wi-Fi") may not send commands nor
    receive secrets."""
    b = _broker(
        tmp_path_factory.mktemp("iface-deny"),
        {
            "enabled": True,
            "default_permission": "allow",
            "rules": [
                {
                    "id": "no-commands-from-field",
                    "messages": ["put", "delete"],
                    "flows": ["ingress"],
                    "permission": "deny",
                    "key_exprs": ["cmd/**"],
                },
                {
                    "id": "no-secrets-to-field",
                    "messages": ["put"],
                    "flows": ["egress"],
                    "permission": "deny",
                    "key_exprs": ["secret/**"],
                },
            ],
            "subjects": [{"id": "field", "interfaces": [veth.name]}],
            "policies": [
                {"rules": ["no-commands-from-field", "no-secrets-to-field"], "subjects": ["field"]}
            ],
        },
    )
    yield b
    b.stop()


def test_interface_map_finds_the_test_interface(veth: Veth) -> None:
    m = InterfaceMap()
    assert m.lookup(veth.ipv4) == veth.name
    assert m.lookup(f"::ffff:{veth.ipv4}") == veth.name
    assert m.lookup(veth.ipv6) == veth.name
    assert m.lookup("127.0.0.1") == "lo"
    assert m.lookup("::1") == "lo"


@pytest.mark.parametrize("family", ["v4", "v6"])
def test_same_client_allowed_on_lo_denied_on_the_field_interface(
    field_denied: RunningBroker, veth: Veth, family: str
) -> None:
    port = field_denied.ports[family]
    lo, field = ("127.0.0.1", veth.ipv4) if family == "v4" else ("::1", veth.ipv6)
    with AclClient(lo, port, client_id="device-7") as c:
        assert c.publish_code("cmd/reboot") != NOT_AUTHORIZED
    with AclClient(field, port, client_id="device-7") as c:
        code, reason = c.publish("cmd/reboot")
        assert code == NOT_AUTHORIZED
        assert 'denied by acl rule "no-commands-from-field"' in reason
        assert c.publish_code("telemetry/t") != NOT_AUTHORIZED  # other keys: default allow


def _link_local(name: str, timeout: float = 5.0) -> str | None:
    """The interface's fe80:: address once duplicate address detection has finished."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = _ip("-6", "addr", "show", "dev", name, "scope", "link").stdout
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0] == "inet6" and "tentative" not in parts:
                return parts[1].split("/")[0]
        time.sleep(0.1)
    return None


def test_ipv6_link_local_address_names_its_interface(
    field_denied: RunningBroker, veth: Veth
) -> None:
    """getsockname gives fe80::...%<interface>: the scope is the interface."""
    address = _link_local(veth.name)
    if address is None:
        pytest.skip(f"no usable link-local address on {veth.name}")
    with AclClient(f"{address}%{veth.name}", field_denied.ports["v6"], client_id="ll") as c:
        code, reason = c.publish("cmd/reboot")
        assert code == NOT_AUTHORIZED and "no-commands-from-field" in reason


def test_egress_deny_by_interface(field_denied: RunningBroker, veth: Veth) -> None:
    port = field_denied.ports["v4"]
    with (
        AclClient(veth.ipv4, port) as field_sub,
        AclClient("127.0.0.1", port) as lo_sub,
        AclClient("127.0.0.1", port) as pub,
    ):
        assert field_sub.subscribe("secret/#") == 1  # subscribing is allowed (ingress)
        assert lo_sub.subscribe("secret/#") == 1
        for i in range(5):
            pub.publish_code(f"secret/k{i}", b"s")
        assert len(lo_sub.received(5)) == 5
        assert field_sub.received() == []


def test_allow_only_on_the_uplink_under_default_deny(
    veth: Veth, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The other way round: default deny, only the veth (uplink) may publish."""
    b = _broker(
        tmp_path_factory.mktemp("iface-allow"),
        {
            "enabled": True,
            "rules": [
                {
                    "id": "uplink-publish",
                    "messages": ["put"],
                    "flows": ["ingress"],
                    "permission": "allow",
                    "key_exprs": ["**"],
                }
            ],
            "subjects": [{"id": "uplink", "interfaces": [veth.name]}],
            "policies": [{"rules": ["uplink-publish"], "subjects": ["uplink"]}],
        },
    )
    try:
        port = b.ports["v4"]
        with AclClient(veth.ipv4, port, client_id="same") as c:
            assert c.publish_code("a/b") != NOT_AUTHORIZED
        with AclClient("127.0.0.1", port, client_id="same") as c:
            code, reason = c.publish("a/b")
            assert code == NOT_AUTHORIZED and "default_permission" in reason
    finally:
        b.stop()

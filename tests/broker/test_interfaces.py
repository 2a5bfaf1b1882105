"""broker/network_interfaces.py: local address -> interface name for site-ACL subjects, with a
scripted address source and clock (the real system is exercised in
tests/authz/test_acl_broker_interfaces.py)."""

from __future__ import annotations

import ipaddress
import socket

from edge_broker.broker.network_interfaces import (
    InterfaceAddress,
    InterfaceMap,
    list_interface_addresses,
    normalize_address,
)


class Source:
    def __init__(self, addresses: list[InterfaceAddress]) -> None:
        self.addresses = addresses
        self.calls = 0

    def __call__(self) -> list[InterfaceAddress]:
        self.calls += 1
        return list(self.addresses)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def addr(
    name: str, address: str, network: str | None = None, loopback: bool = False
) -> InterfaceAddress:
    return InterfaceAddress(
        name, address, ipaddress.ip_network(network) if network else None, loopback
    )


BASE = [
    addr("lo", "127.0.0.1", "127.0.0.0/8", loopback=True),
    addr("lo", "::1", "::1/128", loopback=True),
    addr("wlan0", "192.168.4.1", "192.168.4.0/24"),
    addr("wlan0", "192.168.5.1", "192.168.5.0/24"),  # a secondary address
    addr("eth0", "2001:db8::7", "2001:db8::/64"),
]


def make(addresses: list[InterfaceAddress] | None = None) -> tuple[InterfaceMap, Source, Clock]:
    source, clock = Source(addresses or BASE), Clock()
    return (
        InterfaceMap(max_age=10.0, refresh_interval=1.0, source=source, clock=clock),
        source,
        clock,
    )


def test_ipv4_ipv6_secondary_and_mapped_addresses() -> None:
    m, _, _ = make()
    assert m.lookup("192.168.4.1") == "wlan0"
    assert m.lookup("192.168.5.1") == "wlan0"
    assert m.lookup("2001:db8::7") == "eth0"
    assert m.lookup("2001:0db8:0:0::7") == "eth0"  # any spelling
    assert m.lookup("::ffff:192.168.4.1") == "wlan0"  # IPv4-mapped (dual-stack socket)
    assert m.lookup("::1") == "lo"


def test_loopback_network_covers_the_whole_range() -> None:
    m, _, _ = make()
    assert m.lookup("127.0.0.53") == "lo"
    assert m.lookup("192.168.4.9") is None  # only loopback networks are matched by range


def test_link_local_scope_names_the_interface() -> None:
    m, source, _ = make()
    assert m.lookup("fe80::1%wlan0") == "wlan0"
    assert m.lookup(f"fe80::1%{socket.if_nametoindex('lo')}") == "lo"
    assert source.calls == 0  # no need for the address map


def test_unknown_address_refreshes_at_most_once_per_interval() -> None:
    m, source, clock = make()
    assert m.lookup("10.0.0.1") is None
    assert source.calls == 1
    source.addresses = [*BASE, addr("veth1", "10.0.0.1", "10.0.0.1/32")]
    assert m.lookup("10.0.0.1") is None  # within refresh_interval: no new scan
    assert source.calls == 1
    clock.now += 1.0
    assert m.lookup("10.0.0.1") == "veth1"  # an unknown address appears: rescanned
    assert source.calls == 2
    for _ in range(100):
        m.lookup("10.9.9.9")  # a flood of unknown addresses costs no scans within the interval
    assert source.calls == 2


def test_map_is_rebuilt_when_old_so_moved_addresses_are_seen() -> None:
    m, source, clock = make()
    assert m.lookup("192.168.4.1") == "wlan0"
    source.addresses = [addr("eth1", "192.168.4.1", "192.168.4.0/24")]
    clock.now += 5
    assert m.lookup("192.168.4.1") == "wlan0"  # still fresh
    clock.now += 6
    assert m.lookup("192.168.4.1") == "eth1"


def test_a_failing_scan_keeps_the_map_and_is_retried_after_the_interval() -> None:
    """At the descriptor limit the scan cannot open its socket (EMFILE). The lookup runs in
    ``connection_made``: a raise there left the accepted socket open and unregistered, so a
    half-open flood held every descriptor for good (broker/network_interfaces.py)."""
    m, source, clock = make()
    assert m.lookup("192.168.4.1") == "wlan0"

    def out_of_descriptors() -> list[InterfaceAddress]:
        source.calls += 1
        raise OSError(24, "Too many open files")

    m._source = out_of_descriptors
    clock.now += 11  # the map is old: rebuilt at the next lookup, and that scan fails
    assert m.lookup("192.168.4.1") == "wlan0"  # the old map answers
    assert m.lookup("10.0.0.1") is None
    assert source.calls == 2 and m.failures == 1  # not retried within refresh_interval
    clock.now += 1
    assert m.lookup("192.168.4.1") == "wlan0"
    assert source.calls == 3 and m.failures == 2
    m._source = source  # descriptors are back
    clock.now += 1
    assert m.lookup("192.168.4.1") == "wlan0"
    assert source.calls == 4 and m.failures == 0


def test_a_failing_first_scan_finds_no_interface() -> None:
    def out_of_descriptors() -> list[InterfaceAddress]:
        raise OSError(24, "Too many open files")

    m = InterfaceMap(source=out_of_descriptors, clock=Clock())
    assert m.lookup("127.0.0.1") is None  # subjects that list interfaces do not match


def test_normalize_address() -> None:
    assert normalize_address("::ffff:10.1.2.3") == ("10.1.2.3", None)
    assert normalize_address("fe80::1%eth0") == ("fe80::1", "eth0")
    assert normalize_address("2001:DB8::1") == ("2001:db8::1", None)


def test_system_addresses_include_loopback() -> None:
    found = {(a.name, a.address) for a in list_interface_addresses()}
    assert any(address == "127.0.0.1" for _, address in found)
    m = InterfaceMap()
    assert m.lookup("127.0.0.1") is not None

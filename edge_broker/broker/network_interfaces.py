"""Which local network interface a connection arrived on (site ACL subjects, AUTHZ.md §2 gate 5,
seed 004 "interfaces").

The interface is found once per connection from the socket's LOCAL address (the address the
client connected to), through an address -> interface-name map of every interface address:

- the map comes from ``getifaddrs(3)`` (IPv4 and IPv6, every address of every interface,
  secondary addresses included), falling back to the ``SIOCGIFADDR`` ioctl and
  ``/proc/net/if_inet6`` when libc cannot be loaded;
- IPv4-mapped IPv6 addresses (``::ffff:10.0.0.1``, a dual-stack ``::`` listener) are looked up
  as the IPv4 address; an IPv6 link-local address carries its interface as the scope
  (``fe80::1%eth0``) and that name is used directly;
- an address inside a loopback interface's network (``127.0.0.2`` on ``127.0.0.1/8``) belongs
  to that interface, as the kernel routes it there;
- the map is rebuilt when an address it does not know appears (at most once per
  ``refresh_interval`` seconds, so a flood of unknown addresses costs nothing) and when it is
  older than ``max_age`` seconds (an address moved from one interface to another is seen
  within that time). A connection whose interface cannot be found gets ``None``: subjects that
  list interfaces never match it.
- a scan that fails (EMFILE: an accept burst took the last descriptor, and both getifaddrs and
  the ioctl need a socket) keeps the map it has and is tried again after ``refresh_interval``.
  It must not raise: it runs in ``connection_made``, and a raise there left the accepted socket
  open and unregistered (no connect timeout), so a half-open flood at the descriptor limit held
  every descriptor for good.
"""

from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import logging
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("edge_broker.broker")

SIOCGIFADDR = 0x8915  # Linux ioctl: the (primary) IPv4 address of an interface
IFF_LOOPBACK = 0x8


@dataclass(frozen=True, slots=True)
class InterfaceAddress:
    """One address of one interface, with its network (for loopback ranges)."""

    name: str
    address: str
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None
    loopback: bool


class _Sockaddr(ctypes.Structure):
    _fields_ = [("sa_family", ctypes.c_ushort), ("sa_data", ctypes.c_ubyte * 14)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("ifa_next", ctypes.POINTER(_Ifaddrs)),
    ("ifa_name", ctypes.c_char_p),
    ("ifa_flags", ctypes.c_uint),
    ("ifa_addr", ctypes.POINTER(_Sockaddr)),
    ("ifa_netmask", ctypes.POINTER(_Sockaddr)),
    ("ifa_ifu", ctypes.POINTER(_Sockaddr)),
    ("ifa_data", ctypes.c_void_p),
]


def _sockaddr_ip(pointer: ctypes._Pointer[_Sockaddr]) -> str | None:
    """The textual IP of a ``struct sockaddr *`` (IPv4 or IPv6), or None."""
    if not pointer:
        return None
    family = pointer.contents.sa_family
    base = ctypes.addressof(pointer.contents)
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, ctypes.string_at(base + 4, 4))
    if family == socket.AF_INET6:
        return socket.inet_ntop(socket.AF_INET6, ctypes.string_at(base + 8, 16))
    return None


def _getifaddrs() -> list[InterfaceAddress] | None:
    """Every interface address from libc ``getifaddrs``; None when libc is unavailable."""
    try:
        # the running process already links libc: dlopen(NULL) finds it without a search
        # (ctypes.util.find_library would run ldconfig, milliseconds per call)
        libc = ctypes.CDLL(None, use_errno=True)
        getifaddrs = libc.getifaddrs
        freeifaddrs = libc.freeifaddrs
    except (OSError, AttributeError):
        try:
            from ctypes.util import find_library  # only here: it imports tempfile (~0.6 MB)

            libc = ctypes.CDLL(find_library("c") or "libc.so.6", use_errno=True)
            getifaddrs = libc.getifaddrs
            freeifaddrs = libc.freeifaddrs
        except (OSError, AttributeError):
            return None
    head = ctypes.POINTER(_Ifaddrs)()
    if getifaddrs(ctypes.byref(head)) != 0:
        return None
    found: list[InterfaceAddress] = []
    try:
        node = head
        while node:
            entry = node.contents
            address = _sockaddr_ip(entry.ifa_addr)
            if address is not None and entry.ifa_name is not None:
                name = entry.ifa_name.decode("utf-8", "replace")
                netmask = _sockaddr_ip(entry.ifa_netmask)
                network = None
                if netmask is not None:
                    try:
                        prefix = bin(int(ipaddress.ip_address(netmask))).count("1")
                        network = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
                    except ValueError:
                        network = None
                found.append(
                    InterfaceAddress(name, address, network, bool(entry.ifa_flags & IFF_LOOPBACK))
                )
            node = entry.ifa_next
    finally:
        freeifaddrs(head)
    return found


def _fallback_addresses() -> list[InterfaceAddress]:
    """Primary IPv4 address per interface (ioctl) and every IPv6 address (/proc)."""
    found: list[InterfaceAddress] = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(
                    s.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15])
                )
            except OSError:
                continue
            address = socket.inet_ntoa(packed[20:24])
            found.append(InterfaceAddress(name, address, None, address.startswith("127.")))
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6:
                    address = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(parts[0]))
                    found.append(InterfaceAddress(parts[5], address, None, address == "::1"))
    except OSError:
        pass
    return found


def list_interface_addresses() -> list[InterfaceAddress]:
    """Every address of every local interface."""
    found = _getifaddrs()
    return found if found is not None else _fallback_addresses()


def normalize_address(address: str) -> tuple[str, str | None]:
    """``(address, scope)``: IPv4-mapped IPv6 becomes IPv4, a ``%scope`` suffix is split off
    (the scope is an interface name or index, as ``getsockname`` reports link-local)."""
    scope = None
    if "%" in address:
        address, _, scope = address.partition("%")
    if address.startswith("::ffff:") and "." in address:
        address = address[7:]
    try:
        address = str(ipaddress.ip_address(address))  # one spelling per address
    except ValueError:
        pass
    return address, scope or None


class InterfaceMap:
    """Local address -> interface name (module docstring). One per broker."""

    __slots__ = (
        "_by_address",
        "_loopbacks",
        "_built_at",
        "_tried_at",
        "max_age",
        "refresh_interval",
        "_source",
        "_clock",
        "refreshes",
        "failures",
    )

    def __init__(
        self,
        max_age: float = 10.0,
        refresh_interval: float = 1.0,
        source: Callable[[], list[InterfaceAddress]] = list_interface_addresses,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_age = max_age
        self.refresh_interval = refresh_interval
        self._source = source
        self._clock = clock
        self._by_address: dict[str, str] = {}
        self._loopbacks: list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]] = []
        self._built_at = float("-inf")
        self._tried_at = float("-inf")
        self.refreshes = 0
        self.failures = 0  # scans in a row that failed (module docstring)

    def _refresh(self, now: float) -> None:
        by_address: dict[str, str] = {}
        loopbacks = []
        self._tried_at = now
        try:
            found = self._source()
        except OSError as exc:
            if not self.failures:  # one line per run of failures, not one per connection
                log.warning(
                    f"cannot list the network interfaces ({exc.strerror or exc}): connections "
                    f"keep the interface map of {len(self._by_address)} addresses until a scan "
                    "succeeds (interface-based ACL subjects match on it)",
                    extra={"event": "interfaces_unavailable"},
                )
            self.failures += 1
            return
        self.failures = 0
        for item in found:
            address, _ = normalize_address(item.address)
            by_address.setdefault(address, item.name)
            if item.loopback and item.network is not None:
                loopbacks.append((item.network, item.name))
        self._by_address = by_address
        self._loopbacks = loopbacks
        self._built_at = self._tried_at = now
        self.refreshes += 1

    def _find(self, address: str) -> str | None:
        name = self._by_address.get(address)
        if name is not None or not self._loopbacks:
            return name
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return None
        for network, loopback_name in self._loopbacks:
            if ip.version == network.version and ip in network:
                return loopback_name
        return None

    def lookup(self, address: str) -> str | None:
        """The interface holding local ``address`` (any spelling getsockname gives), or None."""
        address, scope = normalize_address(address)
        if scope is not None:
            if scope.isdigit():
                try:
                    return socket.if_indextoname(int(scope))
                except OSError:
                    return None
            return scope
        now = self._clock()
        if now - self._built_at > self.max_age and now - self._tried_at >= self.refresh_interval:
            self._refresh(now)
        name = self._find(address)
        if name is None and now - self._tried_at >= self.refresh_interval:
            self._refresh(now)
            name = self._find(address)
        return name

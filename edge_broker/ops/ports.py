"""``edge-broker check`` tries the binds ``run`` will make, and says who holds a busy port.

Every listener and the ``[metrics]`` endpoint are bound the way asyncio binds them at start
(``getaddrinfo`` with ``AI_PASSIVE``, ``SO_REUSEADDR``, ``IPV6_V6ONLY`` for IPv6) and closed at
once, without ``listen``: nothing is ever served. The holder of a port in use is read from
``/proc/net/tcp{,6}`` (the listening socket's inode) and ``/proc/<pid>/fd`` (the process that
has it open); a process of another user is not visible without root, and the message then says
how to look (``ss -ltnp``).

A port held by a broker running this same config file is a warning, not an error: checking the
config of the running service before a reload is normal, and a reload binds nothing new.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Holder:
    pid: int
    name: str  # /proc/<pid>/comm
    cmdline: str

    def __str__(self) -> str:
        return f"{self.name} (pid {self.pid}: {self.cmdline[:120]})"


@dataclass(frozen=True, slots=True)
class BindProblem:
    key: str  # the config key: listeners[0].port, metrics.port
    message: str
    error: bool  # False: a warning (``run`` as the service may well bind it)


def _sockets(bind: str, port: int) -> list[tuple[int, tuple[object, ...]]]:
    infos = socket.getaddrinfo(
        bind or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
    )
    return list(dict.fromkeys((family, address) for family, _, _, _, address in infos))


def try_bind(bind: str, port: int) -> OSError | None:
    """The error ``run`` would meet binding ``bind:port``, or None."""
    try:
        addresses = _sockets(bind, port)
    except socket.gaierror as exc:
        return OSError(errno.EADDRNOTAVAIL, str(exc))
    for family, address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
        except OSError as exc:
            return exc
        finally:
            sock.close()
    return None


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    return inodes


def _processes() -> Iterator[Path]:
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return
    yield from (entry for entry in entries if entry.name.isdigit())


def holders(port: int) -> list[Holder]:
    """The processes with a socket listening on TCP ``port`` open, as far as this user can see."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    found: list[Holder] = []
    if not wanted:
        return found
    for proc in _processes():
        try:
            fds = list((proc / "fd").iterdir())
        except OSError:  # another user's process, or gone
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in wanted:
                found.append(_holder(proc))
                break
    return found


def _holder(proc: Path) -> Holder:
    try:
        name = (proc / "comm").read_text().strip()
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        name, cmdline = "?", ""
    return Holder(int(proc.name), name, cmdline.strip())


def _runs_config(holder: Holder, config_file: str) -> bool:
    command = holder.cmdline
    paths = {config_file, str(Path(config_file).resolve())}
    return ("edge_broker" in command or "edge-broker" in command) and any(
        path in command for path in paths
    )


def bind_problem(key: str, what: str, bind: str, port: int, config_file: str) -> BindProblem | None:
    """What ``run`` would meet binding ``what`` on ``bind:port`` (``key`` names the config key)."""
    if port == 0:  # the kernel picks a free port
        return None
    error = try_bind(bind, port)
    if error is None:
        return None
    where = f"{what} on {bind or '*'}:{port}"
    if error.errno == errno.EADDRINUSE:
        found = holders(port)
        if found and all(_runs_config(h, config_file) for h in found):
            return BindProblem(
                key,
                f"{where}: the port is held by a broker running this config ({found[0]}); `run` "
                "would fail until it stops (a reload binds nothing new)",
                error=False,
            )
        who = (
            "held by " + ", ".join(map(str, found))
            if found
            else "held by a process this user cannot see (`sudo ss -ltnp 'sport = :"
            f"{port}'` shows which)"
        )
        return BindProblem(
            key, f"{where}: the port is in use, {who}: stop it or choose another port", error=True
        )
    if error.errno == errno.EACCES:
        return BindProblem(
            key,
            f"{where}: this user may not bind it (ports below 1024 need root or "
            "CAP_NET_BIND_SERVICE, which the installed service unit grants)",
            error=False,
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return BindProblem(
            key,
            f"{where}: no interface of this machine has the address {bind!r}: write one of its "
            'addresses, or "0.0.0.0" for all',
            error=True,
        )
    return BindProblem(key, f"{where}: cannot bind: {error.strerror or error}", error=True)

"""The unit's hardening does not break the broker (issue 20): ``SystemCallFilter=~@privileged
@resources`` (with ``SystemCallErrorNumber=EPERM``) and ``MemoryDenyWriteExecute=yes``.

No systemd runs here, so the test applies the same kernel mechanisms itself before starting the
real broker: a seccomp filter (libseccomp, the library systemd uses) that makes every system call
of those groups — expanded by the installed ``systemd-analyze`` — fail with EPERM, and the
kernel's own W^X switch ``PR_SET_MDWE``, which refuses exactly what MemoryDenyWriteExecute
refuses (writable+executable mappings, making writable memory executable). The broker then
serves a password login (argon2id through PyNaCl's cffi, in a thread) with persistence on.
"""

from __future__ import annotations

import ctypes.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import start_broker

UNIT = Path(__file__).resolve().parents[2] / "systemd" / "edge-broker.service"

LAUNCHER = r"""
import ctypes, errno, mmap, os, sys
names, argv = sys.argv[1].split(","), sys.argv[2:]
lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
lib.seccomp_load.argtypes = [ctypes.c_void_p]
ctx = lib.seccomp_init(0x7FFF0000)  # SCMP_ACT_ALLOW
for name in names:
    nr = lib.seccomp_syscall_resolve_name(name.encode())
    if nr >= 0:
        assert lib.seccomp_rule_add(ctx, 0x00050000 | errno.EPERM, nr, 0) == 0, name
assert lib.seccomp_load(ctx) == 0
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(65, 1, 0, 0, 0) == 0, "PR_SET_MDWE"  # PR_MDWE_REFUSE_EXEC_GAIN
try:  # both switches are on
    os.setpriority(os.PRIO_PROCESS, 0, 5)
    sys.exit("setpriority was allowed")
except PermissionError:
    pass
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    sys.exit("a writable+executable mapping was allowed")
except PermissionError:
    pass
os.execv(sys.executable, [sys.executable, *argv])
"""


def _syscalls(groups: list[str]) -> set[str]:
    """Every system call in ``groups``, nested groups expanded, as this systemd defines them."""
    found: set[str] = set()
    pending, seen = list(groups), set()
    while pending:
        group = pending.pop()
        if group in seen:
            continue
        seen.add(group)
        out = subprocess.run(
            ["systemd-analyze", "syscall-filter", group], capture_output=True, text=True, check=True
        ).stdout
        for line in out.splitlines()[1:]:
            item = line.strip()
            if not item or item.startswith("#"):
                continue
            (pending.append if item.startswith("@") else found.add)(item)
    return found


def _unit_groups() -> list[str]:
    for line in UNIT.read_text().splitlines():
        if line.startswith("SystemCallFilter=~"):
            return line.removeprefix("SystemCallFilter=~").split()
    raise AssertionError("the unit has no SystemCallFilter=~ line")


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None or ctypes.util.find_library("seccomp") is None,
    reason="needs systemd-analyze and libseccomp",
)
def test_broker_serves_under_the_units_syscall_filter_and_memory_deny_write_execute(
    tmp_path: Path,
) -> None:
    unit = UNIT.read_text()
    assert "MemoryDenyWriteExecute=yes" in unit and "RemoveIPC=yes" in unit
    groups = _unit_groups()
    assert groups == ["@privileged", "@resources"]
    syscalls = _syscalls(groups)
    assert {"setuid", "chown", "setrlimit", "setpriority"} <= syscalls

    passwd = tmp_path / "passwd"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_broker",
            "passwd",
            "add",
            str(passwd),
            "dev",
            "--password-stdin",
        ],
        input="pw\n",
        text=True,
        check=True,
        timeout=60,
    )
    config = f"""
[[listeners]]
name = "tcp"
port = 0
auth_methods = ["password"]

[passwords]
file = "{passwd}"

[persistence]
state_dir = "{tmp_path / "state"}"
"""
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    # start_broker runs `sys.executable -m edge_broker run ...`: here a wrapper that applies the
    # restrictions, then execs the interpreter (same process, so the broker keeps them)
    import tests.conftest as conftest

    real = conftest.sys.executable
    wrapper = tmp_path / "python-sandboxed"
    wrapper.write_text(f'#!/bin/sh\nexec {real} {launcher} {",".join(sorted(syscalls))} "$@"\n')
    wrapper.chmod(0o755)
    conftest.sys.executable = str(wrapper)
    try:
        broker = start_broker(tmp_path / "sandboxed", config)
    finally:
        conftest.sys.executable = real
    try:
        status = Path(f"/proc/{broker.process.pid}/status").read_text()
        assert "\nSeccomp:\t2\n" in status, status  # the filter is on the broker process
        with broker.connect_socket() as conn:  # MQTT 3.1.1 CONNECT with username and password
            body = b"\x00\x04MQTT\x04\xc2\x00\x3c" + b"\x00\x01c" + b"\x00\x03dev" + b"\x00\x02pw"
            conn.sendall(bytes([0x10, len(body)]) + body)
            assert conn.recv(4) == bytes([0x20, 2, 0, 0])
        assert "Traceback" not in broker.log()
    finally:
        assert broker.stop() == 0, broker.log()
    assert "Traceback" not in broker.log()

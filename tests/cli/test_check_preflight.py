"""``edge-broker check`` (the unit's ExecStartPre) refuses what ``run`` would fail at, and
``run`` fails at configuration and environment problems with one line naming the listener, file
and key, never a traceback (issue 20). Both commands run as subprocesses from ``/``, as systemd
starts them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.procs import free_port
from tests.cli import field_cli
from tests.ops.tls_files import make_cert

ROOT = Path(__file__).resolve().parents[2]


def cli(
    *args: str, cwd: str = "/", prefix: tuple[str, ...] = (), timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("EDGE_BROKER_STATE_DIR", None)
    env.pop("STATE_DIRECTORY", None)
    return subprocess.run(
        [*prefix, sys.executable, "-m", "edge_broker", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def check(conf: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return cli("check", "--config", str(conf), **kwargs)  # type: ignore[arg-type]


def run_briefly(conf: Path) -> subprocess.CompletedProcess[str]:
    """``run`` of a config that must not start: it exits by itself (or is stopped after 20 s)."""
    return cli("run", "--config", str(conf), timeout=20)


def tls_listener(cert: str, key: str, port: int = 0) -> str:
    return (
        f'[[listeners]]\nname = "tls"\ntransport = "tls"\nport = {port}\n'
        f'tls_cert = "{cert}"\ntls_key = "{key}"\n'
    )


def test_listeners_and_metrics_on_one_address_and_port_are_refused(tmp_path: Path) -> None:
    port, other = free_port(), free_port()
    conf = tmp_path / "b.toml"
    conf.write_text(f"""
[[listeners]]
name = "all"
bind = "0.0.0.0"
port = {port}
auth_methods = ["anonymous"]

[[listeners]]
name = "local"
bind = "127.0.0.1"
port = {port}

[[listeners]]
name = "v6"
bind = "::"
port = {port}
auth_methods = ["anonymous"]

[[listeners]]
name = "second"
port = {other}

[metrics]
enabled = true
port = {other}
""")
    result = check(conf)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert (
        f"{conf}: listeners[1].port: listener 'local' on 127.0.0.1:{port} collides with listener "
        f"'all' on 0.0.0.0:{port}: give it another port or address"
    ) in lines
    assert any(
        line.startswith(
            f"{conf}: metrics.port: [metrics] on 127.0.0.1:{other} collides with listener 'second'"
        )
        for line in lines
    )
    assert "listeners[2]" not in result.stderr  # "::" is IPv6 only: no collision with 0.0.0.0
    assert lines[-1] == "2 error(s)"
    result = run_briefly(conf)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "listeners[1].port" in result.stderr


def test_run_names_the_listener_whose_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        conf = tmp_path / "b.toml"
        conf.write_text(f'[[listeners]]\nname = "plain"\nport = {port}\n')
        checked = check(conf)  # another process: only trying the bind finds it (issue 29)
        assert checked.returncode == 1 and "Traceback" not in checked.stderr
        assert (
            f"listeners[0].port: listener 'plain' on 127.0.0.1:{port}: the port is in use, held "
            f"by python" in checked.stderr
        )
        assert f"(pid {os.getpid()}: " in checked.stderr  # who holds it: this test
        result = run_briefly(conf)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert (
        f"edge-broker: listener 'plain' (tcp 127.0.0.1:{port}): cannot listen: Address already in "
        "use; another process (or listener) holds that port"
    ) in result.stderr


def test_tls_key_problems_are_config_errors(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path, "server")
    _, other_key = make_cert(tmp_path, "other")
    conf = tmp_path / "b.toml"
    cases = {
        "mismatch": (str(cert), str(other_key), "is not the key of the certificate"),
        "cert as key": (
            str(cert),
            str(cert),
            "is a certificate: write the path of the certificate's private key",
        ),
        "key as cert": (str(key), str(key), "is not a PEM certificate"),
    }
    for name, (c, k, expected) in cases.items():
        conf.write_text(tls_listener(c, k))
        result = check(conf)
        assert result.returncode == 1, name
        assert expected in result.stderr, (name, result.stderr)
        assert f"{conf}: listeners[0].tls_" in result.stderr, name
        result = run_briefly(conf)
        assert (
            result.returncode == 2
            and "Traceback" not in result.stderr
            and expected in result.stderr
        ), name
    encrypted = tmp_path / "encrypted.key"  # a service cannot type a passphrase: never a prompt
    subprocess.run(
        [
            "openssl",
            "pkey",
            "-in",
            str(key),
            "-aes256",
            "-passout",
            "pass:secret",
            "-out",
            str(encrypted),
        ],
        check=True,
        capture_output=True,
    )
    conf.write_text(tls_listener(str(cert), str(encrypted)))
    result = check(conf)
    assert result.returncode == 1 and "is encrypted: the broker starts unattended" in result.stderr
    conf.write_text(tls_listener(str(cert), str(key)))
    assert check(conf).returncode == 0


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_a_key_the_service_user_cannot_read(tmp_path: Path) -> None:
    """Root without CAP_DAC_OVERRIDE reads files as their mode says, like the service user."""
    cert, key = make_cert(tmp_path, "server")
    key.chmod(0o000)
    conf = tmp_path / "b.toml"
    conf.write_text(tls_listener(str(cert), str(key)))
    no_dac = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all")
    result = check(conf, prefix=no_dac)
    assert result.returncode == 1
    assert (
        f"{conf}: listeners[0].tls_key: cannot read {str(key)!r} (permission denied) as this user: "
        "make it readable by the service's group"
    ) in result.stderr


AUTHORIZERS = """
class NotAnAuthorizer:
    def __init__(self, options):
        pass

class Broken:
    def __init__(self, options):
        raise RuntimeError("no database at " + options["url"])

    async def authorize_publish(self, request):
        return None
"""


def test_authorizer_that_is_not_one_or_whose_constructor_raises(tmp_path: Path) -> None:
    (tmp_path / "plugins_i20.py").write_text(AUTHORIZERS)
    conf = tmp_path / "b.toml"
    for cls, expected in (
        ("NotAnAuthorizer", "is not an authorizer: it must define 'async def authorize_publish"),
        ("Broken", "no database at db://x"),
    ):
        conf.write_text(
            f'[[authorizers]]\nclass = "plugins_i20:{cls}"\noptions = {{ url = "db://x" }}\n'
        )
        env = {**os.environ, "PYTHONPATH": f"{ROOT}:{tmp_path}"}
        for command, rc in (("check", 1), ("run", 2 if cls == "NotAnAuthorizer" else 1)):
            result = subprocess.run(
                [sys.executable, "-m", "edge_broker", command, "--config", str(conf)],
                capture_output=True,
                text=True,
                cwd="/",
                env=env,
                timeout=20,
            )
            assert result.returncode == rc, (cls, command, result.stderr)
            assert expected in result.stderr and "Traceback" not in result.stderr, (
                cls,
                command,
                result.stderr,
            )
            assert "authorizers[0]" in result.stderr, (cls, command, result.stderr)


def test_every_permissions_problem_is_reported(tmp_path: Path) -> None:
    conf = tmp_path / "b.toml"
    conf.write_text("""
[permissions]
unassigned = "x"

[permissions.sets.a]
rules = [{ id = "r1", topic = "a/#/b", action = "publish", permission = "allow" },
         { id = "r2", topic = "c/+x", action = "publish", permission = "allow" }]

[[permissions.assign]]
username = "u"
sets = ["nope"]
""")
    result = check(conf)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[-1] == "4 error(s)", result.stderr
    assert any("permissions.unassigned" in line and "'x'" in line for line in lines)
    assert sum("permissions.sets.a" in line for line in lines) == 2
    assert any("permissions.assign[0].sets" in line and "'nope'" in line for line in lines)


def test_relative_paths_are_read_from_the_config_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    make_cert(folder, "server")
    added = field_cli.cli(
        "passwd", "add", str(folder / "passwd"), "dev", "--password-stdin", input="pw\n"
    )
    assert added.returncode == 0, added.stderr
    (folder / "acl.json5").write_text(
        '{ access_control: { enabled: true, default_permission: "allow", rules: [], subjects: [], '
        "policies: [] } }"
    )
    port = free_port()
    conf = folder / "b.toml"
    conf.write_text(f"""
[[listeners]]
name = "tls"
transport = "tls"
port = {port}
tls_cert = "server.crt"
tls_key = "./server.key"
auth_methods = ["password"]

[passwords]
file = "passwd"

[persistence]
state_dir = "state"

[acl]
file = "acl.json5"

[log]
level = "INFO"
""")
    result = check(conf)  # from "/", as systemd runs it
    assert result.returncode == 0, result.stderr
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    broker = subprocess.Popen(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(conf)],
        cwd="/",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        import time

        deadline = time.monotonic() + 20
        while not (folder / "state" / "broker.log").exists():
            assert broker.poll() is None and time.monotonic() < deadline, broker.communicate()[0]
            time.sleep(0.1)
    finally:
        broker.terminate()
        out = broker.communicate(timeout=20)[0]
    assert broker.returncode == 0, out
    assert not Path("/state").exists()


def test_directories_the_broker_must_create(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a directory")
    conf = tmp_path / "b.toml"
    conf.write_text(
        f'[[listeners]]\nname = "a"\nport = 0\n[audit]\ndir = "{tmp_path}/afile/audit"\n'
    )
    result = check(conf)
    assert result.returncode == 1
    assert f"{conf}: audit.dir: '{tmp_path}/afile/audit' cannot be created" in result.stderr
    result = run_briefly(conf)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"edge-broker: cannot start: {tmp_path}/afile" in result.stderr
    assert cli("bundle", "keygen", str(tmp_path / "cloud.key")).returncode == 0
    conf.write_text(
        '[[listeners]]\nname = "a"\nport = 0\n[sync]\nsource = "directory"\ngateway_id = "g"\n'
        'trusted_keys = ["cloud.key.pub"]\ndirectory = "in"\nstate_dir = "afile/sync"\n'
    )
    result = check(conf)
    assert (
        result.returncode == 1
        and f"{conf}: sync.state_dir: '{tmp_path}/afile/sync' cannot be created" in result.stderr
    )


def test_relative_sync_files_are_read_from_the_config_files_folder(tmp_path: Path) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    assert cli("bundle", "keygen", str(folder / "cloud.key")).returncode == 0
    (folder / "inbox").mkdir()
    conf = folder / "b.toml"
    conf.write_text(
        '[[listeners]]\nname = "a"\nport = 0\n[sync]\nsource = "directory"\ngateway_id = "gw"\n'
        'trusted_keys = ["cloud.key.pub"]\ndirectory = "inbox"\nstate_dir = "sync"\n'
    )
    result = check(conf)
    assert result.returncode == 0, result.stderr


def test_run_names_metrics_and_pid_file_problems(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        conf = tmp_path / "b.toml"
        conf.write_text(
            f'[[listeners]]\nname = "a"\nport = 0\n[metrics]\nenabled = true\nport = {port}\n'
        )
        result = run_briefly(conf)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        f"edge-broker: [metrics] (127.0.0.1:{port}): cannot listen: Address already in use"
        in result.stderr
    )
    conf.write_text('[[listeners]]\nname = "a"\nport = 0\n')
    result = cli(
        "run",
        "--config",
        str(conf),
        "--pid-file",
        str(tmp_path / "no" / "such" / "pid"),
        timeout=20,
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"--pid-file {tmp_path}/no/such/pid: No such file or directory" in result.stderr

"""Configuration: defaults, every error with file/key/fix, unknown keys, `edge-broker check`."""

from __future__ import annotations

import subprocess
import sys

import pytest

from edge_broker.config import Config, ConfigError, load_config, loads_config


def test_embedded_default_is_loopback_anonymous():
    c = load_config(None)
    assert isinstance(c, Config)
    (listener,) = c.listeners
    assert (listener.bind, listener.port, listener.transport) == ("127.0.0.1", 1883, "tcp")
    assert listener.auth_methods == ("anonymous",)
    assert c.limits.max_packet_size == 1_048_576 and c.sys.interval == 10


def test_full_file_parses():
    c = loads_config("""
[broker]
maximum_qos = 1
topic_alias_maximum = 0
[[listeners]]
name = "lan"
bind = "0.0.0.0"
port = 8883
auth_methods = ["anonymous"]
deny_action = "disconnect"
[[listeners]]
name = "ws"
transport = "websocket"
websocket_path = "/ws"
[limits]
max_connections = 50
connect_rate = 5
[log]
format = "json"
[sys]
interval = 0
[topics]
separator = "."
""")
    assert c.broker.maximum_qos == 1 and c.listeners[0].deny_action == "disconnect"
    assert c.listeners[1].websocket_path == "/ws" and c.limits.connect_rate == 5.0
    assert c.topics.separator == "." and c.sys.interval == 0 and c.log.format == "json"


BAD = """
[broker]
maximum_qos = 3
retain_availabel = true
[[listeners]]
name = "x"
bind = "0.0.0.0"
port = 70000
transport = "udp"
[[listeners]]
name = "x"
auth_methods = ["anonymous", "kerberos"]
tls_cert = "/nope.pem"
[limits]
max_connections = "many"
[frobnicate]
"""


def test_every_error_reported_with_key_and_fix():
    with pytest.raises(ConfigError) as info:
        loads_config(BAD, "bad.toml")
    problems = {p.key: p.message for p in info.value.problems}
    assert all(p.file == "bad.toml" for p in info.value.problems)
    assert "from 0 to 2" in problems["broker.maximum_qos"]
    assert "unknown key" in problems["broker.retain_availabel"]
    assert "retain_available" in problems["broker.retain_availabel"]  # says what to write
    assert "65535" in problems["listeners[0].port"]
    assert "'tcp'" in problems["listeners[0].transport"]
    # a non-loopback listener without methods is told what to write, never to open anonymous
    assert '["password"]' in problems["listeners[0].auth_methods"]
    assert "anonymous" not in problems["listeners[0].auth_methods"]
    assert "kerberos" in problems["listeners[1].auth_methods"]
    assert "twice" in problems["listeners[1].name"]
    assert "transport" in problems["listeners[1].tls_cert"]
    assert "integer" in problems["limits.max_connections"]
    assert "unknown section" in problems["frobnicate"]
    assert len(info.value.problems) >= 10


def test_tls_listener_needs_files(tmp_path):
    with pytest.raises(ConfigError) as info:
        loads_config('[[listeners]]\nname="t"\ntransport="tls"\nrequire_client_cert=true\n')
    keys = {p.key for p in info.value.problems}
    assert {"listeners[0].tls_cert", "listeners[0].tls_key", "listeners[0].tls_ca"} <= keys


def test_syntax_error_names_the_file(tmp_path):
    f = tmp_path / "x.toml"
    f.write_text("[broker\n")
    with pytest.raises(ConfigError) as info:
        load_config(f)
    assert str(f) in str(info.value) and "invalid TOML" in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "absent.toml")
    assert "cannot read" in str(info.value)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", *args], capture_output=True, text=True, timeout=60
    )


def test_check_command_prints_every_error(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(BAD)
    r = run_cli("check", "--config", str(f))
    assert r.returncode == 1
    lines = [line for line in r.stderr.splitlines() if line.startswith(str(f))]
    assert len(lines) >= 10
    assert f"{f}: broker.maximum_qos:" in r.stderr


def test_check_command_ok(tmp_path):
    f = tmp_path / "good.toml"
    f.write_text('[[listeners]]\nname = "a"\nport = 1884\n')
    r = run_cli("check", "--config", str(f))
    assert r.returncode == 0 and "OK" in r.stdout


def test_run_refuses_bad_config(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(BAD)
    r = run_cli("run", "--config", str(f))
    assert r.returncode == 2 and "broker.maximum_qos" in r.stderr


def test_lean_entry_point_has_the_broker_commands(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(BAD)
    r = subprocess.run(
        [sys.executable, "-m", "edge_broker.broker", "check", "--config", str(f)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and f"{f}: broker.maximum_qos:" in r.stderr

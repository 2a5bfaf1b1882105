"""``[metrics]`` and ``[sync]`` sections (config/service.py): defaults, and errors that name the
key and what to write (through the broker's config loader and ``edge-broker check``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.config import ConfigError, loads_config


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        loads_config(text, "gw.toml")
    return [str(p) for p in info.value.problems]


def test_defaults_are_off() -> None:
    config = loads_config("")
    assert (
        not config.metrics.enabled
        and config.metrics.bind == "127.0.0.1"
        and config.metrics.port == 9883
    )
    assert not config.sync.enabled and config.sync.source == "none"


def test_sync_needs_gateway_and_keys() -> None:
    found = problems('[sync]\nsource = "mqtt"\n')
    assert any("sync.gateway_id: missing" in p for p in found)
    assert any("sync.trusted_keys: missing" in p for p in found)


def test_sync_errors_name_the_key(tmp_path: Path) -> None:
    pub = tmp_path / "cloud.pub"
    pub.write_text("x")
    found = problems(
        f'[sync]\nsource = "directory"\ngateway_id = "a/b"\ntrusted_keys = ["{pub}", "/no/key"]\n'
        'cert = "/no/cert"\nport = 70000\nsurprise = 1\n'
    )
    text = "\n".join(found)
    assert "sync.gateway_id: 'a/b' must not contain '/'" in text
    assert "sync.trusted_keys[1]: '/no/key' is not a readable file" in text
    assert 'sync.directory: source = "directory" needs a directory' in text
    assert "sync.cert: '/no/cert' is not a readable file" in text
    assert "sync.port: 70000 is out of range" in text
    assert "sync.surprise: unknown key" in text
    assert all(p.startswith("gw.toml: ") for p in found)


def test_sync_source_choice_and_metrics_types() -> None:
    found = problems('[sync]\nsource = "http"\n[metrics]\nenabled = "yes"\nport = -1\n')
    text = "\n".join(found)
    assert "sync.source: 'http' is not valid: write one of 'none', 'mqtt', 'directory'" in text
    assert "metrics.enabled: expected true or false" in text
    assert "metrics.port: -1 is out of range" in text


def test_check_command_prints_them(tmp_path: Path) -> None:
    path = tmp_path / "gw.toml"
    path.write_text('[sync]\nsource = "mqtt"\ngateway_id = "gw"\n')
    result = subprocess.run(
        [sys.executable, "-m", "edge_broker", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "sync.trusted_keys: missing" in result.stderr


def test_run_refuses_a_key_file_that_is_not_a_key(tmp_path: Path) -> None:
    bad = tmp_path / "cloud.pub"
    bad.write_text("not a key\n")
    path = tmp_path / "gw.toml"
    path.write_text(
        f'[[listeners]]\nname = "t"\nport = 0\n[sync]\nsource = "directory"\ngateway_id = "gw"\n'
        f'trusted_keys = ["{bad}"]\ndirectory = "{tmp_path}"\nstate_dir = "{tmp_path / "s"}"\n'
    )
    result = subprocess.run(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert f"edge-broker: [sync] trusted_keys: cannot load {bad}" in result.stderr

"""Every command whose reader goes away (``edge-broker check … | head -1``) exits quietly, as
Unix tools do: no ``BrokenPipeError`` traceback, no "None: Broken pipe", no "Exception ignored"
(issue 29 row 9). The reader is gone before the command writes, so every write meets the closed
pipe: no timing is involved."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.cli import COMMANDS, EXIT_PIPE_CLOSED
from scripts.procs import free_port
from tests.cli.field_cli import cli, cli_env


def closed_stdout(*args: str, stderr_too: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``edge-broker ARGS`` with stdout (and stderr) a pipe nobody reads."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "edge_broker", *args],
            stdout=write,
            stderr=write if stderr_too else subprocess.PIPE,
            text=True,
            cwd="/",
            env=cli_env(),
            timeout=60,
        )
    finally:
        os.close(write)


def assert_quiet(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == EXIT_PIPE_CLOSED, result.stderr
    assert result.stderr == "", result.stderr


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pipe")
    conf = folder / "b.toml"
    conf.write_text(
        f'[[listeners]]\nname = "tcp"\nport = {free_port()}\n\n'
        f'[persistence]\nstate_dir = "{folder / "state"}"\n'
    )
    return conf


@pytest.mark.parametrize("command", [None, *sorted(COMMANDS)])
def test_help_of_every_command(command: str | None) -> None:
    assert_quiet(closed_stdout(*([command] if command else []), "--help"))


def test_commands_that_print(config: Path, tmp_path: Path) -> None:
    assert_quiet(closed_stdout("check", "--config", str(config)))
    assert_quiet(closed_stdout("state", "check", "--config", str(config)))
    assert_quiet(closed_stdout("lint", "--config", str(config)))
    assert_quiet(closed_stdout("--version"))
    key = tmp_path / "cloud"
    made = cli("bundle", "keygen", str(key))
    assert made.returncode == 0, made.stderr
    policy = tmp_path / "policy.toml"
    policy.write_text('[permissions]\nunassigned = "allow"\n')
    bundle = tmp_path / "b.cbor"
    created = cli(
        "bundle", "create", "--key", str(key), "--version", "1", "--gateway", "gw-1",
        "--policy", str(policy), "--output", str(bundle),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert_quiet(closed_stdout("bundle", "show", str(bundle)))


def test_errors_to_a_closed_stderr(config: Path, tmp_path: Path) -> None:
    broken = tmp_path / "bad.toml"
    broken.write_text("[listeners\n")
    result = closed_stdout("check", "--config", str(broken), stderr_too=True)
    assert result.returncode == EXIT_PIPE_CLOSED and result.stderr is None

"""`lint` and `check` warn about configured principals that default permissions leave with
nothing under ``unassigned = "deny"``: a bridge (whose every bridged message would be a denial)
and password users no assignment can select; and stay quiet once they are assigned."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from edge_broker.config import loads_config
from edge_broker.ops.principal_lint import lint_unpermitted_principals

BRIDGE = """
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 1883
auth_methods = ["anonymous"]

[[bridges]]
name = "cloud"
address = "127.0.0.1"
port = 1884

[[bridges.topics]]
direction = "out"
local = "sensors/#"

[permissions]
unassigned = "deny"

[permissions.sets.sensors]
rules = [{ id = "all", topic = "sensors/#" }]

[[permissions.assign]]
method = "anonymous"
sets = ["sensors"]
"""

ASSIGNED = """
[[permissions.assign]]
method = "bridge"
username = "cloud"
sets = ["sensors"]
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", *args], capture_output=True, text=True, timeout=60
    )


def test_bridge_without_permissions_is_reported_by_lint_and_check(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(BRIDGE)
    lint = run("lint", "--config", str(path))
    assert lint.returncode == 1, lint.stdout + lint.stderr
    assert "bridges.cloud: the bridge's principal" in lint.stdout
    assert 'method = "bridge" and username = "cloud"' in lint.stdout  # what to add
    check = run("check", "--config", str(path))
    assert check.returncode == 0, check.stderr  # it runs: a warning, not an error
    assert "warning: bridges.cloud" in check.stdout
    path.write_text(BRIDGE + ASSIGNED)
    assert "bridges.cloud" not in run("lint", "--config", str(path)).stdout
    assert "warning" not in run("check", "--config", str(path)).stdout


def test_a_set_that_denies_everything_is_no_permission() -> None:
    config = loads_config(
        BRIDGE.replace('unassigned = "deny"', "")
        + '\n[permissions.sets.nothing]\ndefault_behaviour = "deny"\nrules = []\n'
        + ASSIGNED.replace('["sensors"]', '["nothing"]')
    )
    (finding,) = lint_unpermitted_principals(config)
    assert "permissions.assign[1]" in finding and "denies by default" in finding


def test_password_users_no_assignment_reaches(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    hashed = "$6$AAAAAAAAAAAAAAAA$" + "A" * 86 + "=="
    passwd.write_text(f"alice:{hashed}::field\nbob:{hashed}\ncarol:{hashed}\n")
    base = (
        '[[listeners]]\nname = "tcp"\nport = 1883\nbind = "127.0.0.1"\n'
        f'auth_methods = ["password"]\n[passwords]\nfile = "{passwd}"\n'
        '[permissions]\nunassigned = "deny"\n'
        '[permissions.sets.s]\nrules = [{ id = "a", topic = "a/#" }]\n'
        '[[permissions.assign]]\nrole = "field"\nsets = ["s"]\n'
        '[[permissions.assign]]\nusername = "carol"\nclient_id = "c-*"\nsets = ["s"]\n'
    )
    (finding,) = lint_unpermitted_principals(loads_config(base))
    assert "'bob'" in finding and "'alice'" not in finding and "'carol'" not in finding
    assert lint_unpermitted_principals(loads_config(base.replace('"deny"', '"allow"'))) == []

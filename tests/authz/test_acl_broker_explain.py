"""``edge-broker explain`` shows the site ACL's verdict, the deciding rule id, the subjects the
connection matches and the default permission; ``edge-broker lint`` reports ACL rules that can
never apply (AUTHZ.md §4). Run as the command line the operator uses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

CONFIG = """
[acl]
enabled = true
default_permission = "allow"

[[acl.rules]]
id = "no-admin-from-field"
messages = ["put", "declare_subscriber"]
flows = ["ingress"]
permission = "deny"
key_exprs = ["admin/**"]

[[acl.rules]]
id = "never-attached"
messages = ["put"]
permission = "deny"
key_exprs = ["x/**"]

[[acl.subjects]]
id = "field"
interfaces = ["wlan0"]

[[acl.policies]]
rules = ["no-admin-from-field"]
subjects = ["field"]
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "broker.toml"
    path.write_text(CONFIG)
    return str(path)


def test_explain_denied_names_rule_and_subjects(config: str) -> None:
    done = cli(
        "explain",
        "-c",
        config,
        "--client-id",
        "d1",
        "--interface",
        "wlan0",
        "publish",
        "admin/reset",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    acl_line = next(line for line in done.stdout.splitlines() if line.strip().startswith("acl"))
    assert 'deny rule "no-admin-from-field"' in acl_line
    assert "match subjects: 'field'" in acl_line and "default_permission allow" in acl_line
    assert 'DENIED by acl rule "no-admin-from-field"' in done.stdout


def test_explain_allowed_on_another_interface(config: str) -> None:
    done = cli(
        "explain", "-c", config, "--client-id", "d1", "--interface", "eth0", "subscribe", "admin/#"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    acl_line = next(line for line in done.stdout.splitlines() if line.strip().startswith("acl"))
    assert "allow" in acl_line and "match subjects: none" in acl_line
    assert "=> ALLOWED" in done.stdout


def test_lint_reports_acl_rules_that_never_apply(config: str) -> None:
    done = cli("lint", "-c", config)
    assert "acl: rule 'never-attached': unused-rule" in done.stdout

"""`edge-broker explain` and `edge-broker lint` against known answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = """
[passwords]
file = "{pw}"

[permissions.sets.main]
rules = [
  { id = "no-admin", topic = "admin/#", type = "DENY" },
  { id = "own", topic = "devices/${clientid}/#" },
  { id = "wide", topic = "telemetry/#", activity = "SUBSCRIBE" },
  { id = "narrow", topic = "telemetry/room1", activity = "SUBSCRIBE" },
]
[permissions.sets.ops]
rules = [{ id = "everything", topic = "#" }]
[permissions.sets.orphan]
rules = [{ id = "x", topic = "x" }]

[[permissions.assign]]
role = "operator"
sets = ["ops"]
[[permissions.assign]]
client_id = "dev*"
sets = ["main"]
"""


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edge_broker", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("explain")
    pw = base / "passwd"
    assert run("passwd", "add", str(pw), "olga", "--password-stdin", "--roles", "operator",
               stdin="s3cret\n").returncode == 0
    path = base / "edge-broker.toml"
    path.write_text(CONFIG.replace("{pw}", str(pw)))
    return str(path)


def test_explain_denial_names_gate_and_rule(config: str) -> None:
    result = run("explain", "--config", config, "--client-id", "dev7", "publish", "admin/x")
    assert result.returncode == 1
    assert 'permissions  deny rule "no-admin"' in result.stdout
    assert "set from permissions.assign[1] (client_id=dev*)" in result.stdout
    assert result.stdout.strip().endswith('denied by permissions rule "no-admin"')


def test_explain_allow_with_placeholder_and_recheck(config: str) -> None:
    own = run("explain", "--config", config, "--client-id", "dev7", "subscribe", "devices/dev7/#")
    assert own.returncode == 0 and 'allow rule "own"' in own.stdout and "=> ALLOWED" in own.stdout
    other = run("explain", "--config", config, "--client-id", "dev7", "subscribe", "devices/dev8/#")
    assert other.returncode == 1 and "no permission matches and the default behaviour is DENY" in other.stdout


def test_explain_roles_come_from_the_password_file(config: str) -> None:
    result = run("explain", "--config", config, "--client-id", "console", "--username", "olga",
                 "subscribe", "#")
    assert result.returncode == 0
    assert "roles operator" in result.stdout and 'allow rule "everything"' in result.stdout


def test_explain_syntax_gate(config: str) -> None:
    result = run("explain", "--config", config, "--client-id", "dev7", "subscribe", "a/#/b")
    assert result.returncode == 1 and "syntax+reserved deny" in result.stdout and "0x8F" in result.stdout


def test_lint_known_findings(config: str) -> None:
    result = run("lint", "--config", config)
    assert result.returncode == 1
    out = result.stdout
    assert "permissions.sets.orphan: no [[permissions.assign]] names this set" in out
    assert "rule 'narrow' (telemetry/room1) can never match: rule 'wide' (telemetry/#) comes first" in out
    assert "rule 'everything' allows everything" in out
    assert "clients that no assignment selects get no permissions" in out
    assert out.strip().endswith("4 finding(s) in " + config)


def test_lint_clean_config(tmp_path: Path) -> None:
    path = tmp_path / "clean.toml"
    path.write_text('[permissions]\nunassigned = "deny"\n[permissions.sets.s]\n'
                    'rules = [{ id = "a", topic = "a/#" }]\n[[permissions.assign]]\nsets = ["s"]\n')
    result = run("lint", "--config", str(path))
    assert result.returncode == 0 and "0 finding(s)" in result.stdout


def test_bad_config_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[permissions.sets.s]\nrules = [{ topic = "a/#/b" }]\n')
    result = run("explain", "--config", str(path), "--client-id", "c", "publish", "a")
    assert result.returncode == 2 and "'#' must be the last segment" in result.stderr


def test_explain_publish_to_a_wildcard_topic_is_the_brokers_0x90(config: str) -> None:
    """Issue 20: the broker disconnects such a PUBLISH with 0x90 before any gate; explain says so."""
    result = run("explain", "--config", config, "--client-id", "dev7", "publish", "a/+/b")
    assert result.returncode == 1
    assert "syntax+reserved disconnect" in result.stdout
    assert result.stdout.strip().splitlines()[-1].startswith("=> DENIED by syntax: 0x90 ")
    assert "permissions" not in result.stdout  # no later gate is shown as if it ran


def test_lint_reports_sets_only_shadowed_assignments_name(tmp_path: Path) -> None:
    """Issue 20: an assignment that an earlier one always shadows never applies, so the set it
    alone names is a set nobody gets."""
    path = tmp_path / "shadow.toml"
    path.write_text("""
[permissions]
unassigned = "deny"
[permissions.sets.devices]
rules = [{ id = "d", topic = "devices/#" }]
[permissions.sets.special]
rules = [{ id = "s", topic = "special/#" }]
[permissions.sets.ops]
rules = [{ id = "o", topic = "ops/#" }]

[[permissions.assign]]
client_id = "dev-*"
sets = ["devices"]
[[permissions.assign]]
client_id = "dev-special-*"
tenant = "site1"
sets = ["special"]
[[permissions.assign]]
client_id = "ops-*"
sets = ["ops"]
[[permissions.assign]]
client_id = "de*"
sets = ["devices"]
""")
    result = run("lint", "--config", str(path))
    out = result.stdout
    assert result.returncode == 1
    assert ("permissions.sets.special: nobody gets this set: only assignments that never apply name it: "
            "permissions.assign[1] (client_id=dev-special-*, tenant=site1) (shadowed by "
            "permissions.assign[0] (client_id=dev-*))") in out
    assert ("permissions.assign[1] (client_id=dev-special-*, tenant=site1): never applies: "
            "permissions.assign[0] (client_id=dev-*) comes first") in out
    assert "permissions.sets.ops" not in out and "permissions.assign[2]" not in out
    assert "permissions.assign[3]" not in out  # "de*" also takes "deb-1", which "dev-*" does not
    assert out.strip().endswith("2 finding(s) in " + str(path))

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
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("explain")
    pw = base / "passwd"
    assert (
        run(
            "passwd",
            "add",
            str(pw),
            "olga",
            "--password-stdin",
            "--roles",
            "operator",
            stdin="s3cret\n",
        ).returncode
        == 0
    )
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
    assert (
        other.returncode == 1
        and "no permission matches and the default behaviour is DENY" in other.stdout
    )


def test_explain_roles_come_from_the_password_file(config: str) -> None:
    result = run(
        "explain",
        "--config",
        config,
        "--client-id",
        "console",
        "--username",
        "olga",
        "subscribe",
        "#",
    )
    assert result.returncode == 0
    assert "roles operator" in result.stdout and 'allow rule "everything"' in result.stdout


def test_explain_syntax_gate(config: str) -> None:
    result = run("explain", "--config", config, "--client-id", "dev7", "subscribe", "a/#/b")
    assert (
        result.returncode == 1
        and "syntax+reserved deny" in result.stdout
        and "0x8F" in result.stdout
    )


def test_lint_known_findings(config: str) -> None:
    result = run("lint", "--config", config)
    assert result.returncode == 1
    out = result.stdout
    assert "permissions.sets.orphan: no [[permissions.assign]] names this set" in out
    assert (
        "rule 'narrow' (telemetry/room1) can never match: rule 'wide' (telemetry/#) comes first"
        in out
    )
    assert "rule 'everything' allows everything" in out
    assert "clients that no assignment selects get no permissions" in out
    # issue 15 item 8: "own" uses ${clientid} and the default listener is anonymous
    assert (
        "permissions.assign[1] (client_id=dev*) (rules own): ${clientid} is chosen by the "
        "client for method 'anonymous'"
    ) in out
    assert out.strip().endswith("5 finding(s) in " + config)


LISTENERS = """
[[listeners]]
name = "pw"
bind = "127.0.0.1"
port = 0
auth_methods = ["password", "token", "smoker"]

[tokens]
{binding}

[[tokens.keys]]
secret = "0123456789abcdef0123456789abcdef"

[passwords]
file = "{pw}"

[permissions]
unassigned = "deny"

[permissions.sets.own]
rules = [{ id = "own", topic = "sensors/${clientid}/#" }]
[[permissions.assign]]
role = "sensor"
sets = ["own"]
"""


def _lint_binding(tmp_path: Path, binding: str, clientids: str | None) -> str:
    pw = tmp_path / "passwd"
    args = ["passwd", "add", str(pw), "sensor7", "--password-stdin", "--roles", "sensor"]
    if clientids is not None:
        args += ["--clientids", clientids]
    assert run(*args, stdin="pw\n").returncode == 0
    assert (
        run(
            "passwd", "add", str(pw), "ops", "--password-stdin", "--roles", "admin", stdin="pw\n"
        ).returncode
        == 0
    )  # not selected by role = "sensor"
    path = tmp_path / "edge-broker.toml"
    path.write_text(LISTENERS.replace("{pw}", str(pw)).replace("{binding}", binding))
    path.chmod(0o600)  # it holds a token secret: readable by others would be one more finding
    return run("lint", "--config", str(path)).stdout


def test_lint_warns_where_clientid_is_not_bound(tmp_path: Path) -> None:
    out = _lint_binding(tmp_path, "", None)
    assert "for method 'password': password entries without clientids: sensor7;" in out
    assert "ops" not in out.split("password entries without clientids:")[1].split(";")[0]
    # the assignment selects by role, which only password entries carry: token and SMOKER
    # clients never match it, so their unbound ids are no finding here
    assert "for method 'token'" not in out
    assert "for method 'smoker'" not in out
    # and ops, whom no assignment selects under unassigned = "deny", can do nothing
    assert "passwords: user(s) 'ops' can log in but have no permissions" in out
    assert "2 finding(s)" in out


def test_lint_reports_open_tenant_choice(tmp_path: Path) -> None:
    path = tmp_path / "open.toml"
    path.write_text('[[listeners]]\nname = "lab"\ntenant_choice = "open"\n')
    out = run("lint", "--config", str(path)).stdout
    assert 'listeners.lab: tenant_choice = "open"' in out and "1 finding(s)" in out


def test_lint_is_quiet_when_every_method_binds_the_client_id(tmp_path: Path) -> None:
    out = _lint_binding(tmp_path, "require_client_id_binding = true", "sensor-*")
    assert "${clientid}" not in out and "1 finding(s)" in out  # only: 'ops' has no permissions


def test_lint_clean_config(tmp_path: Path) -> None:
    path = tmp_path / "clean.toml"
    path.write_text(
        '[permissions]\nunassigned = "deny"\n[permissions.sets.s]\n'
        'rules = [{ id = "a", topic = "a/#" }]\n[[permissions.assign]]\nsets = ["s"]\n'
    )
    result = run("lint", "--config", str(path))
    assert result.returncode == 0 and "0 finding(s)" in result.stdout


def test_bad_config_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[permissions.sets.s]\nrules = [{ topic = "a/#/b" }]\n')
    result = run("explain", "--config", str(path), "--client-id", "c", "publish", "a")
    assert result.returncode == 2 and "'#' must be the last segment" in result.stderr


def test_explain_token_client_has_the_tokens_subject_not_the_given_user_name(
    tmp_path: Path,
) -> None:
    """issue 15 item 6: explain decides as the broker does for a token client."""
    from edge_broker.auth.token import create_token
    from edge_broker.auth.token_keys import TokenKey

    secret = "0123456789abcdef0123456789abcdef"
    path = tmp_path / "tok.toml"
    path.write_text(f"""
[[listeners]]
name = "t"
auth_methods = ["token"]
[[tokens.keys]]
secret = "{secret}"
[acl]
enabled = true
default_permission = "deny"
[[acl.rules]]
id = "admins-operate"
messages = ["put"]
flows = ["ingress"]
permission = "allow"
key_exprs = ["ops/**"]
[[acl.subjects]]
id = "admins"
usernames = ["admin"]
[[acl.policies]]
rules = ["admins-operate"]
subjects = ["admins"]
""")
    key = TokenKey.hs256(secret.encode(), None, "test")
    grants = [{"tenant_ids": ["~"], "allow_channels_pub": ["ops/#"], "allow_channels_sub": []}]
    anonymous_token = create_token(key, grants, ttl=300)
    admin_token = create_token(key, grants, ttl=300, subject="admin")
    base = ("explain", "--config", str(path), "--client-id", "c1")
    denied = run(*base, "--token", anonymous_token, "--username", "admin", "publish", "ops/x")
    assert denied.returncode == 1 and "username" not in denied.stdout.split(":")[0], denied.stdout
    allowed = run(*base, "--token", admin_token, "publish", "ops/x")
    assert allowed.returncode == 0 and "username 'admin'" in allowed.stdout, allowed.stdout


def test_explain_publish_to_a_wildcard_topic_is_the_brokers_0x90(config: str) -> None:
    """Issue 20: the broker disconnects such a PUBLISH (0x90) before any gate; explain says so."""
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
    assert (
        "permissions.sets.special: nobody gets this set: only assignments that never apply name "
        "it: permissions.assign[1] (client_id=dev-special-*, tenant=site1) (shadowed by "
        "permissions.assign[0] (client_id=dev-*))"
    ) in out
    assert (
        "permissions.assign[1] (client_id=dev-special-*, tenant=site1): never applies: "
        "permissions.assign[0] (client_id=dev-*) comes first"
    ) in out
    assert "permissions.sets.ops" not in out and "permissions.assign[2]" not in out
    assert "permissions.assign[3]" not in out  # "de*" also takes "deb-1", which "dev-*" does not
    assert out.strip().endswith("2 finding(s) in " + str(path))

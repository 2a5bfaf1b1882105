"""What an operator reads from ``check``, ``lint`` and ``bridge status`` (issue 29 rows 6, 7, 8,
10, 12; row 5, the port another process holds, is in tests/ops/test_check_preflight.py). The
commands run as subprocesses, as an operator runs them; ``bridge status`` reads a real broker."""

from __future__ import annotations

from pathlib import Path

from edge_broker.auth.password import set_user, write_password_file
from scripts.procs import free_port
from tests.cli.field_cli import cli
from tests.conftest import BrokerFactory
from tests.ops.tls_files import make_cert


def test_a_typo_gets_the_real_key_and_never_a_suggestion_to_open_anonymous(tmp_path: Path) -> None:
    conf = tmp_path / "b.toml"
    conf.write_text(
        f'[[listeners]]\nname = "lan"\nbind = "0.0.0.0"\nport = {free_port()}\n'
        'auth_method = ["password"]\n\n[persistance]\nstate_dir = "/tmp"\n'
    )
    result = cli("check", "--config", str(conf))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        f"{conf}: listeners[0].auth_method: unknown key: did you mean 'auth_methods'? rename it "
        "to auth_methods" in result.stderr
    )
    assert f"{conf}: persistance: unknown section: did you mean 'persistence'?" in result.stderr
    assert "anonymous" not in result.stderr  # the typo is the problem, not a missing key
    assert result.stderr.rstrip().endswith("2 error(s)")

    # without the typo, a listener off loopback that names no method is told what to write,
    # and that is never anonymous access
    conf.write_text(f'[[listeners]]\nname = "lan"\nbind = "0.0.0.0"\nport = {free_port()}\n')
    result = cli("check", "--config", str(conf))
    assert result.returncode == 1
    assert "listeners[0].auth_methods: " in result.stderr and '["password"]' in result.stderr
    assert "anonymous" not in result.stderr


def test_every_bad_line_of_the_password_file_is_reported(tmp_path: Path) -> None:
    passwd = tmp_path / "passwd"
    write_password_file(passwd, set_user({}, "alice", "pw"))
    good = passwd.read_text()
    passwd.write_text(
        good + "bob:plaintext\n# a comment\n\ncarol\n" + good.splitlines()[1] + "\n"
    )  # lines 3, 6 and 7 (alice again) are bad
    conf = tmp_path / "b.toml"
    conf.write_text(
        f'[[listeners]]\nname = "tcp"\nport = {free_port()}\nauth_methods = ["password"]\n\n'
        f'[passwords]\nfile = "{passwd}"\n'
    )
    result = cli("check", "--config", str(conf))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if f"{passwd}:" in line]
    assert [line.split(f"{passwd}:")[1].split(":")[0] for line in lines] == ["3", "6", "7"]
    assert "user 'bob': " in lines[0] and "expected 'username:argon2id-hash" in lines[1]
    assert "user 'alice' appears twice" in lines[2]
    assert result.stderr.rstrip().endswith("3 error(s)")


def test_secrets_readable_by_others_and_metrics_off_loopback_are_warned(tmp_path: Path) -> None:
    cert, key = make_cert(tmp_path, "server")
    passwd = tmp_path / "passwd"
    write_password_file(passwd, set_user({}, "alice", "pw"))
    token_key = tmp_path / "hs256.key"
    token_key.write_text("a-shared-secret-of-enough-length-for-hs256\n")
    conf = tmp_path / "b.toml"
    conf.write_text(
        f'[[listeners]]\nname = "tls"\ntransport = "tls"\nport = {free_port()}\n'
        f'tls_cert = "{cert}"\ntls_key = "{key}"\nauth_methods = ["password", "token"]\n\n'
        f'[passwords]\nfile = "{passwd}"\n\n'
        f'[[tokens.keys]]\nfile = "{token_key}"\nalg = "HS256"\n\n'
        f'[metrics]\nenabled = true\nbind = "0.0.0.0"\nport = {free_port()}\n'
    )
    for path in (passwd, key, token_key):
        path.chmod(0o600)
    conf.chmod(0o644)  # holds no secret: fine to read
    quiet = cli("check", "--config", str(conf))
    assert quiet.returncode == 0, quiet.stderr
    assert "readable by" not in quiet.stderr
    assert f"warning: {conf}: metrics.bind: [metrics] serves /metrics" in quiet.stderr

    for path in (passwd, key, token_key):
        path.chmod(0o644)
    loud = cli("check", "--config", str(conf))
    assert loud.returncode == 0, loud.stderr  # warnings: the broker runs either way
    for name, path in (
        ("passwords.file", passwd),
        ("listeners[0].tls_key", key),
        ("tokens.keys[0].file", token_key),
    ):
        assert (
            f"warning: {conf}: {name}: {path} holds " in loud.stderr
            and f"is readable by every user (mode 0644): chmod 0640 {path}" in loud.stderr
        ), name
    lint = cli("lint", "--config", str(conf))  # lint reports the same
    assert f"{conf}: passwords.file: {passwd} holds password hashes" in lint.stdout
    assert f"{conf}: metrics.bind: " in lint.stdout

    conf.write_text(conf.read_text().replace('"0.0.0.0"', '"127.0.0.1"'))
    for path in (passwd, key, token_key):
        path.chmod(0o640)  # the service's group (this test's own) may read: as installed
    assert "warning" not in cli("check", "--config", str(conf)).stderr


def test_lint_does_not_warn_of_clientid_where_anonymous_clients_never_reach(
    tmp_path: Path,
) -> None:
    passwd = tmp_path / "passwd"
    write_password_file(passwd, set_user({}, "s1", "pw", roles=("sensor",), clientids=("s1-*",)))
    conf = tmp_path / "b.toml"
    rules = '[{ id = "own", topic = "sensors/${clientid}/#", activity = "PUBLISH" }]'
    conf.write_text(
        f'[[listeners]]\nname = "tcp"\nport = {free_port()}\n'
        'auth_methods = ["anonymous", "password"]\n\n'
        f'[passwords]\nfile = "{passwd}"\n\n'
        '[permissions]\nunassigned = "deny"\n\n'
        f"[permissions.sets.own]\nrules = {rules}\n\n"
        '[[permissions.assign]]\nrole = "sensor"\nsets = ["own"]\n'
    )
    result = cli("lint", "--config", str(conf))
    assert "chosen by the client" not in result.stdout, result.stdout  # roles: password only
    assert result.returncode == 0, result.stdout

    # an assignment anonymous clients do reach is still reported
    conf.write_text(conf.read_text().replace('role = "sensor"', 'client_id = "s*"'))
    result = cli("lint", "--config", str(conf))
    assert "is chosen by the client for method 'anonymous'" in result.stdout
    assert "for method 'password'" not in result.stdout  # the entry binds its ids


def test_bridge_status_takes_the_base_url_or_says_to_add_metrics(
    broker_factory: BrokerFactory,
) -> None:
    port = free_port()
    broker = broker_factory({"metrics": {"enabled": True, "port": port}})
    for url in (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}"):
        result = cli("bridge", "status", "--url", url)
        assert result.returncode == 0, (url, result.stderr)
        assert result.stdout == "no bridges configured on this broker\n"
    wrong = cli("bridge", "status", "--url", f"http://127.0.0.1:{port}/metric")
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr
    assert (
        f"http://127.0.0.1:{port}/metric: HTTP 404 Not Found; the broker serves its metrics at "
        f"/metrics: give --url http://127.0.0.1:{port}/metrics" in wrong.stderr
    )
    assert broker.stop() == 0

"""``[acl]`` in edge-broker's TOML (authz/acl_settings.py): a Zenoh config.json5 taken unchanged
or the same structure inline; every error names the file and the entry; nothing half-loaded;
``edge-broker check`` reports ACL errors; a broker refuses to start on them; a reload with a
broken ACL keeps the running one (never fails open) and a good one takes effect."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.authz.acl_gate import AclGate
from edge_broker.authz.policy import build_pipeline
from edge_broker.config import ConfigError, load_config, loads_config
from tests.authz.acl_paho import NOT_AUTHORIZED, AclClient, acl_json_file, toml_with_acl
from tests.conftest import ROOT, start_broker
from tests.waiting import wait_for_log

SECTION = {
    "enabled": True,
    "default_permission": "allow",
    "rules": [
        {
            "id": "no-admin",
            "messages": ["put"],
            "flows": ["ingress"],
            "permission": "deny",
            "key_exprs": ["admin/**"],
        }
    ],
    "subjects": [{"id": "all"}],
    "policies": [{"rules": ["no-admin"], "subjects": ["all"]}],
}

INLINE = """
[acl]
enabled = true
default_permission = "allow"

[[acl.rules]]
id = "no-admin"
messages = ["put"]
flows = ["ingress"]
permission = "deny"
key_exprs = ["admin/**"]

[[acl.subjects]]
id = "all"

[[acl.policies]]
rules = ["no-admin"]
subjects = ["all"]
"""


def test_file_and_inline_give_the_same_acl(tmp_path: Path) -> None:
    path = acl_json_file(tmp_path / "zenoh.json5", SECTION)
    from_file = loads_config(f'[acl]\nfile = "{path}"\n', "f.toml").acl
    inline = loads_config(INLINE, "i.toml").acl
    assert from_file is not None and inline is not None
    assert from_file.config == inline.config


def test_relative_file_is_relative_to_the_config(tmp_path: Path) -> None:
    acl_json_file(tmp_path / "acl.json5", SECTION)
    toml = tmp_path / "broker.toml"
    toml.write_text('[acl]\nfile = "acl.json5"\n')
    acl = load_config(toml).acl
    assert acl is not None and acl.enabled


def test_no_section_no_gate_and_disabled_no_gate() -> None:
    assert loads_config("").acl is None
    for text in ("", "[acl]\nenabled = false\n"):
        pipeline = build_pipeline(loads_config(text), None, None)
        assert pipeline is None or not any(isinstance(g, AclGate) for g in pipeline.gates)
    pipeline = build_pipeline(loads_config(INLINE), None, None)
    assert pipeline is not None and [type(g) for g in pipeline.gates] == [AclGate]
    # default allow and only ingress rules: no delivery can be denied, none is checked
    assert not pipeline.has_delivery_gates
    for variant in (
        INLINE.replace('flows = ["ingress"]', 'flows = ["egress"]'),
        INLINE.replace('default_permission = "allow"', 'default_permission = "deny"'),
    ):
        pipeline = build_pipeline(loads_config(variant), None, None)
        assert pipeline is not None and pipeline.has_delivery_gates


def problems(text: str, file: str = "broker.toml") -> list[str]:
    with pytest.raises(ConfigError) as info:
        loads_config(text, file)
    return [str(p) for p in info.value.problems]


def test_inline_errors_name_the_entry() -> None:
    found = problems(
        INLINE.replace('rules = ["no-admin"]', 'rules = ["no-such-rule"]').replace(
            'key_exprs = ["admin/**"]', 'key_exprs = ["admin/**/**"]'
        )
    )
    assert any(
        "broker.toml: acl: policies[0]" in p and "'no-such-rule' does not exist" in p for p in found
    )
    assert any("broker.toml: acl: rules[0]" in p and "admin/**/**" in p for p in found)


def test_file_errors_name_the_file_and_the_entry(tmp_path: Path) -> None:
    bad = dict(SECTION, rules=[dict(SECTION["rules"][0], messages=["publish"])])  # type: ignore[index]
    path = acl_json_file(tmp_path / "zenoh.json5", bad)
    found = problems(f'[acl]\nfile = "{path}"\n')
    assert len(found) == 1
    assert f"broker.toml: acl.file: {path}: access_control: rules[0]" in found[0]
    assert "'publish' is not one of" in found[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[acl]\nfile = "/nonexistent/zenoh.json5"\n',
            "acl.file: cannot read '/nonexistent/zenoh.json5'",
        ),
        ('[acl]\nfile = ""\n', "acl.file: expected the path of a Zenoh config.json5"),
        ('[acl]\nfile = "x.json5"\nenabled = true\n', "not both (remove enabled or file)"),
        ("acl = 3\n", "acl: expected a table"),
        ('[acl]\ndefault_permission = "deny"\n', "acl: enabled: is required"),
    ],
)
def test_section_errors(text: str, expected: str) -> None:
    assert any(expected in p for p in problems(text)), problems(text)


def test_invalid_json5_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "zenoh.json5"
    path.write_text("{ access_control: { enabled: true, ")
    found = problems(f'[acl]\nfile = "{path}"\n')
    assert f"acl.file: {path}: " in found[0] and "not valid JSON5" in found[0]


def test_check_command_reports_acl_errors(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(INLINE.replace('subjects = ["all"]', 'subjects = ["nobody"]'))
    done = subprocess.run(
        [sys.executable, "-m", "edge_broker", "check", "--config", str(toml)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode != 0
    assert (
        "acl: policies[0]" in done.stdout + done.stderr
        and "'nobody' does not exist" in done.stdout + done.stderr
    )


def test_broker_refuses_to_start_on_a_bad_acl(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="does not exist in rules list"):
        start_broker(
            tmp_path, toml_with_acl(INLINE.replace('rules = ["no-admin"]', 'rules = ["x"]'))
        )


def test_reload_never_fails_open_and_applies_a_good_acl(tmp_path: Path) -> None:
    path = acl_json_file(tmp_path / "zenoh.json5", SECTION)
    b = start_broker(tmp_path, toml_with_acl(f'[acl]\nfile = "{path}"\n'))
    try:
        with AclClient(b.host, b.port) as c:
            assert c.subscribe("ops/#") == 1
            assert c.publish_code("admin/x") == NOT_AUTHORIZED
            # 1. a broken ACL file: the reload is refused, the running ACL still denies
            path.write_text("{ access_control: { enabled: tru } }")
            b.process.send_signal(signal.SIGHUP)
            wait_for_log(b, "reload of", 1)
            assert "refused" in b.log()
            assert c.publish_code("admin/x") == NOT_AUTHORIZED
            # 2. a good new ACL: admin/ allowed, ops/ denied for puts and subscriptions
            acl_json_file(
                path,
                dict(
                    SECTION,
                    rules=[
                        dict(
                            SECTION["rules"][0],  # type: ignore[index]
                            messages=["put", "declare_subscriber"],
                            key_exprs=["ops/**"],
                        )
                    ],
                ),
            )
            b.process.send_signal(signal.SIGHUP)
            wait_for_log(b, "policy applied", 1)
            assert c.publish_code("admin/x") != NOT_AUTHORIZED
            assert c.publish_code("ops/x") == NOT_AUTHORIZED
            assert "1 removed" in b.log()  # the ops/# subscription is gone
    finally:
        b.stop()


def test_readme_example_loads_and_decides_as_documented() -> None:
    from edge_broker.authz.acl import Acl
    from edge_broker.authz.acl_config import AclMessage, Flow, load_acl_json5

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Site ACL") :]
    block = section[section.index("```json5") + len("```json5") :]
    acl = Acl.compile(load_acl_json5(block[: block.index("```")], "README.md"))

    def decide(
        subject: tuple[str | None, str | None, str | None], key: str
    ) -> tuple[bool, str | None]:
        d = acl.decide(subject, Flow.INGRESS, AclMessage.PUT, key)
        return d.allowed, d.rule_id

    assert decide(("wlan0", None, None), "site/a/telemetry/t") == (True, "field-telemetry")
    assert decide(("wlan0", None, None), "site/a/firmware/f") == (False, "no-firmware-from-field")
    assert decide(("eth0", "ops-1", "alice"), "site/a/firmware/f") == (True, "operators")
    assert decide(("eth0", "ops-1", None), "site/a/firmware/f") == (False, None)  # CN AND username


def test_reload_rechecks_a_queryable_subscription_as_declare_queryable(tmp_path: Path) -> None:
    def section(queryable: str) -> dict[str, object]:
        return {
            "enabled": True,
            "default_permission": "deny",
            "rules": [
                {
                    "id": "subscribe",
                    "messages": ["declare_subscriber"],
                    "permission": "allow",
                    "key_exprs": ["q/**"],
                },
                {
                    "id": "queryable",
                    "messages": ["declare_queryable"],
                    "permission": queryable,
                    "key_exprs": ["q/**"],
                },
            ],
            "subjects": [{"id": "all"}],
            "policies": [{"rules": ["subscribe", "queryable"], "subjects": ["all"]}],
        }

    path = acl_json_file(tmp_path / "zenoh.json5", section("allow"))
    b = start_broker(tmp_path, toml_with_acl(f'[acl]\nfile = "{path}"\n'))
    try:
        with AclClient(b.host, b.port) as c:
            assert c.subscribe("q/#", queryable=True) == 1
            acl_json_file(path, section("deny"))  # declare_subscriber still allowed on q/**
            b.process.send_signal(signal.SIGHUP)
            wait_for_log(b, "policy applied", 1)
            assert "1 subscription(s) checked, 1 removed" in b.log()
    finally:
        b.stop()

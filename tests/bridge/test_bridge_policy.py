"""The bridge is a principal (method "bridge", name = the bridge's name): outbound only what it
may receive, inbound only what it may publish; denials counted and audited (issue 19)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from bridge_support import METRICS, Collector, bridge_status, gateway_toml, publish, wait_log

PERMISSIONS = """
[permissions.sets.uplink]
default_behaviour = "deny"
rules = [
  { id = "telemetry-out", topic = "sensors/#", activity = "SUBSCRIBE" },
  { id = "commands-in", topic = "cmd/allowed/#", activity = "PUBLISH" },
]

[permissions.sets.devices]
rules = []

[[permissions.assign]]
method = "bridge"
username = "cloud"
sets = ["uplink"]

[[permissions.assign]]
sets = ["devices"]
"""

ACL = """
[acl]
enabled = true
default_permission = "allow"

[[acl.rules]]
id = "secrets-stay-home"
messages = ["put"]
flows = ["egress"]
permission = "deny"
key_exprs = ["sensors/secret/**"]

[[acl.rules]]
id = "no-remote-admin"
messages = ["put"]
flows = ["ingress"]
permission = "deny"
key_exprs = ["cmd/allowed/admin/**"]

[[acl.subjects]]
id = "uplink"
interfaces = ["bridge/cloud"]

[[acl.policies]]
rules = ["secrets-stay-home", "no-remote-admin"]
subjects = ["uplink"]
"""


def bridge(port: int) -> dict:
    return {
        "name": "cloud",
        "address": "127.0.0.1",
        "port": port,
        "topics": [
            {"direction": "out", "local": "#", "remote_prefix": "gw/", "qos": 1},
            {"direction": "in", "local": "cmd/#", "remote_prefix": "gw/", "qos": 1},
        ],
    }


def test_default_permissions_and_site_acl_judge_the_bridge(
    broker_factory, mosquitto_factory, tmp_path: Path
):
    cloud = mosquitto_factory()
    audit = tmp_path / "audit"
    gw = broker_factory(
        gateway_toml(
            [bridge(cloud.port)],
            extra=PERMISSIONS + ACL + METRICS + f'\n[audit]\ndir = "{audit}"\n',
        )
    )
    wait_log(gw, "bridge cloud connected")
    up = Collector(cloud.port, [("gw/#", 1)])
    down = Collector(gw.port, [("cmd/#", 1), ("sensors/#", 1), ("other/#", 1)])
    try:
        publish(
            gw.port,
            [
                ("other/x", b"not granted", 1),
                ("sensors/secret/key", b"acl egress deny", 1),
                ("sensors/t", b"granted", 1),
            ],
        )
        publish(
            cloud.port,
            [
                ("gw/cmd/forbidden/x", b"not granted", 1),
                ("gw/cmd/allowed/admin/reboot", b"acl ingress deny", 1),
                ("gw/cmd/allowed/led", b"granted", 1),
            ],
        )
        got_up = up.wait_for(10, 3)
        got_down = down.wait_for(10, 3)
    finally:
        up.close()
        down.close()
    # denied outbound never reaches the cloud (the cloud's own copies of gw/cmd/... aside)
    assert sorted(t for t, *_ in got_up if not t.startswith("gw/cmd/")) == ["gw/sensors/t"]
    # denied inbound never reaches a device (local devices are allowed everything)
    assert sorted(t for t, *_ in got_down if t.startswith("cmd/")) == ["cmd/allowed/led"]
    # ($SYS is not readable here: the site ACL denies what it cannot represent, $ topics)
    status = bridge_status(gw, until=lambda s: s.get("denied_in") == 2)
    assert (status["denied_out"], status["denied_in"]) == (2, 2)
    # audited like any client's denial, under the bridge principal
    deadline = time.monotonic() + 5
    records: list[dict] = []

    # the audit contract (README "Audit log"): a delivery denial names its receiver in "to"
    # (the publisher, if known, in "client"); every other decision names it in "client"
    def bridge_denials(records: list[dict]) -> set[tuple[str, str, str]]:
        return {
            (r["action"], r["topic"], r["gate"])
            for r in records
            if r.get("type") == "decision"
            and r.get("outcome") == "deny"
            and (
                (r["action"] == "deliver" and r.get("to") == "cloud")
                or (r.get("method") == "bridge" and r.get("client") == "cloud")
            )
        }

    while time.monotonic() < deadline:
        records = [
            json.loads(line)
            for f in sorted(audit.glob("*"))
            if f.is_file()
            for line in f.read_text().splitlines()
            if line.startswith("{")
        ]
        if len(bridge_denials(records)) >= 4:
            break
        time.sleep(0.2)
    denied = bridge_denials(records)
    assert denied == {
        ("deliver", "other/x", "permissions"),
        ("deliver", "sensors/secret/key", "acl"),
        ("publish", "cmd/forbidden/x", "permissions"),
        ("publish", "cmd/allowed/admin/reboot", "acl"),
    }


def test_reserved_topics_never_come_in(broker_factory, mosquitto_factory):
    cloud = mosquitto_factory()
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "topics": [
                        {"direction": "in", "local": "access/#", "remote_prefix": "gw/", "qos": 1}
                    ],
                }
            ]
        )
    )
    wait_log(gw, "bridge cloud connected")
    down = Collector(gw.port, [("access/#", 1)])
    try:
        publish(
            cloud.port, [("gw/access/claims/x", b"forged claim", 1), ("gw/access/other", b"ok", 1)]
        )
        got = down.wait_for(2, 3)
    finally:
        down.close()
    assert [t for t, *_ in got] == ["access/other"]


def test_restricted_smoker_topics_never_leave(broker_factory, mosquitto_factory, tmp_path: Path):
    """SMOKER.md "Access decision" step 1: only SMOKER-authenticated clients reach the
    restricted area, and the bridge principal is not one: the owner's restricted/ data stays."""
    import asyncio

    from nacl.signing import SigningKey

    from edge_broker.claims.smoker_id import smoker_id
    from edge_broker.smoker_client import SmokerClient

    key = SigningKey(bytes(range(1, 33)))
    owner = smoker_id(key.verify_key)
    cloud = mosquitto_factory()
    text = gateway_toml(
        [bridge(cloud.port)], extra=METRICS + f'\n[claims]\nstore_dir = "{tmp_path}/claims"\n'
    )
    text = text.replace(
        'name = "tcp"\n', 'name = "tcp"\nauth_methods = ["smoker", "anonymous"]\n', 1
    )
    gw = broker_factory(text)
    wait_log(gw, "bridge cloud connected")
    up = Collector(cloud.port, [("gw/#", 1)])

    async def owner_publishes() -> None:
        client = SmokerClient("127.0.0.1", gw.port, key, timeout=5)
        await client.connect()
        await client.publish(f"restricted/{owner}/temperature", b"private", 1)
        await client.publish("sensors/public", b"public", 1)
        await client.disconnect()

    try:
        asyncio.run(owner_publishes())
        got = up.wait_for(2, 3)
    finally:
        up.close()
    assert [t for t, *_ in got] == ["gw/sensors/public"]
    assert bridge_status(gw, until=lambda s: s.get("denied_out") == 1)["denied_out"] == 1

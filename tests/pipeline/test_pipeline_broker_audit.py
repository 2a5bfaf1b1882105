"""One contract between the broker's audit log and the pipeline, end to end: a real broker
(password clients, an egress ACL deny, ``[audit] log_allowed``, ``[sync] gateway_id`` and no
``[audit] gateway_id``) writes its audit log under real MQTT traffic; the real ``audit`` job
finds the egress denials by receiver (``to``), the top talkers from the broker's own
``client_stats`` events, and the gateway id from ``[sync]``; ``whatif`` sees the allowed
publishes a stricter candidate would refuse, and refuses a candidate for a gateway with no logs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from edge_broker.audit.log import read_records
from edge_broker.pipeline.audit import run_audit
from edge_broker.pipeline.spark import PipelineError
from edge_broker.pipeline.whatif import run_whatif
from edge_broker.sync.bundle import PolicyBundle
from tests.authz.acl_paho import AclClient, password_file
from tests.conftest import BrokerFactory

GW = "gw-e2e"
USERS = {"guest": "guest-pw", "writer": "writer-pw"}
ACL = """
[acl]
enabled = true
default_permission = "allow"

[[acl.rules]]
id = "guests-see-no-secrets"
messages = ["put"]
flows = ["egress"]
permission = "deny"
key_exprs = ["plant/secret/**"]

[[acl.subjects]]
id = "guests"
usernames = ["guest"]

[[acl.policies]]
rules = ["guests-see-no-secrets"]
subjects = ["guests"]
"""


def test_broker_audit_log_through_audit_and_whatif(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    audit_dir = tmp_path / "audit"
    passwd = password_file(tmp_path / "passwd", USERS)
    broker = broker_factory(
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\nauth_methods = ["password"]\n'
        f'[sys]\ninterval = 0\n[passwords]\nfile = "{passwd}"\n'
        f'[sync]\ngateway_id = "{GW}"\n'
        f'[audit]\ndir = "{audit_dir}"\nlog_allowed = true\nstats_interval = 1\n' + ACL
    )
    guest = AclClient(
        broker.host, broker.port, username="guest", password=USERS["guest"], client_id="guest-1"
    )
    writer = AclClient(
        broker.host, broker.port, username="writer", password=USERS["writer"], client_id="writer-1"
    )
    try:
        assert guest.subscribe("plant/#") == 1
        for i in range(3):
            writer.publish_code(f"plant/secret/s{i}")
        for i in range(2):
            writer.publish_code(f"plant/public/p{i}")
        assert sorted(t for t, _ in guest.received(2)) == ["plant/public/p0", "plant/public/p1"]
        time.sleep(1.5)  # one client_stats period passes while connected
    finally:
        guest.close()
        writer.close()
    time.sleep(0.5)
    assert broker.stop() == 0

    records = [r for _, _, r in read_records(audit_dir)]
    assert {r["gw"] for r in records} == {GW}  # [sync] gateway_id, not the host name
    events = {(r.get("event"), r.get("client")) for r in records if r["type"] == "event"}
    assert {
        ("connect", "guest-1"),
        ("disconnect", "guest-1"),
        ("connect", "writer-1"),
        ("disconnect", "writer-1"),
    } <= events

    report = run_audit(spark, [str(audit_dir)], str(tmp_path / "report"), top=50)
    egress = {
        (r["gw"], r["to"], r["topic"], r["rule"]): r["filtered"]
        for r in report.tables["egress_filtered"]
    }
    assert egress == {
        (GW, "guest-1", f"plant/secret/s{i}", "guests-see-no-secrets"): 1 for i in range(3)
    }
    talkers = {r["client"]: (r["msgs_in"], r["msgs_out"]) for r in report.tables["top_talkers"]}
    assert talkers == {"writer-1": (5, 0), "guest-1": (0, 2)}, talkers
    assert report.denials == 3 and report.bad_lines == 0

    # whatif: the allowed publishes are in the log, so a stricter candidate shows what it refuses
    candidate = PolicyBundle(
        2,
        GW,
        0,
        {
            "permissions": {
                "unassigned": "deny",
                "sets": {
                    "writer": {
                        "rules": [
                            {"id": "no-public", "topic": "plant/public/#", "type": "DENY"},
                            {"id": "rest", "topic": "#"},
                        ]
                    },
                    "all": {"rules": [{"id": "all", "topic": "#"}]},
                },
                "assign": [
                    {"client_id": "writer-1", "sets": ["writer"]},
                    {"client_id": "guest-1", "sets": ["all"]},
                ],
            }
        },
        "k",
        b"",
    )
    wi = run_whatif(spark, [str(audit_dir)], candidate, str(tmp_path / "wi"))
    assert (
        wi.changed == 2
        and wi.by_rule[0]["after_rule"] == "no-public"
        and wi.by_rule[0]["logged"] == 2
    )
    other = PolicyBundle(2, "gw-elsewhere", 0, candidate.policy, "k", b"")
    with pytest.raises(
        PipelineError, match=f"no audit record of that gateway.*logged gateways: {GW}"
    ):
        run_whatif(spark, [str(audit_dir)], other, str(tmp_path / "wi2"))

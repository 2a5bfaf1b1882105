"""Explaining a request is not the request: no audit record, no count, no log line.

The admin API explains every denial it shows with the live policy (``broker/operator.py``); if
explaining were judged like a client's request, each read of the denials feed would write a new
denial into the audit log and the ring it reads from, and the feed would grow by itself."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from edge_broker.authz.decision import Decision, GateName
from edge_broker.authz.explain import explain
from edge_broker.authz.gates import GatePipeline
from edge_broker.authz.policy import Policy
from edge_broker.authz.request import NO_PUBLISH_PROPERTIES, Publication
from edge_broker.identity import Identity
from edge_broker.mqtt.reason_codes import ReasonCode


class DenyAdmin:
    """A gate 5 that denies ``admin/...`` with rule ``no-admin``."""

    gate = GateName.ACL
    checks_every_delivery = False

    def _judge(self, topic: str) -> Decision | None:
        if topic.startswith("admin/"):
            return Decision(False, GateName.ACL, "no-admin", ReasonCode.NOT_AUTHORIZED, "no")
        return None

    def check_publish(self, identity: Identity, message: Any) -> Decision | None:
        return self._judge(message.topic)

    def check_will(self, identity: Identity, will: Any) -> Decision | None:
        return self._judge(will.topic)

    def check_subscribe(self, identity: Identity, sub: Any, topic_filter: str, group: Any) -> Any:
        return self._judge(topic_filter)


class Window:
    log_allowed = False

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def decision(self, line: Any, **record: Any) -> None:
        self.records.append(record)


def test_explaining_a_denial_writes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    window = Window()
    pipeline = GatePipeline(gates=[DenyAdmin()], audit=window)
    policy = Policy("/", pipeline)
    who = Identity(client_id="sensor-1", username="sensor-1", method="password")
    with caplog.at_level(logging.INFO):
        verdicts, final = asyncio.run(explain(policy, who, "publish", "admin/x"))
    assert not final.allowed and final.rule == "no-admin"
    assert [v.rule for v in verdicts if v.rule] == ["no-admin"]
    assert window.records == [] and not pipeline.denials and not pipeline.hits
    assert not [r for r in caplog.records if "denied" in r.getMessage()]
    # the live pipeline still records a client's own request
    own = Publication("admin/x", b"", 0, False, NO_PUBLISH_PROPERTIES)
    assert not pipeline.check_publish(who, own).allowed  # type: ignore[union-attr]
    assert len(window.records) == 1 and pipeline.denials[("acl", "no-admin")] == 1

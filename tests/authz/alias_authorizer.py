"""Authorizer plugin for tests/authz/test_publish_request.py: refuses any PUBLISH whose request
still shows a Topic Alias or lacks the resolved topic, naming what it saw in the Reason String
(issue 21: authorizers see the message the broker built, never the packet's per-hop alias)."""

from __future__ import annotations

from typing import Any

from edge_broker.authz.authorizers import Outcome, PublishRequest, SubscribeRequest


class SeesNoAlias:
    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options

    async def authorize_publish(self, request: PublishRequest) -> Outcome:
        alias = request.properties.topic_alias
        if alias is not None or not request.topic:
            return Outcome.deny(
                0x87, f"the authorizer saw topic {request.topic!r} with Topic Alias {alias}"
            )
        return Outcome.next()

    async def authorize_subscribe(self, request: SubscribeRequest) -> Outcome:
        return Outcome.next()

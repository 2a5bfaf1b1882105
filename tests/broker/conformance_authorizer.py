"""Authorizer plugin for tests/broker/test_conformance_paho.py: refuses subscriptions to one
filter with a configured reason code. It is the recipe a conformance run uses for the Eclipse
Paho interoperability suites' "subscribe failure" test, which expects SUBACK 0x80 for
``test/nosubscribe`` (MQTT 5) and ``nosubscribe`` (3.1.1); see README "Authorizers"."""

from __future__ import annotations

from typing import Any

from edge_broker.authz.authorizers import Outcome, PublishRequest, SubscribeRequest


class RefuseFilter:
    """``options = { filter = "...", reason_code = 128 }``: SUBSCRIBE to exactly that filter is
    refused with that code; every other request goes on to the next gate."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.filter = str(options["filter"])
        self.reason_code = int(options.get("reason_code", 0x80))

    async def authorize_publish(self, request: PublishRequest) -> Outcome:
        return Outcome.next()

    async def authorize_subscribe(self, request: SubscribeRequest) -> Outcome:
        if request.topic_filter == self.filter:
            return Outcome.deny(self.reason_code, f"{self.filter} is refused by the test setup")
        return Outcome.next()

"""Claims information requests are bounded (issue 16): checked before the answer is built,
rate-limited per client, answered one page at a time. Real broker, real sockets, SmokerClient."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from claims_broker import client, restriction, running_broker
from claims_helpers import OTHER, OTHER_KEY, OWNER, OWNER_KEY

from edge_broker.claims.topics import claims_request_topic, claims_response_topic
from edge_broker.mqtt.packets import Properties
from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.smoker_client import SmokerClient


async def ask(
    c: SmokerClient, payload: bytes = b""
) -> tuple[int, str | None, dict[str, Any] | None]:
    """One request; (PUBACK code, reason, answer or None)."""
    response = claims_response_topic(c.client_id)
    ack = await c.publish(
        claims_request_topic(c.client_id),
        payload,
        qos=1,
        properties=Properties(response_topic=response),
    )
    assert ack is not None
    if ack.reason_code != 0:
        return ack.reason_code, ack.reason_string, None
    while True:
        message = await c.next_message(5)
        if message.topic == response:
            return 0, None, json.loads(message.payload)


def topics(body: dict[str, Any], section: str) -> list[str]:
    return [c["restriction"]["topicName"] for c in body[section]]


async def test_a_requester_not_subscribed_gets_0x10_and_nothing_is_built(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, port), client(port, OTHER_KEY) as other:
        await other.claim(restriction(f"restricted/{OTHER}/a", "BLACKLIST"))
        code, reason, body = await ask(other)
        assert code == ReasonCode.NO_MATCHING_SUBSCRIBERS and body is None
        assert reason is not None and claims_response_topic(OTHER) in reason
        await other.subscribe(claims_response_topic(OTHER), qos=1)
        code, _, body = await ask(other)
        assert (
            code == 0
            and body is not None
            and topics(body, "ownedClaims") == [f"restricted/{OTHER}/a"]
        )


async def test_claims_requests_are_rate_limited_per_client(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path, request_rate=0.01, request_burst=2) as (broker, port),
        client(port, OTHER_KEY) as other,
        client(port, OWNER_KEY) as owner,
    ):
        for c in (other, owner):
            await c.subscribe(claims_response_topic(c.client_id), qos=1)
        assert [(await ask(other))[0] for _ in range(3)] == [0, 0, ReasonCode.QUOTA_EXCEEDED]
        code, reason, _ = await ask(other)
        assert code == ReasonCode.QUOTA_EXCEEDED and "claims.request_rate" in (reason or "")
        assert (await ask(owner))[0] == 0  # the bucket is per client
        assert broker.limit_hits.counts["claims.request_rate"] == 2


async def test_answers_come_in_pages_that_chain_with_next_page(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path, request_page_claims=2) as (_, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
    ):
        owned = [f"restricted/{OTHER}/o{i}" for i in range(3)]
        involved = [f"restricted/{OWNER}/i{i}" for i in range(2)]
        for t in owned:
            await other.claim(restriction(t, "BLACKLIST"))
        for t in involved:
            await owner.claim(restriction(t, "WHITELIST", (OTHER, "SUBSCRIBE")))
        await other.subscribe(claims_response_topic(OTHER), qos=1)
        pages = []
        payload = b""
        while True:
            code, _, body = await ask(other, payload)
            assert code == 0 and body is not None and body["clientId"] == OTHER
            pages.append((topics(body, "ownedClaims"), topics(body, "involvedClaims")))
            if "nextPage" not in body:
                break
            payload = json.dumps({"after": body["nextPage"]}).encode()
        assert pages == [(owned[:2], []), (owned[2:], involved[:1]), ([], involved[1:])]
        code, reason, _ = await ask(other, b'{"after": "somewhere:else"}')
        assert code == ReasonCode.PAYLOAD_FORMAT_INVALID and "cursor" in (reason or "")
        merged = await other.request_claims(5)  # the host client follows every page
        assert "nextPage" not in merged
        assert (
            topics(merged, "ownedClaims") == owned and topics(merged, "involvedClaims") == involved
        )


async def test_a_page_is_bounded_in_bytes(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path, request_page_bytes=1024) as (_, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
    ):
        for i in range(4):  # each claim ~700 bytes of JSON: one per page
            perms = [(OTHER, "SUBSCRIBE")] + [("*", "PUBLISH")] * 4
            await owner.claim(restriction(f"restricted/{OWNER}/big{i}", "WHITELIST", *perms))
        await other.subscribe(claims_response_topic(OTHER), qos=1)
        code, _, body = await ask(other)
        assert code == 0 and body is not None
        assert (
            len(body["involvedClaims"]) == 1
            and body["nextPage"] == f"involved:restricted/{OWNER}/big0"
        )

"""Claims request budgets are per owner (issue 31 item 6): throw-away SMOKER identities that
fill the tenant with claims and then ask about them cannot use up a device's own requests.
Real broker, real sockets, one SmokerClient per identity (adversaries and victim side by side)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

from claims_broker import client, restriction, running_broker
from claims_helpers import OTHER, OTHER_KEY, OWNER, OWNER_KEY, THIRD, key
from test_broker_claims_requests import ask, topics

from edge_broker.claims.smoker_id import smoker_id
from edge_broker.claims.topics import claims_response_topic
from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.smoker_client import SmokerClient

ADVERSARIES = 30
CLAIMS_EACH = 20  # 600 claims: the measurement


async def test_throw_away_identities_cannot_spend_a_devices_claims_requests(
    tmp_path: Path,
) -> None:
    """600 claims from 30 throw-away keys (every one naming ``*``, so it concerns the device
    too), then 30 ids asking at their own rate: the device's 10 requests all get an answer.
    On the shared scan budget every adversary request cost the whole tenant (600 claims) and
    the device got 0x97 on most of its requests."""
    async with AsyncExitStack() as stack:
        # 601 claims in one tenant: more than the default total's tenant share (250 of 500)
        broker, port = await stack.enter_async_context(
            running_broker(tmp_path, max_claims_total=2000)
        )
        device = await stack.enter_async_context(client(port, OWNER_KEY))
        await device.claim(restriction(f"restricted/{OWNER}/valve", "WHITELIST", (OTHER, "ALL")))
        adversaries: list[SmokerClient] = []
        for n in range(ADVERSARIES):
            signing = key(1000 + n)
            me = smoker_id(signing.verify_key)
            c = await stack.enter_async_context(client(port, signing))
            for i in range(CLAIMS_EACH):
                ack = await c.claim(
                    restriction(f"restricted/{me}/junk{i}", "WHITELIST", ("*", "PUBLISH"))
                )
                assert ack.reason_code == 0
            await c.subscribe(claims_response_topic(me), qos=1)
            adversaries.append(c)
        await device.subscribe(claims_response_topic(OWNER), qos=1)
        answered = 0
        for _ in range(10):  # each round: every adversary once (1 request/s each), then the device
            for c in adversaries:
                await ask(c)
            code, reason, body = await ask(device)
            assert code == 0, reason
            assert body is not None and topics(body, "ownedClaims") == [f"restricted/{OWNER}/valve"]
            answered += 1
        assert answered == 10
        assert broker.limit_hits.counts.get("claims.request_scan_rate", 0) == 0


async def test_a_request_reads_only_the_claims_that_name_the_requester(tmp_path: Path) -> None:
    """The answer lists the same claims as before the index (owned, then involved by name or
    ``*``), and a claim naming both the requester and ``*`` is listed once."""
    async with (
        running_broker(tmp_path) as (broker, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
    ):
        for r in (
            restriction(f"restricted/{OWNER}/a", "WHITELIST", (OTHER, "ALL")),
            restriction(f"restricted/{OWNER}/b", "WHITELIST", (OTHER, "ALL"), ("*", "SUBSCRIBE")),
            restriction(f"restricted/{OWNER}/c", "WHITELIST", ("*", "PUBLISH")),
            restriction(f"restricted/{OWNER}/d", "BLACKLIST", (THIRD, "ALL")),
        ):
            assert (await owner.claim(r)).reason_code == 0
        own = restriction(f"restricted/{OTHER}/own", "WHITELIST", (OTHER, "ALL"))
        assert (await other.claim(own)).reason_code == 0
        await other.subscribe(claims_response_topic(OTHER), qos=1)
        code, _, body = await ask(other)
        assert code == 0 and body is not None
        assert topics(body, "ownedClaims") == [f"restricted/{OTHER}/own"]
        assert topics(body, "involvedClaims") == [
            f"restricted/{OWNER}/a",
            f"restricted/{OWNER}/b",
            f"restricted/{OWNER}/c",
        ]
        # an unclaim and a changed claim leave the index
        assert (await owner.unclaim(f"restricted/{OWNER}/a")).reason_code == 0
        changed = restriction(f"restricted/{OWNER}/b", "WHITELIST", (THIRD, "ALL"))
        ack = await owner.claim(changed)
        assert ack.reason_code == 0, ack
        code, _, body = await ask(other)
        assert code == 0 and body is not None
        assert topics(body, "involvedClaims") == [f"restricted/{OWNER}/c"]
        assert broker.claims is not None


async def test_a_clients_scan_budget_is_its_own(tmp_path: Path) -> None:
    """``claims.request_scan_rate`` is per client: one client that spent it is refused 0x97,
    another asking at the same moment is answered."""
    async with (
        running_broker(tmp_path, request_scan_rate=5) as (broker, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
    ):
        for i in range(6):
            await owner.claim(restriction(f"restricted/{OWNER}/s{i}", "WHITELIST", (OTHER, "ALL")))
        for c in (owner, other):
            await c.subscribe(claims_response_topic(c.client_id), qos=1)
        assert (await ask(other))[0] == 0  # 6 claims examined: in debt now
        code, reason, _ = await ask(other)
        assert code == ReasonCode.QUOTA_EXCEEDED and "claims.request_scan_rate" in (reason or "")
        assert (await ask(owner))[0] == 0  # its own budget: untouched by other's requests
        assert broker.limit_hits.counts["claims.request_scan_rate"] == 1

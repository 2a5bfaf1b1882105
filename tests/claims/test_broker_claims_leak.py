"""Leak suite (SMOKER.md "Access decision"; issue 6): subscribers with ``#``, ``+/<ID>/t``,
``restricted/+/t``, ``$share/g/#``, an exact subscription, a plain (non-SMOKER) ``#`` subscriber and
retained messages receive exactly what the claims allow at the moment of delivery, before and
after an update and an unclaim; subscriptions are never removed by a claim change."""

from __future__ import annotations

from pathlib import Path

from claims_broker import client, restriction, running_broker
from claims_helpers import OWNER, OWNER_KEY, key

from edge_broker.claims.smoker_id import smoker_id
from edge_broker.smoker_client import SmokerClient

T = f"restricted/{OWNER}/t"
R = f"restricted/{OWNER}/r"
FILTERS = ["#", f"+/{OWNER}/t", "restricted/+/t", "$share/g/#", T]
KEYS = [key(100 + i) for i in range(len(FILTERS))]
IDS = [smoker_id(k.verify_key) for k in KEYS]


async def received(who: SmokerClient, within: float = 0.4) -> list[bytes]:
    """Every payload delivered to ``who`` within ``within`` seconds of quiet."""
    got: list[bytes] = []
    while True:
        try:
            message = await who.next_message(within)
        except TimeoutError:
            return got
        got.append(message.payload)


def sub(*indexes: int) -> tuple[tuple[str, str], ...]:
    return tuple((IDS[i], "SUBSCRIBE") for i in indexes)


async def test_wildcard_shared_and_exact_subscribers_get_what_the_claim_allows_now(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as (_, port):
        subscribers = [client(port, k) for k in KEYS]
        plain = client(port, client_id="plain-watcher")
        async with client(port, OWNER_KEY) as owner:
            for s in [*subscribers, plain]:
                await s.connect()
            try:
                ok = await owner.claim(restriction(T, "BLACKLIST"))  # open: every subscribe passes
                assert ok.reason_code == 0
                for s, f in zip(subscribers, FILTERS, strict=True):
                    assert await s.subscribe(f) == (1,), f
                assert await plain.subscribe("#") == (1,)

                async def phase(
                    claim_kind: str | None,
                    perms: tuple[tuple[str, str], ...],
                    payload: bytes,
                    allowed: set[int],
                ) -> None:
                    if claim_kind is None:
                        assert (await owner.unclaim(T)).reason_code == 0
                    else:
                        ack = await owner.claim(restriction(T, claim_kind, *perms))
                        assert ack.reason_code == 0
                    ack = await owner.publish(T, payload, qos=1)
                    assert ack is not None and ack.ok
                    for i, s in enumerate(subscribers):
                        expected = [payload] if i in allowed else []
                        assert await received(s, 0.25) == expected, (FILTERS[i], claim_kind, perms)
                    assert await received(plain, 0.05) == []

                await phase("WHITELIST", sub(0, 2, 4), b"m1", {0, 2, 4})
                await phase("WHITELIST", sub(1, 3), b"m2", {1, 3})  # update: others stop at once
                await phase("BLACKLIST", sub(1), b"m3", {0, 2, 3, 4})
                await phase("WHITELIST", sub(0, 1, 2, 3, 4), b"m4", {0, 1, 2, 3, 4})
                await phase(None, (), b"m5", set())  # unclaimed: owner only
                # outside the restricted area everybody (plain too) still receives: the
                # subscriptions were never removed
                await owner.publish("open/t", b"free", qos=1)
                for s in (subscribers[0], subscribers[3]):  # "#" and "$share/g/#"
                    assert await received(s, 0.25) == [b"free"]
                assert await received(plain, 0.25) == [b"free"]
                # re-whitelisted subscribers receive again without re-subscribing
                await phase("WHITELIST", sub(4), b"m6", {4})
            finally:
                for s in [*subscribers, plain]:
                    await s.disconnect()


async def test_a_claim_of_another_owner_does_not_open_my_area(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, port):
        async with client(port, KEYS[0]) as intruder, client(port, OWNER_KEY) as owner:
            # the intruder claims its own area wide open; the owner's stays closed
            mine = f"restricted/{IDS[0]}/t"
            assert (await intruder.claim(restriction(mine, "BLACKLIST"))).reason_code == 0
            assert await intruder.subscribe("restricted/#") == (1,)
            await owner.publish(T, b"private", qos=1)
            await owner.publish(f"restricted/{OWNER}/deeper/t", b"private too", qos=1)
            assert await received(intruder, 0.3) == []
            assert await owner.subscribe(mine) == (1,)  # BLACKLIST []: every SMOKER client
            await intruder.publish(mine, b"shared", qos=1)
            assert await received(intruder, 0.3) == [b"shared"]
            assert await received(owner, 0.3) == [b"shared"]


async def test_retained_messages_follow_the_claim_at_delivery_time(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, port):
        async with (
            client(port, OWNER_KEY) as owner,
            client(port, KEYS[0]) as first,
            client(port, KEYS[1]) as second,
            client(port, client_id="plain-retained") as plain,
        ):
            assert (await owner.claim(restriction(R, "WHITELIST", *sub(0)))).reason_code == 0
            ack = await owner.publish(R, b"kept", qos=1, retain=True)
            assert ack is not None and ack.ok
            assert await first.subscribe("restricted/+/r") == (1,)
            assert [m for m in await received(first)] == [b"kept"]
            assert await second.subscribe("#") == (1,)
            assert await plain.subscribe("#") == (1,)
            assert await received(second) == [] and await received(plain, 0.05) == []
            # the owner moves the permission: new retained deliveries follow at once
            assert (await owner.claim(restriction(R, "WHITELIST", *sub(1)))).reason_code == 0
            assert await second.subscribe("restricted/#") == (1,)
            assert await received(second) == [b"kept"]
            assert await first.subscribe("+/+/r") == (1,)
            assert await received(first) == []
            await owner.unclaim(R)
            assert await second.subscribe("restricted/+/+") == (1,)
            assert await received(second) == []
            assert await owner.subscribe(R) == (1,)  # the owner always gets its own
            assert await received(owner) == [b"kept"]


async def test_messages_queued_for_an_offline_session_are_checked_when_they_leave(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path) as (_, port):

        def reader() -> SmokerClient:
            return SmokerClient(
                "127.0.0.1", port, KEYS[0], clean_start=False, session_expiry=300, timeout=5
            )

        async with client(port, OWNER_KEY) as owner:
            assert (await owner.claim(restriction(T, "WHITELIST", *sub(0)))).reason_code == 0
            async with reader() as r:
                assert await r.subscribe("#", qos=1) == (1,)
            # offline: both messages are allowed now and wait in the session's queue
            await owner.publish(T, b"before", qos=1)
            await owner.publish("open/t", b"open", qos=1)
            await owner.publish(T, b"before 2", qos=1)
            # the owner withdraws the permission before the reader comes back
            assert (await owner.claim(restriction(T, "WHITELIST"))).reason_code == 0
            async with reader() as r:
                assert await received(r) == [b"open"]
            await owner.unclaim(T)


async def test_a_shared_group_delivers_to_a_member_the_claim_allows(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, port):
        async with (
            client(port, OWNER_KEY) as owner,
            client(port, KEYS[0]) as allowed,
            client(port, KEYS[1]) as refused,
        ):
            assert (await owner.claim(restriction(T, "WHITELIST", *sub(0)))).reason_code == 0
            assert await allowed.subscribe("$share/g/restricted/#") == (1,)
            assert await refused.subscribe("$share/g/restricted/#") == (1,)
            for i in range(6):
                await owner.publish(T, f"m{i}".encode(), qos=1)
            assert await received(allowed) == [f"m{i}".encode() for i in range(6)]
            assert await received(refused, 0.05) == []
            await owner.publish("restricted/x/t", b"nobody may", qos=1)  # no member allowed
            assert await received(allowed, 0.2) == [] and await received(refused, 0.05) == []

"""SMOKER claims through the live broker over real sockets (SMOKER.md "What the broker answers to
a claim", "Access decision"): every row of the PUBACK table in its order, unclaim cases,
owner-only / whitelist / blacklist / ``*`` / empty lists, the claims request, non-SMOKER clients
kept out of the restricted area and the access topics, and the impostor rule."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from claims_broker import client, restriction, running_broker
from claims_helpers import OTHER, OTHER_KEY, OWNER, OWNER_KEY, THIRD_KEY, claim_obj, dumps

from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.smoker_client import SmokerClientError

T = f"restricted/{OWNER}/t"
OK = ReasonCode.SUCCESS
NOT_AUTHORIZED = ReasonCode.NOT_AUTHORIZED
FORMAT = ReasonCode.PAYLOAD_FORMAT_INVALID


def good() -> dict[str, object]:
    return claim_obj(restriction(T, "WHITELIST", (OTHER, "SUBSCRIBE")))


def with_restriction(**changes: object) -> bytes:
    """A claim whose restriction was changed after signing (keys kept, signature stale)."""
    obj = good()
    obj["restriction"] = {**obj["restriction"], **changes}  # type: ignore[dict-item]
    return dumps(obj)


BAD_PAYLOADS: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("not utf-8", b"\xff\xfe{}"),
    ("not json", b"{restriction"),
    ("not an object", b"[1, 2]"),
    ("unknown field", dumps({**good(), "extra": 1})),
    ("missing field", dumps({"restriction": good()["restriction"]})),
    ("wrong type", dumps({**good(), "signature": 5})),
    ("enum not upper case", with_restriction(restrictionType="whitelist")),
    (
        "bad permission client id",
        with_restriction(permissions=[{"clientId": "sensor-1", "activity": "ALL"}]),
    ),
    ("topic with +", with_restriction(topicName=f"restricted/{OWNER}/+")),
    ("topic with #", with_restriction(topicName=f"restricted/{OWNER}/#")),
    ("topic only whitespace", with_restriction(topicName="   ")),
    ("empty level", with_restriction(topicName=f"restricted/{OWNER}//t")),
    ("not restricted", with_restriction(topicName=f"open/{OWNER}/t")),
    ("no level after owner", with_restriction(topicName=f"restricted/{OWNER}")),
    ("signature does not verify", with_restriction(restrictionType="BLACKLIST")),
]


@pytest.mark.parametrize("name,payload", BAD_PAYLOADS, ids=[n for n, _ in BAD_PAYLOADS])
async def test_malformed_claims_are_0x99_with_a_reason_string(
    tmp_path: Path, name: str, payload: bytes
) -> None:
    async with running_broker(tmp_path) as (broker, port), client(port, OWNER_KEY) as owner:
        ack = await owner.claim_payload(payload)
        assert ack.reason_code == FORMAT, ack
        assert ack.reason_string
        assert broker.claims is not None and len(broker.claims.service) == 0


async def test_the_table_is_checked_in_order(tmp_path: Path) -> None:
    """Non-SMOKER first (even for junk), then format, then owner, then limits."""
    async with running_broker(tmp_path, max_claim_bytes=64) as (_, port):
        async with client(port, client_id="plain") as plain:
            ack = await plain.publish("access/claim", b"junk", qos=1)
            assert ack is not None and ack.reason_code == NOT_AUTHORIZED
        async with client(port, OWNER_KEY) as owner:
            # signed by OTHER for OTHER's area, published by OWNER: format passes, owner fails
            stolen = claim_obj(restriction(f"restricted/{OTHER}/t", "WHITELIST"), OTHER_KEY)
            ack = await owner.claim_payload(dumps(stolen))
            assert ack.reason_code == NOT_AUTHORIZED and "belongs to" in (ack.reason_string or "")
            # a valid claim over the size limit: 0x97
            assert (await owner.claim(restriction(T, "WHITELIST"))).reason_code == (
                ReasonCode.QUOTA_EXCEEDED
            )


async def test_a_good_claim_is_0x00_stored_and_replaced_by_an_update(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, port), client(port, OWNER_KEY) as owner:
        assert (await owner.claim(restriction(T, "WHITELIST", (OTHER, "ALL")))).reason_code == OK
        assert (await owner.claim(restriction(T, "BLACKLIST"), qos=2)).reason_code == OK
        assert broker.claims is not None
        stored = broker.claims.service.lookup(T)
        assert stored is not None and stored.restriction.restriction_type == "BLACKLIST"  # type: ignore[union-attr]
        # QoS 2 flow finished (PUBREL → PUBCOMP) and the connection still works
        assert (await owner.unclaim(T, qos=2)).reason_code == OK
        assert broker.claims.service.lookup(T) is None


async def test_qos0_claims_are_not_processed(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, port), client(port, OWNER_KEY) as owner:
        await owner.claim(restriction(T, "WHITELIST"), qos=0)
        await owner.unclaim(T, qos=0)
        assert await owner.subscribe(f"restricted/{OWNER}/x") == (1,)  # a round trip
        assert broker.claims is not None and broker.claims.service.lookup(T) is None


async def test_a_store_that_cannot_write_answers_0x80(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, port), client(port, OWNER_KEY) as owner:
        assert broker.claims is not None
        await broker.claims.store.aclose()  # the log refuses every further write
        ack = await owner.claim(restriction(T, "WHITELIST"))
        assert ack.reason_code == ReasonCode.UNSPECIFIED_ERROR and "durable" in (
            ack.reason_string or ""
        )
        assert broker.claims.service.lookup(T) is None


async def test_unclaim_cases(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, port), client(port, OWNER_KEY) as owner:
        assert (await owner.claim(restriction(T, "WHITELIST"))).reason_code == OK
        for payload in (b"", b"\xff", f"open/{OWNER}/t".encode(), b"restricted/+/t"):
            ack = await owner.publish("access/unclaim", payload, qos=1)
            assert ack is not None and ack.reason_code == FORMAT, payload
        ack = await owner.unclaim(f"restricted/{OTHER}/t")
        assert ack.reason_code == NOT_AUTHORIZED
        assert (await owner.unclaim(T)).reason_code == OK
        assert (await owner.unclaim(T)).reason_code == OK  # nothing left: still 0x00
        assert broker.claims is not None and broker.claims.service.lookup(T) is None
        async with client(port, client_id="plain") as plain:
            ack = await plain.publish("access/unclaim", T.encode(), qos=1)
            assert ack is not None and ack.reason_code == NOT_AUTHORIZED


ACCESS_CASES = [
    # (kind, permissions, OTHER may publish, OTHER may subscribe, THIRD pub, THIRD sub)
    ("WHITELIST", (), False, False, False, False),  # empty whitelist: owner only
    ("WHITELIST", ((OTHER, "PUBLISH"),), True, False, False, False),
    ("WHITELIST", ((OTHER, "SUBSCRIBE"),), False, True, False, False),
    ("WHITELIST", ((OTHER, "ALL"),), True, True, False, False),
    ("WHITELIST", (("*", "SUBSCRIBE"),), False, True, False, True),
    ("BLACKLIST", (), True, True, True, True),  # empty blacklist: every SMOKER client
    ("BLACKLIST", ((OTHER, "ALL"),), False, False, True, True),
    ("BLACKLIST", ((OTHER, "PUBLISH"),), False, True, True, True),
    ("BLACKLIST", (("*", "PUBLISH"),), False, True, False, True),
]


@pytest.mark.parametrize("kind,perms,o_pub,o_sub,t_pub,t_sub", ACCESS_CASES)
async def test_access_over_the_wire(
    tmp_path: Path,
    kind: str,
    perms: tuple[tuple[str, str], ...],
    o_pub: bool,
    o_sub: bool,
    t_pub: bool,
    t_sub: bool,
) -> None:
    async with (
        running_broker(tmp_path) as (_, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
        client(port, THIRD_KEY) as third,
        client(port, client_id="plain") as plain,
    ):
        assert (await owner.claim(restriction(T, kind, *perms))).reason_code == OK
        for who, may_pub, may_sub in (
            (other, o_pub, o_sub),
            (third, t_pub, t_sub),
            (plain, False, False),
            (owner, True, True),
        ):
            ack = await who.publish(T, b"x", qos=1)
            assert ack is not None
            assert (ack.reason_code < 0x80) == may_pub, (who.client_id, ack)
            code = (await who.subscribe(T))[0]
            assert (code < 0x80) == may_sub, (who.client_id, code)
            if not may_sub:
                assert code == NOT_AUTHORIZED


async def test_owner_has_full_access_to_unclaimed_topics_and_others_none(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path) as (_, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
    ):
        assert (await owner.subscribe(f"restricted/{OWNER}/free")) == (1,)
        ack = await owner.publish(f"restricted/{OWNER}/free", b"mine", qos=1)
        assert ack is not None and ack.ok
        assert (await owner.next_message()).payload == b"mine"
        assert (await other.subscribe(f"restricted/{OWNER}/free")) == (NOT_AUTHORIZED,)
        ack = await other.publish(f"restricted/{OWNER}/free", b"x", qos=1)
        assert ack is not None and ack.reason_code == NOT_AUTHORIZED


async def test_non_smoker_clients_cannot_touch_the_restricted_area_or_access_topics(
    tmp_path: Path,
) -> None:
    async with (
        running_broker(tmp_path) as (_, port),
        client(port, OWNER_KEY) as owner,
        client(port, client_id="plain") as plain,
    ):
        assert (await owner.claim(restriction(T, "BLACKLIST"))).reason_code == OK  # open to all
        ack = await plain.publish(T, b"x", qos=1)
        assert ack is not None and ack.reason_code == NOT_AUTHORIZED
        assert (
            await plain.subscribe(
                [
                    T,
                    "access/claim",
                    "access/unclaim",
                    f"access/claims/{OWNER}/request",
                    "$share/g/access/claim",
                ]
            )
            == (NOT_AUTHORIZED,) * 5
        )
        for topic in ("access/claim", "access/unclaim", f"access/claims/{OWNER}/request"):
            ack = await plain.publish(topic, b"x", qos=1)
            assert ack is not None and ack.reason_code == NOT_AUTHORIZED
        # SMOKER clients cannot subscribe to the system topics either
        assert await owner.subscribe(["access/claim", "access/#"]) == (NOT_AUTHORIZED, 0x01)
        await owner.claim(restriction(T, "WHITELIST"))
        await owner.no_message(0.2)  # access/# never sees a claim: nothing is routed


async def test_a_compromised_claim_answers_0x83(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, port), client(port, OWNER_KEY) as owner:
        assert (await owner.claim(restriction(T, "BLACKLIST"))).reason_code == OK
    # tamper: the stored restriction now whitelists OTHER, the signature is the owner's old one
    from edge_broker.claims.persistence import KeyedClaimStore

    path = str(tmp_path / "claims.log")
    store = KeyedClaimStore.open(path)
    [(tenant, topic, doc)] = list(store.records())
    signed = json.loads(doc["restriction"])
    signed["restrictionType"] = "WHITELIST"
    signed["permissions"] = [{"activity": "ALL", "clientId": OTHER}]
    store.put_sync(
        tenant,
        topic,
        {**doc, "restriction": json.dumps(signed, sort_keys=True, separators=(",", ":"))},
    )
    store.close()
    async with (
        running_broker(tmp_path) as (broker, port),
        client(port, OTHER_KEY) as other,
        client(port, OWNER_KEY) as owner,
    ):
        assert broker.claims is not None
        assert [t for _, t, _ in broker.claims.service.load_report.quarantined] == [T]
        stats = broker.claims.stats()
        assert (stats.claims, stats.pending, stats.quarantined) == (1, 0, 1)
        assert await other.subscribe(T) == (ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,)
        ack = await other.publish(T, b"x", qos=1)
        assert ack is not None and ack.reason_code == ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR
        # the owner keeps full access and repairs it by claiming again
        assert await owner.subscribe(T) == (1,)
        assert (await owner.claim(restriction(T, "WHITELIST", (OTHER, "ALL")))).reason_code == OK
        assert await other.subscribe(T) == (1,)


async def test_claims_request_answers_on_the_response_topic(tmp_path: Path) -> None:
    async with (
        running_broker(tmp_path) as (_, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
    ):
        await owner.claim(restriction(T, "WHITELIST", (OTHER, "SUBSCRIBE")))
        await other.claim(restriction(f"restricted/{OTHER}/own", "BLACKLIST"))
        info = await other.request_claims()
        assert info["clientId"] == OTHER
        assert [c["restriction"]["topicName"] for c in info["ownedClaims"]] == [
            f"restricted/{OTHER}/own"
        ]
        assert [c["restriction"]["topicName"] for c in info["involvedClaims"]] == [T]
        sig = base64.b64decode(info["involvedClaims"][0]["signature"])
        assert len(sig) > 64  # the attached signature, as the client sent it
        # a wrong or missing Response Topic
        ack = await other.publish(f"access/claims/{OTHER}/request", b"", qos=1)
        assert ack is not None and ack.reason_code == ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR
        from edge_broker.mqtt.packets import Properties

        ack = await other.publish(
            f"access/claims/{OTHER}/request",
            b"",
            qos=1,
            properties=Properties(response_topic=f"restricted/{OTHER}/x"),
        )
        assert ack is not None and ack.reason_code == ReasonCode.TOPIC_NAME_INVALID
        ack = await owner.publish(
            f"access/claims/{OTHER}/request",
            b"",
            qos=1,
            properties=Properties(response_topic=f"restricted/{OTHER}/claims"),
        )
        assert ack is not None and ack.reason_code >= 0x80


async def test_a_plain_client_using_a_smoker_id_is_refused_0x85(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, port):
        impostor = client(port, client_id=OWNER)
        with pytest.raises(SmokerClientError) as refused:
            await impostor.connect()
        assert refused.value.reason_code == ReasonCode.CLIENT_IDENTIFIER_NOT_VALID
        async with client(port, OWNER_KEY) as owner:  # the real owner still connects
            assert owner.connack is not None


async def test_a_claim_survives_a_restart(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, port), client(port, OWNER_KEY) as owner:
        await owner.claim(restriction(T, "WHITELIST", (OTHER, "SUBSCRIBE")))
    async with running_broker(tmp_path) as (broker, port), client(port, OTHER_KEY) as other:
        assert await other.subscribe(T) == (1,)
        assert broker.claims is not None and broker.claims.service.load_report.loaded == 1


async def test_a_client_that_never_answers_the_nonce_is_dropped_after_the_connect_timeout(
    tmp_path: Path,
) -> None:
    import asyncio
    import time

    from claims_broker import smoker_config

    from edge_broker.broker.server import Broker
    from edge_broker.config import loads_config
    from edge_broker.mqtt.codec import PacketReader, encode
    from edge_broker.mqtt.packets import Auth, Connect, Properties

    text = "[broker]\nconnect_timeout = 0.5\n\n" + smoker_config(tmp_path)
    broker = Broker(loads_config(text, "<test>"))
    await broker.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.bound[0][3])
        writer.write(
            encode(Connect(5, OWNER, properties=Properties(authentication_method="SMOKER")), 5)
        )
        started = time.monotonic()
        packets = PacketReader(side="client", protocol_level=5)
        [challenge] = packets.feed(await reader.read(1024))
        assert isinstance(challenge, Auth) and challenge.reason_code == 0x18
        assert challenge.properties.authentication_method == "SMOKER"
        assert len(challenge.properties.authentication_data or b"") == 32
        assert await asyncio.wait_for(reader.read(1024), 5) == b""  # closed, no CONNACK
        assert time.monotonic() - started < 3
        writer.close()
    finally:
        await broker.shutdown()


@pytest.mark.parametrize("method", ["smoker", "Smoker", "SCRAM-SHA-1"])
async def test_any_other_authentication_method_is_0x8c(tmp_path: Path, method: str) -> None:
    import asyncio

    from edge_broker.mqtt.codec import PacketReader, encode
    from edge_broker.mqtt.packets import Connack, Connect, Properties

    async with running_broker(tmp_path) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            encode(Connect(5, OWNER, properties=Properties(authentication_method=method)), 5)
        )
        [connack] = PacketReader(side="client", protocol_level=5).feed(await reader.read(1024))
        assert isinstance(connack, Connack)
        assert connack.reason_code == ReasonCode.BAD_AUTHENTICATION_METHOD
        writer.close()


async def test_claims_are_per_tenant(tmp_path: Path) -> None:
    from nacl.signing import SigningKey

    from edge_broker.smoker_client import SmokerClient

    # SMOKER proves a client id, not a tenant: this broker lets clients choose (issue 15 item 7)
    async with running_broker(tmp_path, tenant_choice="open") as (broker, port):

        def in_tenant(key: SigningKey, tenant: str) -> SmokerClient:
            return SmokerClient("127.0.0.1", port, key, tenant=tenant, timeout=5)

        async with (
            in_tenant(OWNER_KEY, "a") as owner_a,
            in_tenant(OTHER_KEY, "a") as other_a,
        ):
            ack = await owner_a.claim(restriction(T, "WHITELIST", (OTHER, "ALL")))
            assert ack.reason_code == OK
            assert await other_a.subscribe(T) == (1,)
        async with in_tenant(OTHER_KEY, "b") as other_b:
            assert await other_b.subscribe(T) == (NOT_AUTHORIZED,)  # no claim in tenant b
        assert broker.claims is not None
        assert broker.claims.service.lookup(T, "a") is not None
        assert broker.claims.service.lookup(T, "b") is None
        assert broker.claims.service.lookup(T) is None  # nor in the default tenant "~"


async def test_smoker_client_cannot_choose_a_tenant_by_default(tmp_path: Path) -> None:
    """SMOKER proves a client id, not a tenant (issue 15 item 7): 0x87 naming the rule."""
    from edge_broker.smoker_client import SmokerClient

    async with running_broker(tmp_path) as (_broker, port):
        with pytest.raises(SmokerClientError) as refused:
            async with SmokerClient("127.0.0.1", port, OWNER_KEY, tenant="a", timeout=5):
                pass
        assert refused.value.reason_code == NOT_AUTHORIZED
        assert "tenant_choice" in str(refused.value)
        async with SmokerClient("127.0.0.1", port, OWNER_KEY, timeout=5) as default:
            assert await default.subscribe("plain/topic") == (1,)  # granted (QoS 1)


async def test_deny_action_disconnect_applies_to_claims_gate_denials_not_to_claim_answers(
    tmp_path: Path,
) -> None:
    async with running_broker(tmp_path, deny_action="disconnect") as (_, port):
        async with client(port, OTHER_KEY) as other:
            ack = await other.claim_payload(b"junk")  # a claim answer, not an authz denial
            assert ack.reason_code == FORMAT and not other.closed
            ack = await other.publish(T, b"x", qos=1)  # gate 6 denies: PUBACK 0x87, DISCONNECT
            assert ack is not None and ack.reason_code == NOT_AUTHORIZED
            with pytest.raises(SmokerClientError):  # the broker has gone away
                await other.next_message(2)
            assert other.closed
            assert other.disconnect_packet is not None
            assert other.disconnect_packet.reason_code == NOT_AUTHORIZED


async def test_reauthentication_issues_a_fresh_nonce_and_a_bad_answer_disconnects(
    tmp_path: Path,
) -> None:
    import asyncio

    from edge_broker.mqtt.codec import PacketReader, encode
    from edge_broker.mqtt.packets import Auth, Connack, Connect, Disconnect, Packet, Properties

    def auth(code: int, data: bytes | None = None) -> bytes:
        return encode(
            Auth(code, Properties(authentication_method="SMOKER", authentication_data=data)), 5
        )

    async with running_broker(tmp_path) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        packets = PacketReader(side="client", protocol_level=5)
        pending: list[Packet] = []

        async def next_packet() -> Packet:
            while not pending:
                data = await asyncio.wait_for(reader.read(4096), 5)
                assert data, "connection closed"
                pending.extend(packets.feed(data))
            return pending.pop(0)

        writer.write(
            encode(Connect(5, OWNER, properties=Properties(authentication_method="SMOKER")), 5)
        )
        first = await next_packet()
        assert isinstance(first, Auth) and first.reason_code == 0x18
        nonce1 = first.properties.authentication_data or b""
        writer.write(auth(0x18, OWNER_KEY.sign(nonce1)))
        connack = await next_packet()
        assert isinstance(connack, Connack) and connack.reason_code == 0
        writer.write(auth(0x19))  # re-authenticate
        second = await next_packet()
        assert isinstance(second, Auth) and second.reason_code == 0x18
        nonce2 = second.properties.authentication_data or b""
        assert len(nonce2) == 32 and nonce2 != nonce1
        writer.write(auth(0x18, OWNER_KEY.sign(nonce2)))
        done = await next_packet()
        assert isinstance(done, Auth) and done.reason_code == 0
        writer.write(auth(0x19))
        third = await next_packet()
        assert isinstance(third, Auth)
        writer.write(auth(0x18, OWNER_KEY.sign(nonce2)))  # replays the old nonce's signature
        refused = await next_packet()
        assert isinstance(refused, Disconnect) and refused.reason_code == NOT_AUTHORIZED
        writer.close()


async def test_an_mqtt_311_client_with_a_smoker_id_is_refused_identifier_rejected(
    tmp_path: Path,
) -> None:
    import asyncio

    from edge_broker.mqtt.codec import PacketReader, encode
    from edge_broker.mqtt.packets import Connack, Connect

    async with running_broker(tmp_path) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(encode(Connect(4, OWNER), 4))
        [connack] = PacketReader(side="client", protocol_level=4).feed(await reader.read(64))
        assert isinstance(connack, Connack) and connack.reason_code == 0x02  # identifier rejected
        assert await asyncio.wait_for(reader.read(64), 5) == b""
        writer.close()

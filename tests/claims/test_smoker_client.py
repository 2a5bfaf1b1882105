"""``edge_broker.smoker_client`` against the real broker, in-process, over real sockets, with
the listener's ``auth_methods = ["smoker", "anonymous"]`` from the config."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from claims_helpers import OTHER_KEY, OWNER, OWNER_KEY

from edge_broker.broker.server import Broker
from edge_broker.config import loads_config
from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.smoker_client import SmokerClient, SmokerClientError

CONFIG = """
[[listeners]]
name = "t"
bind = "127.0.0.1"
port = 0
auth_methods = ["anonymous"]
"""

SMOKER_CONFIG = """
[[listeners]]
name = "t"
bind = "127.0.0.1"
port = 0
auth_methods = ["smoker", "anonymous"]

[claims]
store_dir = {store!r}
fsync = "never"
"""


@pytest.fixture
async def port(tmp_path: Path) -> AsyncIterator[int]:
    broker = Broker(loads_config(SMOKER_CONFIG.format(store=str(tmp_path / "claims"))))
    await broker.start()
    yield broker.bound[0][3]
    await broker.shutdown()


async def test_smoker_enhanced_authentication_succeeds(port: int) -> None:
    async with SmokerClient("127.0.0.1", port, OWNER_KEY, timeout=5) as client:
        assert client.client_id == OWNER
        assert client.connack is not None
        assert client.connack.properties.authentication_method == "SMOKER"


async def test_a_key_that_does_not_match_the_client_id_is_refused_0x87(port: int) -> None:
    client = SmokerClient("127.0.0.1", port, OTHER_KEY, client_id=OWNER, timeout=5)
    with pytest.raises(SmokerClientError) as refused:
        await client.connect()
    assert refused.value.reason_code == ReasonCode.NOT_AUTHORIZED
    assert client.closed


async def test_a_client_id_that_is_no_smoker_id_is_refused_0x85(port: int) -> None:
    client = SmokerClient("127.0.0.1", port, OWNER_KEY, client_id="sensor-1", timeout=5)
    with pytest.raises(SmokerClientError) as refused:
        await client.connect()
    assert refused.value.reason_code == ReasonCode.CLIENT_IDENTIFIER_NOT_VALID


async def test_publish_subscribe_at_every_qos(port: int) -> None:
    async with (
        SmokerClient("127.0.0.1", port, OWNER_KEY, timeout=5) as owner,
        SmokerClient("127.0.0.1", port, client_id="plain-1", timeout=5) as plain,
    ):
        assert await plain.subscribe(["t/0", "t/1", "t/2"], qos=2) == (2, 2, 2)
        assert await owner.publish("t/0", b"zero") is None
        ack1 = await owner.publish("t/1", b"one", qos=1)
        ack2 = await owner.publish("t/2", b"two", qos=2)
        assert ack1 is not None and ack1.ok and ack2 is not None and ack2.ok
        got = {(m.topic, m.payload, m.qos) for m in [await plain.next_message() for _ in range(3)]}
        assert got == {("t/0", b"zero", 0), ("t/1", b"one", 1), ("t/2", b"two", 2)}
        assert await plain.unsubscribe("t/1") == (0,)
        await owner.publish("t/1", b"again", qos=1)
        await plain.no_message(0.2)


async def test_plain_clients_may_not_publish_claims(port: int) -> None:
    async with SmokerClient("127.0.0.1", port, client_id="plain-2", timeout=5) as plain:
        ack = await plain.publish("access/claim", b"{}", qos=1)
        assert ack is not None and ack.reason_code == ReasonCode.NOT_AUTHORIZED
        with pytest.raises(ValueError):
            from edge_broker.claims.model import Restriction, RestrictionType

            await plain.claim(Restriction(f"restricted/{OWNER}/t", RestrictionType.WHITELIST))


def test_a_client_needs_a_key_or_an_id() -> None:
    with pytest.raises(ValueError):
        SmokerClient("127.0.0.1", 1)


async def test_a_broker_without_the_smoker_method_answers_0x8c() -> None:
    broker = Broker(loads_config(CONFIG))  # anonymous only
    await broker.start()
    try:
        client = SmokerClient("127.0.0.1", broker.bound[0][3], OWNER_KEY, timeout=5)
        with pytest.raises(SmokerClientError) as refused:
            await client.connect()
        assert refused.value.reason_code == ReasonCode.BAD_AUTHENTICATION_METHOD
        assert client.closed
    finally:
        await broker.shutdown()


async def test_keep_alive_pings_keep_the_connection(port: int) -> None:
    async with SmokerClient("127.0.0.1", port, OWNER_KEY, keep_alive=2, timeout=5) as client:
        await client.subscribe("k/a")
        await client.no_message(3.2)  # past 1.5 × keep-alive: only the pings kept it open
        assert not client.closed
        await client.publish("k/a", b"still here", qos=1)
        assert (await client.next_message()).payload == b"still here"

"""Issue 15 item 3, SMOKER: a will allowed at CONNECT by a claim is judged again when it is
published; after the owner unclaims the topic, the will of the client the claim let in is not
published (SMOKER.md "Access decision": claims are decided when a request is made)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from claims_broker import client, restriction, running_broker
from claims_helpers import OTHER, OTHER_KEY, OWNER, OWNER_KEY

from edge_broker.mqtt.packets import Connect, Packet, Will
from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.smoker_client import SmokerClient

T = f"restricted/{OWNER}/status"


class WillClient(SmokerClient):
    """A SMOKER client whose CONNECT carries a will (the product client sends none)."""

    def __init__(self, *args: Any, will: Will, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._will = will

    def _send(self, packet: Packet) -> None:
        if isinstance(packet, Connect):
            packet = replace(packet, will=self._will)
        super()._send(packet)

    def drop(self) -> None:
        """Lose the connection without DISCONNECT: the will is due."""
        assert self._writer is not None
        self._writer.transport.abort()


async def will_after(tmp_path: Path, unclaim: bool) -> bool:
    """Whether the owner sees OTHER's will on T after OTHER drops (with or without an unclaim
    in between)."""
    async with running_broker(tmp_path) as (_, port), client(port, OWNER_KEY) as owner:
        ack = await owner.claim(restriction(T, "WHITELIST", (OTHER, "PUBLISH")))
        assert ack.reason_code == ReasonCode.SUCCESS
        assert await owner.subscribe(T) == (1,)
        other = WillClient("127.0.0.1", port, OTHER_KEY, timeout=5, will=Will(T, b"offline", 1))
        await other.connect()  # the claim lets OTHER's will topic in at CONNECT
        if unclaim:
            assert (await owner.unclaim(T)).reason_code == ReasonCode.SUCCESS
        other.drop()
        try:
            message = await owner.next_message(timeout=1.0)
        except TimeoutError:
            return False
        assert message.payload == b"offline"
        return True


async def test_the_will_the_claim_allows_is_published(tmp_path: Path) -> None:
    assert await will_after(tmp_path, unclaim=False)


async def test_after_an_unclaim_the_will_is_not_published(tmp_path: Path) -> None:
    assert not await will_after(tmp_path, unclaim=True)

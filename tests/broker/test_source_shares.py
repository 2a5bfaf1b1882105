"""One source cannot keep the others out (issue 34 item 4). A real broker in this test's event
loop; one address (127.0.0.2) reopens sockets as fast as it can and never sends CONNECT, while
victims from 127.0.0.3... connect over real TCP. Conditions are waited on, never timed: the
victims' bound is the broker's connect timeout, the promise the issue asks for."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from edge_broker.broker.limits.source_shares import MIN_SOURCE_CONNECTIONS, SourceShares
from edge_broker.broker.server import Broker
from edge_broker.config import load_config
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Connack, Connect

FLOODER = "127.0.0.2"
VICTIMS = tuple(f"127.0.0.{i}" for i in range(3, 9))
CONNECT_TIMEOUT = 10


def test_shares_count_and_refuse() -> None:
    shares = SourceShares()
    assert SourceShares.share(0.25, 2064) == 516
    assert SourceShares.share(0.25, 20) == MIN_SOURCE_CONNECTIONS
    assert SourceShares.share(0.25, 10) == 10  # never above the cap
    assert shares.open(1, "a", 2) is None and shares.open(2, "a", 2) is None
    assert shares.open(3, "a", 2) == 2  # refused, not counted
    assert shares.open(4, "b", 2) is None
    shares.close(3)  # never counted: ignored
    assert shares.held("a") == 2
    shares.close(1)
    assert shares.open(5, "a", 2) is None
    for key in (2, 4, 5):
        shares.close(key)
    assert len(shares) == 0


async def connect(port: int, source: str, cid: str) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    try:
        writer.write(encode(Connect(5, cid, True, 60), 5))
        parser = PacketReader(side="client", protocol_level=5)
        while data := await reader.read(4096):
            for packet in parser.feed(data):
                if isinstance(packet, Connack):
                    return packet.reason_code
        return -1  # closed without CONNACK
    finally:
        writer.close()


async def flood(port: int, opened: list[asyncio.StreamWriter], stop: asyncio.Event) -> None:
    """Open sockets without CONNECT as fast as the loop allows; keep every one that stays."""
    while not stop.is_set():
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(FLOODER, 0))
            opened.append(writer)
        await asyncio.sleep(0)


def test_a_flooding_source_leaves_room_for_the_others(tmp_path: Path) -> None:
    path = tmp_path / "broker.toml"
    path.write_text(
        '[[listeners]]\nname = "t"\nbind = "127.0.0.1"\nport = 0\n\n'
        f"[broker]\nconnect_timeout = {CONNECT_TIMEOUT}\n\n"
        "[limits]\nmax_connections = 40\nconnect_rate = 100000.0\nconnect_burst = 100000\n"
    )

    async def scenario() -> None:
        broker = Broker(load_config(str(path)))
        await broker.start()
        port = broker.bound[0][3]
        opened: list[asyncio.StreamWriter] = []
        stop = asyncio.Event()
        flooders = [asyncio.create_task(flood(port, opened, stop)) for _ in range(8)]
        try:
            allowed = SourceShares.share(0.25, 40 + 64)
            while broker.limit_hits.counts.get("limits.source_connection_share", 0) < 50:
                await asyncio.sleep(0.01)  # the flooder has met its share, many times over
            assert broker.source_shares.held(FLOODER) == allowed
            codes = await asyncio.wait_for(
                asyncio.gather(*(connect(port, v, f"victim-{v}") for v in VICTIMS)),
                CONNECT_TIMEOUT,
            )
            assert codes == [0] * len(VICTIMS)
            assert broker.source_shares.held(FLOODER) <= allowed
        finally:
            stop.set()
            await asyncio.gather(*flooders)
            for writer in opened:
                writer.close()
            await broker.shutdown()

    asyncio.run(scenario())

"""Issue 21 item 5: the broker does not import the bridges (they are built on it). The run path
that builds both (``ops/service.py`` ``run_service``, what ``edge-broker run`` runs) registers
``Broker.open_bridges``; a Broker started some other way with ``[[bridges]]`` says so instead of
running without them. The other bridge tests run the broker through ``edge-broker run``."""

from __future__ import annotations

import asyncio
import socket

import pytest
from bridge_support import gateway_toml

from edge_broker.bridge.service import Bridges
from edge_broker.broker.server import Broker
from edge_broker.config import loads_config
from edge_broker.ops.service import run_service


def _config() -> str:
    with socket.socket() as s:  # a port nobody listens on: the link keeps retrying, harmless
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bridge = {
        "name": "cloud",
        "address": "127.0.0.1",
        "port": port,
        "topics": [{"direction": "out", "local": "t/#", "remote_prefix": "gw/"}],
    }
    return gateway_toml([bridge], sys_interval=0)


async def test_a_broker_started_without_the_bridge_service_refuses_instead_of_dropping_them() -> (
    None
):
    broker = Broker(loads_config(_config(), "<test>"))
    with pytest.raises(RuntimeError, match=r"\[\[bridges\]\].*run_service"):
        await broker.start()
    assert broker.bridges is None and not broker.bound  # no listener ran unbridged
    await broker.shutdown()


async def test_run_service_registers_the_bridges_and_the_broker_opens_them() -> None:
    broker = Broker(loads_config(_config(), "<test>"))
    stop = asyncio.Event()
    task = asyncio.create_task(run_service(broker, stop))
    for _ in range(200):
        if broker.bound:
            break
        await asyncio.sleep(0.02)
    assert broker.bound
    assert isinstance(broker.bridges, Bridges)
    assert [b.name for b in broker.bridges.bridges] == ["cloud"]
    stop.set()
    await asyncio.wait_for(task, 10)

"""The amqtt 0.12 client (MQTT 3.1.1) against the real broker."""

from __future__ import annotations

import asyncio
import time

from amqtt.client import MQTTClient
from amqtt.mqtt.constants import QOS_0, QOS_1, QOS_2


def uniq(name: str) -> str:
    return f"amqtt/{name}/{time.monotonic_ns()}"


async def connected(broker, **config) -> MQTTClient:
    c = MQTTClient(config={"auto_reconnect": False, **config})
    await c.connect(f"mqtt://{broker.host}:{broker.port}/")
    return c


async def test_qos_and_wildcards(module_broker):
    t = uniq("qos")
    sub = await connected(module_broker)
    pub = await connected(module_broker)
    await sub.subscribe([(t + "/+", QOS_2)])
    for qos in (QOS_0, QOS_1, QOS_2):
        await pub.publish(f"{t}/{qos}", b"m%d" % qos, qos=qos)
    got = []
    for _ in range(3):
        m = await sub.deliver_message(timeout_duration=5)
        got.append((m.topic, m.data, m.qos))
    assert sorted(got) == [(f"{t}/{q}", b"m%d" % q, q) for q in (0, 1, 2)]
    await sub.disconnect()
    await pub.disconnect()


async def test_retained(module_broker):
    t = uniq("ret")
    pub = await connected(module_broker)
    await pub.publish(t, b"kept", qos=QOS_1, retain=True)
    sub = await connected(module_broker)
    await sub.subscribe([(t, QOS_1)])
    m = await sub.deliver_message(timeout_duration=5)
    assert m.data == b"kept" and m.publish_packet.retain_flag
    await sub.disconnect()
    await pub.disconnect()


async def test_will(module_broker):
    t = uniq("will")
    watcher = await connected(module_broker)
    await watcher.subscribe([(t, QOS_1)])
    dying = await connected(
        module_broker, will={"topic": t, "message": "gone", "qos": 1, "retain": False}
    )
    # Network loss without DISCONNECT: abort the client's TCP transport under it.
    dying._handler.writer._writer.transport.abort()
    m = await watcher.deliver_message(timeout_duration=5)
    assert m.data == b"gone"
    await watcher.disconnect()
    await asyncio.sleep(0)

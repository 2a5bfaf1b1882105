#!/usr/bin/env python3
"""Micro-benchmark of the MQTT codec's hot paths (PUBLISH decode, fan-out encode).

Run:  .venv/bin/python scripts/bench_codec.py [--quick]

Prints CPU ns per operation (best of several repeats, so a busy machine inflates them less):
decoding a burst of PUBLISH packets with PacketReader.feed, encode(Publish) per subscriber
versus one PublishTemplate reused for every subscriber, and the template variants.
"""

from __future__ import annotations

import argparse
import time
import timeit
from collections.abc import Callable

from edge_broker.mqtt.codec import PacketReader, encode, encode_publish_template
from edge_broker.mqtt.packets import NO_PROPERTIES, Connect, Properties, Puback, Publish

TOPIC = "sensors/room1/temperature"
PAYLOAD = b"x" * 64


def best_ns(fn: Callable[[], object], per_call: int, number: int, repeat: int) -> float:
    """CPU time (process_time), best of ``repeat``: other load on the machine inflates it less."""
    timer = timeit.Timer(fn, timer=time.process_time)
    return min(timer.repeat(number=number, repeat=repeat)) / number / per_call * 1e9


def reader_after_connect(level: int) -> PacketReader:
    reader = PacketReader(side="server")
    reader.feed(
        encode(Connect(level, "bench", protocol_name="MQIsdp" if level == 3 else "MQTT"), level)
    )
    return reader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    number, repeat = (200, 3) if args.quick else (2000, 5)
    burst = 100
    rows: list[tuple[str, float]] = []

    cases = [
        ("decode PUBLISH QoS 0, 3.1.1, 64 B", 4, Publish(TOPIC, PAYLOAD)),
        ("decode PUBLISH QoS 1, 3.1.1, 64 B", 4, Publish(TOPIC, PAYLOAD, 1, packet_id=7)),
        ("decode PUBLISH QoS 0, 5, no properties", 5, Publish(TOPIC, PAYLOAD)),
        (
            "decode PUBLISH QoS 1, 5, alias + user property",
            5,
            Publish(
                TOPIC,
                PAYLOAD,
                1,
                packet_id=7,
                properties=Properties(topic_alias=3, user_properties=(("unit", "C"),)),
            ),
        ),
    ]
    for name, level, packet in cases:
        reader = reader_after_connect(level)
        data = encode(packet, level) * burst
        rows.append((name, best_ns(lambda r=reader, d=data: r.feed(d), burst, number, repeat)))

    single_reader = reader_after_connect(4)
    single = encode(Publish(TOPIC, PAYLOAD), 4)
    rows.append(
        (
            "decode PUBLISH QoS 0, one packet per feed call",
            best_ns(lambda: single_reader.feed(single), 1, number * 20, repeat),
        )
    )
    split_reader = reader_after_connect(4)
    one = encode(Publish(TOPIC, PAYLOAD), 4)
    halves = (one[:10], one[10:])
    rows.append(
        (
            "decode PUBLISH QoS 0 arriving in two reads",
            best_ns(lambda: [split_reader.feed(h) for h in halves], 1, number * 20, repeat),
        )
    )

    fanout = 50
    subscribers_pub = [Publish(TOPIC, PAYLOAD, 1, packet_id=i + 1) for i in range(fanout)]
    rows.append(
        (
            "fan-out 50 x encode(Publish QoS 1), per subscriber",
            best_ns(lambda: [encode(p, 4) for p in subscribers_pub], fanout, number // 4, repeat),
        )
    )

    def template_fanout() -> None:
        template = encode_publish_template(TOPIC, PAYLOAD, 1, False, False, NO_PROPERTIES, 4)
        for pid in range(1, fanout + 1):
            template.for_packet_id(pid)

    rows.append(
        (
            "fan-out 50 x template.for_packet_id (incl. building it), per subscriber",
            best_ns(template_fanout, fanout, number // 4, repeat),
        )
    )
    template0 = encode_publish_template(TOPIC, PAYLOAD, 0, False, False, NO_PROPERTIES, 4)
    rows.append(("template.data (QoS 0)", best_ns(lambda: template0.data, 1, number * 50, repeat)))
    template1 = encode_publish_template(TOPIC, PAYLOAD, 1, False, False, NO_PROPERTIES, 4)
    rows.append(
        (
            "template.for_packet_id (QoS 1)",
            best_ns(lambda: template1.for_packet_id(4242), 1, number * 50, repeat),
        )
    )
    user_property = Properties(user_properties=(("unit", "C"),))
    rows.append(
        (
            "encode_publish_template, 5, no properties",
            best_ns(
                lambda: encode_publish_template(TOPIC, PAYLOAD, 1, False, False, NO_PROPERTIES, 5),
                1,
                number,
                repeat,
            ),
        )
    )
    rows.append(
        (
            "encode_publish_template, 5, one user property",
            best_ns(
                lambda: encode_publish_template(TOPIC, PAYLOAD, 1, False, False, user_property, 5),
                1,
                number,
                repeat,
            ),
        )
    )
    ack = Puback(4242)
    rows.append(
        (
            "encode(Puback) (QoS 1 acknowledgement)",
            best_ns(lambda: encode(ack, 5), 1, number * 20, repeat),
        )
    )
    ack_reader = reader_after_connect(5)
    acks = encode(ack, 5) * burst
    rows.append(("decode PUBACK, 5", best_ns(lambda: ack_reader.feed(acks), burst, number, repeat)))
    width = max(len(name) for name, _ in rows)
    for name, ns in rows:
        print(f"{name:<{width}}  {ns:9.0f} ns")


if __name__ == "__main__":
    main()

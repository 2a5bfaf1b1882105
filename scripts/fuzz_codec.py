#!/usr/bin/env python3
"""Coverage-guided fuzzing of the MQTT codec with atheris (libFuzzer), when atheris is installed.

    pip install atheris      # wheels for x86_64 Linux; elsewhere it needs clang to build
    PYTHONPATH=. python scripts/fuzz_codec.py -max_total_time=300 -artifact_prefix=/tmp/ [corpus]

Properties checked on every input, as in tests/mqtt/test_codec_fuzz.py:
  * only ProtocolError escapes PacketReader.feed, whatever the bytes and however they are split;
  * between calls the reader never holds more than max_packet_size + 5 bytes;
  * every packet that decodes survives encode → decode unchanged.
Without atheris the script says so and exits 0, so it can sit in any pipeline.
"""

from __future__ import annotations

import sys

try:
    import atheris
except ImportError:
    print("atheris is not installed; skipping the codec fuzzer (pip install atheris)")
    sys.exit(0)

with atheris.instrument_imports():
    from edge_broker.mqtt.codec import PacketReader, ProtocolError, encode
    from edge_broker.mqtt.packets import Connect, Packet

LIMITS = (32, 300, 268_435_455)  # 32: room for the 18-byte CONNECT below


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    server = fdp.ConsumeBool()
    level = fdp.PickValueInList([3, 4, 5])
    limit = fdp.PickValueInList(list(LIMITS))
    cuts = sorted(fdp.ConsumeIntInRange(0, 512) for _ in range(fdp.ConsumeIntInRange(0, 4)))
    body = fdp.ConsumeBytes(fdp.remaining_bytes())
    if server:
        reader = PacketReader(side="server", max_packet_size=limit)
        if cuts and cuts[0] % 2:  # usually start connected, to reach every packet decoder
            name = "MQIsdp" if level == 3 else "MQTT"
            reader.feed(encode(Connect(level, "fuzz", protocol_name=name), level))
    else:
        reader = PacketReader(side="client", max_packet_size=limit, protocol_level=level)
    first_level = reader.protocol_level
    packets: list[Packet] = []
    start = 0
    for cut in [*(min(c, len(body)) for c in cuts), len(body)]:
        try:
            packets.extend(reader.feed(body[start:cut]))
        except ProtocolError as exc:
            packets.extend(exc.packets_before_error)
            break
        if reader.buffered > limit + 5:
            raise AssertionError(f"reader holds {reader.buffered} bytes with limit {limit}")
        start = max(start, cut)
    final_level = reader.protocol_level
    if packets and final_level is not None:
        again = PacketReader(side=reader.side, protocol_level=first_level)
        wire = b"".join(encode(p, final_level) for p in packets)
        if again.feed(wire) != packets:
            raise AssertionError(f"encode/decode changed {packets!r}")


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

"""Sans-io MQTT 3.1, 3.1.1 and 5.0 codec: bytes in, packets out; packets in, bytes out.

No sockets, no asyncio, no policy: every malformed input ends in ``errors.ProtocolError``
carrying the MQTT 5 reason code. Public entry points are re-exported by ``codec``.

    packets.py          the 15 packet types, ``Properties``, ``Will``, ``Subscription``
    reason_codes.py     reason codes, and which of them each packet type may carry
    errors.py           ``ProtocolError`` (reason code, message, protocol level)
    wire.py             integers, variable byte integers, strings and binary data on the wire
    properties.py       the MQTT 5 property table (ids, types, packets allowed) and its codec
    names.py            topic name / topic filter / shared subscription / UTF-8 payload checks
    decoder.py          one decoding function per packet type
    fast_construct.py   hot-path constructors for PUBLISH and its acknowledgements
    reader.py           ``PacketReader``: framing, fixed-header checks, packet-size limit
    encoder.py          ``encode(packet, protocol_level)``
    publish_template.py ``encode_publish_template``: a PUBLISH encoded once per fan-out
    packet_ids.py       ``free_packet_id``: a client side's next identifier, round robin
    codec.py            the public face: what the broker and test clients import
"""

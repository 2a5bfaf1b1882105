"""Sans-io MQTT 3.1, 3.1.1 and 5.0 codec: bytes in, packets out; packets in, bytes out."""

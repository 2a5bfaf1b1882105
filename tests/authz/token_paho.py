"""paho-mqtt 2.x clients authenticated by a token, with synchronous helpers that return the
broker's answers (SUBACK codes, PUBACK reason codes) and collect deliveries."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

V5 = paho.MQTTv5
V311 = paho.MQTTv311
_ids = itertools.count()


class TokenClient:
    def __init__(self, host: str, port: int, token: str, version: int = V5,
                 tenant: str | None = None) -> None:
        self.version = version
        self.client_id = f"tok-{next(_ids)}-{time.monotonic_ns() % 10**9}"
        self.c = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=self.client_id,
                             protocol=version)
        self.c.username_pw_set("device", token)
        # paho checks filters with MQTT's '/' rules ('#' must follow '/'); a broker configured
        # with the '.' separator (PATTERNS.md) judges them itself.
        self.c._filter_wildcard_len_check = lambda sub: paho.MQTT_ERR_SUCCESS  # type: ignore[method-assign]
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        self.disconnect_reason: Any = None
        self.disconnect_props: Any = None
        self.reason: Any = None
        self.c.on_message = lambda c, u, m: self.messages.put(m)
        self.c.on_connect = self._on_connect
        self.c.on_disconnect = self._on_disconnect
        props = None
        if version == V5 and tenant is not None:
            props = Properties(PacketTypes.CONNECT)
            props.UserProperty = ("tenant", tenant)
        if version == V5:
            self.c.connect(host, port, properties=props)
        else:
            self.c.connect(host, port)
        self.c.loop_start()
        assert self.connected.wait(5), "no CONNACK"

    def _on_connect(self, c: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        self.reason = rc
        self.connected.set()

    def _on_disconnect(self, c: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        self.disconnect_reason = rc
        self.disconnect_props = props
        self.disconnected.set()

    def subscribe(self, *patterns: str, qos: int = 1) -> list[int]:
        """SUBACK codes, one per pattern (0..2 granted; 0x80+ refused)."""
        done = threading.Event()
        codes: list[int] = []

        def on_subscribe(c: Any, u: Any, mid: Any, rcs: Any, p: Any) -> None:
            codes.extend(int(getattr(rc, "value", rc)) for rc in rcs)
            done.set()

        self.c.on_subscribe = on_subscribe
        self.c.subscribe([(p, qos) for p in patterns])
        assert done.wait(5), "no SUBACK"
        return codes

    def publish(self, topic: str, payload: bytes = b"x", qos: int = 1,
                retain: bool = False) -> int:
        """QoS 1: the PUBACK reason code (MQTT 3.1.1: always 0); QoS 0: 0."""
        done = threading.Event()
        result: list[int] = []

        def on_publish(c: Any, u: Any, mid: Any, rc: Any, p: Any) -> None:
            result.append(int(getattr(rc, "value", rc)))
            done.set()

        self.c.on_publish = on_publish
        self.c.publish(topic, payload, qos, retain)
        if qos == 0:
            return 0
        assert done.wait(5), "no PUBACK"
        return result[0]

    def received(self, expect: int = 0, quiet: float = 0.2) -> list[tuple[str, bytes]]:
        """The ``expect`` messages that must arrive (5 s each at most), plus any that arrive
        in the ``quiet`` seconds after them (so that unexpected extras are seen)."""
        got: list[tuple[str, bytes]] = []
        while True:
            try:
                m = self.messages.get(timeout=5.0 if len(got) < expect else quiet)
            except queue.Empty:
                return got
            got.append((m.topic, m.payload))

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()

    def __enter__(self) -> TokenClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

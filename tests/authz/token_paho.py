"""paho-mqtt 2.x clients authenticated by a token, with synchronous helpers that return the
broker's answers (SUBACK codes, PUBACK reason codes) and collect deliveries."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from tests.authz.paho_sync import SyncPahoClient, reason_value

V5 = paho.MQTTv5
V311 = paho.MQTTv311


class TokenClient(SyncPahoClient):
    """A connection with ``token`` as the CONNECT password (user name "device"), MQTT 5 with
    an optional ``tenant`` User Property, or 3.1.1. ``reason`` is the CONNACK's answer."""

    QUIET = 0.2

    def __init__(
        self, host: str, port: int, token: str, version: int = V5, tenant: str | None = None
    ) -> None:
        super().__init__(f"tok-{uuid.uuid4().hex[:12]}", version)
        self.version = version
        self.c.username_pw_set("device", token)
        # paho checks filters with MQTT's '/' rules ('#' must follow '/'); a broker configured
        # with the '.' separator (PATTERNS.md) judges them itself.
        self.c._filter_wildcard_len_check = lambda sub: paho.MQTT_ERR_SUCCESS  # type: ignore[method-assign]
        self.disconnected = threading.Event()
        self.disconnect_reason: Any = None
        self.disconnect_props: Any = None
        self.c.on_disconnect = self._on_disconnect
        props = None
        if version == V5 and tenant is not None:
            props = Properties(PacketTypes.CONNECT)
            props.UserProperty = ("tenant", tenant)
        self.start(host, port, props)

    def _on_disconnect(self, c: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        self.disconnect_reason = rc
        self.disconnect_props = props
        self.disconnected.set()

    def subscribe(self, *patterns: str, qos: int = 1) -> list[int]:
        """SUBACK codes, one per pattern (0..2 granted; 0x80+ refused)."""
        return self.suback_codes(lambda: self.c.subscribe([(p, qos) for p in patterns]))

    def publish(self, topic: str, payload: bytes = b"x", qos: int = 1, retain: bool = False) -> int:
        """QoS 1: the PUBACK reason code (MQTT 3.1.1: always 0); QoS 0: 0."""
        done = threading.Event()
        result: list[int] = []

        def on_publish(c: Any, u: Any, mid: Any, rc: Any, p: Any) -> None:
            result.append(reason_value(rc))
            done.set()

        self.c.on_publish = on_publish
        self.c.publish(topic, payload, qos, retain)
        if qos == 0:
            return 0
        assert done.wait(5), "no PUBACK"
        return result[0]

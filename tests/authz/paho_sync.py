"""The synchronous core the paho-mqtt 2.x test clients share (acl_paho.AclClient,
token_paho.TokenClient): one connection whose callbacks become return values and a queue of
deliveries. The subclasses say how to authenticate and what PUBLISH/SUBSCRIBE carry."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Self

import paho.mqtt.client as paho
from paho.mqtt.properties import Properties


def reason_value(rc: Any) -> int:
    """paho hands reason codes as ReasonCode objects (MQTT 5) or ints (3.1.1)."""
    return int(getattr(rc, "value", rc))


class SyncPahoClient:
    """One paho connection. A subclass configures ``self.c`` (credentials, TLS) between
    ``__init__`` and :meth:`start`; ``received()`` waits ``QUIET`` seconds for extras."""

    QUIET: ClassVar[float] = 0.3

    def __init__(self, client_id: str, protocol: int) -> None:
        self.client_id = client_id
        self.c = paho.Client(
            paho.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=protocol
        )
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connected = threading.Event()
        self.reason: Any = None
        self.c.on_message = lambda c, u, m: self.messages.put(m)
        self.c.on_connect = self._on_connect

    def start(self, host: str, port: int, properties: Properties | None = None) -> None:
        """Connect, start paho's network thread and wait for the CONNACK (``self.reason``)."""
        self.c.connect(host, port, properties=properties)
        self.c.loop_start()
        assert self.connected.wait(5), "no CONNACK"

    def _on_connect(self, c: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        self.reason = rc
        self.connected.set()

    def suback_codes(self, send: Callable[[], object]) -> list[int]:
        """Run ``send`` (a ``self.c.subscribe(...)`` call) and return the SUBACK's codes, one
        per filter (0..2 granted; 0x80+ refused)."""
        done = threading.Event()
        codes: list[int] = []

        def on_subscribe(c: Any, u: Any, mid: Any, rcs: Any, p: Any) -> None:
            codes.extend(reason_value(rc) for rc in rcs)
            done.set()

        self.c.on_subscribe = on_subscribe
        send()
        assert done.wait(5), "no SUBACK"
        return codes

    def received(self, expect: int = 0, quiet: float | None = None) -> list[tuple[str, bytes]]:
        """The ``expect`` messages that must arrive (5 s each at most), plus any arriving in the
        ``quiet`` seconds (default ``QUIET``) after them, so that unexpected extras are seen."""
        wait_extra = self.QUIET if quiet is None else quiet
        got: list[tuple[str, bytes]] = []
        while True:
            try:
                m = self.messages.get(timeout=5.0 if len(got) < expect else wait_extra)
            except queue.Empty:
                return got
            got.append((m.topic, bytes(m.payload)))

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

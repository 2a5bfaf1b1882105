"""paho-mqtt 2.x clients for the site-ACL broker tests: synchronous helpers returning the
broker's answers (SUBACK codes, PUBACK reason codes and Reason Strings) and collecting deliveries.
Plus the broker config of an ACL and a password file for username subjects."""

from __future__ import annotations

import json
import ssl
import threading
import uuid
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge_broker.auth.password import set_user, write_password_file
from tests.authz.paho_sync import SyncPahoClient, reason_value

V5 = paho.MQTTv5

GRANTED_QOS1 = 1
NOT_AUTHORIZED = 0x87
NO_MATCHING_SUBSCRIBERS = 0x10


def toml_with_acl(acl_toml: str, listeners: str | None = None, extra: str = "") -> str:
    """A broker config: the given listeners (default: TCP on 127.0.0.1, port 0) and ``[acl]``."""
    if listeners is None:
        listeners = '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
    return f"{listeners}\n[sys]\ninterval = 0\n{extra}\n{acl_toml}\n"


def acl_json_file(path: Path, access_control: dict[str, Any]) -> Path:
    """A Zenoh-style config.json5 holding ``access_control`` (plus an unrelated section)."""
    path.write_text(
        "// Zenoh config (JSON5)\n{\n  mode: 'router',\n  access_control: "
        + json.dumps(access_control, indent=2)
        + ",\n}\n"
    )
    return path


def password_file(path: Path, users: dict[str, str]) -> Path:
    entries: dict[str, Any] = {}
    for user, password in users.items():
        entries = set_user(entries, user, password)
    write_password_file(path, entries)
    return path


class AclClient(SyncPahoClient):
    """One MQTT 5 connection; ``username``/``password`` for the password method, ``tls`` a
    (ca, cert, key) triple for a TLS listener with client certificates."""

    QUIET = 0.3

    def __init__(
        self,
        host: str,
        port: int,
        *,
        username: str | None = None,
        password: str | None = None,
        tls: tuple[Path, Path, Path] | None = None,
        client_id: str | None = None,
    ) -> None:
        super().__init__(client_id or f"acl-{uuid.uuid4().hex[:12]}", V5)
        if username is not None:
            self.c.username_pw_set(username, password)
        if tls is not None:
            ca, cert, key = tls
            self.c.tls_set(
                ca_certs=str(ca), certfile=str(cert), keyfile=str(key), cert_reqs=ssl.CERT_REQUIRED
            )
        self.start(host, port)
        assert reason_value(self.reason) == 0, f"CONNECT refused: {self.reason}"

    def subscribe(self, topic_filter: str, qos: int = 1, queryable: bool = False) -> int:
        """The SUBACK code (0..2 granted; 0x80+ refused)."""
        props = None
        if queryable:
            props = Properties(PacketTypes.SUBSCRIBE)
            props.UserProperty = ("queryable", "true")
        return self.suback_codes(lambda: self.c.subscribe(topic_filter, qos, properties=props))[0]

    def publish(
        self,
        topic: str,
        payload: bytes = b"x",
        *,
        retain: bool = False,
        response_topic: str | None = None,
        correlation: bytes | None = None,
    ) -> tuple[int, str]:
        """QoS 1: the PUBACK reason code and Reason String ('' when absent)."""
        done = threading.Event()
        result: list[tuple[int, str]] = []

        def on_publish(c: Any, u: Any, mid: Any, rc: Any, p: Any) -> None:
            reason = getattr(p, "ReasonString", "") if p is not None else ""
            result.append((reason_value(rc), reason or ""))
            done.set()

        props = Properties(PacketTypes.PUBLISH)
        if response_topic is not None:
            props.ResponseTopic = response_topic
        if correlation is not None:
            props.CorrelationData = correlation
        self.c.on_publish = on_publish
        self.c.publish(topic, payload, 1, retain, properties=props)
        assert done.wait(5), "no PUBACK"
        return result[0]

    def publish_code(self, topic: str, payload: bytes = b"x", **kw: Any) -> int:
        return self.publish(topic, payload, **kw)[0]

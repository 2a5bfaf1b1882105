"""``[[bridges]]``: one table per remote broker, with ``[[bridges.topics]]`` mappings (issue 19).

Every key and its default is documented in docs/bridge.md. Problems are collected into the
config file's list (``bridges[0].topics[1].local: ...``) with what to write instead; the parser
is called by :func:`edge_broker.config.parse_config`.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config_section import ConfigError, Section
from ..matching.errors import RuleError
from ..matching.mqtt_topics import filters_overlap, validate_topic_filter
from ..matching.names import DEFAULT_TENANT

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DIRECTIONS = ("out", "in", "both")
TRANSPORTS = ("tcp", "tls", "websocket")
PROTOCOLS = {"5": 5, "3.1.1": 4}
OVERFLOW = ("drop-oldest", "drop-newest")
QUEUE_MAX_MESSAGES = 20_000
QUEUE_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_PORTS = {"tcp": 1883, "tls": 8883, "websocket": 80}


@dataclass(frozen=True, slots=True)
class TopicMapping:
    """``local`` is an MQTT filter on this broker; the remote topic of a local topic is
    ``remote_prefix + topic[len(local_prefix):]`` and back (Mosquitto's ``topic`` line)."""

    direction: str
    local: str
    local_prefix: str = ""
    remote_prefix: str = ""
    qos: int = 1
    tenant: str = DEFAULT_TENANT

    @property
    def outbound(self) -> bool:
        return self.direction in ("out", "both")

    @property
    def inbound(self) -> bool:
        return self.direction in ("in", "both")

    @property
    def remote(self) -> str:
        """The filter on the remote broker."""
        return self.remote_prefix + self.local[len(self.local_prefix) :]


def echo_pair(topics: Sequence[TopicMapping]) -> tuple[TopicMapping, TopicMapping] | None:
    """An out mapping and an in mapping (possibly one ``both`` mapping) that share remote
    topics: what the bridge sends there, a remote without No Local sends back. None if the
    remote topics of the two directions are disjoint."""
    for out in (m for m in topics if m.outbound):
        for into in (m for m in topics if m.inbound):
            if filters_overlap(out.remote, into.remote):
                return out, into
    return None


def echo_problem(topics: Sequence[TopicMapping], protocol: int, bridge_mode: bool) -> str | None:
    """Why a bridge would have to guess which messages are echoes, or None.

    A 3.1.1 remote sends the bridge back what the bridge published on a topic it subscribed to
    (3.1.1 has no No Local), and a 3.1.1 PUBLISH carries nothing to tell an echo from a message
    the remote really sent. Only two ways avoid a guess: the bridge protocol flag
    (``bridge_mode``, Mosquitto stops echoing) or remote topics that no inbound mapping
    subscribes to. A guess (the old fingerprint filter) dropped real commands."""
    if protocol == 5 or bridge_mode:
        return None
    pair = echo_pair(topics)
    if pair is None:
        return None
    out, into = pair
    what = (
        f"the {out.direction!r} mapping {out.local!r}"
        if out is into
        else f"the out mapping {out.local!r} and the in mapping {into.local!r}"
    )
    return (
        f'false with protocol = "3.1.1": {what} share remote topics '
        f"({out.remote!r}, {into.remote!r}), so the remote would echo what this "
        "bridge sends and nothing in a 3.1.1 message tells an echo from a real one: "
        'set bridge_mode = true (a Mosquitto remote), protocol = "5", or split it '
        "into out and in mappings with disjoint remote_prefix"
    )


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    name: str
    address: str
    port: int
    topics: tuple[TopicMapping, ...]
    transport: str = "tcp"
    protocol: int = 5  # 5 or 4 (3.1.1)
    # 3.1.1: CONNECT with the bridge protocol flag (0x80 on the level byte, Mosquitto's
    # try_private) when out and in mappings share remote topics, so that the remote does not
    # send back what the bridge published (echo_pair; without shared topics nothing echoes)
    bridge_mode: bool = True
    client_id: str = ""
    username: str | None = None
    password: str | None = None
    token_file: str | None = None  # a JWT read at every connect, sent as the password
    keep_alive: int = 60
    clean_start: bool = False
    session_expiry: int = 86400
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_server_name: str | None = None
    tls_verify_hostname: bool = True
    websocket_path: str = "/mqtt"
    reconnect_min: float = 1.0
    reconnect_max: float = 60.0
    connect_timeout: float = 10.0
    max_inflight: int = 32
    # the defaults fit the unit's MemoryMax with the default [limits] (edge-broker check's
    # "bridge queues" term): 8 MiB of topics and payloads, 20,000 messages
    queue_max_messages: int = QUEUE_MAX_MESSAGES
    queue_max_bytes: int = QUEUE_MAX_BYTES
    overflow: str = "drop-oldest"
    drain_rate: float = 1000.0  # messages per second to the remote; 0 = unlimited

    @property
    def principal(self) -> str:
        """The site-ACL interface name of the bridge principal: ``/`` is never part of a Linux
        interface name, so no network interface can pose as a bridge (docs/bridge.md)."""
        return "bridge/" + self.name


def parse_bridges(raw: Any, file: str, problems: list[ConfigError]) -> tuple[BridgeConfig, ...]:
    """``raw`` is the TOML value of ``bridges``; problems are appended to ``problems``."""
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        problems.append(
            ConfigError(file, "bridges", "expected an array of tables: write [[bridges]]")
        )
        return ()
    bridges: list[BridgeConfig] = []
    for i, table in enumerate(raw):
        section = Section(file, f"bridges[{i}]", table, problems)
        bridge = _parse_bridge(section, file, problems)
        section.finish()
        if bridge is not None:
            if any(b.name == bridge.name for b in bridges):
                problems.append(
                    ConfigError(
                        file,
                        f"bridges[{i}].name",
                        f"{bridge.name!r} is used twice: give each bridge a unique name",
                    )
                )
            bridges.append(bridge)
    return tuple(bridges)


def _parse_bridge(s: Section, file: str, problems: list[ConfigError]) -> BridgeConfig | None:
    name = s.string("name", "")
    if not NAME.match(name):
        s.problem(
            "name", f"{name!r}: write a name of 1-64 letters, digits, '-' or '_' (e.g. \"cloud\")"
        )
    address = s.string("address", "")
    if not address:
        s.problem(
            "address",
            'missing: write the remote broker\'s host name or IP, e.g. "mqtt.example.com"',
        )
    transport = s.choice("transport", "tcp", TRANSPORTS)
    port = s.integer("port", DEFAULT_PORTS[transport], 1, 65535)
    protocol_text = s.get("protocol", "5", str, 'a string: "5" or "3.1.1"')
    protocol = PROTOCOLS.get(protocol_text)
    if protocol is None:
        s.problem("protocol", f'{protocol_text!r} is not supported: write "5" or "3.1.1"')
        protocol = 5
    bridge_mode = s.boolean("bridge_mode", True)
    if protocol == 5 and "bridge_mode" in s.table:
        s.problem(
            "bridge_mode",
            'only used with protocol = "3.1.1" (MQTT 5 bridges subscribe with No Local): remove it',
        )
    client_id = s.string("client_id", f"{socket.gethostname()}.{name}")
    if not client_id:
        s.problem(
            "client_id", "empty: write the client id to use on the remote broker, or remove the key"
        )
    username = s.optional_string("username")
    password = s.optional_string("password")
    token_file = s.optional_string("token_file")
    if password is not None and token_file is not None:
        s.problem(
            "token_file",
            "give either password or token_file, not both (the token is sent as the password)",
        )
    keep_alive = s.integer("keep_alive", 60, 5, 65535)
    clean_start = s.boolean("clean_start", False)
    session_expiry = s.integer("session_expiry", 86400, 0, 0xFFFFFFFF)
    tls_ca = s.optional_string("tls_ca")
    tls_cert = s.optional_string("tls_cert")
    tls_key = s.optional_string("tls_key")
    tls_server_name = s.optional_string("tls_server_name")
    tls_verify_hostname = s.boolean("tls_verify_hostname", True)
    websocket_tls = s.boolean("websocket_tls", False)
    if (tls_cert is None) != (tls_key is None):
        s.problem(
            "tls_key" if tls_key is None else "tls_cert",
            "a client certificate needs both tls_cert and tls_key (PEM files)",
        )
    uses_tls = transport == "tls" or (transport == "websocket" and websocket_tls)
    if not uses_tls:
        for key, value in (
            ("tls_ca", tls_ca),
            ("tls_cert", tls_cert),
            ("tls_key", tls_key),
            ("tls_server_name", tls_server_name),
        ):
            if value is not None:
                s.problem(
                    key,
                    'only used with transport = "tls" (or websocket_tls = true): remove it or set '
                    "the transport",
                )
    websocket_path = s.string("websocket_path", "/mqtt")
    if not websocket_path.startswith("/"):
        s.problem(
            "websocket_path", f"{websocket_path!r}: write a path starting with '/', e.g. \"/mqtt\""
        )
    reconnect_min = s.number("reconnect_min", 1.0, 0.01, 3600)
    reconnect_max = s.number("reconnect_max", 60.0, 0.01, 86400)
    if reconnect_max < reconnect_min:
        s.problem(
            "reconnect_max", f"{reconnect_max:g} is below reconnect_min {reconnect_min:g}: raise it"
        )
    connect_timeout = s.number("connect_timeout", 10.0, 0.1, 600)
    max_inflight = s.integer("max_inflight", 32, 1, 65535)
    queue_max_messages = s.integer("queue_max_messages", QUEUE_MAX_MESSAGES, 1, 100_000_000)
    queue_max_bytes = s.integer("queue_max_bytes", QUEUE_MAX_BYTES, 1024, 1 << 40)
    overflow = s.choice("overflow", "drop-oldest", OVERFLOW)
    drain_rate = s.number("drain_rate", 1000.0, 0, 1e9)
    topics: list[TopicMapping] = []
    raw_topics: list[Any] = s.get(
        "topics", [], list, "an array of tables: write [[bridges.topics]]"
    )
    for j, table in enumerate(raw_topics):
        key = f"{s.path}.topics[{j}]"
        if not isinstance(table, dict):
            problems.append(ConfigError(file, key, "expected a table: write [[bridges.topics]]"))
            continue
        t = Section(file, key, table, problems)
        mapping = _parse_mapping(t)
        t.finish()
        if mapping is not None:
            topics.append(mapping)
    if not raw_topics:
        s.problem(
            "topics", 'no mapping: add [[bridges.topics]] direction = "out" local = "sensors/#"'
        )
    echo = echo_problem(topics, protocol, bridge_mode)
    if echo is not None:
        s.problem("bridge_mode", echo)
    if transport == "websocket" and websocket_tls:
        transport = "websockets"  # WebSocket over TLS
    return BridgeConfig(
        name=name,
        address=address,
        port=port,
        topics=tuple(topics),
        transport=transport,
        protocol=protocol,
        bridge_mode=bridge_mode,
        client_id=client_id,
        username=username,
        password=password,
        token_file=token_file,
        keep_alive=keep_alive,
        clean_start=clean_start,
        session_expiry=session_expiry,
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_server_name=tls_server_name,
        tls_verify_hostname=tls_verify_hostname,
        websocket_path=websocket_path,
        reconnect_min=reconnect_min,
        reconnect_max=reconnect_max,
        connect_timeout=connect_timeout,
        max_inflight=max_inflight,
        queue_max_messages=queue_max_messages,
        queue_max_bytes=queue_max_bytes,
        overflow=overflow,
        drain_rate=drain_rate,
    )


def _parse_mapping(t: Any) -> TopicMapping | None:
    direction = t.get("direction", "", str, 'one of "out", "in", "both"')
    if direction not in DIRECTIONS:
        t.problem(
            "direction", f'{direction!r}: write "out" (to the remote), "in" (from it) or "both"'
        )
    local = t.string("local", "")
    try:
        validate_topic_filter(local)
    except RuleError as exc:
        t.problem(
            "local", f'{local!r} is not a valid MQTT topic filter ({exc}): write e.g. "sensors/#"'
        )
        return None
    if local.startswith("$"):
        t.problem(
            "local",
            f"{local!r}: bridge a plain filter; '$' topics ($SYS, $share) are never bridged",
        )
    local_prefix = t.string("local_prefix", "")
    remote_prefix = t.string("remote_prefix", "")
    for key, prefix in (("local_prefix", local_prefix), ("remote_prefix", remote_prefix)):
        if "+" in prefix or "#" in prefix or "\x00" in prefix:
            t.problem(key, f"{prefix!r}: a prefix is literal text without '+', '#' or NUL")
    if not local.startswith(local_prefix):
        t.problem(
            "local_prefix",
            f"{local_prefix!r} is not a prefix of local = {local!r}: "
            "write the part of the filter that remote_prefix replaces",
        )
    qos = t.integer("qos", 1, 0, 2)
    tenant = t.string("tenant", DEFAULT_TENANT) or DEFAULT_TENANT
    if direction not in DIRECTIONS:
        return None
    return TopicMapping(direction, local, local_prefix, remote_prefix, qos, tenant)

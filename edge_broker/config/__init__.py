"""TOML configuration → frozen dataclasses (DESIGN.md ``config.py``).

Every problem is a :class:`ConfigError` naming the file, the key (``listeners[1].port``) and what
to write instead; :func:`load_config` collects all problems of a file before raising, so
``edge-broker check`` can print them all. Unknown keys are errors.

The config layer. A section is parsed in its own package when that package sits below this one
(so that it takes its section without importing the assembly): ``[tokens]``/``[passwords]`` in
``auth/settings.py``, ``[claims]`` in ``claims/settings.py``, ``[audit]`` in
``audit/settings.py``, ``[permissions]``, ``[[authorizers]]`` and ``[acl]`` (the site ACL,
AUTHZ.md §2 gate 5) in ``authz/``. The sections of the broker and of the packages above it are
parsed here: ``[broker]``, ``[[listeners]]``, ``[limits]``, ``[log]``, ``[sys]``, ``[topics]``
and ``[persistence]`` in this module, ``[metrics]``/``[sync]`` in ``config/service.py``,
``[[bridges]]`` in ``config/bridges.py``, the address and TLS checks in ``config/preflight.py``.
This module reads the file and assembles :class:`Config`; a package below it that needs more of
the assembly than its own section names what it reads in a Protocol (``config.Config`` is one).
Another section is added by writing a parser ``(Section) -> T`` and an entry in
:data:`SECTION_PARSERS`, plus a field on :class:`Config`.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..audit.settings import AuditConfig, parse_audit
from ..auth.methods import AUTHENTICATOR_FACTORIES
from ..auth.settings import PasswordsConfig, TokensConfig, parse_passwords, parse_tokens
from ..authz.authorizers import (
    AuthorizerConfigError,
    AuthorizerSpec,
    check_authorizer_class,
    load_class,
    parse_authorizer_specs,
)
from ..authz.permissions import PermissionConfigError
from ..authz.permissions_config import PermissionsConfig, parse_permissions_config
from ..claims.settings import ClaimsConfig, parse_claims
from ..config_section import ConfigError as ConfigError  # re-exported: callers import it here
from ..config_section import Section as Section
from ..config_section import unknown_name
from .preflight import is_loopback
from .service import (
    AdminConfig,
    MetricsConfig,
    SyncConfig,
    parse_admin,
    parse_metrics,
    parse_sync,
)

if TYPE_CHECKING:
    from ..authz.acl import Acl  # imported by parse_config only when [acl] is present
    from .bridges import BridgeConfig  # [[bridges]], parsed only when present


EMBEDDED_FILE = "<embedded default>"


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """``[broker]``: the MQTT 5 capabilities announced in CONNACK (MQTT 5 §3.2.2.3)."""

    maximum_qos: int = 2
    retain_available: bool = True
    wildcard_subscriptions: bool = True
    subscription_identifiers: bool = True
    shared_subscriptions: bool = True
    topic_alias_maximum: int = 10  # inbound aliases we accept per connection
    server_keep_alive: int = 0  # 0: accept the client's keep alive (else impose this value)
    max_keep_alive: int = 65535  # client keep alives above this are lowered (server keep alive)
    max_session_expiry: int = 0xFFFFFFFF  # cap on the session expiry a client may ask for
    allow_zero_length_client_id: bool = True
    assigned_client_id_prefix: str = "auto-"
    connect_timeout: float = 10.0  # seconds a connection may take to complete CONNECT
    # A CONNECT for a session another principal owns (docs/sessions-and-authorization.md):
    # "refuse" (CONNACK 0x87) or "fresh" (end the owner's session, start an empty one)
    foreign_session: str = "refuse"


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """``[[listeners]]``: one socket the broker accepts clients on."""

    name: str
    bind: str = "127.0.0.1"
    port: int = 1883
    transport: str = "tcp"  # tcp | tls | websocket
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    require_client_cert: bool = False
    websocket_path: str = "/mqtt"
    websocket_tls: bool = False  # WebSocket over TLS (wss) with the tls_* files
    auth_methods: tuple[str, ...] = ("anonymous",)
    deny_action: str = "reason"  # reason | disconnect (AUTHZ.md §3)
    # PATTERNS.md §2: "seed001" also accepts runtime subscription patterns (*, >, p*, p#, p>)
    subscription_patterns: str = "mqtt"  # mqtt | seed001
    # issue 15: "credentials" = a client enters only tenants its credentials name (else "~");
    # "open" = any client may name any tenant in the CONNECT user property "tenant"
    tenant_choice: str = "credentials"  # credentials | open

    @property
    def uses_tls(self) -> bool:
        return self.transport == "tls" or (self.transport == "websocket" and self.websocket_tls)


@dataclass(frozen=True, slots=True)
class LimitsConfig:
    """``[limits]``: sane defaults for a 512 MB board (DESIGN.md "Bounded everything")."""

    max_connections: int = 2000
    max_packet_size: int = 1_048_576  # bytes, both directions
    receive_maximum: int = 32  # inflight QoS 1/2 we accept from one client (MQTT 5 §3.2.2.3.3)
    max_inflight: int = 32  # our outgoing inflight QoS 1/2 per client (capped by its Receive Max)
    max_queued_messages: int = 1000  # per offline / slow session
    max_queued_bytes: int = 4 * 1024 * 1024  # per session
    max_queued_bytes_total: int = 32 * 1024 * 1024  # all sessions together (issue 16)
    max_subscriptions_per_client: int = 1000
    max_subscriptions_total: int = 12_000  # all clients and topic spaces together (issue 16, 34)
    connect_rate: float = 200.0  # new connections per second, token bucket
    connect_burst: int = 400
    # One source's bucket beside the global one (issue 31 item 4, broker/limits/pre_auth.py): this
    # share of connect_rate and connect_burst per client address (IPv6: per /64)
    source_connect_share: float = 0.5
    max_connect_sources: int = 10_000  # sources with a bucket; least recently seen dropped
    # Open sockets one address (IPv6: one /64) may hold, as a share of max_connections + 64
    # (issue 34, broker/limits/source_shares.py): one source cannot keep the others out
    source_connection_share: float = 0.25
    write_buffer_high: int = 256 * 1024  # a client with more unsent bytes is slow: QoS 0 dropped
    write_buffer_low: int = 64 * 1024
    # Broker-wide bounds on socket buffers (issue 16, broker/limits/read_pool.py, write_budget.py):
    # max_connections × max_packet_size and × write_buffer_high would be 2.5 GiB.
    read_buffer_size: int = 8 * 1024  # unfinished-packet bytes a connection holds on its own
    read_pool_size: int = 4 * 1024 * 1024  # beyond that, shared by all connections
    read_pool_timeout: float = 10.0  # s a packet may wait for the pool (then DISCONNECT 0x97)
    max_write_buffer_total: int = 8 * 1024 * 1024  # unsent bytes in all transports together
    # Caches, bounded in bytes (estimates; matching/decision_cache.py entry_bytes):
    decision_cache_bytes: int = 8 * 1024 * 1024  # each: permissions gate, claims gate
    acl_cache_bytes: int = 4 * 1024 * 1024  # all of the ACL gate's decision caches
    routing_cache_bytes: int = 1024 * 1024  # each routing index (subscriptions, patterns)
    # Before authentication (issue 16): what a client that has proved nothing may make us hold.
    max_connect_packet_size: int = 16_384  # bytes of CONNECT (and of anything sent before CONNACK)
    max_connect_user_properties: int = 32  # user properties in CONNECT + will (decoded ~12x bytes)
    # Issue 16 (docs/limits-memory.md): what one client can make the broker hold once connected.
    max_topic_levels: int = 32  # levels of a topic name or filter (seed 000 rules: 32 segments)
    max_topic_length: int = 1024  # UTF-8 bytes of a topic name or filter
    max_retained_messages: int = 16_000  # all topic spaces together ($ topics not counted)
    max_retained_bytes: int = 12 * 1024 * 1024  # topic + payload + properties, all spaces
    max_retained_per_client: int = 1000  # retained topics one client id may hold
    # topic spaces of tenants besides the default one (issue 34, broker/topic_space.py): a
    # CONNECT naming one more gets CONNACK 0x97; each space's routing caches hold
    # routing_cache_bytes / 128 (the default tenant's: routing_cache_bytes)
    max_tenants: int = 500
    max_retained_payload: int = 256 * 1024  # bytes of one retained payload
    # Per-client publish quotas, off by default: memory is bounded without them (queues,
    # retained, caches), and the right figure depends on the devices (docs/limits-memory.md).
    publish_rate: float = 0.0  # PUBLISH packets per second per client (0: no quota)
    publish_burst: int = 1000
    publish_byte_rate: float = 0.0  # topic + payload bytes per second per client (0: no quota)
    publish_byte_burst: int = 4 * 1024 * 1024
    # An online subscriber's full QoS 1/2 queue (broker/delivery.py): "drop" the new message
    # (as Mosquitto does: counted and logged), or "backpressure": keep it and stop reading from
    # its publisher until the queue has drained to half, for at most backpressure_timeout s.
    queue_overflow: str = "drop"  # drop | backpressure
    backpressure_timeout: float = 5.0
    # Quotas (broker/limits/quotas.py, docs/limits-quotas.md): of every broker-wide total above
    # (connections, subscriptions, retained messages and bytes, queued bytes), one tenant may
    # hold at most tenant_share and one principal (user, token subject, certificate, SMOKER
    # key, anonymous listener) at most principal_share; 1.0 turns a share off.
    tenant_share: float = 0.5
    principal_share: float = 0.25


@dataclass(frozen=True, slots=True)
class LogConfig:
    level: str = "info"  # debug | info | warning | error
    format: str = "text"  # text | json


@dataclass(frozen=True, slots=True)
class SysConfig:
    interval: float = 10.0  # seconds between $SYS updates; 0 disables $SYS


@dataclass(frozen=True, slots=True)
class TopicsConfig:
    separator: str = "/"  # PATTERNS.md "The separator": "/" or "."


@dataclass(frozen=True, slots=True)
class PersistenceConfig:
    """``[persistence]`` (issue 8, broker/persist/persistence.py): persistent sessions and retained
    messages in ``<state_dir>/broker.log``. ``state_dir`` ``None``: ``$EDGE_BROKER_STATE_DIR``,
    else /var/lib/edge-broker when writable, else ./var/edge-broker (claims live there too).
    ``durability``: ``sync`` (PUBACK/PUBREC after fsync), ``interval`` (fsync every
    ``interval_ms``), ``none`` (the OS decides; a broker crash loses nothing, a power cut may)."""

    enabled: bool = False  # parse_persistence turns it on when a state directory is given
    state_dir: str | None = None
    durability: str = "sync"
    interval_ms: int = 50
    compact_min_bytes: int = 1 << 20
    # a state log that cannot be opened at all (store/damage.py): "refuse" to start, or
    # "set-aside": move it to <file>.damaged-<time>, log an error, start empty (issue 20)
    on_damage: str = "refuse"


def _default_listeners() -> tuple[ListenerConfig, ...]:
    return (ListenerConfig(name="default"),)


@dataclass(frozen=True, slots=True)
class Config:
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    listeners: tuple[ListenerConfig, ...] = field(default_factory=_default_listeners)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    log: LogConfig = field(default_factory=LogConfig)
    sys: SysConfig = field(default_factory=SysConfig)
    topics: TopicsConfig = field(default_factory=TopicsConfig)
    claims: ClaimsConfig = field(default_factory=ClaimsConfig)
    tokens: TokensConfig = field(default_factory=TokensConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    passwords: PasswordsConfig = field(default_factory=PasswordsConfig)
    persistence: PersistenceConfig = field(default_factory=PersistenceConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)  # [metrics] (config/service.py)
    admin: AdminConfig = field(default_factory=AdminConfig)  # [admin] (config/service.py)
    sync: SyncConfig = field(default_factory=SyncConfig)  # [sync] (config/service.py)
    # [permissions] (authz/permissions_config.py) and [[authorizers]] (authz/authorizers.py)
    permissions: PermissionsConfig | None = None
    authorizers: tuple[AuthorizerSpec, ...] = ()
    acl: Acl | None = None  # [acl], compiled (authz/acl_settings.py); None without the section
    bridges: tuple[BridgeConfig, ...] = ()  # [[bridges]] (config/bridges.py, docs/bridge.md)
    file: str = EMBEDDED_FILE


def claims_enabled(config: Config) -> bool:
    """``[claims] enabled``, or when absent: some listener accepts the ``smoker`` method."""
    if config.claims.enabled is not None:
        return config.claims.enabled
    return any("smoker" in listener.auth_methods for listener in config.listeners)


def parse_broker(s: Section) -> BrokerConfig:
    d = BrokerConfig()
    return BrokerConfig(
        maximum_qos=s.integer("maximum_qos", d.maximum_qos, 0, 2),
        retain_available=s.boolean("retain_available", d.retain_available),
        wildcard_subscriptions=s.boolean("wildcard_subscriptions", d.wildcard_subscriptions),
        subscription_identifiers=s.boolean("subscription_identifiers", d.subscription_identifiers),
        shared_subscriptions=s.boolean("shared_subscriptions", d.shared_subscriptions),
        topic_alias_maximum=s.integer("topic_alias_maximum", d.topic_alias_maximum, 0, 65535),
        server_keep_alive=s.integer("server_keep_alive", d.server_keep_alive, 0, 65535),
        max_keep_alive=s.integer("max_keep_alive", d.max_keep_alive, 1, 65535),
        max_session_expiry=s.integer("max_session_expiry", d.max_session_expiry, 0, 0xFFFFFFFF),
        allow_zero_length_client_id=s.boolean(
            "allow_zero_length_client_id", d.allow_zero_length_client_id
        ),
        assigned_client_id_prefix=s.string(
            "assigned_client_id_prefix", d.assigned_client_id_prefix
        ),
        connect_timeout=s.number("connect_timeout", d.connect_timeout, 0.1, 3600),
        foreign_session=s.choice("foreign_session", d.foreign_session, ("refuse", "fresh")),
    )


def parse_listener(s: Section, index: int) -> ListenerConfig:
    name = s.string("name", f"listener{index}")
    bind = s.string("bind", "127.0.0.1")
    if bind not in ("localhost", ""):
        try:
            ipaddress.ip_address(bind)
        except ValueError:
            s.problem("bind", f'{bind!r} is not an IP address: write e.g. "0.0.0.0" or "::1"')
    port = s.integer("port", 1883, 0, 65535)
    transport = s.choice("transport", "tcp", ("tcp", "tls", "websocket"))
    tls_cert = s.file_path("tls_cert")
    tls_key = s.file_path("tls_key")
    tls_ca = s.file_path("tls_ca")
    require_client_cert = s.boolean("require_client_cert", False)
    websocket_path = s.string("websocket_path", "/mqtt")
    websocket_tls = s.boolean("websocket_tls", False)
    s.used.add("auth_methods")
    raw_methods = s.table.get("auth_methods")
    methods: tuple[str, ...]
    if raw_methods is None:
        # Mosquitto 2: anonymous only where nobody else can reach the socket.
        methods = ("anonymous",) if is_loopback(bind) else ()
        if not methods and not s.misspelt("auth_methods"):  # a typo is reported as one
            # Never suggest opening anonymous access: name the methods that check who connects.
            s.problem(
                "auth_methods",
                f"listener {name!r} binds {bind!r}, which is not loopback, so it needs "
                'auth_methods: write the methods clients must use, e.g. ["password"] or '
                '["certificate"]',
            )
    elif not isinstance(raw_methods, list) or not all(isinstance(m, str) for m in raw_methods):
        s.problem("auth_methods", 'expected a list of method names, e.g. ["anonymous"]')
        methods = ()
    else:
        methods = tuple(raw_methods)
        available = ", ".join(sorted(AUTHENTICATOR_FACTORIES))
        for m in methods:
            if m not in AUTHENTICATOR_FACTORIES:
                s.problem("auth_methods", f"unknown method {m!r}: use one of {available}")
        if not methods:
            s.problem("auth_methods", f"empty: list at least one of {available}")
        if len(set(methods)) != len(methods):
            s.problem("auth_methods", "a method is listed twice: list each once")
    deny_action = s.choice("deny_action", "reason", ("reason", "disconnect"))
    subscription_patterns = s.choice("subscription_patterns", "mqtt", ("mqtt", "seed001"))
    tenant_choice = s.choice("tenant_choice", "credentials", ("credentials", "open"))
    uses_tls = transport == "tls" or (transport == "websocket" and websocket_tls)
    if uses_tls:
        for key, value in (("tls_cert", tls_cert), ("tls_key", tls_key)):
            if value is None:
                s.problem(key, f'a {transport} listener with TLS needs {key} = "/path/to/file.pem"')
            elif not Path(value).is_file():
                s.problem(key, f"file {value!r} does not exist: write the path of a PEM file")
        if tls_ca is not None and not Path(tls_ca).is_file():
            s.problem(
                "tls_ca", f"file {tls_ca!r} does not exist: write the path of a PEM CA bundle"
            )
        if (
            tls_cert is not None
            and tls_key is not None
            and Path(tls_cert).is_file()
            and Path(tls_key).is_file()
        ):
            from .preflight import tls_problem  # only TLS configs pay for ssl here

            problem = tls_problem(tls_cert, tls_key, tls_ca)
            if problem is not None:
                s.problem(*problem)
        if require_client_cert and tls_ca is None:
            s.problem("tls_ca", 'require_client_cert = true needs tls_ca = "/path/to/ca.pem"')
    else:
        for key, value in (("tls_cert", tls_cert), ("tls_key", tls_key), ("tls_ca", tls_ca)):
            if value is not None:
                s.problem(key, f'only TLS listeners use {key}: set transport = "tls" or remove it')
        if require_client_cert:
            s.problem(
                "require_client_cert",
                'only TLS listeners check client certificates: set transport = "tls"',
            )
    if transport != "websocket" and "websocket_path" in s.table:
        s.problem(
            "websocket_path", 'only websocket listeners have a path: set transport = "websocket"'
        )
    if not websocket_path.startswith("/"):
        s.problem("websocket_path", f"{websocket_path!r} must start with '/': write e.g. \"/mqtt\"")
    return ListenerConfig(
        name=name,
        bind=bind,
        port=port,
        transport=transport,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_ca=tls_ca,
        require_client_cert=require_client_cert,
        websocket_path=websocket_path,
        websocket_tls=websocket_tls,
        auth_methods=methods,
        deny_action=deny_action,
        subscription_patterns=subscription_patterns,
        tenant_choice=tenant_choice,
    )


def parse_limits(s: Section) -> LimitsConfig:
    d = LimitsConfig()
    limits = LimitsConfig(
        max_connections=s.integer("max_connections", d.max_connections, 1, 1_000_000),
        max_packet_size=s.integer("max_packet_size", d.max_packet_size, 64, 268_435_455),
        receive_maximum=s.integer("receive_maximum", d.receive_maximum, 1, 65535),
        max_inflight=s.integer("max_inflight", d.max_inflight, 1, 65535),
        max_queued_messages=s.integer("max_queued_messages", d.max_queued_messages, 0, 10_000_000),
        max_queued_bytes=s.integer("max_queued_bytes", d.max_queued_bytes, 0, 1 << 40),
        max_queued_bytes_total=s.integer(
            "max_queued_bytes_total", d.max_queued_bytes_total, 0, 1 << 40
        ),
        max_subscriptions_per_client=s.integer(
            "max_subscriptions_per_client", d.max_subscriptions_per_client, 1, 1_000_000
        ),
        max_subscriptions_total=s.integer(
            "max_subscriptions_total", d.max_subscriptions_total, 1, 100_000_000
        ),
        connect_rate=s.number("connect_rate", d.connect_rate, 0.001, 1_000_000),
        connect_burst=s.integer("connect_burst", d.connect_burst, 1, 1_000_000),
        source_connect_share=s.number("source_connect_share", d.source_connect_share, 0.001, 1.0),
        max_connect_sources=s.integer("max_connect_sources", d.max_connect_sources, 1, 10_000_000),
        source_connection_share=s.number(
            "source_connection_share", d.source_connection_share, 0.001, 1.0
        ),
        write_buffer_high=s.integer("write_buffer_high", d.write_buffer_high, 1024, 1 << 30),
        write_buffer_low=s.integer("write_buffer_low", d.write_buffer_low, 0, 1 << 30),
        read_buffer_size=s.integer("read_buffer_size", d.read_buffer_size, 1024, 1 << 24),
        read_pool_size=s.integer("read_pool_size", d.read_pool_size, 0, 1 << 40),
        read_pool_timeout=s.number("read_pool_timeout", d.read_pool_timeout, 0.01, 3600),
        max_write_buffer_total=s.integer(
            "max_write_buffer_total", d.max_write_buffer_total, 0, 1 << 40
        ),
        decision_cache_bytes=s.integer("decision_cache_bytes", d.decision_cache_bytes, 0, 1 << 40),
        acl_cache_bytes=s.integer("acl_cache_bytes", d.acl_cache_bytes, 0, 1 << 40),
        routing_cache_bytes=s.integer("routing_cache_bytes", d.routing_cache_bytes, 0, 1 << 40),
        max_connect_packet_size=s.integer(
            "max_connect_packet_size", d.max_connect_packet_size, 64, 268_435_455
        ),
        max_connect_user_properties=s.integer(
            "max_connect_user_properties", d.max_connect_user_properties, 0, 1_000_000
        ),
        max_topic_levels=s.integer("max_topic_levels", d.max_topic_levels, 1, 65535),
        max_topic_length=s.integer("max_topic_length", d.max_topic_length, 1, 65535),
        max_retained_messages=s.integer(
            "max_retained_messages", d.max_retained_messages, 0, 100_000_000
        ),
        max_retained_bytes=s.integer("max_retained_bytes", d.max_retained_bytes, 0, 1 << 40),
        max_retained_per_client=s.integer(
            "max_retained_per_client", d.max_retained_per_client, 0, 100_000_000
        ),
        max_retained_payload=s.integer(
            "max_retained_payload", d.max_retained_payload, 0, 268_435_455
        ),
        max_tenants=s.integer("max_tenants", d.max_tenants, 0, 10_000_000),
        publish_rate=s.number("publish_rate", d.publish_rate, 0, 1e9),
        publish_burst=s.integer("publish_burst", d.publish_burst, 1, 1_000_000_000),
        publish_byte_rate=s.number("publish_byte_rate", d.publish_byte_rate, 0, 1e12),
        publish_byte_burst=s.integer("publish_byte_burst", d.publish_byte_burst, 1, 1 << 40),
        queue_overflow=s.choice("queue_overflow", d.queue_overflow, ("drop", "backpressure")),
        backpressure_timeout=s.number("backpressure_timeout", d.backpressure_timeout, 0.01, 3600),
        tenant_share=s.number("tenant_share", d.tenant_share, 0.01, 1.0),
        principal_share=s.number("principal_share", d.principal_share, 0.01, 1.0),
    )
    if limits.tenant_share < limits.principal_share < 1.0:
        s.problem(
            "principal_share",
            f"{limits.principal_share:g} is above tenant_share ({limits.tenant_share:g}): one "
            "principal could then fill its tenant's share; lower it or raise tenant_share",
        )
    if limits.write_buffer_low > limits.write_buffer_high:
        s.problem("write_buffer_low", "must not exceed write_buffer_high: lower it")
    if limits.read_pool_size < limits.max_packet_size - limits.read_buffer_size:
        s.problem(
            "read_pool_size",
            f"{limits.read_pool_size} is below max_packet_size - read_buffer_size "
            f"({limits.max_packet_size - limits.read_buffer_size}): a largest packet could "
            "never be read; raise it or lower max_packet_size",
        )
    if limits.publish_byte_rate and limits.publish_byte_burst < limits.max_packet_size:
        s.problem(
            "publish_byte_burst",
            f"{limits.publish_byte_burst} is below max_packet_size "
            f"({limits.max_packet_size}): a largest PUBLISH could never pass; raise it",
        )
    return limits


def _lowered(s: Section, name: str, default: str, choices: Sequence[str]) -> str:
    value = s.table.get(name)
    if isinstance(value, str):
        s.table = {**s.table, name: value.lower()}
    return s.choice(name, default, choices)


def parse_log(s: Section) -> LogConfig:
    return LogConfig(
        # any case: "INFO" as in Python's logging and Mosquitto's configs (issue 20)
        level=_lowered(s, "level", "info", ("debug", "info", "warning", "error")),
        format=s.choice("format", "text", ("text", "json")),
    )


def parse_sys(s: Section) -> SysConfig:
    return SysConfig(interval=s.number("interval", 10.0, 0, 86400))


def parse_topics(s: Section) -> TopicsConfig:
    return TopicsConfig(separator=s.choice("separator", "/", ("/", ".")))


def parse_persistence(s: Section) -> PersistenceConfig:
    d = PersistenceConfig()
    state_dir = s.file_path("state_dir")
    if state_dir == "":
        s.problem("state_dir", 'empty: write a directory, e.g. "/var/lib/edge-broker"')
        state_dir = None
    # Unset: on when a state directory is given — in [persistence], by systemd's StateDirectory=
    # ($STATE_DIRECTORY) or by $EDGE_BROKER_STATE_DIR (the unit sets both) — so an installed
    # gateway keeps its sessions across power cuts, while ad-hoc runs leave no state behind.
    given = bool(
        state_dir or os.environ.get("STATE_DIRECTORY") or os.environ.get("EDGE_BROKER_STATE_DIR")
    )
    return PersistenceConfig(
        enabled=s.boolean("enabled", given),
        state_dir=state_dir,
        durability=s.choice("durability", d.durability, ("sync", "interval", "none")),
        interval_ms=s.integer("interval_ms", d.interval_ms, 1, 60_000),
        compact_min_bytes=s.integer("compact_min_bytes", d.compact_min_bytes, 4096, 1 << 34),
        on_damage=s.choice("on_damage", d.on_damage, ("refuse", "set-aside")),
    )


SECTION_PARSERS: Mapping[str, Callable[[Section], Any]] = {
    "broker": parse_broker,
    "limits": parse_limits,
    "log": parse_log,
    "sys": parse_sys,
    "topics": parse_topics,
    "claims": parse_claims,
    "tokens": parse_tokens,
    "audit": parse_audit,
    "passwords": parse_passwords,
    "persistence": parse_persistence,
    "metrics": parse_metrics,
    "admin": parse_admin,
    "sync": parse_sync,
}
"""Single-table sections; ``listeners`` (an array of tables) is handled by :func:`parse_config`."""


def parse_config(data: Mapping[str, Any], file: str = EMBEDDED_FILE) -> Config:
    """Build a :class:`Config` from parsed TOML; raise one ConfigError carrying every problem."""
    problems: list[ConfigError] = []
    values: dict[str, Any] = {}
    for name, parser in SECTION_PARSERS.items():
        raw = data.get(name, {})
        if not isinstance(raw, dict):
            problems.append(ConfigError(file, name, f"expected a table: write [{name}]"))
            raw = {}
        section = Section(file, name, raw, problems)
        values[name] = parser(section)
        section.finish()
    raw_listeners = data.get("listeners")
    if raw_listeners is not None:
        if not isinstance(raw_listeners, list) or not all(
            isinstance(t, dict) for t in raw_listeners
        ):
            problems.append(
                ConfigError(file, "listeners", "expected an array of tables: write [[listeners]]")
            )
        else:
            listeners = []
            for i, table in enumerate(raw_listeners):
                section = Section(file, f"listeners[{i}]", table, problems)
                listeners.append(parse_listener(section, i))
                section.finish()
            names = [lc.name for lc in listeners]
            for i, lname in enumerate(names):
                if names.index(lname) != i:
                    problems.append(
                        ConfigError(
                            file,
                            f"listeners[{i}].name",
                            f"{lname!r} is used twice: give each a unique name",
                        )
                    )
            if not listeners:
                problems.append(
                    ConfigError(file, "listeners", "no listener: add a [[listeners]] table")
                )
            values["listeners"] = tuple(listeners)
    tokens = values["tokens"]
    for i, lc in enumerate(values.get("listeners", ())):
        if "token" in lc.auth_methods and not tokens.keys and tokens.jwks is None:
            problems.append(
                ConfigError(
                    file,
                    f"listeners[{i}].auth_methods",
                    'the token method needs keys: add [[tokens.keys]] file = "/path/key.pem" '
                    'or [tokens] jwks = "/path/jwks.json"',
                )
            )
    separator = values["topics"].separator
    raw_permissions = data.get("permissions")
    if raw_permissions is not None:
        if not isinstance(raw_permissions, dict):
            problems.append(
                ConfigError(file, "permissions", "expected a table: write [permissions]")
            )
        else:
            try:
                values["permissions"] = parse_permissions_config(raw_permissions, separator)
            except PermissionConfigError as exc:
                for problem in exc.problems:  # every one, as the README promises
                    key, _, message = problem.partition(": ")
                    problems.append(ConfigError(file, key, message or problem))
    raw_authorizers = data.get("authorizers")
    if raw_authorizers is not None:
        if not isinstance(raw_authorizers, list):
            problems.append(
                ConfigError(
                    file, "authorizers", "expected an array of tables: write [[authorizers]]"
                )
            )
        else:
            try:
                specs = parse_authorizer_specs(raw_authorizers, file)
                for i, spec in enumerate(specs):
                    check_authorizer_class(
                        load_class(spec.class_path, f"{file}: authorizers[{i}].class"),
                        spec,
                        f"{file}: authorizers[{i}].class",
                    )
                values["authorizers"] = tuple(specs)
            except AuthorizerConfigError as exc:
                where, _, message = str(exc).partition(": ")
                key, _, message2 = message.partition(": ")
                problems.append(ConfigError(file, key, message2 or message))
    for i, lc in enumerate(values.get("listeners", ())):
        if "password" in lc.auth_methods and values["passwords"].file is None:
            problems.append(
                ConfigError(
                    file,
                    f"listeners[{i}].auth_methods",
                    "the password method needs a password file: add [passwords] file = "
                    '"/etc/edge-broker/passwd" '
                    "(create it with `edge-broker passwd add FILE USER`)",
                )
            )
        if "certificate" in lc.auth_methods and not (lc.transport == "tls" or lc.websocket_tls):
            problems.append(
                ConfigError(
                    file,
                    f"listeners[{i}].auth_methods",
                    "the certificate method needs a TLS listener with tls_ca and "
                    "require_client_cert = true",
                )
            )
    raw_acl = data.get("acl")
    if raw_acl is not None:
        if not isinstance(raw_acl, dict):
            problems.append(ConfigError(file, "acl", "expected a table: write [acl]"))
        else:
            from ..authz.acl_settings import AclSettingsError, load_acl_section

            try:
                values["acl"] = load_acl_section(raw_acl, file)
            except AclSettingsError as exc:
                problems.extend(ConfigError(file, key, message) for key, message in exc.problems)
    if data.get("bridges") is not None:  # issue 19: cloud bridges
        from .bridges import parse_bridges

        values["bridges"] = parse_bridges(data["bridges"], file, problems)
    from .preflight import address_conflicts

    problems.extend(
        ConfigError(file, key, message)
        for key, message in address_conflicts(
            values.get("listeners", _default_listeners()), values["metrics"], values["admin"]
        )
    )
    admin_users = values["admin"].users_file
    if admin_users is not None and admin_users == values["passwords"].file:
        problems.append(
            ConfigError(
                file,
                "admin.users_file",
                "is the MQTT password file: admin users need their own file "
                "(edge-broker admin add ADMIN-FILE USER --role viewer|operator)",
            )
        )
    known = {*SECTION_PARSERS, "listeners", "permissions", "authorizers", "acl", "bridges"}
    for name in data:
        if name not in known:
            problems.append(ConfigError(file, name, unknown_name("section", name, known)))
    if problems:
        raise ConfigError(problems[0].file, problems[0].key, problems[0].message, problems[1:])
    return Config(file=file, **values)


def load_config(path: str | Path | None) -> Config:
    """Read a TOML file (``None``: the embedded default, 127.0.0.1:1883, anonymous on loopback)."""
    if path is None:  # the console on loopback with a one-time login link, never a password
        return Config(admin=AdminConfig(enabled=True, one_time_login=True))
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(file, "(file)", f"cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(file, "(file)", "not UTF-8: save the file as UTF-8") from exc
    return loads_config(text, file)


def loads_config(text: str, file: str = "<string>") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "(syntax)", f"invalid TOML: {exc}") from exc
    return parse_config(data, file)

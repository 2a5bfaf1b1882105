"""``[metrics]`` and ``[sync]`` configuration sections (issue 9; DESIGN.md "gateway operations",
"cloud policy sync").

``[metrics]``: a Prometheus text endpoint, off by default, loopback by default::

    [metrics]
    enabled = true
    bind = "127.0.0.1"
    port = 9883

``[sync]``: signed policy bundles from the cloud and the audit upload::

    [sync]
    gateway_id = "gw-0042"
    trusted_keys = ["/etc/edge-broker/cloud.pub"]
    source = "mqtt"              # or "directory" (then: directory = "/path")
    host = "cloud.example.com"
    port = 8883
    tls = true                   # ca / cert / key: PEM files
    username = "gw-0042"
    password = "..."
    audit_upload = true          # publish [audit] batches to edge/<gateway>/audit

Both parsers record problems on the :class:`~edge_broker.config_section.Section` (naming the key and
what to write), like every other section.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config_section import Section

SYNC_SOURCES = ("none", "mqtt", "directory")


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    enabled: bool = False
    bind: str = "127.0.0.1"
    port: int = 9883
    max_connections: int = 8  # HTTP connections at once (a scraper needs one)
    request_timeout: float = 10.0  # seconds for a whole request to arrive (slowloris)


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """``[admin]``: the admin API and console (docs/admin-api.md)."""

    enabled: bool = False
    bind: str = "127.0.0.1"
    port: int = 9884
    users_file: str | None = None  # admin users (edge-broker admin add), never the MQTT file
    tls_cert: str | None = None  # HTTPS with these PEM files (as a listener's tls_cert/tls_key)
    tls_key: str | None = None
    one_time_login: bool = False  # print a one-time login link at start (embedded default: on)
    max_connections: int = 16
    request_timeout: float = 10.0
    idle_timeout: float = 30.0
    max_body_bytes: int = 64 * 1024
    session_ttl: float = 8 * 3600.0
    max_sessions: int = 64


@dataclass(frozen=True, slots=True)
class SyncConfig:
    source: str = "none"  # "none": no sync at all
    gateway_id: str = ""
    trusted_keys: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 1883
    tls: bool = False
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    username: str | None = None
    password: str | None = None
    client_id: str | None = None  # default: edge-broker-<gateway_id>
    keepalive: int = 30
    reconnect_max: float = 30.0  # seconds between reconnect attempts, at most
    directory: str | None = None
    poll_interval: float = 2.0  # directory source: seconds between looks
    state_dir: str | None = None  # default: <broker state dir>/sync
    audit_upload: bool = True  # with source = "mqtt" and [audit] dir
    audit_batch: int = 200  # records per batch at most

    @property
    def enabled(self) -> bool:
        return self.source != "none"


def parse_admin(s: Section) -> AdminConfig:
    d = AdminConfig()
    config = AdminConfig(
        enabled=s.boolean("enabled", d.enabled),
        bind=s.string("bind", d.bind),
        port=s.integer("port", d.port, 0, 65535),
        users_file=s.resolve(s.optional_string("users_file")),
        tls_cert=s.file_path("tls_cert"),
        tls_key=s.file_path("tls_key"),
        one_time_login=s.boolean("one_time_login", d.one_time_login),
        max_connections=s.integer("max_connections", d.max_connections, 1, 4096),
        request_timeout=s.number("request_timeout", d.request_timeout, 0.1, 3600.0),
        idle_timeout=s.number("idle_timeout", d.idle_timeout, 0.1, 3600.0),
        max_body_bytes=s.integer("max_body_bytes", d.max_body_bytes, 1024, 16 * 1024 * 1024),
        session_ttl=s.number("session_ttl", d.session_ttl, 60.0, 30 * 86400.0),
        max_sessions=s.integer("max_sessions", d.max_sessions, 1, 10_000),
    )
    if (config.tls_cert is None) != (config.tls_key is None):
        s.problem("tls_cert", "HTTPS needs both tls_cert and tls_key: set both or neither")
    if config.enabled and config.users_file is None and not config.one_time_login:
        s.problem(
            "users_file",
            "nobody could log in: set users_file (edge-broker admin add FILE USER --role "
            "operator) or one_time_login = true",
        )
    return config


def parse_metrics(s: Section) -> MetricsConfig:
    d = MetricsConfig()
    return MetricsConfig(
        enabled=s.boolean("enabled", d.enabled),
        bind=s.string("bind", d.bind),
        port=s.integer("port", d.port, 0, 65535),
        max_connections=s.integer("max_connections", d.max_connections, 1, 1024),
        request_timeout=s.number("request_timeout", d.request_timeout, 0.1, 3600.0),
    )


def _file(s: Section, name: str) -> str | None:
    path = s.file_path(name)  # relative: from the config file's folder
    if path is not None and not Path(path).is_file():
        s.problem(name, f"{path!r} is not a readable file: write the path of a PEM file")
    return path


def parse_sync(s: Section) -> SyncConfig:
    d = SyncConfig()
    source = s.choice("source", d.source, SYNC_SOURCES)
    gateway_id = s.string("gateway_id", "")
    raw_keys: list[object] = s.get("trusted_keys", [], list, "a list of public key files")
    keys: list[str] = []
    for i, item in enumerate(raw_keys):
        if isinstance(item, str):
            item = s.resolve(item)
        if not isinstance(item, str) or not Path(item).is_file():
            s.problem(
                f"trusted_keys[{i}]",
                f"{item!r} is not a readable file: write the path of "
                "the cloud's Ed25519 public key (`edge-broker bundle keygen` writes one)",
            )
        else:
            keys.append(item)
    config = SyncConfig(
        source=source,
        gateway_id=gateway_id,
        trusted_keys=tuple(keys),
        host=s.string("host", d.host),
        port=s.integer("port", d.port, 1, 65535),
        tls=s.boolean("tls", d.tls),
        ca=_file(s, "ca"),
        cert=_file(s, "cert"),
        key=_file(s, "key"),
        username=s.optional_string("username"),
        password=s.optional_string("password"),
        client_id=s.optional_string("client_id"),
        keepalive=s.integer("keepalive", d.keepalive, 5, 3600),
        reconnect_max=s.number("reconnect_max", d.reconnect_max, 0.1, 3600.0),
        directory=s.file_path("directory"),
        poll_interval=s.number("poll_interval", d.poll_interval, 0.05, 3600.0),
        state_dir=s.file_path("state_dir"),
        audit_upload=s.boolean("audit_upload", d.audit_upload),
        audit_batch=s.integer("audit_batch", d.audit_batch, 1, 100_000),
    )
    if source != "none":
        if not gateway_id:
            s.problem(
                "gateway_id",
                'missing: write the gateway id bundles are addressed to, e.g. "gw-0042"',
            )
        elif any(c in gateway_id for c in "/+#\0"):
            s.problem(
                "gateway_id", f"{gateway_id!r} must not contain '/', '+', '#': it is a topic level"
            )
        if not raw_keys:
            s.problem(
                "trusted_keys",
                'missing: write the cloud public key files, e.g. ["/etc/edge-broker/cloud.pub"]',
            )
    if source == "directory" and not config.directory:
        s.problem(
            "directory",
            'source = "directory" needs a directory: write directory = "/path/to/bundles"',
        )
    if (config.cert is None) != (config.key is None):
        s.problem(
            "cert" if config.cert is None else "key",
            "cert and key go together: write both or neither",
        )
    return config

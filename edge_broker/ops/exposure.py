"""Warnings of ``edge-broker check`` and ``lint`` about what a config exposes.

- Secrets readable by others: the password file, TLS private keys (listeners, ``[sync]``,
  bridges), token key files that are not public keys, a bridge's token file, and the config
  file itself when it holds a password or an HS256 secret. A file is fine when only its owner
  and the service's group may read it (``root:edge-broker 0640`` as the installer writes them):
  readable by every user, or by another group, is a warning naming the file and the ``chmod``.
- HTTP endpoints on a non-loopback address: ``[metrics]`` (metrics, ``/healthz``, ``/readyz``)
  has neither TLS nor authentication, so anyone who reaches the address reads the broker's
  client counts, bridge errors and policy status.

Warnings, not errors: the broker runs either way, and a lab bench may want it so.
"""

from __future__ import annotations

import grp
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.preflight import is_loopback

if TYPE_CHECKING:
    from ..config import Config

SERVICE_GROUP = "edge-broker"  # scripts/install.sh and the unit's Group=


def _service_gids() -> set[int]:
    gids = {0, os.getgid()}  # root's group; the group `check` runs as (ExecStartPre: the unit's)
    try:
        gids.add(grp.getgrnam(SERVICE_GROUP).gr_gid)
    except KeyError:
        pass
    return gids


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def readable_by_others(path: str) -> str | None:
    """Who besides the owner and the service's group may read ``path`` (None: nobody)."""
    try:
        info = os.stat(path)
    except OSError:  # a missing or unreadable file is an error reported elsewhere
        return None
    mode = stat.S_IMODE(info.st_mode)
    if mode & stat.S_IROTH:
        return f"every user (mode {mode:04o})"
    if mode & stat.S_IRGRP and info.st_gid not in _service_gids():
        return f"the group {_group_name(info.st_gid)} (mode {mode:04o})"
    return None


def _is_public_key(path: str) -> bool:
    try:
        head = Path(path).read_bytes()[:4096]
    except OSError:
        return False
    return b"PUBLIC KEY-----" in head or b"BEGIN CERTIFICATE" in head


def _secret_files(config: Config) -> Iterator[tuple[str, str, str]]:
    """(config key, path, what it is) of every secret file the config names."""
    if config.passwords.file is not None:
        yield "passwords.file", config.passwords.file, "password hashes"
    for i, listener in enumerate(config.listeners):
        if listener.tls_key is not None:
            yield f"listeners[{i}].tls_key", listener.tls_key, "a TLS private key"
    for i, key in enumerate(config.tokens.keys):
        if key.file is not None and not _is_public_key(key.file):
            yield f"tokens.keys[{i}].file", key.file, "a token signing key"
    if config.sync.key is not None:
        yield "sync.key", config.sync.key, "a TLS private key"
    for i, bridge in enumerate(config.bridges):
        if bridge.tls_key is not None:
            yield f"bridges[{i}].tls_key", bridge.tls_key, "a TLS private key"
        if bridge.token_file is not None:
            yield f"bridges[{i}].token_file", bridge.token_file, "a bearer token"


def _inline_secrets(config: Config) -> list[str]:
    keys = [f"tokens.keys[{i}].secret" for i, k in enumerate(config.tokens.keys) if k.secret]
    if config.sync.password:
        keys.append("sync.password")
    keys += [f"bridges[{i}].password" for i, b in enumerate(config.bridges) if b.password]
    return keys


def exposure_warnings(config: Config) -> list[str]:
    """Every warning of the module docstring, each naming the file or key and what to change."""
    warnings = []
    for key, path, what in _secret_files(config):
        who = readable_by_others(path)
        if who is not None:
            warnings.append(
                f"{config.file}: {key}: {path} holds {what} and is readable by {who}: "
                f"chmod 0640 {path} (owner root, group {SERVICE_GROUP}) or 0600"
            )
    inline = _inline_secrets(config)
    if inline and not config.file.startswith("<"):
        who = readable_by_others(config.file)
        if who is not None:
            warnings.append(
                f"{config.file}: holds secrets ({', '.join(inline)}) and is readable by {who}: "
                f"chmod 0640 {config.file} (owner root, group {SERVICE_GROUP})"
            )
    metrics = config.metrics
    if metrics.enabled and not is_loopback(metrics.bind):
        warnings.append(
            f"{config.file}: metrics.bind: [metrics] serves /metrics, /healthz and /readyz on "
            f"{metrics.bind or '*'}:{metrics.port} without TLS or authentication: anyone who "
            'reaches it reads the broker\'s state; bind "127.0.0.1" and scrape through an SSH '
            "tunnel or a TLS proxy, or firewall the port"
        )
    return warnings

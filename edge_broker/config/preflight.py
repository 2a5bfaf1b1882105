"""What would stop ``edge-broker run`` after the configuration parsed, found beforehand (issue
20): ``edge-broker check`` is the unit's ``ExecStartPre``, so everything here is a config
problem with the file, the key and what to write, never an error at bind or handshake time.

- :func:`address_conflicts`: two listeners, or a listener and ``[metrics]``, that would bind
  the same address and port (``0.0.0.0`` covers every IPv4 address, ``::`` every IPv6 one; the
  listeners set ``IPV6_V6ONLY``, as asyncio does, so ``::`` and ``0.0.0.0`` do not collide).
- :func:`tls_problem`: a certificate and key that ``ssl`` would refuse — unreadable, a
  certificate given as the key, a key of another certificate, an encrypted key.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Protocol

from ..tls import refuse_key_password
from .service import AdminConfig, MetricsConfig


class BoundListener(Protocol):
    """What :func:`address_conflicts` reads of a listener (``config.ListenerConfig`` is one):
    named here so that this check, which ``config/__init__.py`` runs, does not import it back."""

    @property
    def name(self) -> str: ...
    @property
    def bind(self) -> str: ...
    @property
    def port(self) -> int: ...


Address = tuple[int, str]  # (IP version, address text)


def _addresses(bind: str) -> tuple[Address, ...]:
    if bind == "":  # every interface, both families
        return ((4, "0.0.0.0"), (6, "::"))
    if bind == "localhost":
        return ((4, "127.0.0.1"), (6, "::1"))
    try:
        ip = ipaddress.ip_address(bind)
    except ValueError:
        return ()
    return ((ip.version, str(ip)),)


def _overlap(a: Sequence[Address], b: Sequence[Address]) -> bool:
    wildcard = {4: "0.0.0.0", 6: "::"}
    return any(va == vb and (xa == xb or wildcard[va] in (xa, xb)) for va, xa in a for vb, xb in b)


def address_conflicts(
    listeners: Sequence[BoundListener], metrics: MetricsConfig, admin: AdminConfig | None = None
) -> list[tuple[str, str]]:
    """(key, message) for every socket that another one before it would already hold."""
    sockets = [
        (f"listeners[{i}].port", f"listener {lc.name!r}", lc.bind, lc.port)
        for i, lc in enumerate(listeners)
    ]
    if metrics.enabled:
        sockets.append(("metrics.port", "[metrics]", metrics.bind, metrics.port))
    if admin is not None and admin.enabled:
        sockets.append(("admin.port", "[admin]", admin.bind, admin.port))
    problems: list[tuple[str, str]] = []
    for i, (key, what, bind, port) in enumerate(sockets):
        if port == 0:  # the kernel picks a free port
            continue
        for _, other, other_bind, other_port in sockets[:i]:
            if other_port == port and _overlap(_addresses(bind), _addresses(other_bind)):
                problems.append(
                    (
                        key,
                        f"{what} on {bind or '*'}:{port} collides with {other} on "
                        f"{other_bind or '*'}:{other_port}: give it another port or address",
                    )
                )
                break
    return problems


def is_loopback(bind: str) -> bool:
    """True when only this machine can reach ``bind`` (``localhost`` or a loopback address)."""
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind).is_loopback
    except ValueError:
        return False


def tls_problem(cert: str, key: str, ca: str | None) -> tuple[str, str] | None:
    """(key name, message) when ``ssl`` would not load this certificate and key, else None."""
    import ssl

    try:
        with open(key, "rb") as handle:
            key_text = handle.read()
    except PermissionError:
        return (
            "tls_key",
            f"cannot read {key!r} (permission denied) as this user: make it readable "
            "by the service's group: chgrp edge-broker FILE; chmod 0640 FILE",
        )
    except OSError as exc:
        return ("tls_key", f"cannot read {key!r}: {exc.strerror}")
    try:
        with open(cert, "rb") as handle:
            handle.read(1)
    except OSError as exc:
        return (
            "tls_cert",
            f"cannot read {cert!r}: {exc.strerror}: make it readable by the service user",
        )
    if b"PRIVATE KEY-----" not in key_text:
        what = "a certificate" if b"BEGIN CERTIFICATE" in key_text else "not a PEM private key"
        return (
            "tls_key",
            f"{key!r} is {what}: write the path of the certificate's private key "
            "(a PEM file with BEGIN PRIVATE KEY)",
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(cert, key, password=refuse_key_password)
    except ValueError:
        return (
            "tls_key",
            f"{key!r} is encrypted: the broker starts unattended, so store it "
            "decrypted and readable only by root and the group edge-broker "
            "(openssl pkey -in KEY -out PLAIN.key)",
        )
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            return (
                "tls_key",
                f"{key!r} is not the key of the certificate {cert!r}: give the key the "
                "certificate was issued for (compare `openssl x509 -noout -pubkey -in CERT` "
                "with `openssl pkey -pubout -in KEY`)",
            )
        if b"BEGIN CERTIFICATE" not in open(cert, "rb").read():
            return (
                "tls_cert",
                f"{cert!r} is not a PEM certificate: write the path of the server's "
                "certificate (BEGIN CERTIFICATE)",
            )
        return (
            "tls_key",
            f"the certificate {cert!r} and key {key!r} cannot be loaded ({exc.reason or exc}): "
            "check that both are PEM and belong together",
        )
    if ca is not None:
        try:
            ctx.load_verify_locations(ca)
        except (ssl.SSLError, OSError) as exc:
            return (
                "tls_ca",
                f"{ca!r} is not a readable PEM CA bundle ({exc}): write the path of the "
                "CA certificates that sign client certificates",
            )
    return None

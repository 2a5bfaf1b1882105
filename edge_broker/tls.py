"""TLS contexts, built in one place: the listeners' server context (optional or required
client certificates) and the client context of the uplinks (bridges to a remote broker, policy
sync's cloud connection). Only the standard library's ``ssl``.
"""

from __future__ import annotations

import ssl


def refuse_key_password() -> bytes:
    """The password callback of every ``load_cert_chain``: an encrypted key would make OpenSSL
    prompt on a terminal a service does not have."""
    raise ValueError(
        "the TLS key is encrypted: store it decrypted, readable by root and group edge-broker"
    )


def load_server_files(ctx: ssl.SSLContext, cert: str, key: str, ca: str | None) -> None:
    """Load a listener's certificate, key and (for client certificates) CA files into ``ctx``."""
    ctx.load_cert_chain(cert, key, password=refuse_key_password)
    if ca is not None:
        ctx.load_verify_locations(ca)


def server_context(
    cert: str, key: str, ca: str | None, require_client_cert: bool
) -> ssl.SSLContext:
    """A server context from PEM files; with a CA, client certificates are asked for
    (optional, or required with ``require_client_cert``) and verified against it."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_server_files(ctx, cert, key, ca)
    if ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_context(
    ca: str | None, cert: str | None, key: str | None, verify_hostname: bool = True
) -> ssl.SSLContext:
    """Verify the remote against ``ca`` (the system CAs when None) and, with
    ``verify_hostname``, its name; present ``cert``/``key`` when given (mutual
    authentication); TLS 1.2 at least. Raises OSError/ssl.SSLError."""
    context = ssl.create_default_context(cafile=ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = verify_hostname
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context

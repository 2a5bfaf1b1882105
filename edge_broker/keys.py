"""Ed25519 key files shared by every signing tool (policy bundles, SMOKER devices, tokens).

Private keys are written as PKCS#8 PEM (``-----BEGIN PRIVATE KEY-----``), which OpenSSL, PyJWT
and the ``cryptography`` package all read; public keys as SubjectPublicKeyInfo PEM. For
convenience the loaders also accept a file holding 64 hex digits (a raw 32-byte seed or public
key), the form small devices store.
"""

from __future__ import annotations

import os
from pathlib import Path

import nacl.signing
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey


class KeyFileError(Exception):
    """A key file that is missing, unreadable or not an Ed25519 key."""


def _read(path: str | os.PathLike[str]) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read key file: {exc.strerror or exc}") from exc


def _hex32(data: bytes) -> bytes | None:
    text = data.strip()
    if len(text) == 64:
        try:
            return bytes.fromhex(text.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            return None
    return None


def load_signing_key(path: str | os.PathLike[str]) -> nacl.signing.SigningKey:
    data = _read(path)
    seed = _hex32(data)
    if seed is not None:
        return nacl.signing.SigningKey(seed)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(
            f"{path}: not an Ed25519 private key (expected PKCS#8 PEM or 64 hex digits); "
            "make one with `edge-broker keygen`"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: the key is {type(key).__name__}, not Ed25519")
    raw = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return nacl.signing.SigningKey(raw)


def load_verify_key(path: str | os.PathLike[str]) -> nacl.signing.VerifyKey:
    """A public key file, or a private key file (its public half is used)."""
    data = _read(path)
    raw = _hex32(data)
    if raw is not None:
        return nacl.signing.VerifyKey(raw)
    if b"PRIVATE KEY" in data:
        return load_signing_key(path).verify_key
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(
            f"{path}: not an Ed25519 public key (expected PEM or 64 hex digits)"
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path}: the key is {type(key).__name__}, not Ed25519")
    return nacl.signing.VerifyKey(
        key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )


def signing_key_pem(key: nacl.signing.SigningKey) -> bytes:
    private = Ed25519PrivateKey.from_private_bytes(bytes(key))
    return private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def verify_key_pem(key: nacl.signing.VerifyKey) -> bytes:
    public = Ed25519PublicKey.from_public_bytes(bytes(key))
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def write_signing_key(
    path: str | os.PathLike[str], key: nacl.signing.SigningKey, *, overwrite: bool = False
) -> None:
    """Write a private key as PEM with mode 0600; refuses to overwrite unless asked."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if overwrite else os.O_EXCL)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError as exc:
        raise KeyFileError(
            f"{path}: exists; refusing to overwrite a key (remove it first)"
        ) from exc
    with os.fdopen(fd, "wb") as handle:
        handle.write(signing_key_pem(key))


def write_verify_key(path: str | os.PathLike[str], key: nacl.signing.VerifyKey) -> None:
    Path(path).write_bytes(verify_key_pem(key))

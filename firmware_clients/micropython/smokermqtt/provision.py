"""The device's files, written on the host and flashed with the firmware (README "Provision").

A device directory holds:
- ``device.key``: the 32-byte Ed25519 seed, raw, as 64 hex characters (whitespace ignored), or
  as the PKCS#8 PEM that edge_broker/keys.py writes;
- ``config.json``: ``{"client_id": "<SMOKER ID>", "host": "...", "port": 1883, ...}``, see
  CONFIG_KEYS for everything a device reads;
- ``claims/``: optional pre-signed claim payloads (``edge-broker claim sign``), one per file,
  sent once at first boot.
Every error names the file and the key to fix.
"""

import binascii
import json
import os

from smokermqtt import ids
from smokermqtt.ed25519 import SigningKey

try:  # type names for the host's checkers; MicroPython ignores annotations
    from collections.abc import Callable
    from typing import Any

    from smokermqtt.client import MQTTClient
except Exception:  # no typing module on the board (or a stub without these)
    pass

KEY_FILE = "device.key"
CONFIG_FILE = "config.json"
CLAIMS_DIR = "claims"
CLAIMED_FILE = "claimed.txt"  # names of claim files the broker accepted (0x00)

# key -> (types allowed, default; None = required)
CONFIG_KEYS: "dict[str, tuple[tuple[type, ...], Any]]" = {
    "client_id": ((str,), None),
    "host": ((str,), None),
    "port": ((int,), 1883),
    "keepalive": ((int,), 60),
    "session_expiry": ((int,), 0),
    "clean_start": ((bool,), True),
    "timeout_ms": ((int,), 10000),
    "backoff_base_ms": ((int,), 1000),
    "backoff_max_ms": ((int,), 60000),
    "max_packet_size": ((int,), 16384),
    "publish_interval_ms": ((int,), 10000),
    "topic": ((str,), "telemetry"),
    "wifi": ((dict,), {}),
}


class ProvisionError(ValueError):
    """A device file is missing or wrong; the message names the file and what to change."""


def _join(*parts: str) -> str:
    return "/".join(p.rstrip("/") for p in parts if p)


# DER of PKCS#8 PrivateKeyInfo for Ed25519 (RFC 8410 §7) up to the 32-byte seed
_PKCS8_ED25519 = b"\x30\x2e\x02\x01\x00\x30\x05\x06\x03\x2b\x65\x70\x04\x22\x04\x20"
_PEM_BEGIN = b"-----BEGIN PRIVATE KEY-----"
_PEM_END = b"-----END PRIVATE KEY-----"


def _seed_from_pem(raw: bytes, path: str) -> bytes:
    body = raw.split(_PEM_BEGIN, 1)[1].split(_PEM_END, 1)[0]
    try:
        der = binascii.a2b_base64(bytes(b for b in body if b not in b" \t\r\n"))
    except ValueError:
        der = b""
    if len(der) != 48 or der[:16] != _PKCS8_ED25519:
        raise ProvisionError("%s: the PEM private key is not an Ed25519 PKCS#8 key" % path)
    return der[16:]


def read_seed(path: str) -> bytes:
    """The 32-byte seed in ``path`` (raw bytes, 64 hex characters or PKCS#8 PEM)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        raise ProvisionError(
            "%s: cannot read the device key; run `edge-broker keygen --device "
            "DIR` on the host and copy DIR to the board" % path
        ) from None
    if len(raw) == 32:
        return raw
    if _PEM_BEGIN in raw:
        return _seed_from_pem(raw, path)
    text = bytes(b for b in raw if b not in b" \t\r\n")
    if len(text) == 64:
        try:
            return binascii.unhexlify(text)
        except ValueError:
            pass
    raise ProvisionError(
        "%s: a device key is 32 raw bytes, 64 hex characters or a PKCS#8 PEM, "
        "found %d bytes of something else" % (path, len(raw))
    )


def read_config(path: str) -> "dict[str, Any]":
    """config.json with every key of CONFIG_KEYS checked and defaults filled in."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError:
        raise ProvisionError("%s: cannot read the device config" % path) from None
    except ValueError as exc:
        raise ProvisionError("%s: not valid JSON (%s)" % (path, exc)) from None
    if not isinstance(data, dict):
        raise ProvisionError("%s: must hold a JSON object" % path)
    config: dict[str, Any] = {}
    for key, (types, default) in CONFIG_KEYS.items():
        if key not in data:
            if default is None:
                raise ProvisionError("%s: key %r is required" % (path, key))
            config[key] = default
            continue
        value = data[key]
        ok = isinstance(value, types) and not (types == (int,) and isinstance(value, bool))
        if not ok:
            raise ProvisionError(
                "%s: key %r must be %s, got %r" % (path, key, types[0].__name__, value)
            )
        config[key] = value
    for key in data:
        if key not in CONFIG_KEYS:
            config[key] = data[key]  # extra keys are the application's (e.g. "username")
    if not 0 < config["port"] < 65536:
        raise ProvisionError("%s: key 'port' must be 1..65535, got %r" % (path, config["port"]))
    return config


class Device:
    """Everything provisioned on one device: key, config and pre-signed claims."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.signing_key = SigningKey(read_seed(_join(directory, KEY_FILE)))
        self.config = read_config(_join(directory, CONFIG_FILE))
        self.client_id = ids.client_id(self.signing_key.public_key)
        if self.config["client_id"] != self.client_id:
            raise ProvisionError(
                "%s: key 'client_id' is %r but device.key belongs to %r; "
                "copy both files from the same keygen run"
                % (_join(directory, CONFIG_FILE), self.config["client_id"], self.client_id)
            )

    def claim_files(self) -> "list[str]":
        """Names of the pre-signed claim files, sorted."""
        try:
            names = os.listdir(_join(self.directory, CLAIMS_DIR))
        except OSError:
            return []
        return sorted(n for n in names if n.endswith(".json"))

    def read_claim(self, name: str) -> bytes:
        """A pre-signed claim payload, without the trailing newline `claim sign` writes."""
        with open(_join(self.directory, CLAIMS_DIR, name), "rb") as f:
            return f.read().strip()

    def claimed(self) -> "list[str]":
        """Claim files the broker already accepted (one name per line in claimed.txt)."""
        try:
            with open(_join(self.directory, CLAIMED_FILE)) as f:
                return [line.strip() for line in f if line.strip()]
        except OSError:
            return []

    def mark_claimed(self, name: str) -> None:
        with open(_join(self.directory, CLAIMED_FILE), "a") as f:
            f.write(name + "\n")

    def client(
        self, callback: "Callable[[str, bytes], None] | None" = None, **overrides: "Any"
    ) -> "MQTTClient":
        """An MQTTClient configured from config.json (keyword arguments override it)."""
        from smokermqtt.client import MQTTClient

        c = self.config
        kwargs: dict[str, Any] = {
            "host": c["host"],
            "port": c["port"],
            "signing_key": self.signing_key,
            "keepalive": c["keepalive"],
            "clean_start": c["clean_start"],
            "session_expiry": c["session_expiry"],
            "max_packet_size": c["max_packet_size"],
            "timeout_ms": c["timeout_ms"],
            "backoff_base_ms": c["backoff_base_ms"],
            "backoff_max_ms": c["backoff_max_ms"],
            "callback": callback,
        }
        kwargs.update(overrides)
        return MQTTClient(**kwargs)

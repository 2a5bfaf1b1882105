"""MQTT 3.1.1 device loop for boards without Ed25519: umqtt.simple with a password or a token.

The broker's password and token methods take the secret in the CONNECT password field; a token
(a JWT from `edge-broker token`) is flashed as a file so it can be replaced without touching the
code. Readings go to ``<topic_prefix>/<client_id>/telemetry``; commands arrive on
``<topic_prefix>/<client_id>/cmd``. Failures reconnect with exponential backoff and jitter.

config.json keys: client_id, host, port (1883), username, and password or token_file,
keepalive (60), publish_interval_ms (10000), topic_prefix ("devices"), wifi.
"""

import json
import random

try:
    import utime as time
except ImportError:
    import time

from umqtt.simple import MQTTClient, MQTTException

try:  # type names for the host's checkers; MicroPython ignores annotations
    from collections.abc import Callable
    from typing import Any
except Exception:  # no typing module on the board
    pass

_REQUIRED = ("client_id", "host")
# what umqtt.simple raises when the connection or the broker's answer goes wrong
FAILURES = (OSError, IndexError, AssertionError, MQTTException)


class ConfigError(ValueError):
    """config.json is missing something; the message names the key."""


def load_config(path: str) -> "dict[str, Any]":
    """config.json as a dict with defaults; the password comes from token_file if given."""
    try:
        with open(path) as f:
            cfg = json.load(f)
    except OSError:
        raise ConfigError("%s: cannot read the device config" % path) from None
    except ValueError as exc:
        raise ConfigError("%s: not valid JSON (%s)" % (path, exc)) from None
    for key in _REQUIRED:
        if not isinstance(cfg.get(key), str) or not cfg[key]:
            raise ConfigError("%s: key %r must be a non-empty string" % (path, key))
    cfg.setdefault("port", 1883)
    cfg.setdefault("keepalive", 60)
    cfg.setdefault("publish_interval_ms", 10000)
    cfg.setdefault("topic_prefix", "devices")
    if "token_file" in cfg:
        base = path.rsplit("/", 1)[0] if "/" in path else "."
        token_path = cfg["token_file"]
        if not token_path.startswith("/"):
            token_path = base + "/" + token_path
        try:
            with open(token_path) as f:
                cfg["password"] = f.read().strip()
        except OSError:
            raise ConfigError(
                "%s: key 'token_file' names %s, which cannot be read" % (path, token_path)
            ) from None
        cfg.setdefault("username", cfg["client_id"])
    if cfg.get("password") is not None and cfg.get("username") is None:
        raise ConfigError(
            "%s: key 'username' is needed with a password (MQTT 3.1.1 §3.1.2.9)" % path
        )
    if cfg.get("username") is not None and cfg.get("password") is None:
        raise ConfigError(
            "%s: key 'username' is set, so give 'password' or 'token_file' too" % path
        )
    return cfg


def backoff_ms(attempt: int, base_ms: int = 1000, max_ms: int = 60000) -> int:
    """Exponential backoff with equal jitter: a delay in [cap/2, cap)."""
    cap = min(max_ms, base_ms << min(attempt, 20))
    return cap // 2 + (cap // 2) * random.getrandbits(16) // 65536


def make_client(cfg: "dict[str, Any]", callback: "Callable[[bytes, bytes], None]") -> MQTTClient:
    client = MQTTClient(
        cfg["client_id"],
        cfg["host"],
        port=cfg["port"],
        user=cfg.get("username"),
        password=cfg.get("password"),
        keepalive=cfg["keepalive"],
    )
    client.set_callback(callback)
    return client


def connect(
    client: MQTTClient,
    cfg: "dict[str, Any]",
    attempts: int = 0,
    base_ms: int = 1000,
    max_ms: int = 60000,
) -> None:
    """connect() and subscribe to the command topic, retried with backoff."""
    attempt = 0
    while True:
        try:
            client.connect()
            commands = "%s/%s/cmd" % (cfg["topic_prefix"], cfg["client_id"])
            client.subscribe(commands, qos=1)
            # a device on a serial console should say it is up, not stay silent
            print(
                "connected to %s:%d as %s; commands on %s"
                % (cfg["host"], cfg["port"], cfg["client_id"], commands)
            )
            return
        except FAILURES as exc:
            if client.sock is not None:
                try:
                    client.sock.close()
                except OSError:
                    pass
            attempt += 1
            if attempts and attempt >= attempts:
                raise
            print("connect failed (%r); retrying" % (exc,))
            time.sleep_ms(backoff_ms(attempt - 1, base_ms, max_ms))


def run(
    config_path: str,
    cycles: int = 0,
    on_command: "Callable[[bytes, bytes], None] | None" = None,
    base_ms: int = 1000,
) -> MQTTClient:
    """Publish readings every publish_interval_ms; ``cycles`` > 0 stops after that many."""
    cfg = load_config(config_path)
    telemetry = "%s/%s/telemetry" % (cfg["topic_prefix"], cfg["client_id"])

    def deliver(topic: bytes, msg: bytes) -> None:
        if on_command is not None:
            on_command(topic, msg)
        else:
            print("command on %s: %r" % (topic, msg))

    client = make_client(cfg, deliver)
    connect(client, cfg, base_ms=base_ms)
    seq = 0
    last_ping = time.ticks_ms()
    while not cycles or seq < cycles:
        seq += 1
        try:
            client.publish(telemetry, json.dumps({"seq": seq, "uptime_ms": time.ticks_ms()}), qos=1)
            print("published reading %d to %s" % (seq, telemetry))
            end = time.ticks_add(time.ticks_ms(), cfg["publish_interval_ms"])
            while time.ticks_diff(end, time.ticks_ms()) > 0:
                client.check_msg()
                if time.ticks_diff(time.ticks_ms(), last_ping) > cfg["keepalive"] * 500:
                    client.ping()
                    last_ping = time.ticks_ms()
                time.sleep_ms(20)
        except FAILURES as exc:
            print("connection lost (%r); reconnecting" % (exc,))
            connect(client, cfg, base_ms=base_ms)
    client.disconnect()
    return client

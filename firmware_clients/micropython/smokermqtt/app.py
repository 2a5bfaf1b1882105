"""The device application main.py runs: claim at first boot, then publish and listen for ever.

Kept apart from main.py (which brings up Wi-Fi) so that the tests run it unchanged under
CPython against a real broker.
- Pre-signed claims in ``claims/`` are sent once; accepted ones (0x00) are remembered in
  ``claimed.txt`` so a reboot does not send them again; refused ones are retried after the
  next reconnect and their reason codes are printed.
- Every ``publish_interval_ms`` a reading goes to ``restricted/<ID>/<topic>`` at QoS 1.
- Messages on ``restricted/<ID>/cmd`` (the device's own inbox) reach ``on_command``.
- Any network or MQTT failure leads to reconnect() with exponential backoff and jitter.
"""

import gc

try:
    import utime as time
except ImportError:
    import time  # type: ignore[no-redef]
try:  # type names for the host's checkers; MicroPython ignores annotations
    from collections.abc import Callable

    from smokermqtt.client import MQTTClient
except Exception:  # no typing module on the board (or a stub without these)
    pass

from smokermqtt import canonjson
from smokermqtt.packets import MQTTError
from smokermqtt.provision import Device


def claim_pending(client: "MQTTClient", device: Device) -> "dict[str, int]":
    """Send every pre-signed claim not accepted yet; returns {file name: PUBACK reason}."""
    done = device.claimed()
    answers: dict[str, int] = {}
    for name in device.claim_files():
        if name in done:
            continue
        reason = client.claim(device.read_claim(name))
        answers[name] = reason
        if reason == 0:
            device.mark_claimed(name)
        else:
            print("claim %s refused: 0x%02X %s" % (name, reason, client.last_reason_string or ""))
    return answers


def reading(seq: int) -> bytes:
    """A wiring-free reading: sequence number, uptime and free heap."""
    mem_free = getattr(gc, "mem_free", None)
    return canonjson.dumpb(
        {"seq": seq, "uptime_ms": time.ticks_ms(), "mem_free": mem_free() if mem_free else None}
    )


def run(
    directory: str,
    cycles: int = 0,
    on_command: "Callable[[str, bytes], None] | None" = None,
    read: "Callable[[int], bytes]" = reading,
    attempts: int = 0,
) -> "MQTTClient":
    """Run the device loop; ``cycles`` > 0 stops after that many readings (tests), 0 never.
    ``attempts`` bounds each reconnection (0: retry for ever, as a device should)."""
    device = Device(directory)
    cfg = device.config
    telemetry = "restricted/%s/%s" % (device.client_id, cfg["topic"])
    inbox = "restricted/%s/cmd" % device.client_id

    def deliver(topic: str, payload: bytes) -> None:
        if on_command is not None:
            on_command(topic, payload)
        else:
            print("command on %s: %r" % (topic, payload))

    client = device.client(callback=deliver)
    client.connect_with_backoff(attempts)
    claim_pending(client, device)
    client.subscribe(inbox, qos=1)
    seq = 0
    while not cycles or seq < cycles:
        seq += 1
        try:
            client.publish(telemetry, read(seq), qos=1)
            client.loop(cfg["publish_interval_ms"])
        except (OSError, MQTTError) as exc:
            print("connection lost (%s); reconnecting" % exc)
            client.reconnect(attempts)
            claim_pending(client, device)
    client.disconnect()
    return client

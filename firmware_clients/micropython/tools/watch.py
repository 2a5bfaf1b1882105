"""Host tool: subscribe as a SMOKER client and print what arrives (CPython).

    python firmware_clients/micropython/tools/watch.py WATCHER_DIR 'restricted/+/telemetry'

WATCHER_DIR comes from `edge-broker keygen --device WATCHER_DIR --host GATEWAY`: the watcher
is a SMOKER client of its own, so it sees restricted topics exactly as far as the devices'
claims allow (anonymous clients see none). Runs the firmware's client unchanged; only the
MicroPython tick functions are supplied here.
"""

import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _utime():
    """MicroPython's utime tick functions over CPython's clock, wrapping at 2**30 ms."""
    period = 1 << 30
    mod = types.ModuleType("utime")
    mod.ticks_ms = lambda: int(time.monotonic() * 1000) % period
    mod.ticks_add = lambda t, d: (t + d) % period
    mod.ticks_diff = lambda a, b: (
        ((a - b) % period) - (period if (a - b) % period >= period // 2 else 0)
    )
    mod.sleep_ms = lambda ms: time.sleep(ms / 1000)
    return mod


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.modules.setdefault("utime", _utime())
    from smokermqtt.packets import MQTTError
    from smokermqtt.provision import Device

    device = Device(sys.argv[1])
    client = device.client(callback=lambda t, p: print(t, p.decode("utf-8", "replace")))
    client.connect_with_backoff()
    print("connected as", client.client_id, file=sys.stderr)
    code = client.subscribe(sys.argv[2], qos=1)
    if code >= 0x80:
        sys.exit("SUBACK 0x%02X for %s" % (code, sys.argv[2]))
    while True:
        try:
            client.wait_msg(1000)
        except (OSError, MQTTError) as exc:
            print("reconnecting:", exc, file=sys.stderr)
            client.reconnect()


if __name__ == "__main__":
    main()

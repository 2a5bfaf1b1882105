"""Board entry point: join Wi-Fi from /device/config.json, then run smokermqtt.app.

Flash with the README's mpremote commands. Wi-Fi settings: "wifi": {"ssid": ..., "password": ...}
in config.json. Keys and claims are written on the host (README "Provision").
"""

import time

import network
from smokermqtt import app, provision

DEVICE_DIR = "/device"


def join_wifi(settings: dict, timeout_ms: int = 20000) -> None:
    wlan = network.WLAN(network.STA_IF)
    wlan.active(True)
    if not wlan.isconnected():
        if not settings.get("ssid"):
            raise provision.ProvisionError(
                '%s/config.json: key \'wifi\' needs {"ssid": ..., "password": ...}' % DEVICE_DIR
            )
        wlan.connect(settings["ssid"], settings.get("password", ""))
        start = time.ticks_ms()
        while not wlan.isconnected():
            if time.ticks_diff(time.ticks_ms(), start) > timeout_ms:
                raise OSError("Wi-Fi %r not joined within %d ms" % (settings["ssid"], timeout_ms))
            time.sleep_ms(200)
    print("Wi-Fi up:", wlan.ifconfig()[0])


config = provision.read_config(DEVICE_DIR + "/config.json")
join_wifi(config["wifi"])
app.run(DEVICE_DIR)

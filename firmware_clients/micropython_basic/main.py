"""Board entry point: join Wi-Fi from config.json, then run basic_app (README)."""

import time

import basic_app
import network

CONFIG = "/config.json"


def join_wifi(settings: dict, timeout_ms: int = 20000) -> None:
    wlan = network.WLAN(network.STA_IF)
    wlan.active(True)
    if not wlan.isconnected():
        wlan.connect(settings["ssid"], settings.get("password", ""))
        start = time.ticks_ms()
        while not wlan.isconnected():
            if time.ticks_diff(time.ticks_ms(), start) > timeout_ms:
                raise OSError("Wi-Fi %r not joined within %d ms" % (settings["ssid"], timeout_ms))
            time.sleep_ms(200)


cfg = basic_app.load_config(CONFIG)
if "wifi" not in cfg:
    raise basic_app.ConfigError('%s: key \'wifi\' needs {"ssid": ..., "password": ...}' % CONFIG)
join_wifi(cfg["wifi"])
basic_app.run(CONFIG)

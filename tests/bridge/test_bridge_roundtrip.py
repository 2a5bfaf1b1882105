"""Round trips through a bridge to Mosquitto (the Debian package) as the cloud, over loopback:
out and in, QoS 0/1/2, MQTT 3.1.1 and 5 to the remote (issue 19 "Proof")."""

from __future__ import annotations

import paho.mqtt.client as paho
import pytest
from bridge_support import Collector, gateway_toml, publish, sys_value, wait_log


def bridge(port: int, protocol: str, **extra: object) -> dict:
    return {
        "name": "cloud",
        "address": "127.0.0.1",
        "port": port,
        "protocol": protocol,
        "client_id": f"gw-0042-{protocol}",
        "topics": [
            {"direction": "out", "local": "sensors/#", "remote_prefix": "site/gw-0042/", "qos": 2},
            {"direction": "in", "local": "cmd/#", "remote_prefix": "site/gw-0042/", "qos": 2},
        ],
        **extra,
    }


@pytest.mark.parametrize("protocol", ["5", "3.1.1"])
def test_round_trip_out_and_in_every_qos(protocol, broker_factory, mosquitto_factory):
    cloud = mosquitto_factory()
    gw = broker_factory(gateway_toml([bridge(cloud.port, protocol)]))
    wait_log(gw, "bridge cloud connected")
    up = Collector(cloud.port, [("site/gw-0042/#", 2)])
    down = Collector(gw.port, [("cmd/#", 2)])
    try:
        publish(gw.port, [(f"sensors/t{q}", f"out-{q}".encode(), q) for q in (0, 1, 2)])
        publish(cloud.port, [(f"site/gw-0042/cmd/c{q}", f"in-{q}".encode(), q) for q in (0, 1, 2)])
        got_up = up.wait_for(3)
        got_down = down.wait_for(3)
    finally:
        up.close()
        down.close()
    assert sorted((t, p, q) for t, p, q, _ in got_up if "sensors" in t) == [
        ("site/gw-0042/sensors/t0", b"out-0", 0),
        ("site/gw-0042/sensors/t1", b"out-1", 1),
        ("site/gw-0042/sensors/t2", b"out-2", 2),
    ]
    assert sorted((t, p, q) for t, p, q, _ in got_down) == [
        ("cmd/c0", b"in-0", 0),
        ("cmd/c1", b"in-1", 1),
        ("cmd/c2", b"in-2", 2),
    ]
    # the remote saw the protocol the config asked for (Mosquitto logs p2 for 3.1.1), clean start 0
    level = "5" if protocol == "5" else "2"
    assert f"as gw-0042-{protocol} (p{level}, c0, k60" in cloud.log()


def test_unmapped_topics_do_not_cross(broker_factory, mosquitto_factory):
    cloud = mosquitto_factory()
    gw = broker_factory(gateway_toml([bridge(cloud.port, "5")]))
    wait_log(gw, "bridge cloud connected")
    up = Collector(cloud.port, [("#", 1)])
    down = Collector(gw.port, [("#", 1)])
    try:
        publish(gw.port, [("other/x", b"local-only", 1), ("sensors/ok", b"bridged", 1)])
        publish(
            cloud.port,
            [("site/gw-0042/other", b"cloud-only", 1), ("site/gw-0042/cmd/ok", b"in", 1)],
        )
        got_up = up.wait_for(4, 5)
        got_down = down.wait_for(4, 5)
    finally:
        up.close()
        down.close()
    assert {t for t, *_ in got_up} == {
        "site/gw-0042/other",
        "site/gw-0042/cmd/ok",
        "site/gw-0042/sensors/ok",
    }
    assert {t for t, *_ in got_down} == {"other/x", "sensors/ok", "cmd/ok"}


def test_mappings_name_the_local_tenant(broker_factory, mosquitto_factory):
    cloud = mosquitto_factory()
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "topics": [
                        {
                            "direction": "both",
                            "local": "t/#",
                            "remote_prefix": "acme/",
                            "tenant": "acme",
                        },
                        {"direction": "both", "local": "t/#", "remote_prefix": "default/"},
                    ],
                }
            ],
            tenant_choice="open",
        )
    )  # the anonymous devices below name their tenant
    wait_log(gw, "bridge cloud connected")
    up = Collector(cloud.port, [("acme/#", 1), ("default/#", 1)])
    acme = Collector(gw.port, [("t/#", 1)], tenant="acme")
    default = Collector(gw.port, [("t/#", 1)])
    try:
        publish(gw.port, [("t/x", b"acme data", 1)], tenant="acme")
        publish(gw.port, [("t/y", b"default data", 1)])
        publish(cloud.port, [("acme/t/cmd", b"for acme", 1), ("default/t/cmd", b"for default", 1)])
        got_up = up.wait_for(4, 10)
        got_acme = acme.wait_for(2, 5)
        got_default = default.wait_for(2, 5)
    finally:
        for c in (up, acme, default):
            c.close()
    assert sorted((t, p) for t, p, *_ in got_up if not t.endswith("/cmd")) == [
        ("acme/t/x", b"acme data"),
        ("default/t/y", b"default data"),
    ]
    assert sorted((t, p) for t, p, *_ in got_acme) == [
        ("t/cmd", b"for acme"),
        ("t/x", b"acme data"),
    ]
    assert sorted((t, p) for t, p, *_ in got_default) == [
        ("t/cmd", b"for default"),
        ("t/y", b"default data"),
    ]


def test_inbound_qos1_with_persistence_is_stored_for_an_offline_device(
    broker_factory, mosquitto_factory, tmp_path
):
    """A command from the cloud for a device whose persistent session is offline: the gateway
    stores it before acknowledging the cloud, and delivers it when the device comes back."""
    import signal

    cloud = mosquitto_factory()
    state = tmp_path / "state"
    config = gateway_toml(
        [bridge(cloud.port, "5")],
        extra=f'[persistence]\nstate_dir = "{state}"\ndurability = "sync"\n',
    )
    gw = broker_factory(config)
    wait_log(gw, "bridge cloud connected")
    device = Collector(
        gw.port, [("cmd/#", 1)], protocol=paho.MQTTv311, client_id="device-1", clean=False
    )
    device.close()  # offline, its session kept (3.1.1 clean session 0)
    publish(cloud.port, [("site/gw-0042/cmd/reboot", b"now", 1)])
    sys_value(gw.port, "bridge/cloud/messages/received", until=lambda v: v == "1")
    assert "Traceback" not in gw.log()
    device = Collector(
        gw.port, [("cmd/#", 1)], protocol=paho.MQTTv311, client_id="device-1", clean=False
    )
    try:
        got = device.wait_for(1, 10)
    finally:
        device.close()
    assert [(t, p) for t, p, *_ in got] == [("cmd/reboot", b"now")]
    gw.stop(signal.SIGTERM)

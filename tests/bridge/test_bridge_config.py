"""``[[bridges]]`` parsing: defaults; every problem names the file, the key and what to write."""

from __future__ import annotations

import pytest

from edge_broker.config import ConfigError, loads_config

GOOD = """
[[bridges]]
name = "cloud"
address = "mqtt.example.com"

[[bridges.topics]]
direction = "out"
local = "sensors/#"
remote_prefix = "site/gw-0042/"

[[bridges.topics]]
direction = "in"
local = "cmd/#"
remote_prefix = "site/gw-0042/"
qos = 2
tenant = "acme"
"""


def problems(text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        loads_config(text, "gw.toml")
    for p in info.value.problems:
        assert p.file == "gw.toml"
    return {p.key: p.message for p in info.value.problems}


def test_defaults_and_mappings():
    config = loads_config(GOOD)
    (b,) = config.bridges
    assert (b.name, b.address, b.port, b.transport, b.protocol) == (
        "cloud",
        "mqtt.example.com",
        1883,
        "tcp",
        5,
    )
    assert (b.keep_alive, b.clean_start, b.session_expiry) == (60, False, 86400)
    assert (b.queue_max_messages, b.queue_max_bytes, b.overflow, b.drain_rate) == (
        20_000,  # one bridge at its defaults fits MemoryMax with the default limits
        8 * 1024 * 1024,
        "drop-oldest",
        1000.0,
    )
    assert b.client_id.endswith(".cloud")
    out, inbound = b.topics
    assert (out.direction, out.remote, out.qos, out.tenant) == (
        "out",
        "site/gw-0042/sensors/#",
        1,
        "~",
    )
    assert (inbound.remote, inbound.qos, inbound.tenant) == ("site/gw-0042/cmd/#", 2, "acme")
    assert b.principal == "bridge/cloud"


def test_tls_port_default_and_prefix_rewrite():
    config = loads_config("""
[[bridges]]
name = "c"
address = "h"
transport = "tls"
protocol = "3.1.1"
tls_ca = "/etc/ca.pem"
[[bridges.topics]]
direction = "both"
local = "plant/a/#"
local_prefix = "plant/"
remote_prefix = "factory/9/"
""")
    (b,) = config.bridges
    assert (b.port, b.protocol) == (8883, 4)
    assert b.topics[0].remote == "factory/9/a/#"


@pytest.mark.parametrize(
    "body, key, words",
    [
        ('name = "bad name"\naddress = "h"', "bridges[0].name", "letters, digits"),
        ('name = "c"', "bridges[0].address", "host name"),
        ('name = "c"\naddress = "h"\nprotocol = "4"', "bridges[0].protocol", '"5" or "3.1.1"'),
        ('name = "c"\naddress = "h"\ntransport = "quic"', "bridges[0].transport", "'tcp'"),
        ('name = "c"\naddress = "h"\ntls_ca = "/ca.pem"', "bridges[0].tls_ca", 'transport = "tls"'),
        (
            'name = "c"\naddress = "h"\ntransport = "tls"\ntls_cert = "/c.pem"',
            "bridges[0].tls_key",
            "both tls_cert and tls_key",
        ),
        (
            'name = "c"\naddress = "h"\npassword = "p"\ntoken_file = "/t"',
            "bridges[0].token_file",
            "not both",
        ),
        ('name = "c"\naddress = "h"\noverflow = "block"', "bridges[0].overflow", "drop-oldest"),
        (
            'name = "c"\naddress = "h"\nreconnect_min = 10\nreconnect_max = 1',
            "bridges[0].reconnect_max",
            "below reconnect_min",
        ),
        (
            'name = "c"\naddress = "h"\nqueue_max_messages = 0',
            "bridges[0].queue_max_messages",
            "out of range",
        ),
        ('name = "c"\naddress = "h"\ntypo = 1', "bridges[0].typo", "unknown key"),
    ],
)
def test_bridge_problems(body, key, words):
    found = problems(f'[[bridges]]\n{body}\n[[bridges.topics]]\ndirection = "out"\nlocal = "a/#"\n')
    assert key in found, found
    assert words in found[key]


@pytest.mark.parametrize(
    "mapping, key, words",
    [
        ('direction = "up"\nlocal = "a/#"', "bridges[0].topics[0].direction", '"out"'),
        (
            'direction = "out"\nlocal = "a/#/b"',
            "bridges[0].topics[0].local",
            "not a valid MQTT topic filter",
        ),
        ('direction = "out"\nlocal = "$SYS/#"', "bridges[0].topics[0].local", "never bridged"),
        (
            'direction = "out"\nlocal = "a/#"\nremote_prefix = "x/+/"',
            "bridges[0].topics[0].remote_prefix",
            "literal",
        ),
        (
            'direction = "out"\nlocal = "a/#"\nlocal_prefix = "b/"',
            "bridges[0].topics[0].local_prefix",
            "not a prefix",
        ),
        ('direction = "out"\nlocal = "a/#"\nqos = 3', "bridges[0].topics[0].qos", "0 to 2"),
    ],
)
def test_mapping_problems(mapping, key, words):
    found = problems(f'[[bridges]]\nname = "c"\naddress = "h"\n[[bridges.topics]]\n{mapping}\n')
    assert key in found, found
    assert words in found[key]


def test_no_mapping_and_duplicate_names():
    found = problems('[[bridges]]\nname = "c"\naddress = "h"\n')
    assert "[[bridges.topics]]" in found["bridges[0].topics"]
    twice = (
        '[[bridges]]\nname = "c"\naddress = "h"\n'
        '[[bridges.topics]]\ndirection = "out"\nlocal = "a"\n'
    )
    found = problems(twice + twice)
    assert "used twice" in found["bridges[1].name"]
    assert "array of tables" in problems("bridges = 1\n")["bridges"]


def test_check_command_names_the_bridge_key(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    bad = tmp_path / "gw.toml"
    bad.write_text(
        '[[bridges]]\nname = "cloud"\naddress = "h"\n[[bridges.topics]]\ndirection = '
        '"sideways"\nlocal = "a/#"\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "edge_broker", "check", "--config", str(bad)],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    assert out.returncode == 1
    assert f"{bad}: bridges[0].topics[0].direction:" in out.stdout + out.stderr
    assert "Traceback" not in out.stderr


def test_status_url_from_the_config(tmp_path):
    import argparse

    from edge_broker.cli.bridge import _url

    config = tmp_path / "gw.toml"
    config.write_text('[metrics]\nenabled = true\nbind = "0.0.0.0"\nport = 9911\n')
    assert _url(argparse.Namespace(url=None, config=str(config))) == "http://127.0.0.1:9911/metrics"
    config.write_text("")
    with pytest.raises(SystemExit, match=r"no \[metrics\] endpoint"):
        _url(argparse.Namespace(url=None, config=str(config)))


def test_a_both_mapping_that_would_need_an_echo_guess_is_refused():
    """3.1.1 without the bridge flag: the remote would echo and nothing tells an echo from a
    real message (issue 31 item 7). ``edge-broker check`` prints this problem."""
    text = """
[[bridges]]
name = "cloud"
address = "mqtt.example.com"
protocol = "3.1.1"
bridge_mode = false

[[bridges.topics]]
direction = "both"
local = "cmd/#"
"""
    message = problems(text)["bridges[0].bridge_mode"]
    assert "'cmd/#'" in message and "bridge_mode = true" in message
    assert 'protocol = "5"' in message and "disjoint remote_prefix" in message
    assert loads_config(text.replace("bridge_mode = false\n", "")).bridges[0].bridge_mode
    split = text.replace('direction = "both"', 'direction = "out"') + (
        '\n[[bridges.topics]]\ndirection = "in"\nlocal = "cmd/#"\nremote_prefix = "down/"\n'
    )
    assert not loads_config(split).bridges[0].bridge_mode  # disjoint remote topics: no guess
    v5 = text.replace('protocol = "3.1.1"', 'protocol = "5"')
    assert "only used with protocol" in problems(v5)["bridges[0].bridge_mode"]

"""Provisioning: the files `edge-broker keygen --device` and `claim sign` write are what the
device reads (smokermqtt/provision.py), and the device app claims them at first boot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nacl.signing
import pytest
from smokermqtt import app, ed25519, ids, provision

from edge_broker.claims.parse import parse_claim
from edge_broker.claims.signature import verify_claim
from edge_broker.cli import main as edge_broker
from edge_broker.keys import signing_key_pem
from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish, Suback, Subscribe

from .fw_peer import PeerConnection, ScriptedPeer
from .test_fw_client_peer import smoker_handshake


def keygen(directory: Path, port: int = 1883) -> str:
    assert (
        edge_broker(
            ["keygen", "--device", str(directory), "--host", "127.0.0.1", "--port", str(port)]
        )
        == 0
    )
    return json.loads((directory / "config.json").read_text())["client_id"]


def sign(directory: Path, topic: str, *allow: str) -> None:
    args = [
        "claim",
        "sign",
        "--key",
        str(directory / "device.key"),
        "--topic",
        topic,
        "--type",
        "WHITELIST",
        "--out",
        str(directory / "claims" / f"{topic}.json"),
    ]
    for a in allow:
        args += ["--allow", a]
    assert edge_broker(args) == 0


def test_keygen_device_dir_loads_on_the_device(tmp_path: Path) -> None:
    device_dir = tmp_path / "dev"
    me = keygen(device_dir, 18830)
    sign(device_dir, "temp", "*:SUBSCRIBE")
    device = provision.Device(str(device_dir))
    assert device.client_id == me
    assert device.config["host"] == "127.0.0.1" and device.config["port"] == 18830
    assert device.config["keepalive"] == 60  # defaults filled in
    assert device.claim_files() == ["temp.json"]
    payload = device.read_claim("temp.json")
    claim = parse_claim(payload)
    verify_claim(claim)
    assert claim.topic_name == f"restricted/{me}/temp"
    client = device.client()
    assert client.client_id == me and client.port == 18830


def test_seed_formats(tmp_path: Path) -> None:
    key = nacl.signing.SigningKey(os.urandom(32))
    forms = {
        "raw": bytes(key),
        "hex": bytes(key).hex().encode() + b"\n",
        "spaced": b" " + bytes(key).hex().upper().encode() + b"\r\n",
        "pem": signing_key_pem(key),
    }
    for name, data in forms.items():
        (tmp_path / name).write_bytes(data)
        assert provision.read_seed(str(tmp_path / name)) == bytes(key), name
    assert ed25519.SigningKey(bytes(key)).public_key == bytes(key.verify_key)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "32 raw bytes, 64 hex"),
        (b"zz" * 32, "32 raw bytes, 64 hex"),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "not an Ed25519"),
    ],
)
def test_bad_keys_name_the_file(tmp_path: Path, data: bytes, why: str) -> None:
    path = tmp_path / "device.key"
    path.write_bytes(data)
    with pytest.raises(provision.ProvisionError, match=why) as info:
        provision.read_seed(str(path))
    assert str(path) in str(info.value)


def test_missing_key_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(provision.ProvisionError, match="edge-broker keygen --device"):
        provision.read_seed(str(tmp_path / "nope.key"))


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"host": "h"}, "key 'client_id' is required"),
        ({"client_id": "x", "host": "h", "port": "1883"}, "key 'port' must be int"),
        ({"client_id": "x", "host": "h", "port": True}, "key 'port' must be int"),
        ({"client_id": "x", "host": "h", "port": 70000}, "1..65535"),
        ({"client_id": "x", "host": "h", "clean_start": 1}, "key 'clean_start' must be bool"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_configs_name_the_key(tmp_path: Path, config: object, why: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(provision.ProvisionError, match=why):
        provision.read_config(str(path))


def test_invalid_json_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{host: 1")
    with pytest.raises(provision.ProvisionError, match="not valid JSON"):
        provision.read_config(str(path))


def test_key_and_config_from_different_devices(tmp_path: Path) -> None:
    keygen(tmp_path / "a")
    keygen(tmp_path / "b")
    (tmp_path / "a" / "config.json").write_bytes((tmp_path / "b" / "config.json").read_bytes())
    with pytest.raises(provision.ProvisionError, match="same keygen run"):
        provision.Device(str(tmp_path / "a"))


def test_app_claims_at_first_boot_and_not_again(tmp_path: Path) -> None:
    """smokermqtt.app against a scripted broker: pre-signed claims go out once; a refused
    claim is retried on the next boot; readings and commands flow."""
    device_dir = tmp_path / "dev"
    received_claims: list[bytes] = []
    telemetry: list[bytes] = []

    def boot(answers: dict[str, int], readings: int):  # type: ignore[no-untyped-def]
        def script(peer: PeerConnection) -> None:
            connect = smoker_handshake(peer)
            me = connect.client_id
            for _ in answers:
                pub = peer.recv()
                assert isinstance(pub, Publish) and pub.topic == "access/claim"
                received_claims.append(pub.payload)
                topic = json.loads(pub.payload)["restriction"]["topicName"]
                peer.send(
                    Puback(
                        pub.packet_id or 0,
                        answers[topic.rsplit("/", 1)[1]],
                        Properties(reason_string="quota"),
                    )
                )
            sub = peer.recv()
            assert isinstance(sub, Subscribe)
            assert sub.subscriptions[0].topic_filter == f"restricted/{me}/cmd"
            peer.send(Suback(sub.packet_id, (1,)))
            peer.send(Publish(f"restricted/{me}/cmd", b"blink", 1, False, False, 1))
            for _ in range(readings):
                pkt = peer.recv()
                if isinstance(pkt, Puback):  # the device's ack of our command
                    pkt = peer.recv()
                assert isinstance(pkt, Publish) and pkt.topic == f"restricted/{me}/telemetry"
                telemetry.append(pkt.payload)
                peer.send(Puback(pkt.packet_id or 0))
            last = peer.recv()
            if isinstance(last, Puback):  # the command's ack may come after the readings
                last = peer.recv()
            assert isinstance(last, Disconnect)

        return script

    with ScriptedPeer(boot({"a": 0, "b": 0x97}, 2), boot({"b": 0}, 1)) as peer:
        me = keygen(device_dir, peer.port)
        sign(device_dir, "a", "*:SUBSCRIBE")
        sign(device_dir, "b")
        cfg = json.loads((device_dir / "config.json").read_text())
        cfg.update(publish_interval_ms=100, topic="telemetry")
        (device_dir / "config.json").write_text(json.dumps(cfg))
        commands: list[tuple[str, bytes]] = []
        app.run(
            str(device_dir), cycles=2, on_command=lambda t, p: commands.append((t, p)), attempts=1
        )
        assert (device_dir / "claimed.txt").read_text() == "a.json\n"
        app.run(
            str(device_dir), cycles=1, on_command=lambda t, p: commands.append((t, p)), attempts=1
        )
        assert (device_dir / "claimed.txt").read_text() == "a.json\nb.json\n"
    assert len(received_claims) == 3
    for payload in received_claims:
        verify_claim(parse_claim(payload))
    assert commands == [(f"restricted/{me}/cmd", b"blink")] * 2
    assert [json.loads(p)["seq"] for p in telemetry] == [1, 2, 1]
    assert me == ids.client_id(provision.Device(str(device_dir)).signing_key.public_key)


def test_watch_tool_prints_what_arrives(tmp_path: Path) -> None:
    """tools/watch.py (host) subscribes as a SMOKER client and prints messages."""
    watch = Path(__file__).resolve().parents[2] / "firmware_clients/micropython/tools/watch.py"

    def script(peer: PeerConnection) -> None:
        connect = smoker_handshake(peer)
        sub = peer.recv()
        assert isinstance(sub, Subscribe)
        assert sub.subscriptions[0].topic_filter == "restricted/+/telemetry"
        peer.send(Suback(sub.packet_id, (1,)))
        peer.send(Publish(f"restricted/{connect.client_id}/telemetry", b'{"seq":1}'))

    with ScriptedPeer(script) as peer:
        keygen(tmp_path / "watcher", peer.port)
        proc = subprocess.Popen(
            [sys.executable, str(watch), str(tmp_path / "watcher"), "restricted/+/telemetry"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
        finally:
            proc.terminate()
            proc.wait(5)
    assert line.endswith('/telemetry {"seq":1}\n')

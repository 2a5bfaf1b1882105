"""The firmware client with SMOKER against the real broker: authenticate, claim, publish,
receive, unclaim, reconnect after a restart, and the device app end to end.

Runs once the broker offers the ``smoker`` authentication method (registered in
edge_broker.auth.methods.AUTHENTICATOR_FACTORIES); until then every test here is skipped with
that reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from smokermqtt import app, claims, ed25519, ids
from smokermqtt.client import MQTTClient
from smokermqtt.packets import MQTTError

from edge_broker.auth.methods import AUTHENTICATOR_FACTORIES
from edge_broker.cli import main as edge_broker
from scripts.procs import free_port

from .fw_support import running_broker
from .test_fw_provision import keygen, sign

pytestmark = pytest.mark.skipif(
    "smoker" not in AUTHENTICATOR_FACTORIES,
    reason="the broker does not offer the smoker authentication method yet",
)


def smoker_config(store: Path, port: int = 0) -> dict[str, Any]:
    """A loopback listener with SMOKER (and anonymous), claims kept in ``store``."""
    listener: dict[str, Any] = {
        "name": "tcp",
        "bind": "127.0.0.1",
        "auth_methods": ["smoker", "anonymous"],
    }
    if port:
        listener["port"] = port
    return {"listeners": [listener], "claims": {"store_dir": str(store)}}


class Device:
    def __init__(self, host: str, port: int, seed: bytes, **kw: Any) -> None:
        self.key = ed25519.SigningKey(seed)
        self.id = ids.client_id(self.key.public_key)
        self.got: list[tuple[str, bytes]] = []
        self.client = MQTTClient(
            host,
            port,
            signing_key=self.key,
            timeout_ms=5000,
            callback=lambda t, p: self.got.append((t, p)),
            **kw,
        )

    def pump(self, ms: int = 500) -> None:
        self.client.loop(ms)


@pytest.fixture(scope="module")
def smoker_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SMOKER broker for the module: every test uses its own keys, hence its own topics."""
    workdir = tmp_path_factory.mktemp("fw-smoker")
    with running_broker(workdir, smoker_config(workdir / "claims")) as broker:
        yield broker


def test_authenticate_claim_publish_receive_unclaim(smoker_broker: Any) -> None:
    b = smoker_broker
    owner = Device(b.host, b.port, b"\x01" * 32)
    friend = Device(b.host, b.port, b"\x02" * 32)
    stranger = Device(b.host, b.port, b"\x03" * 32)
    for d in (owner, friend, stranger):
        d.client.connect()
        assert d.client.smoker_authenticated
    topic = f"restricted/{owner.id}/temp"
    assert owner.client.claim_topic(topic, "WHITELIST", [(friend.id, "SUBSCRIBE")]) == 0x00
    assert friend.client.subscribe(topic, qos=1) == 1
    assert stranger.client.subscribe(topic, qos=1) == 0x87  # exact filter, decided now
    assert stranger.client.subscribe("restricted/#", qos=1) == 1  # wildcards are accepted...
    assert owner.client.publish(topic, b"21.5", qos=1) == 0
    friend.pump()
    stranger.pump()
    assert friend.got == [(topic, b"21.5")]
    assert stranger.got == []  # ...but every delivery is checked against the claim
    assert owner.client.unclaim(topic) == 0x00
    owner.client.publish(topic, b"22.0", qos=1)
    friend.pump()
    assert friend.got == [(topic, b"21.5")]  # no claim: owner only
    for d in (owner, friend, stranger):
        d.client.disconnect()


def test_claims_the_broker_must_refuse(smoker_broker: Any) -> None:
    b = smoker_broker
    owner = Device(b.host, b.port, b"\x04" * 32)
    other = Device(b.host, b.port, b"\x05" * 32)
    owner.client.connect()
    # a valid claim on someone else's area: 0x87 (owner segment is not the publisher)
    foreign = claims.claim(other.key, other.id, f"restricted/{other.id}/x")
    assert owner.client.claim(foreign) == 0x87
    # a claim whose signature no longer matches: 0x99
    good = json.loads(claims.claim(owner.key, owner.id, f"restricted/{owner.id}/x"))
    good["restriction"]["restrictionType"] = "BLACKLIST"
    assert owner.client.claim(json.dumps(good).encode()) == 0x99
    assert owner.client.claim(b"not json") == 0x99
    owner.client.disconnect()
    # a client that is not SMOKER-authenticated may not claim at all
    anon = MQTTClient(b.host, b.port, client_id="fw-anon-claimer")
    anon.connect()
    assert (
        anon.publish(
            "access/claim", claims.claim(owner.key, owner.id, f"restricted/{owner.id}/x"), qos=1
        )
        == 0x87
    )
    anon.disconnect()


class _WrongKey:
    """Claims to be one key (its client ID) but signs with another."""

    def __init__(self, claimed: ed25519.SigningKey, actual: ed25519.SigningKey) -> None:
        self.public_key = claimed.public_key
        self.sign_attached = actual.sign_attached


def test_wrong_signature_and_impostors_are_refused(smoker_broker: Any) -> None:
    b = smoker_broker
    victim = ed25519.SigningKey(b"\x06" * 32)
    thief = ed25519.SigningKey(b"\x07" * 32)
    c = MQTTClient(b.host, b.port, signing_key=_WrongKey(victim, thief))
    with pytest.raises(MQTTError) as info:
        c.connect()
    assert info.value.reason == 0x87
    # a SMOKER ID as client id without SMOKER authentication: 0x85 (SMOKER.md rule 6)
    impostor = MQTTClient(b.host, b.port, client_id=ids.client_id(victim.public_key))
    with pytest.raises(MQTTError) as info:
        impostor.connect()
    assert info.value.reason == 0x85


def test_reconnect_after_broker_restart(broker_factory: Any, tmp_path: Path) -> None:
    """The device comes back by itself, and its claim survived the restart (claim store)."""
    port = free_port()
    config = smoker_config(tmp_path / "claims", port)
    broker = broker_factory(config)
    owner = Device("127.0.0.1", port, b"\x08" * 32, backoff_base_ms=100, backoff_max_ms=800)
    owner.client.connect()
    topic = f"restricted/{owner.id}/state"
    friend = Device("127.0.0.1", port, b"\x0a" * 32)
    assert owner.client.claim_topic(topic, "WHITELIST", [(friend.id, "SUBSCRIBE")]) == 0
    assert owner.client.subscribe(topic, qos=1) == 1
    broker.stop()
    with pytest.raises((OSError, MQTTError)):
        owner.client.loop(3000)
        owner.client.publish(topic, b"lost", qos=1)
    timer = threading.Timer(0.5, lambda: broker_factory(config))
    timer.start()
    try:
        owner.client.reconnect(attempts=40)
    finally:
        timer.join()
    assert owner.client.smoker_authenticated
    assert owner.client.subscriptions == {topic: 1}  # renewed: the new broker had no session
    friend.client.connect()
    assert friend.client.subscribe(topic, qos=1) == 1  # the stored claim still grants it
    assert owner.client.publish(topic, b"back", qos=1) == 0
    owner.pump()
    friend.pump()
    assert owner.got == [(topic, b"back")] and friend.got == [(topic, b"back")]
    owner.client.disconnect()
    friend.client.disconnect()


def test_device_app_end_to_end(smoker_broker: Any, tmp_path: Path) -> None:
    """keygen --device, claim sign, then smokermqtt.app: the first-boot claim lets the
    watcher read the telemetry, which it receives through a wildcard subscription."""
    b = smoker_broker
    watcher = Device(b.host, b.port, b"\x09" * 32)
    watcher.client.connect()
    assert watcher.client.subscribe("restricted/+/telemetry", qos=1) == 1
    device_dir = tmp_path / "device"
    me = keygen(device_dir, b.port)
    sign(device_dir, "telemetry", f"{watcher.id}:SUBSCRIBE")
    cfg = json.loads((device_dir / "config.json").read_text())
    cfg.update(publish_interval_ms=200)
    (device_dir / "config.json").write_text(json.dumps(cfg))
    app.run(str(device_dir), cycles=2, attempts=3)
    assert (device_dir / "claimed.txt").read_text() == "telemetry.json\n"
    watcher.pump()
    assert [(t, json.loads(p)["seq"]) for t, p in watcher.got] == [
        (f"restricted/{me}/telemetry", 1),
        (f"restricted/{me}/telemetry", 2),
    ]
    watcher.client.disconnect()


def test_readme_quick_start(smoker_broker: Any, tmp_path: Path) -> None:
    """firmware_clients/micropython/README.md, as written: keygen, the BLACKLIST claim that
    bars other publishers, the device app, and tools/watch.py printing the telemetry."""
    b = smoker_broker
    watch = Path(__file__).resolve().parents[2] / "firmware_clients/micropython/tools/watch.py"
    device_dir, watcher_dir = tmp_path / "device", tmp_path / "watcher"
    me = keygen(device_dir, b.port)
    assert (
        edge_broker(
            [
                "claim",
                "sign",
                "--key",
                str(device_dir / "device.key"),
                "--topic",
                "telemetry",
                "--type",
                "BLACKLIST",
                "--allow",
                "*:PUBLISH",
                "--out",
                str(device_dir / "claims" / "telemetry.json"),
            ]
        )
        == 0
    )
    keygen(watcher_dir, b.port)
    proc = subprocess.Popen(
        [sys.executable, str(watch), str(watcher_dir), "restricted/+/telemetry"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None and proc.stdout is not None
        assert proc.stderr.readline().startswith("connected as")
        time.sleep(0.3)  # let the SUBSCRIBE land
        cfg = json.loads((device_dir / "config.json").read_text())
        cfg.update(publish_interval_ms=100)
        (device_dir / "config.json").write_text(json.dumps(cfg))
        app.run(str(device_dir), cycles=2, attempts=3)
        lines = [proc.stdout.readline() for _ in range(2)]
    finally:
        proc.terminate()
        proc.wait(5)
    assert [line.split(" ", 1)[0] for line in lines] == [f"restricted/{me}/telemetry"] * 2
    assert [json.loads(line.split(" ", 1)[1])["seq"] for line in lines] == [1, 2]
    # and nobody else may publish there (the BLACKLIST bars '*' from PUBLISH)
    other = Device(b.host, b.port, b"\x0b" * 32)
    other.client.connect()
    assert other.client.publish(f"restricted/{me}/telemetry", b"forged", qos=1) == 0x87
    other.client.disconnect()


def test_claim_information_request(smoker_broker: Any) -> None:
    b = smoker_broker
    owner = Device(b.host, b.port, b"\x0c" * 32)
    friend = Device(b.host, b.port, b"\x0d" * 32)
    owner.client.connect()
    friend.client.connect()
    topic = f"restricted/{owner.id}/door"
    assert owner.client.claim_topic(topic, "WHITELIST", [(friend.id, "ALL")]) == 0
    mine = owner.client.request_claims()
    assert mine["clientId"] == owner.id
    assert [c["restriction"]["topicName"] for c in mine["ownedClaims"]] == [topic]
    theirs = friend.client.request_claims()
    assert theirs["ownedClaims"] == []
    # involved: claims of others naming the friend (or "*": other tests' claims on this broker)
    involved = {c["restriction"]["topicName"] for c in theirs["involvedClaims"]}
    assert topic in involved
    assert topic not in {c["restriction"]["topicName"] for c in mine["involvedClaims"]}
    assert owner.got == [] and friend.got == []  # answers do not reach the callback
    owner.client.disconnect()
    friend.client.disconnect()


def test_claim_information_request_in_pages(tmp_path: Path) -> None:
    """edge-broker answers one page at a time (issue 16): the device asks for the next page
    with ``after=`` the previous answer's ``nextPage``."""
    config = smoker_config(tmp_path / "claims")
    config["claims"]["request_page_claims"] = 1
    with running_broker(tmp_path, config) as b:
        owner = Device(b.host, b.port, b"\x0e" * 32)
        owner.client.connect()
        topics = [f"restricted/{owner.id}/p{i}" for i in range(3)]
        for topic in topics:
            assert owner.client.claim_topic(topic, "BLACKLIST", []) == 0
        seen: list[str] = []
        after = None
        while True:
            page = owner.client.request_claims(after=after)
            seen += [c["restriction"]["topicName"] for c in page["ownedClaims"]]
            after = page.get("nextPage")
            if after is None:
                break
        assert seen == topics
        owner.client.disconnect()


def test_reauthentication_keeps_the_session(smoker_broker: Any) -> None:
    b = smoker_broker
    d = Device(b.host, b.port, b"\x10" * 32)
    d.client.connect()
    topic = f"restricted/{d.id}/re"
    assert d.client.subscribe(topic, qos=1) == 1
    d.client.reauthenticate()
    d.client.reauthenticate()
    assert d.client.publish(topic, b"same session", qos=1) == 0
    d.pump()
    assert d.got == [(topic, b"same session")]
    d.client.disconnect()

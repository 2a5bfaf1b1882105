"""The firmware's pure modules under real MicroPython (the WebAssembly port, v1.27).

CPython with shims proves the logic; this proves the dialect: MicroPython's hashlib has no
sha512, its json has no sort_keys, its ints and str differ in corners. Outputs made by
MicroPython are compared with CPython and libsodium, and a SMOKER claim signed under
MicroPython must verify in the broker's own claim code, and signing must keep nothing on the heap.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import nacl.signing
from smokermqtt import claims, ed25519, ids, packets

from edge_broker.auth.smoker import SmokerChallenge, check_response, issue_challenge
from edge_broker.claims.parse import parse_claim
from edge_broker.claims.signature import verify_claim
from edge_broker.mqtt import packets as wire  # the broker's packets (``packets``: the firmware's)
from edge_broker.mqtt.codec import PacketReader, encode

from .fw_support import MicroPythonRunner

SEEDS = [bytes(range(32)), b"\xff" * 32, hashlib.sha256(b"device").digest()]
MESSAGES = [b"", b"\x00" * 32, bytes(range(256)) * 3]
OBJECTS = [
    {"b": [1, True, None, {"z": 'é\u0001"\\', "a": -5}], "a": "x\n\t"},
    {"topicName": "restricted/X/t", "permissions": [], "restrictionType": "BLACKLIST"},
    ["😀", "\u2028", {"": 0}],
]
# (MicroPython's json.loads turns a "\ud83d\ude00" escape pair into two surrogates, so the
# objects travel into the script as raw UTF-8 text.)


def _outputs(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_pure_modules_agree_with_cpython(micropython: MicroPythonRunner) -> None:
    script = f"""
import binascii, json
from smokermqtt import sha512, ed25519, canonjson, ids, claims, packets
from smokermqtt import provision, app  # noqa: F401 - they load in MicroPython too
import hashlib
print("native_sha512=" + str(hasattr(hashlib, "sha512")))
for i, m in enumerate({MESSAGES!r}):
    print("sha%d=%s" % (i, binascii.hexlify(sha512.sha512(m)).decode()))
for i, s in enumerate({SEEDS!r}):
    k = ed25519.SigningKey(s)
    print("pk%d=%s" % (i, binascii.hexlify(k.public_key).decode()))
    for j, m in enumerate({MESSAGES!r}):
        print("sig%d_%d=%s" % (i, j, binascii.hexlify(k.sign(m)).decode()))
for i, text in enumerate({[json.dumps(o, ensure_ascii=False) for o in OBJECTS]!r}):
    print("canon%d=%s" % (i, binascii.hexlify(canonjson.dumpb(json.loads(text))).decode()))
key = ed25519.SigningKey({SEEDS[0]!r})
owner = ids.client_id(key.public_key)
print("id=" + owner)
payload = claims.claim(key, owner, "restricted/%s/temp/é" % owner, "BLACKLIST",
                       [("*", "PUBLISH")])
print("claim=" + binascii.hexlify(payload).decode())
print("connect=" + binascii.hexlify(packets.connect(owner, 30, True,
      [(packets.MAXIMUM_PACKET_SIZE, 16384), (packets.AUTH_METHOD, "SMOKER")])).decode())
print("auth=" + binascii.hexlify(packets.auth(0x18, [(packets.AUTH_METHOD, "SMOKER"),
      (packets.AUTH_DATA, key.sign_attached(bytes(32)))])).decode())
print("pub=" + binascii.hexlify(packets.publish_header("a/b", 5, 1, True, False, 7)).decode())
print("parsed=" + repr(packets.parse_publish(
    0x33, b"\\x00\\x03a/b\\x00\\x07\\x05\\x26\\x00\\x00\\x00\\x00x")))
"""
    out = _outputs(micropython(script))
    assert out["native_sha512"] == "False"  # so the pure SHA-512 is what ran
    for i, m in enumerate(MESSAGES):
        assert out[f"sha{i}"] == hashlib.sha512(m).hexdigest()
    for i, s in enumerate(SEEDS):
        nk = nacl.signing.SigningKey(s)
        assert out[f"pk{i}"] == bytes(nk.verify_key).hex()
        for j, m in enumerate(MESSAGES):
            assert out[f"sig{i}_{j}"] == nk.sign(m).signature.hex()
    for i, o in enumerate(OBJECTS):
        expected = json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert bytes.fromhex(out[f"canon{i}"]).decode() == expected
    key = ed25519.SigningKey(SEEDS[0])
    owner = ids.client_id(key.public_key)
    assert out["id"] == owner
    payload = bytes.fromhex(out["claim"])
    assert payload == claims.claim(
        key, owner, f"restricted/{owner}/temp/é", "BLACKLIST", [("*", "PUBLISH")]
    )
    verify_claim(parse_claim(payload))
    assert bytes.fromhex(out["connect"]) == packets.connect(
        owner, 30, True, [(packets.MAXIMUM_PACKET_SIZE, 16384), (packets.AUTH_METHOD, "SMOKER")]
    )
    assert bytes.fromhex(out["auth"]) == packets.auth(
        0x18, [(packets.AUTH_METHOD, "SMOKER"), (packets.AUTH_DATA, key.sign_attached(bytes(32)))]
    )
    assert bytes.fromhex(out["pub"]) == packets.publish_header("a/b", 5, 1, True, False, 7)
    assert out["parsed"] == "('a/b', b'x', 1, True, 7, {38: [('', '')]})"


def test_signing_keeps_nothing_on_the_heap(micropython: MicroPythonRunner) -> None:
    """A signature allocates a lot in small pieces and keeps nothing: the live heap (measured at
    the start of each #@step part, where the WebAssembly port's collector frees what the last
    part dropped) stays where it was. The port grows its heap on demand, so running it with a
    small ``heap`` would limit nothing; test_fw_micropython_broker.py checks the README's
    figures for a whole session."""
    script = """
import gc, time
from smokermqtt import ed25519
key = ed25519.SigningKey(bytes(32))
key.sign_attached(bytes(32))  # builds the comb table once
#@step
gc.collect()
before = gc.mem_alloc()
t = time.ticks_ms()
for _ in range(5):
    key.sign_attached(bytes(32))
print("sign_ms=%d" % (time.ticks_diff(time.ticks_ms(), t) // 5))
#@step
gc.collect()
print("kept=%d" % (gc.mem_alloc() - before))
"""
    out = _outputs(micropython(script))
    print(f"MicroPython (WebAssembly, this host) sign: {out['sign_ms']} ms", file=sys.stderr)
    assert int(out["kept"]) < 1024


def test_cpython_signing_time_is_reported() -> None:
    key = ed25519.SigningKey(bytes(32))
    start = time.perf_counter()
    key.sign_attached(bytes(32))
    elapsed = time.perf_counter() - start
    nacl.signing.VerifyKey(key.public_key).verify(key.sign_attached(bytes(32)))
    print(f"CPython sign: {elapsed * 1000:.2f} ms", file=sys.stderr)


def test_client_runs_under_micropython(micropython: MicroPythonRunner) -> None:
    """smokermqtt.client itself in MicroPython, over a canned-bytes socket module: the SMOKER
    exchange, a claim, a subscription, an incoming QoS 1 message, a ping, a publish and an
    unclaim. What it sent is decoded with the broker's codec and checked with the broker's
    SMOKER and claim code."""
    key = ed25519.SigningKey(SEEDS[0])
    me = ids.client_id(key.public_key)
    nonce = hashlib.sha256(b"nonce").digest()
    server = b"".join(
        encode(p, 5)
        for p in [
            wire.Auth(
                0x18, wire.Properties(authentication_method="SMOKER", authentication_data=nonce)
            ),
            wire.Connack(
                False, 0, wire.Properties(authentication_method="SMOKER", server_keep_alive=30)
            ),
            wire.Puback(1, 0),
            wire.Suback(2, (1,)),
            wire.Publish(f"restricted/{me}/cmd", b"go", 1, False, False, 9),
            wire.Pingresp(),
            wire.Puback(3, 0),
            wire.Puback(4, 0),
        ]
    )
    fake_net = Path(__file__).resolve().parent / "micropython_wasm" / "fake_net"
    script = f"""
import binascii, sys
sys.path.insert(0, "/shim")
import socket
socket.SERVER.extend({server!r})
from smokermqtt import ed25519
from smokermqtt.client import MQTTClient
got = []
c = MQTTClient("gw", 1883, signing_key=ed25519.SigningKey({SEEDS[0]!r}),
               callback=lambda t, p: got.append((t, p)))
print("session=%s" % c.connect())
me = c.client_id
print("claim=%d" % c.claim_topic("restricted/%s/temp" % me, "WHITELIST", [("*", "SUBSCRIBE")]))
print("sub=%d" % c.subscribe("restricted/%s/cmd" % me, qos=1))
c.wait_msg(100)
c.ping()
c.wait_msg(100)
print("pub=%d" % c.publish("restricted/%s/temp" % me, b"21.5", qos=1))
print("unclaim=%d" % c.unclaim("restricted/%s/temp" % me))
c.disconnect()
print("got=%r" % got)
print("keepalive=%d" % c.server_keepalive)
print("sent=" + binascii.hexlify(socket.SENT).decode())
"""
    out = _outputs(micropython(script, mounts={fake_net: "/shim"}))
    assert out["session"] == "False"
    assert (out["claim"], out["sub"], out["pub"], out["unclaim"]) == ("0", "1", "0", "0")
    assert out["got"] == f"[('restricted/{me}/cmd', b'go')]"
    assert out["keepalive"] == "30"
    sent = PacketReader(side="server").feed(bytes.fromhex(out["sent"]))
    connect, answer, claim, sub, ack, ping, pub, unclaim, disc = sent
    assert isinstance(connect, wire.Connect) and connect.client_id == me
    challenge = issue_challenge(me, nonce)
    assert isinstance(challenge, SmokerChallenge) and isinstance(answer, wire.Auth)
    assert check_response(challenge, answer) is None
    assert isinstance(claim, wire.Publish)
    assert claim.topic == "access/claim" and claim.packet_id == 1
    verify_claim(parse_claim(claim.payload))
    assert (
        isinstance(sub, wire.Subscribe)
        and sub.subscriptions[0].topic_filter == f"restricted/{me}/cmd"
    )
    assert ack == wire.Puback(9) and isinstance(ping, wire.Pingreq)
    assert pub == wire.Publish(f"restricted/{me}/temp", b"21.5", 1, False, False, 3)
    assert unclaim == wire.Publish(
        "access/unclaim", f"restricted/{me}/temp".encode(), 1, False, False, 4
    )
    assert disc == wire.Disconnect()


def test_basic_example_runs_under_micropython(
    micropython: MicroPythonRunner, umqtt_simple_path: Path
) -> None:
    """firmware_clients/micropython_basic with umqtt.simple in MicroPython, over canned bytes:
    MQTT 3.1.1 CONNECT with a token as password, SUBSCRIBE, one QoS 1 reading."""
    root = Path(__file__).resolve().parents[2]
    fake_net = Path(__file__).resolve().parent / "micropython_wasm" / "fake_net"
    server = b"\x20\x02\x00\x00" + b"\x90\x03\x00\x01\x01" + b"\x40\x02\x00\x02"
    script = f"""
import sys
sys.path.insert(0, "/shim")
sys.path.insert(0, "/basic")
sys.path.insert(0, "/umqttlib")
import socket, binascii
socket.SERVER.extend({server!r})
open("/token.jwt", "w").write("eyJhbGciOiJFZERTQSJ9.e30.c2ln\\n")
open("/config.json", "w").write('{{"client_id": "dev-9", "host": "gw", "token_file": "token.jwt",'
                                ' "publish_interval_ms": 0, "keepalive": 30}}')
import basic_app
basic_app.run("/config.json", cycles=1)
print("sent=" + binascii.hexlify(socket.SENT).decode())
"""
    out = _outputs(
        micropython(
            script,
            mounts={
                fake_net: "/shim",
                root / "firmware_clients" / "micropython_basic": "/basic",
                umqtt_simple_path: "/umqttlib",
            },
        )
    )
    connect, sub, pub, disc = PacketReader(side="server").feed(bytes.fromhex(out["sent"]))
    assert isinstance(connect, wire.Connect) and connect.protocol_level == 4
    assert (connect.client_id, connect.username, connect.password, connect.keep_alive) == (
        "dev-9",
        "dev-9",
        b"eyJhbGciOiJFZERTQSJ9.e30.c2ln",
        30,
    )
    assert isinstance(sub, wire.Subscribe)
    assert sub.subscriptions[0].topic_filter == "devices/dev-9/cmd"
    assert isinstance(pub, wire.Publish) and pub.topic == "devices/dev-9/telemetry" and pub.qos == 1
    assert json.loads(pub.payload)["seq"] == 1
    assert disc == wire.Disconnect()

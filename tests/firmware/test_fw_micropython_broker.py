"""The SMOKER firmware client inside REAL MicroPython, talking to the REAL broker over TCP.

test_fw_micropython.py proves the dialect over canned bytes; this proves the conversation: the
client compiled to .mpy (as flashed) runs in the WebAssembly port, whose socket module is a real
TCP connection (micropython_wasm/run_net.mjs + real_net/socket.py), and does what a device does:
SMOKER connect, claim, publish, receive, unclaim. A whitelisted subscriber (CPython) receives,
a stranger does not.

It also measures the heap with MicroPython's own accounting (gc.mem_alloc() after gc.collect()
around each step) and checks the figures firmware_clients/micropython/README.md states. The
WebAssembly port grows its heap on demand, so a small ``heapsize`` limits nothing; the live
figures measured here are what a board's heap must hold.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from smokermqtt import ed25519, ids
from smokermqtt.client import MQTTClient

from .fw_support import running_broker
from .test_fw_broker_smoker import smoker_config
from .test_fw_mpy_cross import compile_file

HERE = Path(__file__).resolve().parent
WASM = HERE / "micropython_wasm"
SMOKERMQTT = HERE.parents[1] / "firmware_clients" / "micropython" / "smokermqtt"

# firmware_clients/micropython/README.md, "Signing time and memory": the figures this test holds
# the firmware to (KiB, live heap after gc.collect(), modules loaded from .mpy).
README_CRYPTO_KIB = 16  # ed25519 + sha512: "at most 16 KiB"
README_CLIENT_KIB = 48  # everything smokermqtt.client imports: "at most 48 KiB"
README_SESSION_KIB = 48  # connected, claimed, publishing, receiving: "at most 48 KiB"
README_SIGN_ALLOCATED_KIB = 560  # allocated, and freed again, by one signature: "about 540 KiB"

DEVICE_SEED = bytes(range(1, 33))
FRIEND_SEED = b"\x21" * 32
STRANGER_SEED = b"\x22" * 32


@pytest.fixture(scope="module")
def mpy_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """smokermqtt compiled with mpy-cross, as it is flashed to a board."""
    out = tmp_path_factory.mktemp("mpy") / "smokermqtt"
    out.mkdir()
    for source in sorted(SMOKERMQTT.glob("*.py")):
        proc = compile_file(source, out / (source.stem + ".mpy"))
        assert proc.returncode == 0, proc.stderr
    return out.parent


@pytest.fixture(scope="module")
def smoker_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp("fw-mp-smoker")
    with running_broker(workdir, smoker_config(workdir / "claims")) as broker:
        yield broker


def run_micropython_net(
    script: str, mounts: dict[Path, str], tmp_path: Path, timeout: float = 180.0
) -> str:
    """``script`` in real MicroPython with a real socket module at /net (first on sys.path)."""
    node = shutil.which("node")
    assert node, "node is needed (scripts/test installs it)"
    entry = WASM / "node_modules/@micropython/micropython-webassembly-pyscript/micropython.mjs"
    if not entry.exists():  # the micropython fixture of conftest installs it; run alone, do it here
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=WASM,
            check=True,
            capture_output=True,
            timeout=300,
        )
    script_file = tmp_path / "device.py"
    script_file.write_text(
        "import sys\nsys.path.insert(0, '/net')\nsys.path.insert(1, '/fw')\n" + script
    )
    proc = subprocess.run(
        [
            node,
            str(WASM / "run_net.mjs"),
            str(1 << 20),
            str(script_file),
            f"{WASM / 'real_net'}=/net",
            *(f"{host}={inner}" for host, inner in mounts.items()),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        pytest.fail(f"MicroPython raised:\n{proc.stderr}\nstdout:\n{proc.stdout}")
    return proc.stdout


def _outputs(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


DEVICE_SCRIPT = """
import gc
gc.collect()
base = gc.mem_alloc()
peak = 0

def live(step):
    global peak
    gc.collect()
    n = gc.mem_alloc() - base
    peak = max(peak, n)
    print("live_%s=%d" % (step, n))
#@step
from smokermqtt import ed25519, sha512
#@step
live("crypto")
from smokermqtt.client import MQTTClient
#@step
live("client_module")
key = ed25519.SigningKey(SEED)
got = []
c = MQTTClient(HOST, PORT, signing_key=key, timeout_ms=20000,
               callback=lambda t, p: got.append((t, p)))
print("session=%s" % c.connect())
print("smoker=%s" % c.smoker_authenticated)
#@step
live("connected")
me = c.client_id
topic = "restricted/%s/temp" % me
print("claim=%d" % c.claim_topic(topic, "WHITELIST", [(FRIEND, "SUBSCRIBE")]))
#@step
live("claimed")
print("sub=%d" % c.subscribe(topic, qos=1))
print("pub=%d" % c.publish(topic, b"21.5", qos=1))
deadline = 50
while not got and deadline:
    c.wait_msg(200)
    deadline -= 1
print("got=%r" % got)
#@step
live("received")
print("unclaim=%d" % c.unclaim(topic))
print("pub_after_unclaim=%d" % c.publish(topic, b"22.0", qos=1))
#@step
live("unclaimed")
c.disconnect()
print("peak=%d" % peak)
gc.collect()
gc.disable()
before = gc.mem_alloc()
key.sign_attached(bytes(32))
print("sign_allocated=%d" % (gc.mem_alloc() - before))
gc.enable()
"""


def test_firmware_client_in_micropython_against_the_broker(
    smoker_broker: Any, mpy_package: Path, tmp_path: Path
) -> None:
    b = smoker_broker
    device_id = ids.client_id(ed25519.SigningKey(DEVICE_SEED).public_key)
    topic = f"restricted/{device_id}/temp"
    watchers = {}
    for name, seed in (("friend", FRIEND_SEED), ("stranger", STRANGER_SEED)):
        got: list[tuple[str, bytes]] = []
        client = MQTTClient(
            b.host,
            b.port,
            signing_key=ed25519.SigningKey(seed),
            timeout_ms=5000,
            callback=lambda t, p, got=got: got.append((t, p)),
        )
        client.connect()
        # wildcards into the restricted area are accepted; each delivery is checked on claims
        assert client.subscribe("restricted/#", qos=1) == 1
        watchers[name] = (client, got)
    friend_id = watchers["friend"][0].client_id

    script = (
        f"SEED = {DEVICE_SEED!r}\nFRIEND = {friend_id!r}\n"
        f"HOST = {b.host!r}\nPORT = {b.port}\n" + DEVICE_SCRIPT
    )
    started = time.monotonic()
    out = _outputs(run_micropython_net(script, {mpy_package: "/fw"}, tmp_path))
    elapsed = time.monotonic() - started

    assert out["session"] == "False" and out["smoker"] == "True"
    assert (out["claim"], out["sub"], out["pub"], out["unclaim"]) == ("0", "1", "0", "0")
    assert out["got"] == repr([(topic, b"21.5")])  # the owner receives its own message
    assert out["pub_after_unclaim"] == "0"  # the owner may always publish in its own area

    for client, _ in watchers.values():
        client.loop(1500)
    friend_got = watchers["friend"][1]
    stranger_got = watchers["stranger"][1]
    assert friend_got == [(topic, b"21.5")]  # whitelisted; nothing after the unclaim
    assert stranger_got == []
    for client, _ in watchers.values():
        client.disconnect()

    kib = {k: int(v) / 1024 for k, v in out.items() if k.startswith(("live_", "peak", "sign_"))}
    print(
        f"MicroPython (WebAssembly) device session: {elapsed:.1f} s; heap KiB "
        + ", ".join(f"{k} {v:.1f}" for k, v in kib.items()),
        file=sys.stderr,
    )
    assert kib["live_crypto"] <= README_CRYPTO_KIB
    assert kib["live_client_module"] <= README_CLIENT_KIB
    assert kib["peak"] <= README_SESSION_KIB
    assert kib["sign_allocated"] <= README_SIGN_ALLOCATED_KIB

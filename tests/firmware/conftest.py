"""Fixtures for the firmware clients' tests.

The MicroPython client runs unchanged under CPython: this conftest puts
``firmware_clients/micropython`` (the files a board gets) and ``tests/firmware/shims`` (CPython
stand-ins for MicroPython-only modules, just ``utime``) on sys.path. Nothing else is adapted.

Tools fetched on first use, idempotently, under a file lock (pytest-xdist runs workers in
parallel): the MicroPython WebAssembly port from npm (real MicroPython 1.27, to run the pure
modules as a board would) and umqtt.simple from PyPI (an sdist pip cannot install, so its
``umqtt/simple.py`` is copied into tests/firmware/.cache/).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

from .fw_support import MicroPythonRunner

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIRMWARE = ROOT / "firmware_clients"
MICROPYTHON_CLIENT = FIRMWARE / "micropython"
BASIC_CLIENT = FIRMWARE / "micropython_basic"
SHIMS = HERE / "shims"
CACHE = HERE / ".cache"
WASM_DIR = HERE / "micropython_wasm"
UMQTT_VERSION = "1.3.4"

# appended, not prepended: nothing installed may be shadowed for the rest of the test process
for _path in (MICROPYTHON_CLIENT, SHIMS):
    if str(_path) not in sys.path:
        sys.path.append(str(_path))


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# ---------------------------------------------------------------- real MicroPython (WebAssembly)


@pytest.fixture(scope="session")
def micropython() -> MicroPythonRunner:
    """``run(script, heap=..., mounts={host_dir: "/dir"})`` executes ``script`` in real
    MicroPython with the firmware at /fw (already on sys.path) and any extra host directories
    copied in, and returns its stdout; a Python exception fails the test."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    assert node and npm, "node and npm are needed (scripts/test installs them)"
    entry = WASM_DIR / "node_modules/@micropython/micropython-webassembly-pyscript/micropython.mjs"
    with _locked("npm"):
        if not entry.exists():
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=WASM_DIR,
                check=True,
                capture_output=True,
                timeout=300,
            )
    assert entry.exists(), f"npm install did not provide {entry}"

    def run(
        script: str,
        heap: int = 1 << 20,
        timeout: float = 120.0,
        mounts: dict[Path, str] | None = None,
    ) -> str:
        script_file = CACHE / f"mp_script_{time.monotonic_ns()}.py"
        script_file.write_text("import sys\nsys.path.append('/fw')\n" + script)
        try:
            proc = subprocess.run(
                [
                    node,
                    str(WASM_DIR / "run.mjs"),
                    str(heap),
                    str(script_file),
                    f"{MICROPYTHON_CLIENT}=/fw",
                    *(f"{host}={inner}" for host, inner in (mounts or {}).items()),
                ],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        finally:
            script_file.unlink()
        if proc.returncode != 0:
            pytest.fail(f"MicroPython raised:\n{proc.stderr}\nstdout:\n{proc.stdout}")
        return proc.stdout

    return run


# ---------------------------------------------------------------- umqtt.simple from PyPI

UMQTT_SHA256 = "8555d2f654deb8eb0d724f79b0811a78cc94029d070f3d96bbd74288653d63a5"


@pytest.fixture(scope="session")
def umqtt_simple_path() -> Path:
    """A directory holding ``umqtt/simple.py`` of micropython-umqtt.simple, for sys.path.

    The sdist has neither setup.py nor pyproject.toml, so ``pip download`` fetches and unpacks
    it (checking PyPI's hash) and then refuses to build it; ``--no-clean`` keeps the unpacked
    tree in a temporary directory of ours, from which simple.py is copied and its hash checked.
    """
    target = CACHE / f"umqtt-{UMQTT_VERSION}"
    module = target / "umqtt" / "simple.py"
    with _locked("umqtt"):
        if not module.exists():
            scratch = Path(tempfile.mkdtemp(prefix="umqtt-", dir=CACHE))
            try:
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "pip",
                        "download",
                        "-q",
                        "--no-clean",
                        "--no-deps",
                        "--no-binary",
                        ":all:",
                        f"micropython-umqtt.simple=={UMQTT_VERSION}",
                        "-d",
                        str(scratch / "dl"),
                    ],
                    capture_output=True,
                    timeout=300,
                    env={**os.environ, "TMPDIR": str(scratch)},
                )  # exits 1 by design: "does not appear to be a Python project"
                found = sorted(scratch.rglob("umqtt/simple.py"))
                assert found, "pip did not fetch micropython-umqtt.simple (is PyPI reachable?)"
                data = found[0].read_bytes()
                assert hashlib.sha256(data).hexdigest() == UMQTT_SHA256, "unexpected simple.py"
                module.parent.mkdir(parents=True, exist_ok=True)
                (module.parent / "__init__.py").write_text("")
                module.write_bytes(data)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    return target


@pytest.fixture
def umqtt(umqtt_simple_path: Path) -> ModuleType:
    """``umqtt.simple`` from PyPI, importable (its directory appended to sys.path)."""
    if str(umqtt_simple_path) not in sys.path:
        sys.path.append(str(umqtt_simple_path))
    from umqtt import simple

    return simple


@pytest.fixture
def basic_app(umqtt: ModuleType) -> ModuleType:
    """The example application of firmware_clients/micropython_basic (``basic_app.run``),
    importable together with the umqtt.simple it runs on."""
    if str(BASIC_CLIENT) not in sys.path:
        sys.path.append(str(BASIC_CLIENT))
    import basic_app as app

    return app

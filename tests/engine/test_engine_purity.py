"""The engine stays sans-io: no asyncio, no socket, no thread, no clock, and nothing of ours but
the codec (DESIGN.md "Where the core is going": time is a parameter, never read inside). Every
import of every module under ``edge_broker/engine`` is read with ``ast``, local ones and those
under ``if TYPE_CHECKING:`` too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "edge_broker" / "engine"

# What may run I/O, wait, or read a clock: none of it belongs in the engine.
FORBIDDEN_STDLIB = frozenset(
    {
        "asyncio",
        "socket",
        "selectors",
        "ssl",
        "threading",
        "concurrent",
        "multiprocessing",
        "subprocess",
        "time",
        "datetime",
        "os",
        "random",
        "logging",
    }
)
ALLOWED_OURS = ("edge_broker.mqtt", "edge_broker.engine")


def _imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in ``path``."""
    package = "edge_broker.engine"
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                name = f"{base}.{node.module}" if node.module else base
            else:
                name = node.module or ""
            found.append((name, node.lineno))
    return found


MODULES = sorted(ENGINE.glob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_the_engine_imports_no_io_no_clock_and_only_the_codec(path: Path) -> None:
    for name, line in _imports(path):
        where = f"engine/{path.name}:{line} imports {name}"
        if name.startswith("edge_broker"):
            assert name.startswith(ALLOWED_OURS), f"{where}: the engine may use mqtt/ only"
        else:
            assert name.split(".")[0] not in FORBIDDEN_STDLIB, f"{where}: pass it in instead"


def test_the_rule_sees_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nfrom ..broker import server\n")
    assert [name for name, _ in _imports(bad)] == ["time", "edge_broker.broker"]

"""Imports run one way (DESIGN.md "One direction of imports", CONVENTIONS.md, issue 21 item 5).

Every module's imports are read with ``ast`` -- module-level ones, function-local ones and those
under ``if TYPE_CHECKING:`` alike, since a type named in a signature is a dependency too -- and
each import of a project module must go from a unit to a unit of a *lower* rank in
:data:`RANKS`. The ranks are a total order, so the table cannot describe a cycle, and
``docs/architecture.md`` prints the same table (checked below, since a clone has no DESIGN.md).

:data:`PENDING` lists the imports that still go the wrong way, each with the change that removes
it. It may only shrink: an entry whose import is gone fails the test, so whoever removes an
import also removes its entry.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edge_broker"

# unit → rank. A module belongs to the longest unit that is a prefix of its dotted name (after
# "edge_broker."); a unit may import its own modules and units of a lower rank, nothing else.
RANKS: dict[str, int] = {
    # nothing of ours below them
    "": 0,  # edge_broker/__init__.py: the version string
    "mqtt": 0,  # the sans-io codec
    "matching": 0,  # the pattern languages
    "keys": 0,
    "sdnotify": 0,
    "tls": 0,  # the TLS contexts of the listeners and the uplinks: ssl only
    "config_section": 0,  # a TOML table being read, and ConfigError
    # credential formats and the method names: config.py checks them while it reads the file
    "auth.errors": 0,
    "auth.methods": 0,
    "auth.mosquitto_hashes": 0,
    "auth.token_keys": 1,
    "auth.password": 1,
    "engine": 1,  # the sans-io connection engine and deadlines: mqtt only
    "identity": 1,  # who is connected: what auth produces and the gates judge (matching only)
    "store": 1,
    "audit": 1,
    "authz": 2,  # the gate pipeline: matching, identity, audit, mqtt.reason_codes
    # the section parsers that live with their packages; config.py composes them
    "ops.settings": 3,
    "ops.preflight": 4,
    "bridge.config": 4,
    "config": 5,
    "claims": 6,
    "auth": 7,
    "broker": 8,
    "bridge": 9,
    "sync": 9,
    "ops": 10,
    "pipeline": 11,  # cloud side: reuses matching and authz; nothing imports it
    "smoker_client": 11,
    "cli": 12,  # the command-line front ends of every package
    "__main__": 13,  # python -m entry points (edge_broker/__main__.py, broker/__main__.py)
}

# Imports a rank alone would allow but DESIGN.md forbids: (importing unit, imported module).
FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("authz", "mqtt.packets"),  # gates judge request values, not the codec's packets
    # policy sync and the PySpark pipeline judge with authz's policy object and reach the
    # running broker through sync.host.PolicyHost, never its internals (issue 28 item 1)
    ("sync", "broker"),
    ("pipeline", "broker"),
)

# Imports that still go the wrong way: (importer, imported) module names → what removes it.
PENDING: dict[tuple[str, str], str] = {}


@dataclass(frozen=True, slots=True)
class Import:
    importer: str  # dotted, without "edge_broker."
    imported: str
    line: int
    local: bool  # inside a function body


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if not node.level:
        base = node.module or ""
        if not base.startswith("edge_broker"):
            return []
        names = [base]
    else:
        here = ["edge_broker", *filter(None, module.split("."))]
        package = here if is_package else here[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        names = [".".join([*anchor, *([node.module] if node.module else [])])]
        if node.module is None:  # from . import x: x may be a module
            names = [f"{names[0]}.{alias.name}" for alias in node.names]
    return [name.removeprefix("edge_broker").removeprefix(".") for name in names]


@cache
def project_imports() -> list[Import]:
    found: list[Import] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        in_function: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                in_function.update(id(sub) for sub in ast.walk(node) if sub is not node)
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [
                    a.name.removeprefix("edge_broker").removeprefix(".")
                    for a in node.names
                    if a.name.split(".")[0] == "edge_broker"
                ]
            elif isinstance(node, ast.ImportFrom):
                targets = _absolute(module, path.name == "__init__.py", node)
            for target in targets:
                found.append(Import(module, target, node.lineno, id(node) in in_function))
    return found


def unit_of(module: str) -> str:
    if module == "__main__" or module.endswith(".__main__"):
        return "__main__"
    best = ""
    for unit in RANKS:
        if unit and (module == unit or module.startswith(unit + ".")) and len(unit) > len(best):
            best = unit
    return best


@cache
def _module_of(target: str) -> str:
    """``from ..x import name`` names the module ``x``; a name inside a module maps to it."""
    while target and not (
        (PACKAGE / target.replace(".", "/")).with_suffix(".py").exists()
        or (PACKAGE / target.replace(".", "/") / "__init__.py").exists()
    ):
        target = target.rpartition(".")[0]
    return target


def wrong_way() -> dict[tuple[str, str], list[Import]]:
    bad: dict[tuple[str, str], list[Import]] = {}
    for imp in project_imports():
        target = _module_of(imp.imported)
        source, dest = unit_of(imp.importer), unit_of(target)
        forbidden = any(
            source == unit and (target == banned or target.startswith(banned + "."))
            for unit, banned in FORBIDDEN
        )
        if forbidden or (source != dest and RANKS[dest] >= RANKS[source]):
            bad.setdefault((imp.importer, target), []).append(imp)
    return bad


def test_every_module_belongs_to_a_ranked_unit() -> None:
    top_level = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    top_level -= {"__pycache__", "__init__", "py"}
    unranked = sorted(
        name
        for name in top_level
        if not name.startswith(".") and name not in RANKS and name != "__main__"
    )
    assert not unranked, f"add {unranked} to RANKS here and in docs/architecture.md"


def test_imports_go_down_the_ranks() -> None:
    bad = wrong_way()
    new = {
        key: [f"edge_broker/{i.importer.replace('.', '/')}.py:{i.line}" for i in imps]
        for key, imps in bad.items()
        if key not in PENDING
    }
    assert not new, (
        "imports against DESIGN.md's direction (importer, imported): "
        f"{new}; move the shared piece down a rank instead"
    )


def test_pending_wrong_way_imports_still_exist() -> None:
    gone = sorted(set(PENDING) - set(wrong_way()))
    assert not gone, f"these imports are gone: remove their PENDING entries: {gone}"


def test_mqtt_matching_identity_import_nothing_of_ours() -> None:
    for imp in project_imports():
        if unit_of(imp.importer) in {"mqtt", "matching", "identity"}:
            allowed = {unit_of(imp.importer)} | (
                {"matching"} if imp.importer == "identity" else set()
            )
            assert unit_of(_module_of(imp.imported)) in allowed, imp


def test_nothing_imports_cli_or_pipeline() -> None:
    for imp in project_imports():
        dest = unit_of(_module_of(imp.imported))
        if dest in {"cli", "pipeline"}:
            assert unit_of(imp.importer) in {dest, "__main__"}, imp


def test_architecture_doc_prints_the_same_table() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| *(\d+) *\| *`([^`]*)` *\|", text, flags=re.MULTILINE)
    documented = {("" if unit == "edge_broker" else unit): int(rank) for rank, unit in rows}
    assert documented == RANKS


def test_the_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The parser itself: a function-local relative import and a TYPE_CHECKING one are seen."""
    names = {(i.importer, i.imported, i.local) for i in project_imports()}
    assert ("broker.__main__", "cli.broker", False) in names
    assert any(local for _, _, local in names)
    assert unit_of("ops.settings") == "ops.settings" and unit_of("ops.service") == "ops"
    assert unit_of("broker.__main__") == "__main__" and unit_of("") == ""

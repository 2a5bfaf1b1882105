"""Folders are layers: imports run one way (DESIGN.md "Where the core is going", CONVENTIONS.md).

Every import is read with ``ast`` by ``scripts/import_graph.py``: module-level ones,
function-local ones and those under ``if TYPE_CHECKING:`` alike (a type named in a signature is
a dependency too), and the plugin loads done through ``importlib`` (a string such as
``"edge_broker.auth.anonymous:build"`` is an import of that module).

Two tables hold the tree to its layers, each a total order (so neither can describe a cycle):

- :data:`RANKS` ranks the FOLDERS of ``edge_broker`` (and its top-level modules): a module may
  import modules of its own folder and of folders of a lower rank, nothing else. Every
  ``__main__.py`` is a process entry point, the unit ``__main__``, above everything.
- :data:`BROKER_RANKS` ranks what is inside ``broker/``: its sub-folders (``persist``,
  ``limits``) and its modules, by the same rule; and no sub-folder of ``broker/`` holds a cycle.

``docs/architecture.md`` prints both tables (checked below, since a clone has no DESIGN.md).

:data:`PENDING` lists the imports that still go the wrong way, each with the change that removes
it. It may only shrink: an entry whose import is gone fails the test, so whoever removes an
import also removes its entry.

The engine stays sans-io: ``engine/`` imports only ``mqtt`` and the standard library, no asyncio
or other I/O module, and reads no clock (time is a parameter).
"""

from __future__ import annotations

import ast
import re
import sys
from functools import cache
from pathlib import Path

from scripts.import_graph import (
    Import,
    graph,
    node_in,
    package_of,
    strongly_connected,
)
from scripts.import_graph import project_imports as read_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edge_broker"

# folder (or top-level module) → rank. "" is edge_broker/__init__.py (the version string).
RANKS: dict[str, int] = {
    # nothing of ours below them
    "": 0,
    "mqtt": 0,  # the sans-io codec
    "matching": 0,  # the pattern languages
    "keys": 0,
    "sdnotify": 0,
    "tls": 0,  # the TLS contexts of the listeners and the uplinks: ssl only
    "config_section": 0,  # a TOML table being read, and ConfigError
    "console": 0,  # the web console: static pages and the path the admin listener serves them from
    "engine": 1,  # the sans-io session engine: mqtt only
    "identity": 1,  # who is connected: what auth produces and the gates judge (matching only)
    "store": 1,  # the append-only log, and where the logs live (state_dir)
    "audit": 1,
    "authz": 2,  # the gates: matching, identity, audit, mqtt.reason_codes
    "claims": 3,
    "auth": 4,  # authentication methods; auth.smoker verifies claims
    "config": 5,  # reads the file and assembles the sections
    "broker": 6,  # the asyncio layer
    "bridge": 7,  # clients of the broker
    "sync": 8,
    "admin": 8,  # the HTTP stack, admin users, the admin API: broker/operator.py only
    "ops": 9,  # metrics, health, preflight, the service that wires broker, bridges and sync
    "pipeline": 10,  # cloud side: nothing imports it
    "smoker_client": 10,
    "cli": 11,  # the command-line front ends: nothing imports cli
    "__main__": 12,  # python -m entry points (edge_broker/__main__.py, broker/__main__.py)
}

# inside broker/: sub-folder or module → rank (same rule, one level down).
BROKER_RANKS: dict[str, int] = {
    "broker": 0,  # broker/__init__.py
    "awaiting": 0,
    "message": 0,
    "network_interfaces": 0,
    "pattern_subscriptions": 0,
    "scheduler": 0,
    "graceful_close": 0,
    "stats": 0,
    "logs": 0,
    "ownership": 0,
    "journal": 1,  # the interface a session reports its changes through
    "bridging": 2,
    "limits": 2,  # budgets, quotas, admission
    "listeners": 2,
    "session": 2,
    "retained": 3,
    "topic_space": 4,
    "delivery": 5,
    "persist": 5,  # reference tables, write-ahead, recovery, migrations
    "rejudge": 6,
    "sys_topics": 6,
    "reload": 7,
    "handler_api": 7,  # what a packet handler may touch: the narrow interface (Protocols)
    "outcomes": 8,
    "token_expiry": 8,
    "handle_ping": 8,
    "handle_disconnect": 8,
    "handle_unsubscribe": 8,
    "handle_claims": 9,
    "handle_subscribe": 9,
    "handle_publish": 10,
    "handle_connect": 10,
    "handle_auth": 11,
    "dispatch": 12,
    "connection": 13,
    "websocket": 14,
    "session_control": 13,  # list/drop sessions: the server and the operator call it
    "control_channel": 14,  # the local socket of `edge-broker session`
    "server": 15,
    "operator": 16,  # the narrow interface the admin API calls
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
# Empty: every folder is a layer and broker/ has no cycle; a new entry needs a reason here.
PENDING: dict[tuple[str, str], str] = {}


@cache
def project_imports() -> tuple[Import, ...]:
    return tuple(read_imports(ROOT))


def unit_of(module: str) -> str:
    """The folder (or top-level module) ``module`` is in; ``__main__`` for entry points."""
    return package_of(module) if module else ""


def broker_unit_of(module: str) -> str | None:
    """Inside broker/: the sub-folder or module ``module`` is in (None outside broker/)."""
    node = node_in(module, "broker")
    return None if node is None else node.removeprefix("broker.") or "broker"


def _wrong(imp: Import) -> bool:
    source, dest = unit_of(imp.importer), unit_of(imp.imported)
    forbidden = any(
        source == unit and (imp.imported == banned or imp.imported.startswith(banned + "."))
        for unit, banned in FORBIDDEN
    )
    if forbidden or (source != dest and RANKS[dest] >= RANKS[source]):
        return True
    inner_source, inner_dest = broker_unit_of(imp.importer), broker_unit_of(imp.imported)
    if inner_source is None or inner_dest is None or inner_source == inner_dest:
        return False
    return BROKER_RANKS[inner_dest] >= BROKER_RANKS[inner_source]


def _in_subfolder_cycle() -> set[tuple[str, str]]:
    """Imports inside one sub-folder of broker/ that close a cycle there."""
    found: set[tuple[str, str]] = set()
    for folder in {
        f"broker.{name}" for name in BROKER_RANKS if (PACKAGE / "broker" / name).is_dir()
    }:
        inner = graph(
            (a, b)
            for imp in project_imports()
            if (a := node_in(imp.importer, folder)) and (b := node_in(imp.imported, folder))
        )
        for component in strongly_connected(inner):
            found.update((a, b) for a in component for b in inner[a] if b in component)
    return found


def wrong_way() -> dict[tuple[str, str], list[Import]]:
    cyclic = _in_subfolder_cycle()
    bad: dict[tuple[str, str], list[Import]] = {}
    for imp in project_imports():
        key = (imp.importer, imp.imported)
        if _wrong(imp) or key in cyclic:
            bad.setdefault(key, []).append(imp)
    return bad


def test_every_folder_and_module_is_ranked() -> None:
    top_level = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    top_level -= {"__pycache__", "__init__", "__main__", "py"}
    unranked = sorted(n for n in top_level if not n.startswith(".") and n not in RANKS)
    assert not unranked, f"add {unranked} to RANKS here and in docs/architecture.md"
    inside = {p.stem if p.is_file() else p.name for p in (PACKAGE / "broker").iterdir()}
    inside -= {"__pycache__", "__init__", "__main__", "py"}
    unranked = sorted(n for n in inside if not n.startswith(".") and n not in BROKER_RANKS)
    assert not unranked, f"add {unranked} to BROKER_RANKS here and in docs/architecture.md"
    gone = sorted(n for n in BROKER_RANKS if n not in inside and n not in ("__main__", "broker"))
    assert not gone, f"remove {gone} from BROKER_RANKS and docs/architecture.md: no such module"


def test_the_architecture_page_shows_the_ranks_the_test_enforces() -> None:
    """docs/architecture.md is the newcomer's map: its two rank tables are these two tables."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    layers, inside = page.split("## Inside broker/", 1)
    row = re.compile(r"^\| (\d+) \| `([^`]+)` \|", re.M)
    shown_top = {name: int(rank) for rank, name in row.findall(layers)}
    assert shown_top == {("edge_broker" if n == "" else n): r for n, r in RANKS.items()}
    shown_broker = {name.removeprefix("broker/"): int(rank) for rank, name in row.findall(inside)}
    assert shown_broker == {n: r for n, r in BROKER_RANKS.items() if n != "__main__"}


def test_imports_go_down_the_ranks() -> None:
    bad = wrong_way()
    new = {
        key: [f"edge_broker/{i.importer.replace('.', '/')}.py:{i.line}" for i in imps]
        for key, imps in bad.items()
        if key not in PENDING
    }
    assert not new, (
        "imports against the layers (importer, imported): "
        f"{new}; move the shared piece down a rank, or hand the collaborator in through a "
        "Protocol that names what is used"
    )


def test_pending_wrong_way_imports_still_exist() -> None:
    gone = sorted(set(PENDING) - set(wrong_way()))
    assert not gone, f"these imports are gone: remove their PENDING entries: {gone}"


def folder_cycles(imports: tuple[Import, ...] | list[Import]) -> dict[str, list[list[str]]]:
    """Inside every folder at every depth (``auth``, ``broker``, ``broker.persist`` …), its
    modules and sub-folders as nodes: the sets of them that import each other in a loop."""
    folders = {".".join(imp.importer.split(".")[:n]) for imp in imports for n in (1, 2, 3)}
    found: dict[str, list[list[str]]] = {}
    for folder in sorted(f for f in folders if f):
        inner = graph(
            (a, b)
            for imp in imports
            if (a := node_in(imp.importer, folder)) and (b := node_in(imp.imported, folder))
        )
        cycles = strongly_connected(inner)
        if cycles:
            found[folder] = cycles
    return found


def test_no_folder_holds_a_cycle() -> None:
    """Not only broker/: inside ``auth/`` the methods (loaded as plugins by ``chain.py``
    through ``methods.py``) import ``method_api.py`` below the loader, never ``chain.py``; a
    plugin load is an import like any other here."""
    assert folder_cycles(project_imports()) == {}


def test_the_folder_cycle_check_sees_a_plugin_loop(tmp_path: Path) -> None:
    """A method that imports the chain which loads it by name is a cycle the check reports."""
    auth = tmp_path / "edge_broker" / "auth"
    auth.mkdir(parents=True)
    for path in ("__init__.py", "auth/__init__.py"):
        (tmp_path / "edge_broker" / path).write_text("")
    (auth / "chain.py").write_text('FACTORIES = {"a": "edge_broker.auth.anonymous:build"}\n')
    (auth / "anonymous.py").write_text("from .chain import FACTORIES\n")
    assert folder_cycles(read_imports(tmp_path)) == {"auth": [["auth.anonymous", "auth.chain"]]}


def test_mqtt_matching_identity_import_nothing_of_ours() -> None:
    for imp in project_imports():
        if unit_of(imp.importer) in {"mqtt", "matching", "identity"}:
            allowed = {unit_of(imp.importer)}
            if imp.importer == "identity":  # the tenant names of PATTERNS.md D14
                allowed.add("matching")
            assert unit_of(imp.imported) in allowed, imp


def test_admin_reaches_the_broker_only_through_the_operator() -> None:
    """``admin/`` calls the narrow interface of ``broker/operator.py``, never broker internals
    (DESIGN.md: the admin API is a client of the broker's narrow interfaces)."""
    for imp in project_imports():
        if unit_of(imp.importer) == "admin" and unit_of(imp.imported) == "broker":
            assert imp.imported == "broker.operator", imp


def test_nothing_imports_cli_pipeline_or_an_entry_point() -> None:
    for imp in project_imports():
        dest = unit_of(imp.imported)
        if dest in {"cli", "pipeline", "__main__"}:
            assert unit_of(imp.importer) in {dest, "__main__"}, imp


# The engine is sans-io (DESIGN.md): no event loop, no sockets, no threads, no clock.
ENGINE_BANNED_MODULES = frozenset(
    {"asyncio", "socket", "selectors", "select", "ssl", "threading", "time", "datetime", "os"}
)
CLOCK_READS = frozenset(
    {"monotonic", "monotonic_ns", "perf_counter", "time", "time_ns", "now", "utcnow", "today"}
)


def _engine_violations(tree: ast.AST, where: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        for name in names:
            top = name.split(".")[0]
            if top == "edge_broker" or top in ENGINE_BANNED_MODULES:
                found.append(f"{where}:{node.lineno} imports {name}")
            elif top not in sys.stdlib_module_names and top != "__future__":
                found.append(f"{where}:{node.lineno} imports {name}, not the standard library")
        if isinstance(node, ast.ImportFrom) and node.level:
            if node.level > 2 or (node.level == 2 and (node.module or "").split(".")[0] != "mqtt"):
                found.append(f"{where}:{node.lineno} imports {'.' * node.level}{node.module}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in CLOCK_READS | {"get_running_loop", "get_event_loop"}
        ):
            found.append(f"{where}:{node.lineno} reads {ast.unparse(node.func)}()")
    return found


def test_the_engine_is_pure() -> None:
    """engine/ imports only mqtt and the standard library, nothing of asyncio, I/O or threads,
    and reads no clock: ``now`` is passed in."""
    found: list[str] = []
    for path in sorted((PACKAGE / "engine").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += _engine_violations(tree, str(path.relative_to(ROOT)))
    assert not found, found


def test_the_engine_check_sees_a_clock_an_event_loop_and_the_broker() -> None:
    """The purity check itself fails on what it forbids."""
    samples = {
        "import time\nnow = time.monotonic()\n": 2,
        "import asyncio\n": 1,
        "from datetime import datetime\nx = datetime.now()\n": 2,
        "from ..broker import server\n": 1,
        "from ...config import Config\n": 1,
        "import cbor2\n": 1,
        "def f(loop):\n    return loop.time()\n": 1,
        "from ..mqtt.codec import encode\nfrom .events import Event\nimport heapq\n": 0,
    }
    for source, count in samples.items():
        assert len(_engine_violations(ast.parse(source), "x.py")) == count, source


def _table(text: str, heading: str) -> dict[str, int]:
    section = text.split(heading, 1)[1]
    section = section.split("\n#", 1)[0]
    rows = re.findall(r"^\| *(\d+) *\| *`([^`]*)` *\|", section, flags=re.MULTILINE)
    return {unit: int(rank) for rank, unit in rows}


def test_architecture_doc_prints_the_same_tables() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    folders = _table(text, "## Layers")
    documented = {("" if unit == "edge_broker" else unit): rank for unit, rank in folders.items()}
    assert documented == RANKS
    inside = _table(text, "## Inside broker/")
    assert {unit.removeprefix("broker/") for unit in inside} == set(BROKER_RANKS)
    assert {unit.removeprefix("broker/"): r for unit, r in inside.items()} == BROKER_RANKS


def test_the_reader_sees_every_kind_of_import() -> None:
    """The reader itself: function-local, TYPE_CHECKING and importlib plugin loads are seen."""
    imports = project_imports()
    names = {(i.importer, i.imported, i.kind) for i in imports}
    assert ("broker.__main__", "cli.broker", "import") in names
    assert ("auth.methods", "auth.anonymous", "plugin") in names  # AUTHENTICATOR_FACTORIES
    assert ("cli", "cli.token", "plugin") in names  # COMMANDS
    assert any(i.local for i in imports)
    type_only = [
        i
        for i in imports
        if (i.importer, i.imported) == ("broker.connection", "broker.handler_api")
    ]
    assert type_only and not any(i.local for i in type_only)  # under TYPE_CHECKING
    assert ("broker.reload", "broker.rejudge", "import") in names
    assert unit_of("config.service") == "config" and unit_of("broker.__main__") == "__main__"
    assert unit_of("") == "" and broker_unit_of("broker.persist.tables") == "persist"
    assert broker_unit_of("broker.__main__") is None and broker_unit_of("config") is None


def test_a_wrong_way_type_only_import_counts(tmp_path: Path) -> None:
    """An import under ``if TYPE_CHECKING:`` is an edge like any other."""
    (tmp_path / "edge_broker" / "mqtt").mkdir(parents=True)
    (tmp_path / "edge_broker" / "broker").mkdir()
    for path in ("__init__.py", "mqtt/__init__.py", "broker/__init__.py", "broker/server.py"):
        (tmp_path / "edge_broker" / path).write_text("")
    (tmp_path / "edge_broker" / "mqtt" / "codec.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..broker.server import X\n"
    )
    found = read_imports(tmp_path)
    assert [(i.importer, i.imported) for i in found] == [("mqtt.codec", "broker.server")]

#!/usr/bin/env python3
"""The import graph of ``edge_broker``: package cycles, the loops inside ``broker/``, back-edges.

Every import of a project module is read with ``ast``: module-level ones, function-local ones and
those under ``if TYPE_CHECKING:`` alike (a type named in a signature is a dependency too), plus
the plugin loads done through ``importlib``: a string constant naming one of our modules
(``"edge_broker.auth.anonymous:build"``) in a module is an import of that module.

    .venv/bin/python scripts/import_graph.py            # the report
    .venv/bin/python scripts/import_graph.py --json     # the same figures as JSON
    .venv/bin/python scripts/import_graph.py --root /work/main   # another checkout

Units: a *package* is a top-level folder (or a top-level module) of ``edge_broker``; inside
``broker/`` the *modules* (and sub-folders) are the nodes. A strongly connected component of more
than one node is a cycle. "Back-edges" are the edges that a depth-first search in name order
finds closing a cycle; removing them leaves the graph acyclic, so their count is an upper bound
of how many imports must go to break every cycle. ``tests/test_import_layers.py`` uses
:func:`project_imports` to hold the tree to its layers.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PLUGIN_TARGET = re.compile(r"^edge_broker(?:\.\w+)+(?::\w+)?$")


@dataclass(frozen=True, slots=True)
class Import:
    importer: str  # dotted, without "edge_broker."
    imported: str  # the module imported (a name inside a module maps to that module)
    line: int
    local: bool  # inside a function body
    kind: str  # "import" | "plugin"


def module_name(package: Path, path: Path) -> str:
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if not node.level:
        base = node.module or ""
        if base.split(".")[0] != "edge_broker":
            return []
        names = [base]
        if node.module == "edge_broker":
            names = [f"edge_broker.{alias.name}" for alias in node.names]
    else:
        here = ["edge_broker", *filter(None, module.split("."))]
        package = here if is_package else here[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
        # ``from . import x`` and ``from .pkg import mod``: each name may be a module
        names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [name.removeprefix("edge_broker").removeprefix(".") for name in names]


def _resolve(package: Path, target: str) -> str | None:
    """The module ``target`` names, or None when it is a name inside the module of a prefix."""
    path = package / target.replace(".", "/")
    if target == "" or path.with_suffix(".py").exists() or (path / "__init__.py").exists():
        return target
    return None


def _module_of(package: Path, target: str) -> str:
    while _resolve(package, target) is None:
        target = target.rpartition(".")[0]
    return target


def project_imports(root: Path) -> list[Import]:
    """Every import of an ``edge_broker`` module by an ``edge_broker`` module under ``root``."""
    package = root / "edge_broker"
    found: list[Import] = []
    for path in sorted(package.rglob("*.py")):
        module = module_name(package, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        in_function: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                in_function.update(id(sub) for sub in ast.walk(node) if sub is not node)
        # logger names ("edge_broker.broker") and docstrings are not plugin loads
        not_loads = {
            id(arg)
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "getLogger"
            for arg in node.args
        } | {
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        seen: set[tuple[str, int]] = set()
        for node in ast.walk(tree):
            kind = "import"
            candidates: list[str] = []
            if isinstance(node, ast.Import):
                candidates = [
                    a.name.removeprefix("edge_broker").removeprefix(".")
                    for a in node.names
                    if a.name.split(".")[0] == "edge_broker"
                ]
            elif isinstance(node, ast.ImportFrom):
                from_names = _absolute(module, path.name == "__init__.py", node)
                # the base always counts; an extra ``name`` counts only where it is a module
                candidates = from_names[:1] + [
                    name for name in from_names[1:] if _resolve(package, name) is not None
                ]
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and PLUGIN_TARGET.match(node.value)
                and id(node) not in not_loads
            ):
                kind = "plugin"
                dotted = node.value.partition(":")[0].removeprefix("edge_broker.")
                candidates = [dotted] if _resolve(package, dotted) is not None else []
            for candidate in candidates:
                target = _module_of(package, candidate)
                if target == module or (target, node.lineno) in seen:
                    continue
                seen.add((target, node.lineno))
                local = id(node) in in_function
                found.append(Import(module, target, node.lineno, local, kind))
    return found


def package_of(module: str) -> str:
    """The top-level folder or module: ``broker.persist.journal`` → ``broker``. Every
    ``__main__.py`` (``python -m edge_broker``, ``python -m edge_broker.broker``) is the unit
    ``__main__``: a process entry point, above everything, that nothing imports."""
    if module == "__main__" or module.endswith(".__main__"):
        return "__main__"
    return module.split(".")[0]


def node_in(module: str, package: str) -> str | None:
    """Inside ``package``: the next level down (a module or a sub-folder), else None."""
    if module == package:
        return package  # the package's __init__
    if not module.startswith(package + ".") or package_of(module) == "__main__":
        return None
    return package + "." + module[len(package) + 1 :].split(".")[0]


def graph(edges: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a, b in edges:
        out.setdefault(a, set())
        out.setdefault(b, set())
        if a != b:
            out[a].add(b)
    return out


def strongly_connected(g: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one node, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for start in sorted(g):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(g[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            if children:
                child = children.pop(0)
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(g[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    result.append(sorted(component))
    return sorted(result)


def back_edges(g: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    """Edges a depth-first search in name order finds pointing at a node still on its path."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    found: list[tuple[str, str]] = []
    for start in sorted(g):
        if start in state:
            continue
        state[start] = 1
        work: list[tuple[str, list[str]]] = [(start, sorted(g[start]))]
        while work:
            node, children = work[-1]
            if not children:
                state[node] = 2
                work.pop()
                continue
            child = children.pop(0)
            if state.get(child) == 1:
                found.append((node, child))
            elif child not in state:
                state[child] = 1
                work.append((child, sorted(g[child])))
    return sorted(found)


def report(root: Path) -> dict[str, object]:
    imports = project_imports(root)
    packages = graph((package_of(i.importer), package_of(i.imported)) for i in imports)
    package_cycles = strongly_connected(packages)
    per_package: dict[str, object] = {}
    for package in sorted(packages):
        inner = graph(
            (a, b)
            for i in imports
            if (a := node_in(i.importer, package)) is not None
            and (b := node_in(i.imported, package)) is not None
        )
        cycles = strongly_connected(inner)
        back = back_edges(inner)
        if cycles or back:
            per_package[package] = {
                "cycles": cycles,
                "largest_cycle": max((len(c) for c in cycles), default=0),
                "back_edges": [f"{a} -> {b}" for a, b in back],
            }
    broker_modules = graph(
        (i.importer, i.imported)
        for i in imports
        if package_of(i.importer) == "broker" and package_of(i.imported) == "broker"
    )
    broker_sccs = strongly_connected(broker_modules)
    return {
        "imports": len(imports),
        "plugin_loads": sorted(
            {f"{i.importer} -> {i.imported}" for i in imports if i.kind == "plugin"}
        ),
        "package_cycles": package_cycles,
        "package_back_edges": [f"{a} -> {b}" for a, b in back_edges(packages)],
        "package_edges_in_cycles": sorted(
            f"{a} -> {b}"
            for cycle in package_cycles
            for a in cycle
            for b in packages[a]
            if b in cycle
        ),
        "inside_packages": per_package,
        "broker_module_sccs": broker_sccs,
        "broker_module_back_edges": [f"{a} -> {b}" for a, b in back_edges(broker_modules)],
    }


def _print(figures: Mapping[str, object]) -> None:
    print(f"project imports read: {figures['imports']}")
    print("plugin loads (importlib targets):")
    for line in figures["plugin_loads"]:  # type: ignore[attr-defined]
        print(f"  {line}")
    cycles = figures["package_cycles"]
    print(f"package-level cycles: {len(cycles)}")  # type: ignore[arg-type]
    for cycle in cycles:  # type: ignore[attr-defined]
        print(f"  {len(cycle)} packages: {' '.join(cycle)}")
    print(f"package edges inside those cycles: {len(figures['package_edges_in_cycles'])}")  # type: ignore[arg-type]
    for edge in figures["package_edges_in_cycles"]:  # type: ignore[attr-defined]
        print(f"  {edge}")
    print("package-level back-edges (DFS, name order):")
    for edge in figures["package_back_edges"]:  # type: ignore[attr-defined]
        print(f"  {edge}")
    inside = figures["inside_packages"]
    print("cycles and back-edges inside each package (its modules and sub-folders as nodes):")
    if not inside:
        print("  none")
    for package, info in inside.items():  # type: ignore[attr-defined]
        sizes = [len(c) for c in info["cycles"]]
        print(
            f"  {package}: {len(info['cycles'])} cycle(s) of sizes {sizes}, "
            f"{len(info['back_edges'])} back-edge(s)"
        )
        for edge in info["back_edges"]:
            print(f"    {edge}")
    sccs = figures["broker_module_sccs"]
    print(f"broker/ module-level strongly connected components: {len(sccs)}")  # type: ignore[arg-type]
    for scc in sccs:  # type: ignore[attr-defined]
        print(f"  {len(scc)} modules: {' '.join(scc)}")
    back = figures["broker_module_back_edges"]
    print(f"broker/ module-level back-edges: {len(back)}")  # type: ignore[arg-type]
    for edge in back:  # type: ignore[attr-defined]
        print(f"  {edge}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if not (args.root / "edge_broker").is_dir():
        print(
            f"{args.root}: no edge_broker/ package here; pass the checkout with --root",
            file=sys.stderr,
        )
        return 2
    figures = report(args.root)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        _print(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())

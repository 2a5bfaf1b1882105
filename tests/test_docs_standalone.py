"""The repository's documentation stands alone: a reader of a fresh clone can follow every link
and find every file a page names, and meets no reference to documents or tracker items that are
not in the repository ("issue 16", "seed 003", a design note).

Checked pages: README.md, everything under docs/, the READMEs beside the code, and the text a
user sees from the CLI's help."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    for folder in ("edge_broker", "firmware_clients", "examples", "systemd", "scripts"):
        pages.extend(sorted((ROOT / folder).glob("**/README.md")))
    return pages


PAGES = _pages()

# Names of documents that exist only outside the repository, and references to tracker items or
# source documents a reader cannot open.
UNRESOLVABLE = re.compile(
    r"(?-i:\b(?:AUTHZ|SMOKER|PATTERNS|DESIGN|CONVENTIONS)\.md\b)"
    r"|\bseeds/"
    r"|\b(?:issue|issues|seed|seeds)\s+#?\d+"
    r"|\bwave\s+\d+"
    r"|\bturn\s+\d+\b",
    re.IGNORECASE,
)
# A file a page names by path or name: these kinds must be in the repository. (Configuration,
# key and log files are the user's, named as examples, and not checked.)
# ``$SPARK_HOME/...`` and the like are the user's installation.
FILE_NAME = re.compile(r"(?<![\w/.$-])((?:[\w.-]+/)*[\w-]+\.(?:md|py|sh|service))\b")
# Files of other projects that a page names together with the project they belong to.
OTHER_PROJECTS = {
    "client_test.py": "Eclipse Paho interoperability suite (MQTT 3.1.1)",
    "client_test5.py": "Eclipse Paho interoperability suite (MQTT 5)",
    "_state.py": "h11",
    "manifest.py": "a MicroPython freeze manifest the user writes",
    "umqtt/simple.py": "micropython-lib",
}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto: ...


def _repository_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [ROOT / line for line in out.splitlines() if line and (ROOT / line).exists()]


FILES = _repository_files()
BASENAMES = {path.name for path in FILES}
RELATIVE = {str(path.relative_to(ROOT)) for path in FILES}
# where a page's short paths are read from: the root, the package (``store/log.py``), the tests
BASES = ("", "edge_broker/", "tests/", "edge_broker/broker/")


def _exists(name: str, page: Path) -> bool:
    if name in OTHER_PROJECTS:
        return True
    if "/" not in name:
        return name in BASENAMES
    near = (page.parent / name).resolve()
    if near.exists():
        return True
    name = name.removeprefix("./")
    if any(base + name in RELATIVE for base in BASES):
        return True
    # a path written from inside the package or the tests (``broker/connection.py``)
    return any(rel.endswith("/" + name) for rel in RELATIVE)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.MULTILINE)}


def _lines(page: Path) -> list[tuple[int, str]]:
    return list(enumerate(page.read_text().splitlines(), 1))


def _where(page: Path, number: int) -> str:
    return f"{page.relative_to(ROOT)}:{number}"


def _hits(page: Path, pattern: re.Pattern[str], group: int = 0) -> list[tuple[str, str]]:
    """(file:line, matched text) of every match of ``pattern`` in ``page``."""
    return [
        (_where(page, n), m.group(group))
        for n, line in _lines(page)
        for m in pattern.finditer(line)
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_a_reader_cannot_resolve(page: Path) -> None:
    found = [f"{where}: {text!r}" for where, text in _hits(page, UNRESOLVABLE)]
    assert not found, "say it in our docs instead:\n" + "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_file_is_in_the_repository(page: Path) -> None:
    missing = [
        f"{where}: {name}" for where, name in _hits(page, FILE_NAME, 1) if not _exists(name, page)
    ]
    assert not missing, "these files are not in the repository:\n" + "\n".join(missing)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for n, line in _lines(page):
        for m in LINK.finditer(line):
            target = m.group(1)
            if EXTERNAL.match(target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.exists():
                broken.append(f"{_where(page, n)}: {target} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
                broken.append(f"{_where(page, n)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def _help_texts() -> str:
    """Every command's and subcommand's --help, as a user reads them."""
    from edge_broker.cli import build_parser

    parser = build_parser()
    texts = [parser.format_help()]
    stack = [parser]
    while stack:
        current = stack.pop()
        for action in current._actions:  # argparse keeps subparsers only here
            choices = getattr(action, "choices", None)
            if isinstance(choices, dict):
                for sub in choices.values():
                    texts.append(sub.format_help())
                    stack.append(sub)
    return "\n".join(texts)


def test_cli_help_has_no_unresolvable_reference() -> None:
    found = UNRESOLVABLE.findall(_help_texts())
    assert not found, f"CLI help names {found}"


def test_the_checks_catch_what_they_look_for(tmp_path: Path) -> None:
    """The patterns are not vacuous: each kind of problem in a page is reported."""
    assert UNRESOLVABLE.search("as issue 16 asks") and UNRESOLVABLE.search("seed 003's tables")
    assert UNRESOLVABLE.search("see AUTHZ.md §2") and not UNRESOLVABLE.search("a seed001 listener")
    page = ROOT / "docs" / "README.md"
    assert _exists("operations.md", page) and not _exists("AUTHZ.md", page)
    assert _exists("store/log.py", page) and not _exists("store/nowhere.py", page)
    assert "1-authentication-who-is-connecting" in _anchors(ROOT / "docs" / "authorization.md")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))

"""The console's files as shipped: inside the package, loading nothing from outside, and
building the page without parsing strings as HTML (what makes the strict CSP hold)."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from edge_broker.console import STATIC_DIR

ROOT = Path(__file__).resolve().parents[2]

STATIC_FILES = sorted(p for p in STATIC_DIR.iterdir() if p.is_file())
SCRIPTS = [p for p in STATIC_FILES if p.suffix == ".js"]

# APIs that turn a string into markup or code: with data in them, a client id becomes HTML
HTML_SINKS = re.compile(
    r"\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval|Function)\s*[=(]"
    r"|\.setAttribute\(\s*['\"](style|on\w+|href|src)['\"]"
    r"|\.style\s*=|\bsetTimeout\(\s*['\"`]"
)
OUTSIDE = re.compile(r"\b(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", re.IGNORECASE)


def test_the_console_has_its_pages() -> None:
    names = {p.name for p in STATIC_FILES}
    assert {"index.html", "app.js", "app.css"} <= names
    shipped = {r.name for r in resources.files("edge_broker.console").joinpath("static").iterdir()}
    assert names <= shipped


def test_package_data_names_every_static_file() -> None:
    """pyproject's package-data: a pip-installed broker (a wheel) serves the same files."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["edge_broker.console"]
    for path in STATIC_FILES:
        relative = path.relative_to(STATIC_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), f"{relative} is not package data"


def test_index_has_no_inline_script_or_style() -> None:
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html), "inline <script>"
    assert "<style" not in html and " style=" not in html, "inline style"
    assert not re.search(r"\son\w+=", html), "inline event handler"


@pytest.mark.parametrize("path", STATIC_FILES, ids=lambda p: p.name)
def test_nothing_is_loaded_from_outside(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    text = text.replace("http://www.w3.org/2000/svg", "")  # a namespace name, never fetched
    assert not OUTSIDE.findall(text), f"{path.name} names an outside address"
    assert "@import" not in text and "url(http" not in text


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_never_parse_strings_as_html(path: Path) -> None:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("//"):
            continue
        assert not HTML_SINKS.search(line), f"{path.name}:{number}: {line.strip()}"


def test_the_sink_check_catches_what_it_is_for() -> None:
    bad = [
        "el.innerHTML = name;",
        "row.insertAdjacentHTML('beforeend', html)",
        "a.setAttribute('href', data.url)",
        'a.setAttribute("onclick", code)',
        "el.style = 'color: red'",
        "document.write(x)",
    ]
    assert all(HTML_SINKS.search(line) for line in bad)
    assert not HTML_SINKS.search("cell.textContent = name;")

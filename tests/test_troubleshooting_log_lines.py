"""docs/troubleshooting.md and docs/backup-and-upgrade.md quote the broker's log lines; each
quote must still be something the code can log, so the pages cannot rot when a message changes.

A quote is a backticked text on a ``**Log:**`` line of the troubleshooting page, or a backticked
text of the backup page that a quoted log line would contain. ``…`` stands for what varies (a
``%s`` or ``{value}`` in the code); every fixed piece between them must appear in one string
literal of ``edge_broker/`` (f-strings and %-formats compared with their placeholders as ``…``).
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"
BACKUP = ROOT / "docs" / "backup-and-upgrade.md"
PLACEHOLDER = "…"
PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrfxXgei]")


def _text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return PERCENT.sub(PLACEHOLDER, node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(PERCENT.sub(PLACEHOLDER, str(value.value)))
            else:
                parts.append(PLACEHOLDER)
        return "".join(parts)
    return None


@cache
def source_strings() -> tuple[str, ...]:
    """Every string literal and f-string of the package, placeholders as ``…``."""
    found: list[str] = []
    for path in sorted((ROOT / "edge_broker").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Constant, ast.JoinedStr)):
                text = _text(node)
                if text:
                    found.append(text)
    return tuple(found)


def _pieces(quote: str) -> list[str]:
    return [piece for piece in (p.strip() for p in quote.split(PLACEHOLDER)) if piece]


def in_code(quote: str) -> bool:
    strings = source_strings()
    return all(any(piece in text for text in strings) for piece in _pieces(quote))


def troubleshooting_quotes() -> list[str]:
    quotes = []
    for line in TROUBLESHOOTING.read_text().splitlines():
        if line.startswith("**Log:**"):
            quotes.extend(re.findall(r"`([^`]+)`", line))
    return quotes


def backup_quotes() -> list[str]:
    # the backup page's log quotes: those that name the broker's own words
    return [
        q
        for q in re.findall(r"`([^`\n]+)`", BACKUP.read_text())
        if PLACEHOLDER in q and " " in q and not q.startswith("edge-broker ")
    ]


def test_the_troubleshooting_page_covers_twenty_log_lines() -> None:
    entries = re.findall(r"^### \d+\. ", TROUBLESHOOTING.read_text(), re.MULTILINE)
    assert len(entries) >= 20
    assert len(troubleshooting_quotes()) >= 20


@pytest.mark.parametrize("quote", troubleshooting_quotes() + backup_quotes())
def test_each_quoted_log_line_is_in_the_code(quote: str) -> None:
    assert in_code(quote), f"{quote!r}: no string in edge_broker/ says this any more"


def test_the_check_can_fail() -> None:
    assert in_code("cannot listen: … another process (or listener) holds that port")
    assert not in_code("cannot listen: … the port is haunted")
    assert in_code("authorizer … timed out after …s in …; fallback …")  # a %.3fs placeholder

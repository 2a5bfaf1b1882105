"""A short self-contained HTML report: tables and horizontal bar charts as inline SVG (no CDN,
no plotting library needed; matplotlib is not a dependency)."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import Any


def bar_chart(title: str, labels: Sequence[str], values: Sequence[float], width: int = 640) -> str:
    """An inline SVG bar chart, one bar per label (longest first as given)."""
    if not values:
        return f"<p><em>{html.escape(title)}: none</em></p>"
    top = max(values) or 1
    row, label_w = 22, 260
    height = row * len(values) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{html.escape(title)}">',
        f'<text x="0" y="14" font-size="13" font-weight="bold">{html.escape(title)}</text>',
    ]
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = 24 + i * row
        w = max(1.0, (width - label_w - 80) * value / top)
        short = label if len(label) <= 40 else label[:37] + "..."
        parts.append(f'<text x="0" y="{y + 14}" font-size="11">{html.escape(short)}</text>')
        parts.append(
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" fill="#c0392b"/>'
        )
        parts.append(
            f'<text x="{label_w + w + 4:.1f}" y="{y + 14}" font-size="11">{value:g}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape('' if r.get(c) is None else str(r.get(c)))}</td>" for c in columns
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def cut_note(name: str, sizes: dict[str, int], top: int) -> str:
    """The line saying a table was cut to its top rows and where all of them are."""
    if sizes.get(name, 0) <= top:
        return ""
    return f"<p><em>top {top} of {sizes[name]} rows; all in {name}/ (Parquet)</em></p>"


def utc_time(ts: Any) -> str:
    """A Unix time as the report shows it (``-`` when there is none)."""
    return "-" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    style = (
        "body{font-family:sans-serif;max-width:960px;margin:2em "
        "auto}table{border-collapse:collapse;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:left}"
    )
    body = "\n".join(f"<h2>{html.escape(h)}</h2>\n{content}" for h, content in sections)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )

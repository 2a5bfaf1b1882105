"""The canonical restriction bytes equal what a JavaScript client signs (SMOKER.md).

The TypeScript reference client signs ``stableStringify(restriction)``: ``JSON.stringify`` with
keys sorted at every level. Node.js serialises the same restrictions here; the bytes must match
``Restriction.canonical_bytes()`` for non-ASCII, escapes and control characters alike.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from claims_helpers import OTHER, OWNER

from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType

SORTED_STRINGIFY = r"""
const sort = v => Array.isArray(v) ? v.map(sort)
  : (v && typeof v === 'object')
    ? Object.fromEntries(Object.keys(v).sort().map(k => [k, sort(v[k])]))
  : v;
const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
process.stdout.write(Buffer.from(JSON.stringify(input.map(sort).map(o => JSON.stringify(o)))));
"""

LEVELS = [
    "temperature",
    "küche/température/温度",
    "emoji-🌡️",
    'quote"and\\backslash',
    "tab\tnewline\nbell\x07del\x7f",
    "line\u2028separator\u2029",
    "nul-free-\u0001-\u001f",
]


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_node_sorted_stringify_gives_the_canonical_bytes() -> None:
    restrictions = [
        Restriction(
            f"restricted/{OWNER}/{level}",
            RestrictionType.WHITELIST if i % 2 else RestrictionType.BLACKLIST,
            (Permission(OTHER, Activity.SUBSCRIBE), Permission("*", Activity.ALL))[: i % 3],
        )
        for i, level in enumerate(LEVELS)
    ]
    objs = [r.to_json_obj() for r in restrictions]
    result = subprocess.run(
        ["node", "-e", SORTED_STRINGIFY],
        input=json.dumps(objs).encode(),
        capture_output=True,
        check=True,
        timeout=30,
    )
    from_node = [s.encode("utf-8") for s in json.loads(result.stdout)]
    assert from_node == [r.canonical_bytes() for r in restrictions]

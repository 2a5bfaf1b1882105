"""One gateway's policy sections from the compiled fleet tables (README "Cloud pipeline").

Pure Python (no Spark): the compile job calls :func:`gateway_policy` once per gateway inside a
grouped pandas UDF, and the tests call it to build the same policy for ``edge-broker bundle
create``. The result is a dict of TOML config sections (``permissions`` and, when the gateway has
site ACL rows, ``acl``) for ``edge_broker.sync.bundle.create_bundle``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .rules import acl_rule, acl_subject, split_list


def gateway_policy(
    devices: Iterable[Mapping[str, Any]],
    sets: Mapping[str, Sequence[Mapping[str, Any]]],
    acl_rows: Sequence[Mapping[str, Any]] = (),
    acl_default: str | None = None,
) -> dict[str, Any]:
    """``devices``: rows with ``client_id`` and ``sets``; ``sets``: permission set name -> rules
    in order; ``acl_rows``: this gateway's ACL rows in order.

    Every device gets one ``[[permissions.assign]]`` entry (by client id, sorted) naming its sets;
    only the sets some device uses are included; unassigned clients are denied.
    """
    assign = []
    used: set[str] = set()
    for device in sorted(devices, key=lambda d: str(d["client_id"])):
        names = split_list(device["sets"])
        used.update(names)
        assign.append({"client_id": device["client_id"], "sets": names})
    policy: dict[str, Any] = {
        "permissions": {
            "unassigned": "deny",
            "sets": {name: {"rules": [dict(r) for r in sets[name]]} for name in sorted(used)},
            "assign": assign,
        }
    }
    if acl_rows:
        policy["acl"] = {
            "enabled": True,
            "default_permission": acl_default or "deny",
            "rules": [acl_rule(dict(r)) for r in acl_rows],
            "subjects": [acl_subject(dict(r)) for r in acl_rows],
            "policies": [{"rules": [r["id"]], "subjects": [r["id"]]} for r in acl_rows],
        }
    return policy

"""A synthetic fleet and its audit logs, seeded and deterministic (``scripts/make-fleet``).

Writes the compile job's input tables (``gateways``, ``devices``, ``permissions``, ``acl``,
``grants``; README "Cloud pipeline") as CSV, JSON lines or Parquet, and optionally audit
segments (``audit/<gateway>/audit-00000001.jsonl``, format v1) with publish/subscribe
decisions, egress-filtered deliveries, claim floods (0x97) and ``client_stats`` events. With
``invalid = N`` it adds N invalid rule rows (cycling through kinds the broker's parsers refuse)
and returns where they are, so tests can check every one is reported.
"""

from __future__ import annotations

import base64
import csv
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..matching.reserved_topics import CLAIM_TOPIC
from .rules import RULE_COLUMNS

BASE_TS = 1_790_000_000.0

SETS: dict[str, list[dict[str, Any]]] = {
    "sensor": [
        {"id": "no-admin", "topic": "admin/#", "type": "DENY"},
        {"id": "own-data", "topic": "sensors/${clientid}/#", "activity": "PUBLISH"},
        {"id": "commands", "topic": "commands/${clientid}", "activity": "SUBSCRIBE"},
    ],
    "actuator": [
        {"id": "no-admin", "topic": "admin/#", "type": "DENY"},
        {
            "id": "act-state",
            "topic": "actuators/${clientid}/state",
            "activity": "PUBLISH",
            "qos": "ZERO_ONE",
        },
        {"id": "act-cmd", "topic": "actuators/${clientid}/set", "activity": "SUBSCRIBE"},
    ],
    "operator": [
        {"id": "ops-all", "topic": "#"},
    ],
}
ROLE_WEIGHTS = (("sensor", 0.7), ("actuator", 0.25), ("operator", 0.05))
ACL_ROWS = [
    {
        "id": "no-firmware-from-field",
        "permission": "deny",
        "flows": "ingress",
        "messages": "put",
        "key_exprs": "firmware/**",
        "interfaces": "wlan0",
    },
    {
        "id": "no-admin-from-field",
        "permission": "deny",
        "flows": "ingress",
        "messages": "put declare_subscriber",
        "key_exprs": "admin/**",
        "interfaces": "wlan0",
    },
]
INVALID_KINDS = (
    (
        "permissions",
        {
            "set": "sensor",
            "seq": "99",
            "id": "bad-hash",
            "topic": "sensors/#/x",
            "activity": "PUBLISH",
        },
    ),
    (
        "permissions",
        {"set": "sensor", "seq": "98", "id": "bad-activity", "topic": "x/y", "activity": "WRITE"},
    ),
    (
        "acl",
        {
            "id": "bad-keyexpr",
            "permission": "deny",
            "flows": "ingress",
            "messages": "put",
            "key_exprs": "a/**/**/b$",
            "interfaces": "eth0",
        },
    ),
    (
        "acl",
        {
            "id": "bad-message",
            "permission": "allow",
            "flows": "ingress",
            "messages": "shout",
            "key_exprs": "a/**",
            "interfaces": "eth0",
        },
    ),
    ("grants", {"tenant": "t000", "direction": "pub", "rule": "store/>/x"}),
    ("grants", {"tenant": "bad tenant!", "direction": "sub", "rule": "a/b"}),
    ("devices", {"client_id": "dev*glob", "sets": "sensor"}),
    ("devices", {"client_id": "bad-smoker", "sets": "sensor", "smoker_id": "NOTABASE32ID===="}),
    ("devices", {"client_id": "unknown-set", "sets": "nosuchset"}),
)
COLUMNS = {
    "gateways": ["gateway", "version", "acl_default"],
    "devices": ["gateway", "client_id", "username", "tenant", "sets", "smoker_id"],
    "permissions": ["set", "seq", *RULE_COLUMNS],
    "acl": [
        "gateway",
        "id",
        "permission",
        "flows",
        "messages",
        "key_exprs",
        "interfaces",
        "cert_common_names",
        "usernames",
    ],
    "grants": ["tenant", "direction", "rule"],
}


@dataclass(frozen=True, slots=True)
class Fleet:
    directory: str
    gateways: int
    devices: int
    audit_records: int
    invalid: list[tuple[str, int]] = field(default_factory=list)  # (table, 1-based row)


def _role(rng: random.Random) -> str:
    x = rng.random()
    for role, weight in ROLE_WEIGHTS:
        if x < weight:
            return role
        x -= weight
    return ROLE_WEIGHTS[-1][0]


def _write(path: Path, fmt: str, columns: Sequence[str], rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    target = path.with_suffix(f".{fmt}")
    if fmt == "csv":
        with open(target, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(columns))
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "json":
        with open(target, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps({k: v for k, v in row.items() if v is not None}) + "\n")
    elif fmt == "parquet":
        import pandas as pd  # type: ignore[import-untyped]

        frame = pd.DataFrame(rows, columns=list(columns)).astype("string")
        frame.to_parquet(target, index=False)
    else:
        raise ValueError(f"format {fmt!r}: use csv, json or parquet")
    return target


def make_fleet(
    directory: str,
    *,
    gateways: int = 10,
    devices_per_gateway: int = 20,
    tenants: int = 3,
    audit_records: int = 0,
    invalid: int = 0,
    fmt: str = "csv",
    seed: int = 1,
) -> Fleet:
    """Write the fleet (and audit logs when ``audit_records`` > 0) under ``directory``."""
    rng = random.Random(seed)
    out = Path(directory)
    gw_ids = [f"gw-{i:05d}" for i in range(gateways)]
    tenant_ids = [f"t{i:03d}" for i in range(max(1, tenants))]
    gw_rows = [{"gateway": g, "version": 1, "acl_default": "allow"} for g in gw_ids]
    dev_rows: list[dict[str, Any]] = []
    for g_index, g in enumerate(gw_ids):
        tenant = tenant_ids[g_index % len(tenant_ids)]
        for d in range(devices_per_gateway):
            smoker = (
                base64.b32encode(rng.randbytes(32)).decode("ascii") if rng.random() < 0.1 else None
            )
            cid = smoker or f"{g}-d{d:05d}"
            dev_rows.append(
                {
                    "gateway": g,
                    "client_id": cid,
                    "username": f"u-{g}-{d:05d}",
                    "tenant": tenant,
                    "sets": _role(rng),
                    "smoker_id": smoker,
                }
            )
    perm_rows = [
        {"set": name, "seq": i, **rule}
        for name, rules in SETS.items()
        for i, rule in enumerate(rules)
    ]
    acl_rows = [{"gateway": None, **r} for r in ACL_ROWS]
    grant_rows = []
    for t in tenant_ids:
        grant_rows += [
            {"tenant": t, "direction": "pub", "rule": "sensors/>"},
            {"tenant": t, "direction": "sub", "rule": "commands/*"},
        ]
    valid_devices = list(dev_rows)
    tables = {
        "gateways": gw_rows,
        "devices": dev_rows,
        "permissions": perm_rows,
        "acl": acl_rows,
        "grants": grant_rows,
    }
    bad: list[tuple[str, int]] = []
    for i in range(invalid):
        table, row = INVALID_KINDS[i % len(INVALID_KINDS)]
        row = dict(row)
        if table == "devices":
            row.update(
                gateway=gw_ids[i % len(gw_ids)],
                client_id=f"{row['client_id']}-{i}"
                if "*" not in row["client_id"]
                else row["client_id"] + str(i),
            )
        elif "id" in row:
            row["id"] = f"{row['id']}-{i}"
        tables[table].append(row)
        bad.append((table, len(tables[table])))
    for name, rows in tables.items():
        _write(out / name, fmt, COLUMNS[name], rows)
    records = (
        _write_audit(out / "audit", rng, gw_ids, valid_devices, audit_records)
        if audit_records
        else 0
    )
    return Fleet(str(out), gateways, len(valid_devices), records, bad)


def _write_audit(
    directory: Path,
    rng: random.Random,
    gw_ids: list[str],
    devices: list[dict[str, Any]],
    total: int,
) -> int:
    """Roughly: 60% publish decisions, 15% subscribes, 10% egress denials, 5% claim floods,
    10% client_stats events; denials name the gate and rule the fleet's policy would use."""
    by_gw: dict[str, list[dict[str, Any]]] = {}
    for d in devices:
        by_gw.setdefault(d["gateway"], []).append(d)
    per_gw = max(1, total // max(1, len(gw_ids)))
    written = 0
    for g in gw_ids:
        if written >= total:
            break
        members = by_gw.get(g) or []
        if not members:
            continue
        (directory / g).mkdir(parents=True, exist_ok=True)
        with open(directory / g / "audit-00000001.jsonl", "w", encoding="utf-8") as fh:
            n = min(per_gw, total - written)
            lines = []
            for k in range(n):
                d = members[rng.randrange(len(members))]
                base = {
                    "v": 1,
                    "ts": round(BASE_TS + written + k * 0.001, 3),
                    "gw": g,
                    "client": d["client_id"],
                    "user": d["username"],
                    "tenant": d["tenant"],
                    "method": "password",
                }
                x = rng.random()
                if x < 0.6:
                    ok = rng.random() < 0.8
                    topic = f"sensors/{d['client_id']}/temp" if ok else "admin/reboot"
                    rec = {
                        **base,
                        "type": "decision",
                        "action": "publish",
                        "topic": topic,
                        "qos": 1,
                        "retain": False,
                        "outcome": "allow" if ok else "deny",
                    }
                    if not ok:
                        rec.update(
                            gate="permissions",
                            rule="no-admin",
                            rc=0x87,
                            reason="denied by rule no-admin",
                        )
                elif x < 0.75:
                    rec = {
                        **base,
                        "type": "decision",
                        "action": "subscribe",
                        "topic": "admin/#",
                        "qos": 0,
                        "outcome": "deny",
                        "gate": "permissions",
                        "rule": "no-admin",
                        "rc": 0x87,
                    }
                elif x < 0.85:
                    rec = {
                        **base,
                        "type": "decision",
                        "action": "deliver",
                        "topic": "firmware/v2",
                        "qos": 0,
                        "outcome": "deny",
                        "gate": "acl",
                        "rule": "no-firmware-from-field",
                        "rc": 0x87,
                        "to": members[rng.randrange(len(members))]["client_id"],
                    }
                elif x < 0.9:
                    rec = {
                        **base,
                        "type": "decision",
                        "action": "publish",
                        "topic": CLAIM_TOPIC,
                        "qos": 1,
                        "retain": False,
                        "outcome": "deny",
                        "gate": "claims",
                        "rc": 0x97,
                        "reason": "claim rate exceeded",
                    }
                else:
                    rec = {
                        **base,
                        "type": "event",
                        "event": "client_stats",
                        "msgs_in": rng.randrange(1000),
                        "msgs_out": rng.randrange(1000),
                        "bytes_in": rng.randrange(100000),
                        "bytes_out": rng.randrange(100000),
                    }
                lines.append(json.dumps(rec, separators=(",", ":")))
            fh.write("\n".join(lines) + "\n")
            written += n
    return written

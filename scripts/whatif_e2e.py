"""What-if end to end, as an operator runs it: figures for edge_broker/pipeline/README.md.

Two real edge-broker gateways (password users with roles, permission sets assigned by role and
by user name, ``[audit] log_allowed = true``, audit upload to a Debian Mosquitto on loopback as
the cloud broker) take seeded random paho traffic; ``edge-broker-pipeline collect`` stores the
uploaded batches; ``whatif`` replays them against a candidate for gateway 1 (the issue's two
cases: ``own-data`` limited to QoS 0, the sets assigned by role, plus a new rule); then
gateway 1 runs the candidate under the same traffic, and the changes whatif found are compared
with the changes observed (each request's outcome in the two gateways' own decision records),
request by request.

    PYTHONPATH=$PWD .venv/bin/python scripts/whatif_e2e.py --requests 1000 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts import procs  # noqa: E402
from tests.conftest import start_broker  # noqa: E402
from tests.pipeline.test_pipeline_whatif_exact import _inline, _run, _users  # noqa: E402

CLIENTS = {"c1": "u1", "c2": "u2", "c3": "u3"}  # the users of the exactness test

SETS = {
    "sensors": {
        "rules": [
            {"id": "own-data", "topic": "sensors/${clientid}/#", "activity": "PUBLISH"},
            {"id": "commands", "topic": "commands/${clientid}", "activity": "SUBSCRIBE"},
            {"id": "status", "topic": "status/${clientid}", "retain": "RETAINED"},
        ]
    },
    "operators": {
        "rules": [
            {"id": "no-admin", "topic": "admin/#", "type": "DENY"},
            {"id": "read-all", "topic": "#", "activity": "SUBSCRIBE"},
        ]
    },
}
BASELINE = {
    "permissions": {
        "unassigned": "deny",
        "sets": SETS,
        "assign": [
            {"username": "u1", "sets": ["sensors"]},
            {"username": "u3", "sets": ["operators", "sensors"]},
        ],
    }
}


def candidate() -> dict[str, Any]:
    sets = json.loads(json.dumps(SETS))
    sets["sensors"]["rules"][0]["qos"] = "ZERO"  # the QoS 0 limit
    sets["operators"]["rules"].insert(
        0, {"id": "ops-reboot", "topic": "admin/reboot", "activity": "PUBLISH"}
    )
    return {
        "permissions": {
            "unassigned": "deny",
            "sets": sets,
            "assign": [  # by role, as the README's example
                {"role": "ops", "sets": ["operators", "sensors"]},
                {"role": "sensor", "sets": ["sensors"]},
            ],
        }
    }


def traffic(n: int, seed: int) -> list[tuple[str, str, str, int, bool]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        cid = rnd.choice(sorted(CLIENTS))
        other = rnd.choice(sorted(CLIENTS))
        if rnd.random() < 0.75:
            topic = rnd.choice(
                [
                    f"sensors/{cid}/temp",
                    f"sensors/{other}/temp",
                    f"status/{cid}",
                    "admin/reboot",
                    "admin/config",
                ]
            )
            out.append((cid, "publish", topic, rnd.choice((0, 0, 1, 1, 2)), rnd.random() < 0.2))
        else:
            flt = rnd.choice([f"commands/{cid}", "sensors/#", f"commands/{other}", "admin/+"])
            out.append((cid, "subscribe", flt, rnd.choice((0, 1)), False))
    return out


def gateway_config(
    work: Path, name: str, passwd: Path, sections: dict[str, Any], cloud: int
) -> str:
    policy = "".join(f"{k} = {_inline(v)}\n" for k, v in sections.items())
    return (
        policy
        + '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
        + 'auth_methods = ["password"]\n'
        + f'[sys]\ninterval = 0\n[passwords]\nfile = "{passwd}"\n'
        + f'[audit]\ndir = "{work / name / "audit"}"\nlog_allowed = true\n'
        + f'[sync]\nsource = "mqtt"\ngateway_id = "{name}"\nhost = "127.0.0.1"\nport = {cloud}\n'
        + f'state_dir = "{work / name / "state"}"\ntrusted_keys = ["{work / "cloud.pub"}"]\n'
    )


def decided(folder: Path, gw: str) -> dict[tuple[str, str, str, int, bool], str]:
    """Outcome per distinct request in the decision records under ``folder`` (one gateway)."""
    out: dict[tuple[str, str, str, int, bool], str] = {}
    for path in folder.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("gw") != gw or r.get("type") != "decision":
                continue
            if r.get("action") in ("publish", "subscribe"):
                key = (r["client"], r["action"], r["topic"], r["qos"], bool(r.get("retain")))
                out[key] = r["outcome"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    import nacl.signing

    from edge_broker.keys import write_verify_key
    from edge_broker.sync.bundle import create_bundle

    with tempfile.TemporaryDirectory(prefix="whatif-e2e-") as tmp:
        work = Path(tmp)
        key = nacl.signing.SigningKey.generate()
        write_verify_key(work / "cloud.pub", key.verify_key)
        passwd = _users(work / "passwd")
        cloud = procs.Mosquitto(work / "cloud", verbose=False).start()
        store = work / "batches"
        collector = subprocess.Popen(
            [sys.executable, "-m", "edge_broker.pipeline", "collect"]
            + ["--broker", f"127.0.0.1:{cloud.port}", "-o", str(store)],
            cwd=ROOT,
            stderr=subprocess.DEVNULL,
        )
        requests = traffic(args.requests, args.seed)
        try:
            for i, gw in enumerate(("gw-1", "gw-2")):
                conf = gateway_config(work, gw, passwd, BASELINE, cloud.port)
                mine = requests if i == 0 else traffic(args.requests // 2, args.seed + 1)
                _run(lambda c, gw=gw: start_broker(work / f"run-{gw}", c), conf, mine)
            # the gateways stopped after their traffic; restart them to upload what is left
            uploaders = [
                start_broker(
                    work / f"up-{gw}", gateway_config(work, gw, passwd, BASELINE, cloud.port)
                )
                for gw in ("gw-1", "gw-2")
            ]
            logged = sum(
                len(p.read_text().splitlines())
                for gw in ("gw-1", "gw-2")
                for p in (work / gw / "audit").glob("*.jsonl")
            )
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                stored = sum(len(p.read_text().splitlines()) - 1 for p in store.rglob("*.jsonl"))
                # the uploaders' own connect records come on top of the traffic's
                if stored >= logged:
                    break
                time.sleep(1)
            time.sleep(3)
            for b in uploaders:
                b.stop()
        finally:
            collector.terminate()
            collector.wait(10)
        records = sum(len(p.read_text().splitlines()) - 1 for p in store.rglob("*.jsonl"))
        cand = work / "candidate.cbor"  # signed as `edge-broker bundle create` does
        cand.write_bytes(
            create_bundle(key, version=2, gateway="gw-1", issued_at=0, policy=candidate())
        )
        out = work / "diff"
        done = subprocess.run(
            [sys.executable, "-m", "edge_broker.pipeline", "--master", "local[2]", "whatif"]
            + [str(store), "--candidate", str(cand), "--trust", str(work / "cloud.pub")]
            + ["-o", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        print(done.stdout.strip(), done.stderr.strip().splitlines()[-1:], file=sys.stderr)
        summary = json.loads((out / "summary.json").read_text())
        import pandas as pd

        changes = pd.read_parquet(out / "changes").to_dict("records")
        found = {
            (r["client"], r["action"], r["topic"], int(r["qos"]), bool(r["retain"])): (
                r["before_outcome"],
                r["after_outcome"],
            )
            for r in changes
        }
        before = decided(store, "gw-1")
        conf = gateway_config(work, "gw-1", passwd, candidate(), cloud.port)
        conf = conf.replace(str(work / "gw-1" / "audit"), str(work / "cand-audit"))
        conf = conf.replace('source = "mqtt"', 'source = "none"')
        _run(lambda c: start_broker(work / "run-cand", c), conf, requests)
        cloud.stop()
        after = decided(work / "cand-audit", "gw-1")
        observed = {
            k: (before[k], after[k]) for k in before if k in after and before[k] != after[k]
        }
        kinds = Counter(f"{b} -> {a}" for b, a in observed.values())
        weight = Counter(requests)
        figures = {
            "records_stored": records,
            "requests_gw1": len(requests),
            "distinct_requests_gw1": summary["requests"],
            "logged_requests_gw1": summary["logged"],
            "changes_found": len(found),
            "changes_found_logged": summary["changed_logged"],
            "changes_observed": len(observed),
            "changes_observed_requests": sum(weight[k] for k in observed),
            "found_equals_observed": found == observed,
            "cannot_judge": summary["cannot_judge"]["requests"],
            "observed_kinds": dict(kinds),
        }
        print(json.dumps(figures, indent=1))
        if found != observed:
            print("missed:", sorted(set(observed) - set(found)), file=sys.stderr)
            print("extra:", sorted(set(found) - set(observed)), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()

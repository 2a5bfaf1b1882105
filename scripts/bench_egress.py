"""Per-subscription egress checks (issue 21 item 4), before and after, side by side in one run.

edge-broker from two source trees (``--before``: a checkout of the code before, e.g.
``git worktree add /tmp/before <commit>``; after: this tree), each plain, with a site ACL that
has one egress deny rule the bench topics never meet (``edge-broker+acl``) and with SMOKER
claims enabled (``edge-broker+claims``), over the scripts/bench scenarios. Runs alternate
before/after ``--rounds`` times; the table gives the median broker CPU µs per delivered message
and after ÷ before (below 1: cheaper).

    python scripts/bench_egress.py --before /tmp/before --scenarios fanout-qos0 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_brokers import ACL_EGRESS, ROOT, claims_on, start_edge  # noqa: E402
from bench_load import run  # noqa: E402
from bench_run import SCENARIOS  # noqa: E402

VARIANTS = {
    "edge-broker": lambda d: "",
    "edge-broker+acl": lambda d: ACL_EGRESS,
    "edge-broker+claims": claims_on,
}


def measure(root: Path, variant: str, key: str, scale: float) -> float:
    workdir = Path(tempfile.mkdtemp(prefix="bench-egress-"))
    broker = start_edge(workdir, VARIANTS[variant](workdir), root)
    try:
        result = run(SCENARIOS[key], broker.port, broker.cpu_seconds, scale)
    finally:
        broker.stop()
    if result.delivered < result.expected:
        print(f"  ({variant} {key} {root}: {result.delivered}/{result.expected})", file=sys.stderr)
    return result.us_per_msg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--before", type=Path, required=True, help="source tree of the code before")
    ap.add_argument("--scenarios", default="fanout-qos0")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": ROOT}
    rows = []
    for key in args.scenarios.split(","):
        for variant in args.variants.split(","):
            got: dict[str, list[float]] = {"before": [], "after": []}
            for _ in range(args.rounds):
                for label, root in trees.items():
                    got[label].append(measure(root, variant, key, args.scale))
            before, after = (statistics.median(got[k]) for k in ("before", "after"))
            rows.append(
                f"| {SCENARIOS[key].name} | {variant} | {before:.2f} | {after:.2f} | "
                f"{after / before:.2f} | {' '.join(f'{v:.2f}' for v in got['before'])} / "
                f"{' '.join(f'{v:.2f}' for v in got['after'])} |"
            )
            print(rows[-1], file=sys.stderr, flush=True)
    print(
        "| scenario | broker | before CPU µs/msg | after CPU µs/msg | after ÷ before | "
        "runs (before / after) |"
    )
    print("|---|---|---:|---:|---:|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

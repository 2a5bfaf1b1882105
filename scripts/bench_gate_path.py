#!/usr/bin/env python3
"""CPU per PUBLISH decision of the gated policy of scripts/bench (password user, permission
set with a DENY rule, site ACL with an egress deny rule), in process, without sockets: what
``Policy.check_publish`` costs one repeated 1→1 message, and the routing check that follows
(``Policy.routable``). Runs the ``edge_broker`` of the current directory, so two source trees
compare side by side (on a shared machine the in-process figure is steadier than a broker's):

    cd /tmp/before && /path/to/.venv/bin/python /path/to/scripts/bench_gate_path.py
    cd /path/to/tree && .venv/bin/python scripts/bench_gate_path.py [--calls 200000]

Prints the median and min–max over ``--rounds`` of CPU ns per decision (process time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

from bench_brokers import gated_policy  # noqa: E402

from edge_broker.authz.policy import build_policy  # noqa: E402
from edge_broker.broker.message import make_message  # noqa: E402
from edge_broker.config import loads_config  # noqa: E402
from edge_broker.identity import Identity  # noqa: E402
from edge_broker.mqtt.packets import NO_PROPERTIES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    policy = build_policy(loads_config(gated_policy()))
    identity = Identity(client_id="pub", username="bench", method="password")
    results = []
    for _ in range(args.rounds):
        # a new message per PUBLISH, as the broker builds one (its facts are computed per message)
        messages = [
            make_message("bench/s1/0/data", b"x" * 64, 0, False, NO_PROPERTIES, "pub")
            for _ in range(args.calls)
        ]
        check, routable = policy.check_publish, policy.routable
        t0 = time.process_time()
        for message in messages:
            check(identity, message)
            routable(message)
        results.append((time.process_time() - t0) / args.calls * 1e9)
    print(
        f"{os.getcwd()}: {statistics.median(results):.0f} ns per decision "
        f"({min(results):.0f}–{max(results):.0f}), {args.calls:,} calls x {args.rounds}"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a broker's CPU goes per message: a cProfile file of the broker under load (written by
``BENCH_PROFILE=/tmp/x.prof scripts/bench ...`` or scripts/bench_bridge.py) split into the
stages of docs/performance.md's budget table by the module each function lives in (its own
time, ``tottime``, so nothing is counted twice).

    .venv/bin/python scripts/profile_budget.py /tmp/x.prof --messages 60000 --us 17.7

``--messages``: messages the profiled run handled; ``--us``: the broker CPU µs per message
measured *without* the profiler in the same scenario (scripts/bench): each stage gets that
figure times its share of the profiled time (cProfile's own overhead is spread over the calls,
so shares are closer to the truth than its absolute times). Start-up (imports, compiling) and
idle polling are left out of the shares.
"""

from __future__ import annotations

import argparse
import pstats

# (stage, substrings of "file:function"); the first match wins, in this order
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "start-up (left out)",
        (
            "builtins.compile",
            "builtins.exec",
            "marshal.loads",
            "<frozen",
            "_imp.",
            "dataclasses.py",
            "__build_class__",
            "io.open_code",
            "sre_",
            "re/_",
            "enum.py",
            "typing.py",
        ),
    ),
    ("idle wait (left out)", ("select.epoll",)),
    (
        "persistence",
        (
            "broker/persist/",
            "edge_broker/store/",
            "posix.fsync",
            "posix.pwrite",
            "cbor2",
            "SimpleQueue",
            "posix.fdatasync",
            "posix.write",
            "os.fsync",
        ),
    ),
    ("bridge queue and link", ("edge_broker/bridge/",)),
    ("policy", ("edge_broker/authz/", "edge_broker/claims/gate", "edge_broker/audit/")),
    ("decode", ("mqtt/reader.py", "mqtt/decoder.py", "mqtt/fast_construct.py", "from_bytes")),
    (
        "encode",
        (
            "mqtt/encoder.py",
            "mqtt/publish_template.py",
            "mqtt/wire.py",
            "broker/message.py",
            "mqtt/codec.py",
        ),
    ),
    (
        "routing",
        (
            "broker/delivery.py",
            "edge_broker/matching/",
            "broker/topic_space.py",
            "broker/session.py",
        ),
    ),
    (
        "write (socket)",
        ("'send'", "'sendmsg'", "selector_events.py", "transports.py", "'write' of"),
    ),
    ("read and event loop", ("'recv'", "'recv_into'", "asyncio/", "selectors.py")),
    ("handlers and the rest", ("",)),
)


def stage_of(key: tuple[str, int, str]) -> str:
    name = f"{key[0]}:{key[2]}"
    for stage, needles in STAGES:
        if any(n in name for n in needles):
            return stage
    return STAGES[-1][0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profile")
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--us", type=float, required=True, help="measured CPU µs per message")
    args = ap.parse_args()
    stats = pstats.Stats(args.profile).stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}
    for key, (_, _, tottime, _, _) in stats.items():
        stage = stage_of(key)
        totals[stage] = totals.get(stage, 0.0) + tottime
    counted = {s: t for s, t in totals.items() if "left out" not in s}
    whole = sum(counted.values())
    print(f"| stage | share | µs per message (of {args.us:.1f}) |")
    print("|---|---:|---:|")
    for stage, _ in STAGES:
        if stage in counted:
            share = counted[stage] / whole
            print(f"| {stage} | {share:.0%} | {share * args.us:.1f} |")
    left = {s: t for s, t in totals.items() if "left out" in s}
    print(
        f"\n({args.messages:,} messages; profiled seconds counted {whole:.2f}, left out "
        + ", ".join(f"{s.split(' (')[0]} {t:.2f}" for s, t in left.items())
        + ")"
    )


if __name__ == "__main__":
    main()

"""``edge-broker-pipeline`` / ``python -m edge_broker.pipeline``: compile | audit | whatif.

Exit status: 0 done; 1 invalid rows reported (compile without ``--skip-invalid``); 2 unusable
input or arguments (the message names the file, row and problem).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from .session import PipelineError, get_session, parse_conf, progress


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edge-broker-pipeline", description=__doc__)
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    parser.add_argument("--separator", default="/", help="the gateways' topic separator ([topics] separator)")
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser("compile", help="fleet + rule tables -> one signed policy bundle per gateway")
    c.add_argument("--input", required=True, help="directory with gateways, devices, permissions, acl, grants tables")
    c.add_argument("--key", required=True, help="the cloud's Ed25519 signing key (as for edge-broker bundle create)")
    c.add_argument("--issued-at", type=int, help="Unix seconds (default: now); fix it for reproducible bundles")
    c.add_argument("-o", "--out", required=True, help="output directory")
    c.add_argument("--skip-invalid", action="store_true", help="compile only the gateways none of whose rows is invalid (a permission set that lost a row "
                   "is never compiled); still report every invalid row")
    c.add_argument("--emit-policies", action="store_true", help="also write each gateway's policy as JSON")
    c.add_argument("--publish", metavar="HOST:PORT", help="publish each bundle retained to edge/<gateway>/policy")

    a = sub.add_parser("audit", help="audit records -> denials, claim floods, egress filtering, top talkers")
    a.add_argument("inputs", nargs="+", help="audit segments (*.jsonl) or directories of them")
    a.add_argument("-o", "--out", required=True)
    a.add_argument("--top", type=int, default=20, help="rows per table in the HTML report (default 20)")
    a.add_argument("--strict", action="store_true", help="fail on lines that are not v1 audit records")

    k = sub.add_parser("collect", help="store uploaded audit batches (edge/+/audit) as the audit job's input")
    k.add_argument("--broker", required=True, metavar="HOST:PORT", help="the cloud broker the gateways upload to")
    k.add_argument("-o", "--out", required=True, help="folder: <gateway>/<segment>-<first>-<last>.jsonl per batch")
    k.add_argument("--count", type=int, help="stop after this many batches")
    k.add_argument("--idle", type=float, help="stop when nothing arrived for this many seconds")

    w = sub.add_parser("whatif", help="replay logged requests against a candidate bundle")
    w.add_argument("inputs", nargs="+", help="audit segments (*.jsonl) or directories of them")
    w.add_argument("--candidate", required=True, help="the candidate bundle")
    w.add_argument("--baseline", help="compare with this bundle's verdicts instead of the logged outcomes")
    w.add_argument("--trust", action="append", default=[], help="verify the bundles with this public key (repeatable)")
    w.add_argument("-o", "--out", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.monotonic()
    try:
        conf = parse_conf(args.conf)
        if args.command == "compile":
            from ..keys import KeyFileError, load_signing_key

            try:
                key = load_signing_key(args.key)
            except KeyFileError as exc:
                raise PipelineError(str(exc)) from exc
            from .compile import run_compile

            spark = get_session(args.master, conf)
            issued_at = args.issued_at if args.issued_at is not None else int(time.time())
            try:
                result = run_compile(spark, args.input, args.out, key=key, issued_at=issued_at, separator=args.separator,
                                     skip_invalid=args.skip_invalid, emit_policies=args.emit_policies,
                                     publish=args.publish)
            except PipelineError as exc:
                if "invalid row(s)" in str(exc):
                    print(f"edge-broker-pipeline compile: {exc}", file=sys.stderr)
                    return 1
                raise
            print(f"{result.bundles} bundles, {result.withheld} gateways withheld, {result.invalid} invalid rows, "
                  f"in {result.out}")
        elif args.command == "collect":
            from .batches import collect

            stored = collect(args.broker, args.out, count=args.count, idle=args.idle)
            print(f"{stored} batches stored in {args.out}")
        elif args.command == "audit":
            from .audit import run_audit

            spark = get_session(args.master, conf)
            audit = run_audit(spark, args.inputs, args.out, top=args.top, strict=args.strict)
            print(f"{audit.records} records, {audit.denials} denials, {audit.bad_lines} bad lines; report {audit.out}/report.html")
        else:
            from .whatif import load_bundle, run_whatif

            candidate = load_bundle(args.candidate, args.trust)
            baseline = load_bundle(args.baseline, args.trust) if args.baseline else None
            spark = get_session(args.master, conf)
            wi = run_whatif(spark, args.inputs, candidate, args.out, baseline=baseline, separator=args.separator)
            print(f"{wi.changed} of {wi.requests} distinct requests would change; {wi.out}/summary.json")
    except PipelineError as exc:
        print(f"edge-broker-pipeline {args.command}: {exc}", file=sys.stderr)
        return 2
    progress(f"{args.command} done in {time.monotonic() - started:.1f} s")
    return 0

"""``edge-broker-pipeline`` (``python -m edge_broker.pipeline``): compile | collect | audit |
whatif.

Exit status: 0 done; 1 invalid rows reported (compile without ``--skip-invalid``: nothing
signed); 2 unusable input or arguments (the message names the file, row and problem); 3 the Spark
job failed on the cluster (one line; the executors' logs have the traceback); 4 whatif: some
logged requests cannot be judged against the candidate (outputs written; ``--accept-unjudged``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .spark import PipelineError, get_session, parse_conf, progress


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edge-broker-pipeline", description=__doc__)
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (repeatable)",
    )
    parser.add_argument(
        "--ship-code",
        action="store_true",
        help="send this edge_broker package to the executors "
        "(workers without the project installed)",
    )
    parser.add_argument(
        "--separator", default="/", help="the gateways' topic separator ([topics] separator)"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser(
        "compile", help="fleet + rule tables -> one signed policy bundle per gateway"
    )
    c.add_argument(
        "--input",
        required=True,
        help="directory with gateways, devices, permissions, acl, grants tables",
    )
    c.add_argument(
        "--key",
        required=True,
        help="the cloud's Ed25519 signing key (as for edge-broker bundle create)",
    )
    c.add_argument(
        "--issued-at", type=int, help="Unix seconds (default: now); fix it for reproducible bundles"
    )
    c.add_argument("-o", "--out", required=True, help="output directory")
    c.add_argument(
        "--skip-invalid",
        action="store_true",
        help="compile only the gateways none of whose rows is invalid "
        "(a permission set that lost a row is never compiled); still report every invalid row",
    )
    c.add_argument(
        "--emit-policies", action="store_true", help="also write each gateway's policy as JSON"
    )
    c.add_argument(
        "--publish",
        metavar="HOST:PORT",
        help="publish each bundle retained to edge/<gateway>/policy",
    )

    a = sub.add_parser(
        "audit", help="audit records -> denials, claim floods, egress filtering, top talkers"
    )
    a.add_argument("inputs", nargs="+", help="audit segments (*.jsonl) or directories of them")
    a.add_argument("-o", "--out", required=True)
    a.add_argument(
        "--top", type=int, default=20, help="rows per table in the HTML report (default 20)"
    )
    a.add_argument(
        "--strict", action="store_true", help="fail on lines that are not v1 audit records"
    )
    a.add_argument(
        "--no-records",
        action="store_true",
        help="do not write the cleaned records by gateway and date (<out>/records, for whatif)",
    )

    k = sub.add_parser(
        "collect", help="store uploaded audit batches (edge/+/audit) as the audit job's input"
    )
    k.add_argument(
        "--broker",
        required=True,
        metavar="HOST:PORT",
        help="the cloud broker the gateways upload to",
    )
    k.add_argument(
        "-o",
        "--out",
        required=True,
        help="folder: <gateway>/<segment>-<first>-<last>.jsonl per batch",
    )
    k.add_argument(
        "--group",
        default="collectors",
        help="MQTT 5 shared subscription group: run several collectors with the same group and "
        "each batch goes to one of them (default collectors; 'none': a plain subscription)",
    )
    k.add_argument("--client-id", help="MQTT client id (default: edge-broker-collect-<host>-<pid>)")
    k.add_argument("--username", help="user name on the cloud broker")
    k.add_argument(
        "--password-file", help="file holding the password on the cloud broker (first line)"
    )
    k.add_argument("--count", type=int, help="stop after this many new batches")
    k.add_argument("--idle", type=float, help="stop when nothing arrived for this many seconds")

    w = sub.add_parser("whatif", help="replay logged requests against a candidate bundle")
    w.add_argument("inputs", nargs="+", help="audit segments (*.jsonl) or directories of them")
    w.add_argument("--candidate", required=True, help="the candidate bundle")
    w.add_argument(
        "--baseline", help="compare with this bundle's verdicts instead of the logged outcomes"
    )
    w.add_argument(
        "--trust",
        action="append",
        default=[],
        help="verify the bundles with this public key (repeatable)",
    )
    w.add_argument(
        "--accept-unjudged",
        action="store_true",
        help="exit 0 even when some requests cannot be judged (records without the attributes "
        "the candidate's rules read; counted in summary.json cannot_judge)",
    )
    w.add_argument("-o", "--out", required=True)
    return parser


def _is_spark_failure(exc: BaseException) -> bool:
    module = type(exc).__module__ or ""
    return module.startswith(("py4j", "pyspark"))


def _first_line(exc: BaseException) -> str:
    """The root cause's message: a Python error raised in a worker is the last "...Error: ..."
    line of the Py4J text; otherwise the first line."""
    text = str(exc)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [
        line
        for line in lines
        if line.split(":", 1)[0].endswith(("Error", "Exception"))
        and not line.startswith(("py4j", "org.apache.spark.SparkException", "Traceback"))
    ]
    chosen = errors[-1] if errors else (lines[0] if lines else type(exc).__name__)
    return chosen[:400]


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

            spark = get_session(args.master, conf, ship_code=args.ship_code)
            issued_at = args.issued_at if args.issued_at is not None else int(time.time())
            try:
                result = run_compile(
                    spark,
                    args.input,
                    args.out,
                    key=key,
                    issued_at=issued_at,
                    separator=args.separator,
                    skip_invalid=args.skip_invalid,
                    emit_policies=args.emit_policies,
                    publish=args.publish,
                )
            except PipelineError as exc:
                if "invalid row(s)" in str(exc):
                    print(f"edge-broker-pipeline compile: {exc}", file=sys.stderr)
                    return 1
                raise
            print(
                f"{result.bundles} bundles, {result.withheld} gateways withheld, {result.invalid} "
                f"invalid rows, in {result.out}"
            )
        elif args.command == "collect":
            from .batches import CollectStats, collect

            password = None
            if args.password_file:
                try:
                    password = Path(args.password_file).read_text().splitlines()[0]
                except (OSError, IndexError) as exc:
                    raise PipelineError(
                        f"--password-file {args.password_file}: cannot read a password ({exc})"
                    ) from exc
            stats = CollectStats()
            collect(
                args.broker,
                args.out,
                count=args.count,
                idle=args.idle,
                client_id=args.client_id,
                group=None if args.group == "none" else args.group,
                username=args.username,
                password=password,
                stats=stats,
            )
            print(
                f"{stats.stored} batches stored in {args.out} ({stats.repeats} received again, "
                f"{stats.refused} refused)"
            )
        elif args.command == "audit":
            from .audit import run_audit

            spark = get_session(args.master, conf, ship_code=args.ship_code)
            audit = run_audit(
                spark,
                args.inputs,
                args.out,
                top=args.top,
                strict=args.strict,
                records_out=not args.no_records,
            )
            print(
                f"{audit.records} records, {audit.denials} denials, {audit.bad_lines} bad lines; "
                f"report {audit.out}/report.html"
            )
        else:
            from .whatif import CannotJudge, load_bundle, run_whatif

            candidate = load_bundle(args.candidate, args.trust)
            baseline = load_bundle(args.baseline, args.trust) if args.baseline else None
            spark = get_session(args.master, conf, ship_code=args.ship_code)
            try:
                wi = run_whatif(
                    spark,
                    args.inputs,
                    candidate,
                    args.out,
                    baseline=baseline,
                    separator=args.separator,
                    accept_unjudged=args.accept_unjudged,
                )
            except CannotJudge as exc:
                print(
                    f"{exc.result.changed} of {exc.result.requests} distinct requests would "
                    f"change; {exc.result.out}/summary.json"
                )
                print(f"edge-broker-pipeline whatif: {exc}", file=sys.stderr)
                return 4
            print(
                f"{wi.changed} of {wi.requests} distinct requests would change"
                + (
                    f", {wi.unjudged} cannot be judged ({wi.unjudged_logged} logged)"
                    if wi.unjudged
                    else ""
                )
                + f"; {wi.out}/summary.json"
            )
    except PipelineError as exc:
        print(f"edge-broker-pipeline {args.command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a Spark/executor failure: one line, not 300 of Py4J
        if not _is_spark_failure(exc):
            raise
        print(
            f"edge-broker-pipeline {args.command}: the Spark job failed: {_first_line(exc)} "
            "(executor logs have the details)",
            file=sys.stderr,
        )
        return 3
    progress(f"{args.command} done in {time.monotonic() - started:.1f} s")
    return 0

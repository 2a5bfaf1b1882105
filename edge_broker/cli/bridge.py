"""``edge-broker bridge status``: the bridges of a running broker, read from its metrics
endpoint (``[metrics]`` of the config, or ``--url``)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

SAMPLE = re.compile(
    r'^edge_broker_bridge_(\w+)\{bridge="([^"]*)"(?:,error="((?:[^"\\]|\\.)*)")?\} (\S+)$'
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("bridge", help="the cloud bridges of a running broker")
    sub = parser.add_subparsers(dest="bridge_command", metavar="ACTION")
    sub.required = True
    status = sub.add_parser("status", help="connected state, queue depth and counters per bridge")
    status.add_argument("--config", help="the broker's config file ([metrics] bind and port)")
    status.add_argument(
        "--url",
        help="the metrics URL, or the endpoint's base URL http://HOST:PORT (default: from "
        "--config, else http://127.0.0.1:9883/metrics)",
    )
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(func=_status)


def parse_status(text: str) -> dict[str, dict[str, object]]:
    """Bridge name → metric name (without prefix and ``_total``) → value."""
    out: dict[str, dict[str, object]] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match is None:
            continue
        metric, bridge, error, value = match.groups()
        entry = out.setdefault(bridge, {})
        if metric == "last_error_info":
            entry["last_error"] = (
                (error or "").replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
            )
        else:
            entry[metric.removesuffix("_total")] = int(float(value))
    return out


METRICS_PATH = "/metrics"


def metrics_url(url: str) -> str:
    """``--url`` as given, or the metrics endpoint of a base URL: ``http://host:port`` (or
    ``host:port``, or ``.../``) gets ``/metrics``; a path given is kept as it is."""
    if "://" not in url:
        url = f"http://{url}"
    parts = urllib.parse.urlsplit(url)
    if parts.path in ("", "/"):
        parts = parts._replace(path=METRICS_PATH)
    return urllib.parse.urlunsplit(parts)


def _url(args: argparse.Namespace) -> str:
    if args.url:
        return metrics_url(str(args.url))
    if args.config:
        from ..config import ConfigError, load_config

        try:
            config = load_config(args.config)
        except ConfigError as exc:
            raise SystemExit(f"edge-broker bridge status: {exc}") from exc
        if not config.metrics.enabled:
            raise SystemExit(
                f"edge-broker bridge status: {args.config} has no [metrics] endpoint: "
                "add [metrics] enabled = true (or pass --url)"
            )
        host = (
            config.metrics.bind if config.metrics.bind not in ("0.0.0.0", "::", "") else "127.0.0.1"
        )
        return f"http://{host}:{config.metrics.port}/metrics"
    return "http://127.0.0.1:9883/metrics"


def _status(args: argparse.Namespace) -> int:
    url = _url(args)
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as exc:
        path = urllib.parse.urlsplit(url).path
        hint = (
            f"the broker serves its metrics at {METRICS_PATH}: give --url "
            f"{url.removesuffix(path)}{METRICS_PATH}"
            if exc.code == 404 and path != METRICS_PATH
            else "is this the broker's [metrics] endpoint?"
        )
        print(
            f"edge-broker bridge status: {url}: HTTP {exc.code} {exc.reason}; {hint}",
            file=sys.stderr,
        )
        return 1
    except (urllib.error.URLError, OSError) as exc:
        print(
            f"edge-broker bridge status: cannot read {url}: {exc}; is the broker running with "
            "[metrics]?",
            file=sys.stderr,
        )
        return 1
    status = parse_status(text)
    if args.json:
        print(json.dumps(status, indent=2, sort_keys=True))
        return 0
    if not status:
        print("no bridges configured on this broker")
        return 0
    for name, s in sorted(status.items()):
        state = "connected" if s.get("connected") else "DISCONNECTED"
        print(
            f"{name}: {state}  queue {s.get('queue_messages', 0)} msgs / {s.get('queue_bytes', 0)} "
            f"B ({s.get('inflight', 0)} in flight)  sent {s.get('sent', 0)}  acked "
            f"{s.get('acknowledged', 0)}  dropped {s.get('dropped', 0)}  denied out/in "
            f"{s.get('denied_out', 0)}/{s.get('denied_in', 0)}  received {s.get('received', 0)}"
        )
        if s.get("last_error"):
            print(f"  last error: {s['last_error']}")
    return 0

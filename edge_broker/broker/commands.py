"""``edge-broker run`` and ``edge-broker check``."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from ..config import Config, ConfigError, load_config


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser(
        "run", help="run the broker (no --config: 127.0.0.1:1883, anonymous on loopback)")
    run.add_argument("--config", "-c", metavar="FILE", help="TOML configuration file")
    run.add_argument("--log-format", choices=("text", "json"), help="overrides [log] format")
    run.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                     help="overrides [log] level")
    run.set_defaults(func=cmd_run)
    check = subparsers.add_parser("check", help="validate a configuration file, print every error")
    check.add_argument("--config", "-c", metavar="FILE", required=True)
    check.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} error(s)", file=sys.stderr)
        return 1
    print(f"{config.file}: OK ({len(config.listeners)} listener(s): "
          + ", ".join(f"{lc.name} {lc.transport} {lc.bind}:{lc.port}" for lc in config.listeners)
          + ")")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2
    from .logs import setup_logging

    setup_logging(args.log_format or config.log.format, args.log_level or config.log.level)
    try:
        import uvloop  # type: ignore[import-not-found, unused-ignore]  # optional speed-up (pyproject extra "speed")
    except ImportError:
        return asyncio.run(_serve(config))
    return uvloop.run(_serve(config))  # type: ignore[no-any-return]


async def _serve(config: Config) -> int:
    from .server import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, broker.request_stop)
    try:
        await broker.serve()
    except OSError as exc:
        print(f"edge-broker: cannot listen: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # a part that cannot start (the claim store) says why and how
        print(f"edge-broker: {exc}", file=sys.stderr)
        return 1
    return 0

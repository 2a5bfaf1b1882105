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
    run.add_argument("--pid-file", metavar="FILE",
                     help="write the process id here (for `edge-broker reload --pid-file`)")
    run.set_defaults(func=cmd_run)
    reload = subparsers.add_parser(
        "reload", help="ask a running broker to reload its config (SIGHUP); a bad file keeps the old policy")
    target = reload.add_mutually_exclusive_group(required=True)
    target.add_argument("--pid-file", metavar="FILE", help="the file `run --pid-file` wrote")
    target.add_argument("--pid", type=int, help="the broker's process id")
    reload.set_defaults(func=cmd_reload)
    check = subparsers.add_parser("check", help="validate a configuration file, print every error")
    check.add_argument("--config", "-c", metavar="FILE", required=True)
    check.add_argument("--unit", metavar="FILE",
                       help="systemd unit whose MemoryMax the memory budget is compared with "
                            "(default: the installed edge-broker.service)")
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
    from pathlib import Path

    from .budget import budget_report

    lines, _over = budget_report(config, Path(args.unit) if args.unit else None)
    print("\n".join(lines))  # a warning, not an error: the budget is a worst case
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
        return asyncio.run(_serve(config, args.config, args.pid_file))
    return uvloop.run(_serve(config, args.config, args.pid_file))  # type: ignore[no-any-return]


def cmd_reload(args: argparse.Namespace) -> int:
    import os

    pid = args.pid
    if args.pid_file is not None:
        try:
            pid = int(open(args.pid_file).read().strip())
        except (OSError, ValueError) as exc:
            print(f"edge-broker reload: cannot read a pid from {args.pid_file}: {exc}", file=sys.stderr)
            return 2
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        print(f"edge-broker reload: cannot signal process {pid}: {exc.strerror}", file=sys.stderr)
        return 2
    print(f"sent SIGHUP to {pid}; the broker logs whether the new config was applied")
    return 0


async def _serve(config: Config, path: str | None = None, pid_file: str | None = None) -> int:
    import os

    from ..ops.service import run_service
    from ..sync.state import SyncError
    from .server import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reloads: set[asyncio.Task[object]] = set()

    def on_hup() -> None:
        if path is None:
            print("edge-broker: SIGHUP ignored: running on the embedded default config, "
                  "there is no file to reload (start with --config FILE)", file=sys.stderr)
            return
        task: asyncio.Task[object] = loop.create_task(broker.reload(path))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, on_hup)
    if pid_file is not None:
        with open(pid_file, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    try:
        await run_service(broker, stop)  # sd_notify, metrics, policy sync (ops/service.py)
    except SyncError as exc:
        print(f"edge-broker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"edge-broker: cannot listen: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # a part that cannot start (the claim store) says why and how
        print(f"edge-broker: {exc}", file=sys.stderr)
        return 1
    return 0

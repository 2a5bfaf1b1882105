"""``edge-broker run`` and ``edge-broker check``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from ..config import Config, ConfigError, load_config

log = logging.getLogger("edge_broker")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = subparsers.add_parser(
        "run", help="run the broker (no --config: 127.0.0.1:1883, anonymous on loopback)"
    )
    run.add_argument("--config", "-c", metavar="FILE", help="TOML configuration file")
    run.add_argument("--log-format", choices=("text", "json"), help="overrides [log] format")
    run.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), help="overrides [log] level"
    )
    run.add_argument(
        "--pid-file",
        metavar="FILE",
        help="write the process id here (for `edge-broker reload --pid-file`)",
    )
    run.set_defaults(func=cmd_run)
    reload = subparsers.add_parser(
        "reload",
        help="ask a running broker to reload its config (SIGHUP); a bad file keeps the old policy",
    )
    target = reload.add_mutually_exclusive_group(required=True)
    target.add_argument("--pid-file", metavar="FILE", help="the file `run --pid-file` wrote")
    target.add_argument("--pid", type=int, help="the broker's process id")
    reload.set_defaults(func=cmd_reload)
    check = subparsers.add_parser("check", help="validate a configuration file, print every error")
    check.add_argument("--config", "-c", metavar="FILE", required=True)
    check.add_argument(
        "--unit",
        metavar="FILE",
        help="systemd unit whose MemoryMax the memory budget is compared with "
        "(default: the installed edge-broker.service)",
    )
    check.set_defaults(func=cmd_check)


def _build_problems(config: Config, warnings: list[str]) -> list[str]:
    """What ``run`` does with a parsed config before serving, done the same way: authorizer
    constructors run (``build_pipeline``, as ``Broker`` does), so one that raises fails here;
    the state files are judged and every port is bound (and closed) once."""
    from ..authz.policy import build_pipeline

    try:
        build_pipeline(config, None, None)
    except Exception as exc:  # a plugin constructor's own error, reported, never a traceback
        return [f"{exc}" if str(exc).startswith(config.file) else f"{config.file}: {exc}"]
    return (
        _directory_problems(config)
        + _state_problems(config, warnings)
        + _port_problems(config, warnings)
    )


def _port_problems(config: Config, warnings: list[str]) -> list[str]:
    """Every listener and [metrics] bound as ``run`` binds them (ops/ports.py)."""
    from ..ops.ports import bind_problem

    sockets = [
        (f"listeners[{i}].port", f"listener {lc.name!r}", lc.bind, lc.port)
        for i, lc in enumerate(config.listeners)
    ]
    if config.metrics.enabled:
        sockets.append(("metrics.port", "[metrics]", config.metrics.bind, config.metrics.port))
    problems: list[str] = []
    for key, what, bind, port in sockets:
        found = bind_problem(key, what, bind, port, config.file)
        if found is not None:
            text = f"{config.file}: {found.key}: {found.message}"
            (problems if found.error else warnings).append(text)
    return problems


def _directory_problems(config: Config) -> list[str]:
    """Directories the broker creates or writes at start: each must be (or be creatable in) a
    directory this user may write, or ``run`` stops with an OSError."""
    import os
    from pathlib import Path

    wanted = [("audit.dir", config.audit.dir), ("claims.store_dir", config.claims.store_dir)]
    if config.persistence.enabled:
        wanted.append(("persistence.state_dir", config.persistence.state_dir))
    if config.sync.enabled:
        wanted.append(("sync.state_dir", config.sync.state_dir))
    problems = []
    for key, value in wanted:
        if value is None:
            continue
        path = Path(value)
        while not path.exists() and path != path.parent:
            path = path.parent
        if not path.is_dir():
            problems.append(
                f"{config.file}: {key}: {value!r} cannot be created: {str(path)!r} is not a "
                "directory; write the path of a directory"
            )
        elif not os.access(path, os.W_OK | os.X_OK):
            problems.append(
                f"{config.file}: {key}: {str(path)!r} is not writable by this user: give the "
                "service user the directory (chown edge-broker) or choose another path"
            )
    return problems


def _state_problems(config: Config, warnings: list[str] | None = None) -> list[str]:
    """A state file ``run`` would refuse fails the check too (every file of
    ``ops/state_files.py`` the broker opens); a damaged one only with ``on_damage = "refuse"``,
    since ``set-aside`` moves it at start. A sound log is not replayed here, as ``run`` replays
    it right after (store/damage.py ``refusal``)."""
    from ..ops.state_files import state_files

    problems = []
    for state_file in state_files(config):
        condition = state_file.refusal()
        if condition is None:
            continue
        if condition.state == "blocked":
            problems.append(f"{config.file}: sync: {condition.detail}")
        elif config.persistence.on_damage == "set-aside":
            (problems if warnings is None else warnings).append(
                f"{config.file}: persistence.on_damage: {condition.detail}: the broker will "
                "move it aside at start and start without it"
            )
        else:
            problems.append(
                f"{config.file}: persistence.on_damage: {condition.detail}: the broker will "
                "not start on it; run `edge-broker state "
                f'set-aside --config {config.file}` or write on_damage = "set-aside"'
            )
    return problems


def cmd_check(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} error(s)", file=sys.stderr)
        return 1
    from ..ops.exposure import exposure_warnings

    warnings = exposure_warnings(config)
    problems = _build_problems(config, warnings)
    for text in warnings:
        print(f"warning: {text}", file=sys.stderr)
    if problems:
        for text in problems:
            print(text, file=sys.stderr)
        print(f"{len(problems)} error(s)", file=sys.stderr)
        return 1
    print(
        f"{config.file}: OK ({len(config.listeners)} listener(s): "
        + ", ".join(f"{lc.name} {lc.transport} {lc.bind}:{lc.port}" for lc in config.listeners)
        + ")"
    )
    from pathlib import Path

    from ..ops.memory_budget import budget_report

    lines, _over = budget_report(config, Path(args.unit) if args.unit else None)
    print("\n".join(lines))  # a warning, not an error: the budget is a worst case
    from ..broker.limits.quotas import quota_report

    print("\n".join(quota_report(config.limits)))
    from ..ops.principal_lint import lint_unpermitted_principals

    for finding in lint_unpermitted_principals(config):  # runs, but denies all they do
        print(f"warning: {finding}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 2
    from ..broker.logs import setup_logging

    setup_logging(args.log_format or config.log.format, args.log_level or config.log.level)
    if event_loop(config) == "asyncio":
        return asyncio.run(_serve(config, args.config, args.pid_file))
    import uvloop  # type: ignore[import-not-found, unused-ignore]  # optional speed-up (pyproject extra "speed")

    return uvloop.run(_serve(config, args.config, args.pid_file))  # type: ignore[no-any-return]


def event_loop(config: Config, installed: bool | None = None) -> str:
    """``"uvloop"`` when the optional ``speed`` extra is installed (``installed`` None: look),
    else ``"asyncio"``; and ``"asyncio"`` whenever a listener uses TLS: under uvloop 0.23 a TLS
    handshake never finishes once the process has received a signal (SIGHUP rotates the
    certificates), so a TLS gateway keeps the reference event loop (logged)."""
    if installed is None:
        import importlib.util

        installed = importlib.util.find_spec("uvloop") is not None
    if not installed:
        return "asyncio"
    tls = [listener.name for listener in config.listeners if listener.uses_tls]
    if tls:
        log.info(
            "uvloop is installed but not used: listener %s uses TLS, which uvloop's TLS does not "
            "serve after a SIGHUP; the broker runs on asyncio's own event loop",
            ", ".join(tls),
            extra={"event": "event_loop", "loop": "asyncio"},
        )
        return "asyncio"
    return "uvloop"


def cmd_reload(args: argparse.Namespace) -> int:
    import os

    pid = args.pid
    if args.pid_file is not None:
        try:
            pid = int(open(args.pid_file).read().strip())
        except (OSError, ValueError) as exc:
            print(
                f"edge-broker reload: cannot read a pid from {args.pid_file}: {exc}",
                file=sys.stderr,
            )
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

    from ..authz.errors import AuthzError
    from ..broker.listeners import reload_tls
    from ..broker.server import Broker
    from ..ops.service import run_service
    from ..sync.errors import SyncError

    try:
        broker = Broker(config)
    except AuthzError as exc:  # an authorizer that is not one, or whose constructor raised
        print(f"edge-broker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the audit directory, a file gone since the config was read
        print(f"edge-broker: cannot start: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reloads: set[asyncio.Task[object]] = set()

    def on_hup() -> None:
        if path is None:
            print(
                "edge-broker: SIGHUP ignored: running on the embedded default config, "
                "there is no file to reload (start with --config FILE)",
                file=sys.stderr,
            )
            return
        reload_tls(broker.tls_contexts, broker.config.listeners)
        task: asyncio.Task[object] = loop.create_task(broker.reload(path))
        reloads.add(task)
        task.add_done_callback(reloads.discard)

    loop.add_signal_handler(signal.SIGHUP, on_hup)
    if pid_file is not None:
        try:
            with open(pid_file, "w") as handle:
                handle.write(f"{os.getpid()}\n")
        except OSError as exc:
            print(f"edge-broker: --pid-file {pid_file}: {exc.strerror}", file=sys.stderr)
            return 1
    try:
        await run_service(broker, stop)  # sd_notify, metrics, policy sync (ops/service.py)
    except SyncError as exc:
        print(f"edge-broker: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # start_listener names the listener; files name themselves
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else (exc.strerror or str(exc))
        print(f"edge-broker: {text}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # a part that cannot start (the claim store) says why and how
        print(f"edge-broker: {exc}", file=sys.stderr)
        return 1
    return 0

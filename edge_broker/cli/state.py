"""``edge-broker state check|set-aside``: the way out of a damaged state directory (issue 20;
docs/operations.md "State recovery").

``check`` opens every state log read-only (no lock, nothing changed; safe while the broker runs)
and says for each whether it is intact, will be salvaged at the next start (damaged records
dropped), or will be refused. ``set-aside`` moves the refused ones to ``<file>.damaged-<UTC
time>`` next to them, so the broker starts empty; ``--all`` moves every log (a deliberate fresh
start). It refuses while a broker holds the logs.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from pathlib import Path

from ..config import Config, ConfigError, load_config


def _logs(config: Config) -> list[tuple[str, Path]]:
    from ..broker.persist.tables import log_path
    from ..claims.runtime import store_path

    return [("sessions and retained messages", log_path(config)), ("claims", store_path(config))]


def _held(path: Path) -> bool:
    """True when a broker has ``path`` open for writing (its ``.lock`` is flocked)."""
    lock = Path(str(path) + ".lock")
    if not lock.exists():
        return False
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _load(args: argparse.Namespace) -> Config | None:
    try:
        return load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return None


def cmd_check(args: argparse.Namespace) -> int:
    from ..store.damage import inspect_log

    config = _load(args)
    if config is None:
        return 2
    bad = 0
    for what, path in _logs(config):
        condition = inspect_log(path)
        print(f"{path} ({what}): {condition.state}: {condition.detail}")
        bad += condition.state in ("refused", "unreadable")
    if bad:
        print(
            f"{bad} state file(s) would stop the broker: `edge-broker state set-aside --config "
            f"{args.config}` moves the damaged ones aside (an unreadable one needs its permissions "
            "fixed)",
            file=sys.stderr,
        )
    return 1 if bad else 0


def cmd_set_aside(args: argparse.Namespace) -> int:
    from ..store.damage import inspect_log, set_aside

    config = _load(args)
    if config is None:
        return 2
    moved = 0
    for what, path in _logs(config):
        condition = inspect_log(path)
        if condition.state == "missing" or (condition.state != "refused" and not args.all):
            print(f"{path} ({what}): {condition.state}: kept")
            continue
        if _held(path):
            print(
                f"{path}: a running broker holds it: stop the broker first (systemctl stop "
                "edge-broker)",
                file=sys.stderr,
            )
            return 1
        target = set_aside(path)
        moved += 1
        print(
            f"{path} ({what}): {condition.state}: moved to {target}; the broker starts with it "
            "empty"
        )
    print(f"{moved} file(s) set aside")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "state", help="check the state directory, or set damaged state files aside"
    )
    sub = parser.add_subparsers(dest="state_command", metavar="ACTION")
    sub.required = True
    check = sub.add_parser(
        "check", help="say whether each state log is intact, salvageable or refused"
    )
    check.add_argument(
        "--config", "-c", metavar="FILE", help="the broker's config (its state directory)"
    )
    check.set_defaults(func=cmd_check)
    aside = sub.add_parser(
        "set-aside", help="move refused (damaged) state logs aside so the broker starts empty"
    )
    aside.add_argument(
        "--config", "-c", metavar="FILE", help="the broker's config (its state directory)"
    )
    aside.add_argument("--all", action="store_true", help="move every state log, intact ones too")
    aside.set_defaults(func=cmd_set_aside)

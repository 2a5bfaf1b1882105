"""``edge-broker state check|set-aside``: the way out of a damaged state directory (issue 20;
docs/operations.md "State recovery").

``check`` reads every state file (``ops/state_files.py``: the logs, the bridges' queues, the
saved policy bundle, the audit upload cursor, and the files the broker only writes) read-only
(no lock, nothing changed; safe while the broker runs) and says for each whether it is intact,
will be salvaged at the next start (damaged records dropped), or will be refused. ``set-aside``
moves the refused ones to ``<file>.damaged-<UTC time>`` next to them, so the broker starts
without them; ``--all`` moves every log, queue, bundle and cursor (a deliberate fresh start). It
refuses while a broker holds the logs.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import sys
from pathlib import Path

from ..config import Config, ConfigError, load_config


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
    from ..ops.state_files import state_files

    config = _load(args)
    if config is None:
        return 2
    bad = 0
    for state_file in state_files(config):
        condition = state_file.inspect()
        print(f"{state_file.path} ({state_file.what}): {condition.state}: {condition.detail}")
        bad += condition.state in ("refused", "unreadable", "blocked")
    if bad:
        print(
            f"{bad} state file(s) would stop the broker: `edge-broker state set-aside --config "
            f"{args.config}` moves the damaged ones aside (an unreadable one needs its permissions "
            "fixed, a blocked one what its line says)",
            file=sys.stderr,
        )
    return 1 if bad else 0


def cmd_set_aside(args: argparse.Namespace) -> int:
    from ..ops.state_files import SETTABLE_ASIDE, state_files
    from ..store.damage import set_aside

    config = _load(args)
    if config is None:
        return 2
    files = [f for f in state_files(config) if f.kind in SETTABLE_ASIDE]
    moved = 0
    for state_file in files:
        path, what = state_file.path, state_file.what
        condition = state_file.inspect()
        if condition.state == "missing" or (condition.state != "refused" and not args.all):
            print(f"{path} ({what}): {condition.state}: kept")
            continue
        holder = next((f.path for f in files if f.kind == "log" and _held(f.path)), None)
        if holder is not None:
            print(
                f"{holder}: a running broker holds it: stop the broker first (systemctl stop "
                "edge-broker)",
                file=sys.stderr,
            )
            return 1
        target = set_aside(path)
        moved += 1
        print(
            f"{path} ({what}): {condition.state}: moved to {target}; the broker starts without it"
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
        "check", help="say whether each state file is intact, salvageable or refused"
    )
    check.add_argument(
        "--config", "-c", metavar="FILE", help="the broker's config (its state directory)"
    )
    check.set_defaults(func=cmd_check)
    aside = sub.add_parser(
        "set-aside",
        help="move refused (damaged) state files aside so the broker starts without them",
    )
    aside.add_argument(
        "--config", "-c", metavar="FILE", help="the broker's config (its state directory)"
    )
    aside.add_argument(
        "--all", action="store_true", help="move every log, queue, bundle and cursor, intact too"
    )
    aside.set_defaults(func=cmd_set_aside)

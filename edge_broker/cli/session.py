"""``edge-broker session list|drop``: a running broker's sessions, over its local control channel
``<state_dir>/control.sock`` (broker/control_channel.py; docs/sessions.md "Operator commands").

``list`` prints one line per session (client id, tenant, owner, connected or offline, when an
offline one expires, queued messages); ``--json`` prints the broker's answer as it came. ``drop
CLIENT_ID`` ends that client's session: its connection is closed (MQTT 5: DISCONNECT 0x98), its
queue removed, the id released; exit status 1 when there was no such session.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

TIMEOUT = 30.0  # a broker busy with a large listing answers within this
MAX_ANSWER = 256 * 1024 * 1024


class ControlError(Exception):
    """The broker could not be asked, or answered with an error."""


def _socket(args: argparse.Namespace) -> Path | None:
    if args.socket:
        return Path(args.socket)
    from ..broker.control_channel import socket_path
    from ..config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return None
    return socket_path(config)


def ask(path: Path, request: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
    """Send one request to the control socket at ``path``; its answer (``ok`` true)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except FileNotFoundError:
            raise ControlError(
                f"{path} does not exist: is the broker running with this state directory? "
                "(give the broker's --config, or --socket)"
            ) from None
        except PermissionError:
            raise ControlError(
                f"{path}: permission denied: run as the broker's user (e.g. sudo -u edge-broker)"
            ) from None
        except ConnectionRefusedError:
            raise ControlError(f"{path}: no broker answers (it is not running)") from None
        sock.sendall(json.dumps(request).encode() + b"\n")
        data = bytearray()
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_ANSWER:
                raise ControlError(f"the answer exceeds {MAX_ANSWER} bytes: use --limit")
    except TimeoutError:
        raise ControlError(f"{path}: no answer within {timeout:g} s") from None
    finally:
        sock.close()
    try:
        answer = json.loads(data)
    except ValueError:
        raise ControlError(f"{path}: the answer is not JSON: {bytes(data[:200])!r}") from None
    if not isinstance(answer, dict) or not answer.get("ok"):
        error = answer.get("error") if isinstance(answer, dict) else answer
        raise ControlError(f"the broker refused the request: {error}")
    return answer


def _expiry(expires_at: object) -> str:
    if not isinstance(expires_at, (int, float)):
        return "-"
    left = expires_at - time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at))
    return f"{stamp} (in {max(0, int(left))} s)"


def _ask(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any] | None:
    """``request`` (with ``--tenant``) to the broker of ``args``; None when it could not be
    asked (the reason printed)."""
    path = _socket(args)
    if path is None:
        return None
    if args.tenant is not None:
        request["tenant"] = args.tenant
    try:
        return ask(path, request)
    except ControlError as exc:
        print(exc, file=sys.stderr)
        return None


def cmd_list(args: argparse.Namespace) -> int:
    answer = _ask(args, {"op": "list", "limit": args.limit})
    if answer is None:
        return 2
    if args.json:
        print(json.dumps(answer, indent=2))
        return 0
    sessions = answer.get("sessions", [])
    print("CLIENT ID\tTENANT\tOWNER\tSTATE\tEXPIRES\tQUEUED")
    for s in sessions:
        state = "connected" if s.get("connected") else "offline"
        print(
            f"{s.get('client_id')}\t{s.get('tenant')}\t{s.get('owner')}\t{state}\t"
            f"{_expiry(s.get('expires_at'))}\t{s.get('queued')}"
        )
    total = answer.get("total", len(sessions))
    if total > len(sessions):
        print(f"({len(sessions)} of {total} sessions shown: raise --limit)", file=sys.stderr)
    return 0


def cmd_drop(args: argparse.Namespace) -> int:
    answer = _ask(args, {"op": "drop", "client_id": args.client_id})
    if answer is None:
        return 2
    where = f" in tenant {args.tenant!r}" if args.tenant is not None else ""
    if not answer.get("dropped"):
        print(f"no session of client id {args.client_id!r}{where}", file=sys.stderr)
        return 1
    print(f"session of client id {args.client_id!r}{where} dropped; the id is free")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "session", help="list a running broker's sessions, or drop one (control channel)"
    )
    sub = parser.add_subparsers(dest="session_command", metavar="ACTION")
    sub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--config", "-c", metavar="FILE", help="the broker's config (its state directory)"
        )
        p.add_argument(
            "--socket", metavar="PATH", help="the control socket (default <state_dir>/control.sock)"
        )
        p.add_argument("--tenant", metavar="TENANT", help="only this tenant (default: every one)")

    listing = sub.add_parser("list", help="one line per session")
    common(listing)
    listing.add_argument("--json", action="store_true", help="the broker's JSON answer")
    listing.add_argument(
        "--limit", type=int, default=10_000, help="at most this many sessions (default 10000)"
    )
    listing.set_defaults(func=cmd_list)
    drop = sub.add_parser(
        "drop", help="end a session: close its client (0x98), remove its queue, free the id"
    )
    common(drop)
    drop.add_argument("client_id", metavar="CLIENT_ID")
    drop.set_defaults(func=cmd_drop)

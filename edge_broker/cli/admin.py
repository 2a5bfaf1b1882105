"""`edge-broker admin add|remove|list`: the admin users of the console and the admin API, in
their own argon2id file (``[admin] users_file``), never the MQTT password file."""

from __future__ import annotations

import argparse
import sys

from ..admin.users import ROLES, add_admin_user, load_admin_users, remove_admin_user
from ..auth.password import PasswordFileError
from .passwd import _read_password


def _cmd_add(args: argparse.Namespace) -> int:
    password = _read_password(args)
    add_admin_user(args.file, args.user, password, args.role)
    print(f"{args.file}: admin user {args.user!r} saved with role {args.role}")
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    remove_admin_user(args.file, args.user)
    print(f"{args.file}: admin user {args.user!r} removed")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    for user in sorted(load_admin_users(args.file).values(), key=lambda u: u.name):
        print(f"{user.name}\t{user.role}")
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.admin_func(args))
    except PasswordFileError as exc:
        for problem in exc.problems:
            print(f"edge-broker admin: {problem}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "admin", help="manage the admin users of the console ([admin] users_file)"
    )
    parser.set_defaults(func=_run)
    sub = parser.add_subparsers(dest="admin_command", metavar="ACTION")
    sub.required = True
    add = sub.add_parser("add", help="add an admin user or change its password or role")
    add.add_argument("file")
    add.add_argument("user")
    add.add_argument("--role", choices=ROLES, required=True)
    add.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    add.set_defaults(admin_func=_cmd_add)
    rm = sub.add_parser("remove", help="remove an admin user")
    rm.add_argument("file")
    rm.add_argument("user")
    rm.set_defaults(admin_func=_cmd_remove)
    ls = sub.add_parser("list", help="list the admin users and their roles")
    ls.add_argument("file")
    ls.set_defaults(admin_func=_cmd_list)

"""`edge-broker passwd add|remove|import|list|check`: manage the argon2id password file."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from ..auth.password import (
    PasswordEntry,
    PasswordFileError,
    load_password_file,
    remove_user,
    set_user,
    verify_password,
    write_password_file,
)


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin or not sys.stdin.isatty():
        line = sys.stdin.readline()
        return line.rstrip("\r\n")
    first = getpass.getpass("Password: ")
    second = getpass.getpass("Repeat password: ")
    if first != second:
        raise PasswordFileError("the two passwords differ; nothing was changed")
    return first


def _csv(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _cmd_add(args: argparse.Namespace) -> int:
    path = Path(args.file)
    entries = load_password_file(path) if path.exists() else {}
    password = _read_password(args)
    entries = set_user(
        entries, args.user, password, _csv(args.tenants), _csv(args.roles), _csv(args.clientids)
    )
    write_password_file(path, entries)
    print(f"{path}: user {args.user!r} saved")
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    entries = remove_user(load_password_file(args.file), args.user)
    write_password_file(args.file, entries)
    print(f"{args.file}: user {args.user!r} removed")
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    """Users and hashes of a ``mosquitto_passwd`` file into ``FILE``, hashes unchanged: every
    device keeps its password (auth/mosquitto_hashes.py verifies them). Conversion to argon2id
    is not done behind the operator's back: the service cannot write its password file (it is
    root-owned under ProtectSystem=strict); `passwd add` re-keys a user (docs/operations.md)."""
    source = load_password_file(args.mosquitto_file)
    path = Path(args.file)
    entries = load_password_file(path) if path.exists() else {}
    clashes = sorted(set(source) & set(entries))
    if clashes and not args.replace:
        raise PasswordFileError(
            f"{path} already has {', '.join(map(repr, clashes))}: nothing was imported; "
            "give --replace to take the Mosquitto passwords for them"
        )
    tenants, roles = _csv(args.tenants) or (), _csv(args.roles) or ()
    weak = 0
    for name, entry in source.items():  # load_password_file accepted every hash
        weak += entry.hash.startswith(b"$6$")
        entries[name] = PasswordEntry(
            name, entry.hash, tenants or entry.tenants, roles or entry.roles
        )
    write_password_file(path, entries)
    print(
        f"{path}: {len(source)} user(s) imported from {args.mosquitto_file} with their hashes "
        "unchanged"
    )
    if weak:
        print(
            f"{weak} of them have Mosquitto 1.6 '$6$' hashes (one salted SHA-512): re-key them "
            f"with `edge-broker passwd add {path} USER` when you can",
            file=sys.stderr,
        )
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    for entry in load_password_file(args.file).values():
        tenants = ",".join(entry.tenants) or "-"
        roles = ",".join(entry.roles) or "-"
        line = f"{entry.username}\ttenants={tenants}\troles={roles}"
        if entry.clientids:  # only then: the column is new, scripts may read the old three
            line += f"\tclientids={','.join(entry.clientids)}"
        print(line)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    entries = load_password_file(args.file)
    entry = entries.get(args.user)
    password = _read_password(args)
    if entry is not None and verify_password(entry, password.encode("utf-8")):
        print("password OK")
        return 0
    print("password does not match (or no such user)", file=sys.stderr)
    return 1


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.passwd_func(args))
    except PasswordFileError as exc:
        print(f"edge-broker passwd: {exc}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("passwd", help="manage the argon2id password file")
    parser.set_defaults(func=_run)
    sub = parser.add_subparsers(dest="passwd_command", metavar="ACTION")
    sub.required = True

    add = sub.add_parser("add", help="add a user or change a password (creates the file)")
    add.add_argument("file")
    add.add_argument("user")
    add.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    add.add_argument("--tenants", help="comma-separated tenants this user may connect to")
    add.add_argument("--roles", help="comma-separated roles that select default permissions")
    add.add_argument(
        "--clientids",
        help="comma-separated client ids (globs such as sensor-*) "
        "this user may connect with; ${clientid} in its permissions is then verified",
    )
    add.set_defaults(passwd_func=_cmd_add)

    rm = sub.add_parser("remove", help="remove a user")
    rm.add_argument("file")
    rm.add_argument("user")
    rm.set_defaults(passwd_func=_cmd_remove)

    imp = sub.add_parser(
        "import", help="add the users of a mosquitto_passwd file ($6$/$7$ hashes kept as they are)"
    )
    imp.add_argument("mosquitto_file")
    imp.add_argument(
        "file", help="the edge-broker password file to add them to (created if missing)"
    )
    imp.add_argument("--tenants", help="comma-separated tenants for every imported user")
    imp.add_argument("--roles", help="comma-separated roles for every imported user")
    imp.add_argument("--replace", action="store_true", help="overwrite users FILE already has")
    imp.set_defaults(passwd_func=_cmd_import)

    ls = sub.add_parser("list", help="list users with their tenants and roles")
    ls.add_argument("file")
    ls.set_defaults(passwd_func=_cmd_list)

    check = sub.add_parser("check", help="check a user's password (exit 0 when it matches)")
    check.add_argument("file")
    check.add_argument("user")
    check.add_argument("--password-stdin", action="store_true")
    check.set_defaults(passwd_func=_cmd_check)

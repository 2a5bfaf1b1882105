"""`edge-broker` command line: run | check | explain | lint | passwd | token | claim | keygen | bundle.

Each command lives with the concept it serves and exposes ``register(subparsers)``; this module
only lists them. A command module's ``register`` adds its parser and sets ``func`` to a callable
taking the parsed ``argparse.Namespace`` and returning the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__

# module path for each command group; imported lazily so `edge-broker run` stays light.
COMMAND_MODULES: tuple[str, ...] = (
    "edge_broker.broker.commands",  # run, check
    "edge_broker.auth.password_commands",  # passwd
    "edge_broker.sync.commands",  # bundle
    "edge_broker.authz.commands",  # explain, lint
    "edge_broker.claims.commands",  # keygen, claim
    "edge_broker.auth.token_commands",  # token
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge-broker",
        description="MQTT 3.1/3.1.1/5.0 broker for gateways, with a precompiled authorization engine.",
    )
    parser.add_argument("--version", action="version", version=f"edge-broker {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

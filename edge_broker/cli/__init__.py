"""`edge-broker` command line: run | check | reload | explain | lint | passwd | token | claim |
keygen | bundle | bridge | state.

The command-line front ends live here, out of the library packages (DESIGN.md ``cli/``): one
module per command group, each exposing ``register(subparsers)``; this module only lists them.
A command module's ``register`` adds its parser and sets ``func`` to a callable taking the
parsed ``argparse.Namespace`` and returning the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .. import __version__

# command name → the module that registers it. Only the module of the command being run is
# imported, so `edge-broker run` does not pay (about 14 MB on a Pi) for cryptography, PyNaCl
# and TinyDB that the token, claim and bundle commands load; `--help` imports them all.
COMMANDS: dict[str, str] = {
    "run": "edge_broker.cli.broker",
    "check": "edge_broker.cli.broker",
    "reload": "edge_broker.cli.broker",
    "passwd": "edge_broker.cli.passwd",
    "bundle": "edge_broker.cli.sync",
    "explain": "edge_broker.cli.authz",
    "lint": "edge_broker.cli.authz",
    "keygen": "edge_broker.cli.claims",
    "claim": "edge_broker.cli.claims",
    "token": "edge_broker.cli.token",
    "bridge": "edge_broker.cli.bridge",
    "state": "edge_broker.cli.state",
}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))


def build_parser(modules: tuple[str, ...] = COMMAND_MODULES) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edge-broker",
        description=(
            "MQTT 3.1/3.1.1/5.0 broker for gateways, with a precompiled authorization engine."
        ),
    )
    parser.add_argument("--version", action="version", version=f"edge-broker {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def _modules_for(argv: list[str]) -> tuple[str, ...]:
    """Just the module of the command named in ``argv``; all of them otherwise (help, typos)."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    module = COMMANDS.get(command) if command is not None else None
    return (module,) if module is not None else COMMAND_MODULES


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    parser = build_parser(_modules_for(args_list))
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`edge-broker` command line: run | check | reload | explain | lint | passwd | admin | token |
claim | keygen | bundle | bridge | state.

The command-line front ends live here, out of the library packages (DESIGN.md ``cli/``): one
module per command group, each exposing ``register(subparsers)``; this module only lists them.
A command module's ``register`` adds its parser and sets ``func`` to a callable taking the
parsed ``argparse.Namespace`` and returning the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any, TextIO

from .. import __version__

# command name → the module that registers it. Only the module of the command being run is
# imported, so `edge-broker run` does not pay (about 14 MB on a Pi) for cryptography, PyNaCl
# and TinyDB that the token, claim and bundle commands load; `--help` imports them all.
COMMANDS: dict[str, str] = {
    "run": "edge_broker.cli.broker",
    "check": "edge_broker.cli.broker",
    "reload": "edge_broker.cli.broker",
    "passwd": "edge_broker.cli.passwd",
    "admin": "edge_broker.cli.admin",
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


class OutputClosed(BaseException):
    """The reader of stdout or stderr went away (``edge-broker check | head -1``). A
    BaseException, so that no command's ``except OSError`` reports it as its own failure
    ("None: Broken pipe"): it reaches :func:`main`, which exits quietly as Unix tools do."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.fd = fd


class _Guarded:
    """A text stream whose broken pipe raises :class:`OutputClosed` (everything else is the
    stream's own)."""

    def __init__(self, stream: TextIO, fd: int) -> None:
        self._stream = stream
        self._fd = fd

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise OutputClosed(self._fd) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise OutputClosed(self._fd) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


EXIT_PIPE_CLOSED = 128 + 13  # what a shell reports for a tool that SIGPIPE ended


def main(argv: list[str] | None = None) -> int:
    """Run one command. A closed stdout or stderr (a pipe to ``head``) ends it quietly with
    status 141, for every command, ``--help`` included: no traceback, no "Broken pipe"."""
    streams = (sys.stdout, sys.stderr)
    sys.stdout = _Guarded(sys.stdout, 1)
    sys.stderr = _Guarded(sys.stderr, 2)
    try:
        try:
            return _dispatch(sys.argv[1:] if argv is None else argv)
        finally:  # what is still buffered meets the closed pipe here, not at interpreter exit
            sys.stdout.flush()
            sys.stderr.flush()
    except OutputClosed as closed:
        _discard_output(closed.fd)
        return EXIT_PIPE_CLOSED
    finally:
        sys.stdout, sys.stderr = streams


def _discard_output(fd: int) -> None:
    """Point the closed descriptor at /dev/null, so the interpreter's last flush of what is
    still buffered does not print "Exception ignored ... BrokenPipeError"."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    except OSError:  # nothing left to protect
        pass
    finally:
        os.close(devnull)


def _dispatch(args_list: list[str]) -> int:
    parser = build_parser(_modules_for(args_list))
    args = parser.parse_args(args_list)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

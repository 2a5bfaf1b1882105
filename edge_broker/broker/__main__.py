"""``python -m edge_broker.broker run|check``: the broker commands alone.

Same commands as ``edge-broker run|check``, without importing the other command groups
(tokens, claims, bundles pull in cryptography, PyNaCl, TinyDB): about 14 MB less resident memory
on a small board.
"""

from __future__ import annotations

import argparse
import sys

from ..cli.broker import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edge_broker.broker")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

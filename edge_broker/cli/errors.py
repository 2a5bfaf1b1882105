"""The command line's one exception type (CONVENTIONS.md "Errors")."""

from __future__ import annotations


class UsageError(Exception):
    """A command-line argument the user has to change; the message says how."""

"""edge_broker.matching: the pattern languages of PATTERNS.md, compiled once, matched many times."""

from .errors import RuleError

__all__ = ["RuleError"]

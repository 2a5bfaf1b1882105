"""One TOML table being read, and :class:`ConfigError` (CONVENTIONS.md: the config layer's one
exception, with file and key).

The bottom of the configuration: the section parsers read their tables with :class:`Section`,
those of the packages below ``config/`` in the package itself (``auth/settings.py``,
``claims/settings.py``, ``audit/settings.py``, authz's), the others in ``config/``, which
composes them all; none of them imports ``config/`` (DESIGN.md, one direction of imports).
Depends on nothing of ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class ConfigError(Exception):
    """A configuration problem: ``file``, ``key`` and a ``message`` saying what to write instead.

    ``problems`` holds every problem found in the file (this one first).
    """

    def __init__(
        self, file: str, key: str, message: str, others: Sequence[ConfigError] = ()
    ) -> None:
        super().__init__(file, key, message)
        self.file = file
        self.key = key
        self.message = message
        self.problems: tuple[ConfigError, ...] = (self, *others)

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.message}"


class Section:
    """A TOML table being read: typed getters that record problems instead of raising."""

    def __init__(self, file: str, path: str, table: Mapping[str, Any], problems: list[ConfigError]):
        self.file = file
        self.path = path
        self.table = table
        self.problems = problems
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def problem(self, name: str, message: str) -> None:
        self.problems.append(ConfigError(self.file, self.key(name), message))

    def get(self, name: str, default: T, kind: type | tuple[type, ...], hint: str) -> T:
        self.used.add(name)
        if name not in self.table:
            return default
        value = self.table[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            self.problem(name, f"expected {hint}, got {value!r}")
            return default
        if not isinstance(value, kinds):
            self.problem(name, f"expected {hint}, got {type(value).__name__} {value!r}")
            return default
        if float in kinds and isinstance(value, int):
            value = float(value)
        return value  # type: ignore[no-any-return]

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        value = self.get(name, default, int, f"an integer from {low} to {high}")
        if not low <= value <= high:
            self.problem(name, f"{value} is out of range: write an integer from {low} to {high}")
            return default
        return value

    def number(self, name: str, default: float, low: float, high: float) -> float:
        value = self.get(name, default, (int, float), f"a number from {low:g} to {high:g}")
        if not low <= value <= high:
            self.problem(name, f"{value} is out of range: write a number from {low:g} to {high:g}")
            return default
        return float(value)

    def boolean(self, name: str, default: bool) -> bool:
        return self.get(name, default, bool, "true or false")

    def string(self, name: str, default: str) -> str:
        return self.get(name, default, str, "a string")

    def optional_string(self, name: str) -> str | None:
        self.used.add(name)
        if name not in self.table:
            return None
        return self.get(name, "", str, "a string")

    def resolve(self, value: str | None) -> str | None:
        """A relative path from the config file's folder, not the current directory (which is
        ``/`` under systemd): every path key reads this way (issue 20)."""
        if not value or Path(value).is_absolute() or self.file.startswith("<"):
            return value
        return str(Path(self.file).resolve().parent / value)

    def file_path(self, name: str) -> str | None:
        """An optional path key, resolved (:meth:`resolve`)."""
        return self.resolve(self.optional_string(name))

    def choice(self, name: str, default: str, choices: Sequence[str]) -> str:
        value = self.get(name, default, str, "one of " + ", ".join(map(repr, choices)))
        if value not in choices:
            self.problem(
                name, f"{value!r} is not valid: write one of {', '.join(map(repr, choices))}"
            )
            return default
        return value

    def finish(self) -> None:
        """Unknown keys are errors (a typo must not silently become a default)."""
        for name in self.table:
            if name not in self.used:
                self.problem(name, unknown_name("key", name, self.used))

    def misspelt(self, name: str) -> bool:
        """True when the table has an unknown key that looks like a typo of ``name`` (it is
        reported by :meth:`finish` with a suggestion of ``name``)."""
        return any(
            closest(other, (name,)) == name for other in self.table if other not in self.used
        )


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` is most likely a typo of (difflib), or None."""
    import difflib  # only a misspelt name pays for it (issue 32: fresh RSS)

    matches = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return matches[0] if matches else None


def unknown_name(what: str, name: str, known: Iterable[str]) -> str:
    """The message for an unknown ``what`` (key, section): the real name it is most likely a
    typo of, else every name there is."""
    names = sorted(known)
    guess = closest(name, names)
    if guess is not None:
        return f"unknown {what}: did you mean {guess!r}? rename it to {guess}"
    return f"unknown {what}: remove it or use one of: {', '.join(names)}"

"""The ``[acl]`` section of edge-broker's TOML: the site ACL (AUTHZ.md §2 gate 5, seed 004).

Two shapes, never mixed:

- ``[acl] file = "/etc/edge-broker/zenoh-acl.json5"``: a Zenoh ``config.json5`` whose
  ``access_control`` section is taken unchanged (a file holding only that object is accepted
  too). A relative path is relative to the directory of the TOML file. The file is read again
  on every reload.
- the same structure inline: ``[acl]`` with ``enabled``, ``default_permission``,
  ``[[acl.rules]]``, ``[[acl.subjects]]``, ``[[acl.policies]]``.

The section is compiled completely when the configuration is loaded (so ``edge-broker check`` and a
reload see every problem, each naming the file and the entry), or not at all: nothing is ever
half-loaded. JSON5 is read by authz/json5_text.py (a 10k-rule file in about a second; the ``json5``
package alone takes minutes). Without an ``[acl]`` section (or with ``enabled = false``) gate 5 is
absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .acl import Acl
from .acl_config import AclError, load_acl_json5
from .errors import AuthzError


class AclSettingsError(AuthzError):
    """``problems``: (key, message) pairs, the key relative to the config file (``acl.file``)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" for k, m in problems))


def _acl_path(value: str, config_file: str) -> Path:
    path = Path(value)
    if not path.is_absolute():
        base = (
            Path(config_file).parent
            if config_file and not config_file.startswith("<")
            else Path.cwd()
        )
        path = base / path
    return path


def load_acl_section(raw: Mapping[str, Any], config_file: str) -> Acl:
    """The compiled :class:`Acl` of an ``[acl]`` table; :class:`AclSettingsError` if invalid."""
    if "file" in raw:
        value = raw["file"]
        others = sorted(k for k in raw if k != "file")
        if others:
            raise AclSettingsError(
                [
                    (
                        "acl",
                        f'give either file = "..." or the access_control keys inline, not both '
                        f"(remove {', '.join(others)} or file)",
                    )
                ]
            )
        if not isinstance(value, str) or not value:
            raise AclSettingsError(
                [("acl.file", f"expected the path of a Zenoh config.json5, got {value!r}")]
            )
        path = _acl_path(value, config_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise AclSettingsError(
                [("acl.file", f"cannot read {str(path)!r}: {exc.strerror}")]
            ) from exc
        except UnicodeDecodeError as exc:
            raise AclSettingsError(
                [("acl.file", f"{str(path)!r} is not UTF-8: save it as UTF-8")]
            ) from exc
        try:
            return Acl.compile(load_acl_json5(text, str(path)))
        except AclError as exc:
            raise AclSettingsError(
                [("acl.file", f"{exc.source}: {p}") for p in exc.problems]
            ) from exc
    try:
        return Acl.load(dict(raw), "acl")
    except AclError as exc:
        raise AclSettingsError([("acl", p) for p in exc.problems]) from exc

"""A third-party module imported on first use, for modules a running broker may never touch.

``cbor2`` (about 0.9 MB of resident memory) is the store's record format, and the store's
modules are imported by every broker, but a broker without ``[persistence]`` and without claims
reads and writes no record (issue 32: a fresh broker imports only what its configuration
uses). A module names it as a :class:`LazyModule` bound to a global name; the first attribute
read imports the real module and rebinds that global to it, so every later use is an ordinary
global lookup, with no cost on the store's per-record path::

    if TYPE_CHECKING:
        import cbor2
    else:
        cbor2 = LazyModule("cbor2", globals())
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands in for module ``name`` under the global of the same name in ``namespace``."""

    __slots__ = ("_name", "_namespace")

    def __init__(self, name: str, namespace: dict[str, Any]) -> None:
        self._name = name
        self._namespace = namespace

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)
        self._namespace[self._name] = module  # from now on the global is the module itself
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<{self._name}, imported on first use>"

"""Helpers of the browser tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, RunningBroker

# admin users of the test broker, made with `edge-broker admin add` (argon2id)
PASSWORDS = {"vera": "viewer-pass-1", "otto": "operator-pass-1"}
ROLES = {"vera": "viewer", "otto": "operator"}
DOCS_SHOTS = os.environ.get("EDGE_BROKER_DOCS_SHOTS", "")
ONCE_LINK_RE = re.compile(r"(https?://\S+/login/once\?token=[A-Za-z0-9_\-.~%]+)")


def docs_shot(driver: Any, name: str) -> None:
    """Save ``<EDGE_BROKER_DOCS_SHOTS>/<name>.png`` when that variable is set (docs/console.md)."""
    if not DOCS_SHOTS:
        return
    folder = Path(DOCS_SHOTS)
    if not folder.is_absolute():
        folder = ROOT / folder
    folder.mkdir(parents=True, exist_ok=True)
    driver.execute_script("document.getElementById('notice').hidden = true")  # a stale toast
    driver.save_screenshot(str(folder / f"{name}.png"))


def wait_for(
    condition: Callable[[], Any], timeout: float = 10.0, what: str = "the condition"
) -> Any:
    """Poll ``condition`` until it returns a truthy value (returned) or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception as err:  # e.g. a stale element while the page re-renders
            last_error = err
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last_error!r})")


def once_link(broker: RunningBroker, timeout: float = 10.0) -> str:
    """The one-time login link the broker printed at start."""
    return wait_for(
        lambda: (m := ONCE_LINK_RE.search(broker.log())) and m.group(1),
        timeout,
        f"the one-time login link in the broker's log:\n{broker.log()}",
    )

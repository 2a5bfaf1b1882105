"""Fixtures of the browser tests: ONE headless Chromium (Debian's ``chromium`` driven through its
``chromedriver`` by Selenium) and ONE real broker with the admin listener, shared by the module
(starting either costs about a second; CI time matters more than isolation here, and each test
uses its own client ids and topics).

On a failing test the page as the browser showed it is kept: ``test-artifacts/console/<test>.png``
(and ``.html`` and the browser's console log beside it); ``test-artifacts/`` is ignored by git.
With ``EDGE_BROKER_DOCS_SHOTS=docs/console`` the tests also save the screenshots docs/console.md
shows (``console_support.docs_shot``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.admin.admin_support import write_users
from tests.conftest import ROOT, RunningBroker, start_broker
from tests.console.console_support import PASSWORDS, ROLES

ARTIFACTS = ROOT / "test-artifacts" / "console"
WINDOW = (1200, 760)  # small PNGs for the docs, wide enough for the tables

# Without the networking flags Chromium dials Google's services at start, and on a closed
# network those dials fail slowly; a fresh profile per run keeps runs independent.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)


def _tool(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name) or shutil.which(name, path="/usr/bin")
        if found:
            return found
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium for the module (Selenium's WebDriver on Debian's chromedriver)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    chromium = _tool("chromium", "chromium-browser")
    driver_path = _tool("chromedriver")
    if not chromium or not driver_path:
        message = "Debian's chromium and chromium-driver are needed (scripts/test installs them)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(autouse=True)
def keep_screenshot_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """A failing browser test leaves the page it saw under test-artifacts/console/."""
    yield
    if "browser" not in request.fixturenames:
        return
    failed = any(
        getattr(request.node, f"rep_{when}", None) is not None
        and getattr(request.node, f"rep_{when}").failed
        for when in ("setup", "call")
    )
    if not failed:
        return
    driver = request.getfixturevalue("browser")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    try:
        driver.save_screenshot(str(ARTIFACTS / f"{stem}.png"))
        (ARTIFACTS / f"{stem}.html").write_text(driver.page_source, encoding="utf-8")
        logs = driver.get_log("browser")
        (ARTIFACTS / f"{stem}.console.json").write_text(json.dumps(logs, indent=1))
    except Exception as err:  # the browser itself may be what failed
        (ARTIFACTS / f"{stem}.error.txt").write_text(repr(err))


@pytest.fixture(scope="module")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    """The real broker with the admin listener and the console, audit on (the denials feed)."""
    workdir = tmp_path_factory.mktemp("console-broker")
    users = workdir / "admin-users"
    config = f"""
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0

[sys]
interval = 2

[audit]
dir = "{workdir / "audit"}"

[admin]
enabled = true
bind = "127.0.0.1"
port = 0
one_time_login = true
users_file = "{users}"

[permissions.sets.sensor]
default_behaviour = "allow"
rules = [ {{ id = "no-admin", topic = "admin/#", type = "DENY" }} ]

[[permissions.assign]]
client_id = "*"
sets = ["sensor"]
"""
    write_users(users, **{user: (PASSWORDS[user], role) for user, role in ROLES.items()})
    broker = start_broker(workdir, config)
    try:
        yield broker
    finally:
        broker.stop()

"""The web console in real headless Chromium against the real broker and its admin API v1.

One browser and one broker serve the whole module (conftest.py); each test uses its own client
ids and topics. What crosses the socket is real: paho-mqtt clients connect, publish and are
kicked; the pages show it through the API and its event stream without a reload.
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

from tests.conftest import RunningBroker
from tests.console.console_support import PASSWORDS, docs_shot, once_link, wait_for

XSS_ID = "<img src=x onerror=alert(1)>"
ADMINISTRATIVE_ACTION = 0x98


class Device:
    """A paho MQTT 5 client that records its messages and how it was disconnected."""

    def __init__(self, broker: RunningBroker, client_id: str) -> None:
        self.client_id = client_id
        self.messages: queue.Queue[paho.MQTTMessage] = queue.Queue()
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        self.disconnect_reason: int | None = None
        self.acks: queue.Queue[int] = queue.Queue()
        self.c = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv5)
        self.c.on_connect = lambda c, u, f, rc, p: self.connected.set()
        self.c.on_message = lambda c, u, m: self.messages.put(m)
        self.c.on_disconnect = self._on_disconnect
        self.c.on_publish = lambda c, u, mid, rc, p: self.acks.put(rc.value)
        self.c.connect(broker.host, broker.port)
        self.c.loop_start()
        assert self.connected.wait(5), f"{client_id}: no CONNACK"

    def _on_disconnect(self, c: Any, u: Any, flags: Any, rc: Any, props: Any) -> None:
        self.disconnect_reason = rc.value
        self.disconnected.set()

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False) -> int:
        """Publish and return the PUBACK's reason code."""
        self.c.publish(topic, payload, qos, retain)
        return self.acks.get(timeout=5)

    def subscribe(self, topic: str) -> None:
        done = threading.Event()
        self.c.on_subscribe = lambda c, u, mid, rcs, p: done.set()
        self.c.subscribe(topic, 1)
        assert done.wait(5), f"{self.client_id}: no SUBACK"

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


@pytest.fixture
def devices(console_broker: RunningBroker) -> Iterator[Any]:
    made: list[Device] = []

    def make(client_id: str) -> Device:
        device = Device(console_broker, client_id)
        made.append(device)
        return device

    yield make
    for device in made:
        device.close()


@pytest.fixture(scope="module")
def console(browser: Any, console_broker: RunningBroker) -> Any:
    """The browser logged in through the broker's one-time link (the first test proves it)."""
    browser.get(once_link(console_broker))
    wait_for(lambda: browser.find_element(By.ID, "logout").is_displayed(), what="the console shell")
    return browser


def base_url(driver: Any) -> str:
    url = driver.current_url
    return url[: url.index("/", len("http://"))]


def open_page(driver: Any, page: str) -> None:
    """Go to a console page by its hash (no reload: the console's own navigation)."""
    driver.execute_script("location.hash = arguments[0]", f"#/{page}")
    view = page.split("/")[0]
    # aria-busy goes when the page has drawn its first data (its inputs exist from then on)
    wait_for(
        lambda: (
            (v := driver.find_element(By.ID, "view")).get_attribute("data-view") == view
            and v.get_attribute("aria-busy") is None
        ),
        what=f"the {view} page",
    )


def points(driver: Any, css: str) -> list[str]:
    return (driver.find_element(By.CSS_SELECTOR, css).get_attribute("points") or "").split()


def click(driver: Any, css: str, text: str = "", inside: str = "") -> None:
    """Click the first ``css`` element whose text holds ``text`` (or the ``inside`` element in
    it); again if the page re-rendered it in between (a live event came in)."""

    def attempt() -> bool:
        found = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if text in e.text]
        if found:
            (found[0].find_element(By.CSS_SELECTOR, inside) if inside else found[0]).click()
        return bool(found)

    wait_for(attempt, what=f"a click on {css} {text!r}")


def text_of(driver: Any, css: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, css).text


def test_login_through_the_one_time_link(console: Any, console_broker: RunningBroker) -> None:
    # the link set the session cookie and redirected to the console, which opened the dashboard
    assert console.current_url.startswith(base_url(console) + "/")
    wait_for(lambda: console.find_element(By.ID, "stat-connections"), what="the dashboard")
    assert console.find_element(By.CSS_SELECTOR, "#who .role").text in ("operator", "viewer")
    # the cookie is HttpOnly: the page's script cannot read it
    assert "eb_session" not in console.execute_script("return document.cookie")
    # the charts start from the overview and grow a point with each counters event (every 2 s)
    wait_for(
        lambda: len(points(console, "#chart-clients polyline")) >= 2,
        timeout=8,
        what="a counters event on the dashboard's clients chart",
    )


def test_a_client_connecting_shows_up_live(console: Any, devices: Any) -> None:
    open_page(console, "clients")
    console.execute_script("window.__notReloaded = true")
    devices("live-sensor-1")
    row = wait_for(
        lambda: console.find_element(By.CSS_SELECTOR, 'tr[data-client-id="live-sensor-1"]'),
        what="the new client's row",
    )
    assert "live-sensor-1" in row.text
    assert console.execute_script("return window.__notReloaded === true"), "the page reloaded"


def test_xss_client_id_renders_as_text(console: Any, devices: Any) -> None:
    devices(XSS_ID)
    open_page(console, "clients")
    wait_for(
        lambda: [
            a
            for a in console.find_elements(By.CSS_SELECTOR, "#clients-table a")
            if a.text == XSS_ID
        ],
        what="the client id as text",
    )
    assert console.find_elements(By.TAG_NAME, "img") == []
    docs_shot(console, "clients")
    # the detail page: the id went through the URL hash and the API path
    click(console, "#clients-table a", XSS_ID)
    wait_for(lambda: XSS_ID in text_of(console, "#client-detail"), what="the client's detail")
    assert console.find_elements(By.TAG_NAME, "img") == []
    with pytest.raises(NoAlertPresentException):
        console.switch_to.alert.text  # noqa: B018 - reading it is what raises


def test_a_denial_opens_its_explanation(console: Any, devices: Any) -> None:
    open_page(console, "denials")
    device = devices("denied-sensor")
    assert device.publish("admin/reset", b"1") == 0x87  # Not authorized, by rule no-admin
    wait_for(
        lambda: [
            r
            for r in console.find_elements(By.CSS_SELECTOR, "#denials-list tr.denial")
            if "denied-sensor" in r.text and "admin/reset" in r.text
        ],
        what="the denial in the live feed",
    )
    click(console, "#denials-list tr.denial", "denied-sensor", inside="button.why")
    detail = wait_for(
        lambda: (d := console.find_element(By.ID, "denial-detail")) and "no-admin" in d.text and d,
        what="the denial's explanation",
    )
    assert detail.find_element(By.CSS_SELECTOR, "code.rule").text == "no-admin"
    explanation = detail.find_element(By.CSS_SELECTOR, "pre.explanation").text
    assert "no-admin" in explanation and "permissions" in explanation, explanation
    docs_shot(console, "denials")


def api_get(driver: Any, path: str) -> Any:
    """GET an API path with the browser's session cookie (HttpOnly: WebDriver can read it)."""
    cookie = driver.get_cookie("eb_session")
    request = urllib.request.Request(
        base_url(driver) + path, headers={"Cookie": f"eb_session={cookie['value']}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_reading_the_denials_feed_adds_no_denial(console: Any, devices: Any) -> None:
    device = devices("feed-sensor")  # stays connected: its denials are explained live
    assert device.publish("admin/feed", b"1") == 0x87

    def mine() -> list[Any]:
        items = api_get(console, "/api/v1/denials?limit=200")["items"]
        return [d for d in items if d["client_id"] == "feed-sensor"]

    wait_for(mine, what="the denial in the ring")
    # each read explains the denial with the live policy: explaining must not be a new denial
    assert [len(mine()) for _ in range(3)] == [1, 1, 1]


def test_kick_a_client(console: Any, devices: Any) -> None:
    device = devices("kick-me")
    device.subscribe("commands/kick-me")
    open_page(console, "clients/kick-me")
    wait_for(lambda: "kick-me" in text_of(console, "#client-detail"), what="the client's detail")
    docs_shot(console, "client-detail")
    click(console, "#client-detail button.action")
    assert device.disconnected.wait(5), "the paho client was not disconnected"
    assert device.disconnect_reason == ADMINISTRATIVE_ACTION
    wait_for(lambda: console.find_element(By.ID, "not-connected"), what="'not connected'")


def test_delete_a_retained_message(console: Any, devices: Any) -> None:
    publisher = devices("retain-publisher")
    # PUBACK 0x10 "No matching subscribers" is a success (< 0x80), and the message is retained
    assert publisher.publish("plant/line-1/status", b"stale", retain=True) < 0x80
    assert publisher.publish("plant/line-2/status", b"fresh", retain=True) < 0x80
    open_page(console, "retained")
    row = wait_for(
        lambda: console.find_element(By.CSS_SELECTOR, 'tr[data-topic="plant/line-1/status"]'),
        what="the retained message's row",
    )
    assert "stale" in row.text
    docs_shot(console, "retained")
    button = row.find_element(By.CSS_SELECTOR, "button.action")
    button.click()  # arms it
    assert "Confirm" in button.text
    button.click()
    wait_for(
        lambda: not console.find_elements(By.CSS_SELECTOR, 'tr[data-topic="plant/line-1/status"]'),
        what="the row to go",
    )
    # a new subscriber gets line-2's retained message and never line-1's: line-1's filter is
    # subscribed first, so its retained message would have come before line-2's
    subscriber = devices("retain-subscriber")
    subscriber.subscribe("plant/line-1/status")
    subscriber.subscribe("plant/line-2/status")
    first = subscriber.messages.get(timeout=5)
    assert (first.topic, first.payload) == ("plant/line-2/status", b"fresh")


def test_policy_page_asks_explain(console: Any) -> None:
    open_page(console, "policy")
    console.find_element(By.ID, "explain-who").send_keys("anyone")
    console.find_element(By.ID, "explain-client-id").send_keys("sensor-7")
    console.find_element(By.ID, "explain-topic").send_keys("admin/reboot")
    console.find_element(By.CSS_SELECTOR, "#explain-form button[type=submit]").click()
    verdict = wait_for(
        lambda: console.find_element(By.CSS_SELECTOR, "#explain-result .verdict"),
        what="the explain answer",
    )
    assert verdict.text == "Denied"
    assert text_of(console, "#explain-result code.rule") == "no-admin"
    docs_shot(console, "policy")


def test_every_page_renders_without_an_error(console: Any) -> None:
    console.get_log("browser")  # what earlier tests logged (a kicked client's 404) is theirs
    pages = {
        "dashboard": "#chart-rates",
        "clients": "#clients-table",
        "denials": "#denials-list",
        "retained": "#retained-table",
        "subscriptions": "#subscriptions-table",
        "sessions": "#sessions-table",
        "claims": "#claims-table",
        "bridges": "#bridges-table",
        "policy": "#running-config",
    }
    for page, body in pages.items():
        open_page(console, page)
        wait_for(
            lambda body=body: (
                console.find_element(By.CSS_SELECTOR, body).text.strip() not in ("", "Loading…")
            ),
            what=f"the {page} page's content",
        )
        assert not console.find_elements(By.CSS_SELECTOR, "#view .error"), page
    assert '"listeners"' in text_of(console, "#running-config")
    # a CSP refusal (inline style or script, an outside address) would be logged here too
    severe = [e for e in console.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []


def log_in_with_the_form(driver: Any, user: str, password: str) -> None:
    if driver.find_elements(By.ID, "logout"):
        click(driver, "#logout")
    form = wait_for(lambda: driver.find_element(By.ID, "login-form"), what="the login form")
    form.find_element(By.ID, "login-user").clear()
    form.find_element(By.ID, "login-user").send_keys(user)
    form.find_element(By.ID, "login-password").clear()
    form.find_element(By.ID, "login-password").send_keys(password)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()


def test_a_viewer_sees_the_pages_but_cannot_act(console: Any, devices: Any) -> None:
    devices("viewer-target")
    log_in_with_the_form(console, "vera", "not-her-password")
    wait_for(
        lambda: text_of(console, "#login-form .error") == "Wrong user or password.",
        what="the refusal of a wrong password",
    )
    log_in_with_the_form(console, "vera", PASSWORDS["vera"])
    try:
        wait_for(lambda: text_of(console, "#who .role") == "viewer", what="vera logged in")
        open_page(console, "clients/viewer-target")
        wait_for(
            lambda: "viewer-target" in text_of(console, "#client-detail"),
            what="the client's detail",
        )
        button = console.find_element(By.CSS_SELECTOR, "#client-detail button.action")
        assert not button.is_enabled()
        assert "actions need the operator role" in text_of(console, "#client-detail")
    finally:
        log_in_with_the_form(console, "otto", PASSWORDS["otto"])
        wait_for(lambda: text_of(console, "#who .role") == "operator", what="otto logged in")


def test_the_dashboard_keeps_its_history_across_pages(console: Any, devices: Any) -> None:
    """The charts' samples live in the page, not in the dashboard view: after the other pages
    (the tests above) the dashboard comes back with the points gathered meanwhile."""
    listener = devices("dashboard-listener")
    listener.subscribe("line/#")
    publisher = devices("dashboard-publisher")
    for n in range(20):
        publisher.c.publish(f"line/{n % 4}/count", str(n).encode())
    open_page(console, "dashboard")
    wait_for(
        lambda: len(points(console, "#chart-memory polyline.series-a")) >= 3,
        what="three counters samples on the memory chart",
    )
    # the live numbers follow the stream: both clients of this test within one counters event
    wait_for(
        lambda: text_of(console, "#stat-connections .big") == "2",
        what="the connections counter to show this test's two clients",
    )
    docs_shot(console, "dashboard")

"""The admin API over real sockets against a real broker with real paho clients: who may do
what, each endpoint's content against the broker's state, each action seen by an MQTT client."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.admin.admin_support import Api, Client, admin_port, write_users
from tests.conftest import BrokerFactory, RunningBroker
from tests.waiting import wait_for

XSS = "<img src=x onerror=alert(1)>"

CONFIG = """
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0

[admin]
enabled = true
port = 0
users_file = "{users}"
request_timeout = 2.0

[audit]
dir = "{audit}"

[permissions.sets.everyone]
default_behaviour = "allow"
rules = [ {{ id = "no-admin", topic = "admin/#", type = "DENY" }} ]

[[permissions.assign]]
client_id = "*"
sets = ["everyone"]
"""


@pytest.fixture
def admin_broker(tmp_path: Path, broker_factory: BrokerFactory) -> tuple[RunningBroker, int]:
    users = write_users(
        tmp_path / "admin-users", alice=("op-secret", "operator"), vera=("view-secret", "viewer")
    )
    b = broker_factory(CONFIG.format(users=users, audit=tmp_path / "audit"))
    return b, admin_port(b)


def audit_records(tmp_path: Path) -> list[dict[str, object]]:
    found = []
    for path in sorted((tmp_path / "audit").glob("audit-*.jsonl")):
        found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return found


def test_login_roles_and_csrf(admin_broker: tuple[RunningBroker, int]) -> None:
    b, port = admin_broker
    anonymous = Api(port)
    answer = anonymous.request("GET", "/api/v1/overview")
    assert answer.status == 401 and answer.json()["error"] == "login"
    assert answer.headers["cache-control"] == "no-store"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-content-type-options"] == "nosniff"
    # a wrong password and an unknown user get the same answer
    wrong = Api(port).login("alice", "nope")
    unknown = Api(port).login("mallory", "nope")
    assert wrong.status == unknown.status == 401 and wrong.body == unknown.body

    viewer = Api(port)
    me = viewer.login("vera", "view-secret")
    assert me.status == 200 and me.json()["role"] == "viewer"
    cookie = me.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" not in cookie
    assert viewer.get("/api/v1/me")["user"] == "vera"
    assert viewer.get("/api/v1/overview")["version"]
    refused = viewer.request("POST", "/api/v1/reload")
    assert refused.status == 403 and refused.json()["error"] == "role"

    operator = Api(port)
    assert operator.login("alice", "op-secret").status == 200
    no_csrf = operator.request("POST", "/api/v1/reload", csrf=False)
    assert no_csrf.status == 403 and no_csrf.json()["error"] == "csrf"
    bad = operator.request("DELETE", "/api/v1/retained?topic=x", csrf=False)
    assert bad.status == 403 and bad.json()["error"] == "csrf"
    reload = operator.request("POST", "/api/v1/reload")
    assert reload.status == 200 and reload.json()["ok"] is True
    assert operator.request("POST", "/api/v1/logout").status == 200
    assert operator.request("GET", "/api/v1/overview").status == 401


def test_login_backs_off_per_source(admin_broker: tuple[RunningBroker, int]) -> None:
    _, port = admin_broker
    statuses = [Api(port).login("alice", f"guess{i}").status for i in range(5)]
    assert statuses[:3] == [401, 401, 401] and statuses[-1] == 429
    limited = Api(port).login("alice", "op-secret")  # even the right password waits
    assert limited.status == 429 and int(limited.headers["retry-after"]) >= 1
    assert limited.json()["error"] == "backoff"


def test_reads_show_the_brokers_state(
    admin_broker: tuple[RunningBroker, int], tmp_path: Path
) -> None:
    b, port = admin_broker
    api = Api(port)
    assert api.login("vera", "view-secret").status == 200
    sensor = Client(b, "sensor-1")
    sensor.subscribe("plant/+/temp", 1)
    sensor.publish("plant/a/temp", b"21.5", qos=1, retain=True)
    sensor.publish("plant/b/raw", bytes([0xFF, 0x00, 0x01]), qos=0, retain=True)
    # paho 2.2 may write a QoS 0 PUBLISH from another thread some time after publish() returned
    # (its loop thread was busy acknowledging the QoS 1 delivery): wait until the broker has it
    assert wait_for(lambda: api.get("/api/v1/retained?prefix=plant/")["total"] == 2)
    xss = Client(b, XSS, v5=False)
    offline = Client(b, "offline-1", expiry=3600, clean=True)
    offline.subscribe("cmd/offline-1", 1)
    offline.stop()
    try:
        page = wait_for(lambda: (p := api.get("/api/v1/clients"))["total"] == 2 and p)
        assert page, api.get("/api/v1/clients")
        ids = [item["client_id"] for item in page["items"]]
        assert ids == sorted([XSS, "sensor-1"])
        by_id = {item["client_id"]: item for item in page["items"]}
        assert by_id[XSS]["protocol"] == "3.1.1" and by_id["sensor-1"]["protocol"] == "5.0"
        assert by_id["sensor-1"]["method"] == "anonymous"
        assert by_id["sensor-1"]["address"].startswith("127.0.0.1:")
        # the XSS id is a JSON string, served as application/json (escaping is the page's job)
        raw = api.request("GET", "/api/v1/clients?id=" + urllib.parse.quote("<img*"))
        assert raw.headers["content-type"] == "application/json; charset=utf-8"
        assert raw.json()["items"][0]["client_id"] == XSS
        assert api.get("/api/v1/clients?id=sensor-*")["total"] == 1
        assert api.get("/api/v1/clients?limit=1&offset=1")["items"][0]["client_id"] == "sensor-1"
        bad = api.request("GET", "/api/v1/clients?limit=lots")
        assert bad.status == 400 and "limit" in bad.json()["message"]

        detail = api.get("/api/v1/clients/sensor-1")
        assert detail["subscriptions"] == [{"filter": "plant/+/temp", "qos": 1}]
        assert detail["keep_alive"] == 30 and detail["queued"] == 0
        quoted = urllib.parse.quote(XSS, safe="")
        assert api.get(f"/api/v1/clients/{quoted}")["client_id"] == XSS
        assert api.request("GET", "/api/v1/clients/nobody").status == 404

        retained = api.get("/api/v1/retained?prefix=plant/")
        assert retained["total"] == 2
        items = {i["topic"]: i for i in retained["items"]}
        assert items["plant/a/temp"]["preview"] == "21.5" and items["plant/a/temp"]["qos"] == 1
        assert items["plant/b/raw"]["preview"] == "ff0001" and items["plant/b/raw"]["bytes"] == 3

        subs = api.get("/api/v1/subscriptions")["items"]
        assert {"filter": "plant/+/temp", "tenant": "~", "clients": 1} in subs
        assert any(s["filter"] == "cmd/offline-1" for s in subs)
        sessions = api.get("/api/v1/sessions")["items"]
        assert [s["client_id"] for s in sessions] == ["offline-1"]
        assert sessions[0]["expires_at"] > time.time() + 3000

        overview = api.get("/api/v1/overview")
        assert overview["connections"] == 2 and overview["sessions"] >= 3
        assert overview["memory"]["rss_bytes"] > 0 and overview["memory"]["budget_bytes"] > 0
        config = api.get("/api/v1/config")
        assert config["admin"]["users_file"].endswith("admin-users")
        assert api.get("/api/v1/bridges") == {"items": []}
        assert api.get("/api/v1/claims") == {"items": []}
        doc = api.get("/api/v1/openapi.json")
        assert doc["openapi"].startswith("3.1")
        assert "/api/v1/clients/{client_id}/disconnect" in doc["paths"]
    finally:
        sensor.stop()
        xss.stop()


def test_config_hides_secrets_and_bridges_show_their_state(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    users = write_users(tmp_path / "admin-users", vera=("view-secret", "viewer"))
    text = CONFIG.format(users=users, audit=tmp_path / "audit") + (
        '\n[[bridges]]\nname = "cloud"\naddress = "127.0.0.1"\nport = 1\n'
        'username = "gw"\npassword = "cloud-password-123"\nreconnect_min = 0.1\n'
        'reconnect_max = 1.0\n[[bridges.topics]]\ndirection = "out"\nlocal = "t/#"\n'
    )
    b = broker_factory(text)
    api = Api(admin_port(b))
    assert api.login("vera", "view-secret").status == 200
    answer = api.request("GET", "/api/v1/config")
    assert b"cloud-password-123" not in answer.body
    assert answer.json()["bridges"][0]["password"] == "***"
    bridges = wait_for(
        lambda: (i := api.get("/api/v1/bridges")["items"]) and i[0]["last_error"] and i
    )
    assert bridges, api.get("/api/v1/bridges")
    assert bridges[0]["name"] == "cloud" and bridges[0]["state"] == "disconnected"
    assert bridges[0]["queue_depth"] == 0 and "sent" in bridges[0]["counters"]


def test_denials_carry_their_explanation(admin_broker: tuple[RunningBroker, int]) -> None:
    b, port = admin_broker
    api = Api(port)
    assert api.login("vera", "view-secret").status == 200
    device = Client(b, "dev-7")
    try:
        device.publish("admin/reboot", b"now", qos=1)
        items = wait_for(lambda: api.get("/api/v1/denials")["items"])
        assert items, "no denial listed"
        denial = items[0]
        assert denial["client_id"] == "dev-7" and denial["topic"] == "admin/reboot"
        assert denial["kind"] == "publish" and denial["rule"] == "no-admin"
        assert 'DENIED by permissions rule "no-admin"' in denial["explanation"]
        # explain: changes nothing, needs CSRF like every POST
        body = {"client_id": "dev-7", "action": "publish", "topic": "admin/x"}
        no_csrf = api.request("POST", "/api/v1/explain", body, csrf=False)
        assert no_csrf.status == 403
        said = api.request("POST", "/api/v1/explain", body).json()
        assert said["allowed"] is False and said["rule"] == "no-admin"
        body["topic"] = "plant/a"
        assert api.request("POST", "/api/v1/explain", body).json()["allowed"] is True
    finally:
        device.stop()


def test_actions_are_seen_by_mqtt_clients(
    admin_broker: tuple[RunningBroker, int], tmp_path: Path
) -> None:
    b, port = admin_broker
    api = Api(port)
    assert api.login("alice", "op-secret").status == 200
    # kick: an MQTT 5 client gets DISCONNECT 0x98
    kicked = Client(b, "kick-me")
    answer = api.request("POST", "/api/v1/clients/kick-me/disconnect")
    assert answer.status == 200
    assert kicked.gone.wait(10) and kicked.disconnects[0] == 0x98
    kicked.client.loop_stop()
    # a 3.1.1 client's socket is closed
    old = Client(b, "old-311", v5=False)
    assert api.request("POST", "/api/v1/clients/old-311/disconnect").status == 200
    assert old.gone.wait(10)
    old.client.loop_stop()
    assert api.request("POST", "/api/v1/clients/nobody/disconnect").status == 404

    # delete a retained message: a new subscriber does not get it
    publisher = Client(b, "pub")
    publisher.publish("status/pump", b"on", qos=1, retain=True)
    publisher.publish("status/fan", b"off", qos=1, retain=True)
    publisher.stop()
    gone = api.request("DELETE", "/api/v1/retained?topic=status/pump")
    assert gone.status == 200
    assert api.request("DELETE", "/api/v1/retained?topic=status/pump").status == 404
    fresh = Client(b, "fresh")
    fresh.subscribe("status/#", 1)
    # the retained messages come with the SUBACK, before the broker reads fresh's next PUBLISH:
    # once that one is back, a wrongly kept message would have arrived before it
    fresh.publish("status/~end", b"", qos=1)
    wait_for(lambda: any(m[0] == "status/~end" for m in fresh.messages))
    assert [m[0] for m in fresh.messages] == ["status/fan", "status/~end"]
    fresh.stop()

    # drop a session: gone after resume
    keeper = Client(b, "keeper", expiry=3600)
    keeper.subscribe("cmd/keeper", 1)
    keeper.stop()
    assert api.request("DELETE", "/api/v1/sessions/keeper").status == 200
    assert api.request("DELETE", "/api/v1/sessions/keeper").status == 404
    back = Client(b, "keeper", expiry=3600, clean=False)
    assert back.session_present is False
    back.stop()

    kinds = [r.get("detail") for r in audit_records_when(tmp_path, "drop_session")]
    assert {"disconnect", "delete_retained", "drop_session"} <= set(kinds)
    first = next(r for r in audit_records(tmp_path) if r.get("detail") == "disconnect")
    assert first["user"] == "alice" and first["addr"] == "127.0.0.1"
    assert first["topic"] == "kick-me" and first["event"] == "admin"


def audit_records_when(tmp_path: Path, detail: str) -> list[dict[str, object]]:
    """The audit records once one with ``detail`` is on disk (flushed about every 0.5 s)."""
    found = wait_for(
        lambda: (r := audit_records(tmp_path)) and any(x.get("detail") == detail for x in r) and r
    )
    assert found, audit_records(tmp_path)
    return list(found)


def test_live_stream_sees_clients_and_denials(admin_broker: tuple[RunningBroker, int]) -> None:
    b, port = admin_broker
    api = Api(port)
    assert api.login("vera", "view-secret").status == 200
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(f"GET /api/v1/events HTTP/1.1\r\nHost: x\r\nCookie: {api.cookie}\r\n\r\n".encode())
    got = b""
    while b"event: counters" not in got:
        got += sock.recv(4096)
    assert got.startswith(b"HTTP/1.1 200") and b"text/event-stream" in got
    live = Client(b, "live-1")
    live.publish("admin/x", b"1", qos=1)
    try:
        while (
            b'"change":"connected","client_id":"live-1"' not in got or b"event: denial" not in got
        ):
            chunk = sock.recv(4096)
            assert chunk, got
            got += chunk
    finally:
        sock.close()
        live.stop()


def test_one_time_login_link(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    text = CONFIG.replace('users_file = "{users}"', "one_time_login = true").format(
        audit=tmp_path / "audit"
    )
    b = broker_factory(text)
    port = admin_port(b)
    link = wait_for(lambda: [w for w in b.log().split() if "/login/once?token=" in w])
    assert link, b.log()
    path = link[0].split(f":{port}", 1)[1]
    api = Api(port)
    first = api.request("GET", path)
    assert first.status == 303 and first.headers["location"] == "/"
    assert api.get("/api/v1/me")["role"] == "operator"
    assert Api(port).request("GET", path).status == 403  # it works once


def logs_in(port: int) -> bool:
    """A login succeeds (False while the closed sockets still count against the cap: a
    connection beyond it is reset at accept)."""
    try:
        return Api(port).login("vera", "view-secret").status == 200
    except (ConnectionError, http.client.HTTPException):
        return False


def test_hostile_input_to_the_admin_port(admin_broker: tuple[RunningBroker, int]) -> None:
    b, port = admin_broker
    api = Api(port)
    huge = api.request("POST", "/api/v1/login", raw=b"{" + b" " * 200_000 + b"}")
    assert huge.status == 413
    assert api.request("POST", "/api/v1/login", raw=b"[1,2]").status == 400
    assert api.request("POST", "/api/v1/login", raw=b"\xff\xfe").status == 400
    assert api.request("GET", "/static/../../etc/passwd").status == 404
    assert api.request("GET", "/api/v1/clients/%ff").status in (401, 404)
    # many sockets: beyond max_connections they are closed, the API still answers after
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
    for s in socks:
        s.close()
    assert wait_for(lambda: logs_in(port))
    assert "Traceback" not in b.log()


def test_https_listener_sets_a_secure_cookie(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    import ssl

    from tests.ops.tls_files import make_cert

    cert, key = make_cert(tmp_path, "admin")
    users = write_users(tmp_path / "admin-users", vera=("view-secret", "viewer"))
    text = CONFIG.format(users=users, audit=tmp_path / "audit").replace(
        "request_timeout = 2.0", f'request_timeout = 2.0\ntls_cert = "{cert}"\ntls_key = "{key}"'
    )
    b = broker_factory(text)
    port = admin_port(b)
    assert f"admin console on https://127.0.0.1:{port}/" in b.log()
    context = ssl.create_default_context(cafile=str(cert))
    context.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    body = json.dumps({"user": "vera", "password": "view-secret"})
    conn.request("POST", "/api/v1/login", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    assert response.status == 200
    assert "; Secure" in response.getheader("Set-Cookie", "")
    # plain HTTP to the TLS port gets nothing served
    plain = Api(port)
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        plain.request("GET", "/api/v1/me")

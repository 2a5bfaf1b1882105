"""The audit log tells the whole truth, read back from a real broker driven by real clients
(paho-mqtt; raw sockets for the 2,000-CONNECT storm): every attribute a gate reads is in each
decision record, every refused CONNECT is a ``connect`` decision saying who, from where and
why, repeated identical records are aggregated (the log and the INFO lines stay bounded while
the counts stay exact, and a distinct security event in a storm is still there), allowed
``connect`` decisions are written with ``log_allowed``, ``stats_interval = 0`` writes no
``client_stats``, and default-deny denials name their permission set."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import sys
from functools import cache
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from edge_broker.audit.events import grants_digest
from edge_broker.audit.log import read_records
from edge_broker.auth.password import set_user, write_password_file
from edge_broker.authz.grants import Grants
from edge_broker.mqtt.packets import Connack
from edge_broker.mqtt.packets import Properties as MqttProperties
from tests.authz.paho_sync import reason_value
from tests.broker.broker_raw import RawClient
from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402

V5 = paho.MQTTv5
PASSWORDS = {"sensor-a": "pw-a", "ops": "pw-ops"}
STORM_USER, STORM_PASSWORD = "storm", "right-password"


def _mosquitto_sha512(password: str) -> str:
    """A ``$6$`` hash (mosquitto_passwd -H sha512): one SHA-512 round, so 2,000 wrong-password
    CONNECTs take milliseconds of checking, not minutes of argon2."""
    salt = os.urandom(12)
    digest = hashlib.sha512(password.encode() + salt).digest()
    return f"$6${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"


@cache
def _password_lines(directory: Path) -> str:
    """The password file's text, hashed once per test run (argon2id is slow on purpose)."""
    entries: dict[str, Any] = {}
    entries = set_user(entries, "sensor-a", PASSWORDS["sensor-a"], roles=("sensor", "field"))
    entries = set_user(entries, "ops", PASSWORDS["ops"], clientids=("ops-console",))
    write_password_file(directory / "passwd", entries)
    text = (directory / "passwd").read_text()
    return text + f"{STORM_USER}:{_mosquitto_sha512(STORM_PASSWORD)}\n"


def _password_file(path: Path) -> Path:
    path.write_text(_password_lines(path.parent.parent))
    return path


PERMISSIONS = """
[permissions]
unassigned = "deny"

[permissions.sets.own-data]
rules = [
  { id = "own", topic = "sensors/${clientid}/#", activity = "PUBLISH", qos = "ZERO_ONE" },
  { id = "cmds", topic = "commands/#", activity = "SUBSCRIBE" },
]

[permissions.sets.ops]
default_behaviour = "deny"
rules = [{ id = "ops-read", topic = "sensors/#", activity = "SUBSCRIBE" }]

[[permissions.assign]]
role = "sensor"
sets = ["own-data"]

[[permissions.assign]]
username = "ops"
sets = ["ops"]
"""


def _broker(tmp_path: Path, *, audit: str = "", limits: str = "") -> tuple[RunningBroker, Path]:
    audit_dir = tmp_path / "audit"
    passwd = _password_file(tmp_path / "passwd")
    tokens = token_config(tmp_path / "keys", methods=("token",)).replace(
        'name = "tcp"', 'name = "tok"'
    )
    config = (
        '[[listeners]]\nname = "pw"\nbind = "127.0.0.1"\nport = 0\nauth_methods = ["password"]\n'
        + tokens
        # the (source, user) back-off would answer repeated wrong passwords from this one
        # address with 0x9F after three: these tests count the audit records of the refusals
        # themselves (tests/auth/test_login_fairness.py tests the back-off)
        + f'\n[passwords]\nfile = "{passwd}"\nfailure_backoff = 0\n'
        + f'[audit]\ndir = "{audit_dir}"\n{audit}\n'
        + (f"[limits]\n{limits}\n" if limits else "")
        + PERMISSIONS
    )
    return start_broker(tmp_path / "broker", config), audit_dir


def _records(audit_dir: Path) -> list[dict[str, Any]]:
    return [r for _, _, r in read_records(audit_dir)]


class Paho:
    """One paho MQTT 5 client that never reconnects by itself (a refused CONNECT is one)."""

    def __init__(self, client_id: str) -> None:
        self.c = paho.Client(
            paho.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=V5,
            reconnect_on_failure=False,
        )
        self.connacks: queue.Queue[int] = queue.Queue()
        self.subacks: queue.Queue[int] = queue.Queue()
        self.acks: queue.Queue[tuple[int, int]] = queue.Queue()  # (mid, code); QoS 0 too
        self.c.on_connect = lambda c, u, f, rc, p: self.connacks.put(reason_value(rc))
        self.c.on_subscribe = lambda c, u, m, rcs, p: self.subacks.put(reason_value(rcs[0]))
        self.c.on_publish = lambda c, u, m, rc, p: self.acks.put((m, reason_value(rc)))

    def connect(
        self,
        port: int,
        username: str | None = None,
        password: str | None = None,
        properties: Properties | None = None,
    ) -> int:
        if username is not None:
            self.c.username_pw_set(username, password)
        self.c.connect("127.0.0.1", port, properties=properties)
        self.c.loop_start()
        return self.connacks.get(timeout=5)

    def publish(self, topic: str, qos: int = 1, retain: bool = False) -> int:
        """The PUBACK (PUBREC/PUBCOMP) reason code of this PUBLISH."""
        mid = self.c.publish(topic, b"x", qos, retain).mid
        while True:
            acked, code = self.acks.get(timeout=5)
            if acked == mid:
                return code

    def subscribe(self, topic_filter: str, qos: int = 1) -> int:
        self.c.subscribe(topic_filter, qos)
        return self.subacks.get(timeout=5)

    def close(self) -> None:
        self.c.disconnect()
        self.c.loop_stop()


def login(port: int, client_id: str, **kw: Any) -> int:
    client = Paho(client_id)
    try:
        return client.connect(port, **kw)
    finally:
        client.close()


def _token_props(token: str) -> Properties:
    props = Properties(PacketTypes.CONNECT)
    props.AuthenticationMethod = "TOKEN"
    props.AuthenticationData = token.encode()
    return props


def test_decision_records_carry_every_attribute_the_gates_read(tmp_path: Path) -> None:
    broker, audit_dir = _broker(tmp_path, audit="log_allowed = true\nstats_interval = 0")
    pw, tok = broker.ports["pw"], broker.ports["tok"]
    grants = [grant(["~"], pub=["sensors/tok/a"], sub=["commands/tok"])]
    sensor, ops, device = Paho("sensor-a"), Paho("ops-console"), Paho("tok-1")
    try:
        assert sensor.connect(pw, "sensor-a", PASSWORDS["sensor-a"]) == 0
        assert sensor.publish("sensors/sensor-a/temp", qos=1, retain=True) < 0x80
        # own-data allows QoS 0-1: PUBREC 0x87 (paho reports the PUBCOMP that ends the flow)
        assert sensor.publish("sensors/sensor-a/temp", qos=2) >= 0x80
        assert sensor.subscribe("commands/sensor-a", qos=2) == 2
        assert ops.connect(pw, "ops", PASSWORDS["ops"]) == 0
        assert ops.publish("sensors/x") == 0x87  # default deny of set "ops": no rule
        assert device.connect(tok, properties=_token_props(make_token(grants))) == 0
        assert device.publish("sensors/tok/a", qos=1) < 0x80
        assert device.publish("sensors/other", qos=1) == 0x87
    finally:
        for client in (sensor, ops, device):
            client.close()
    assert broker.stop() == 0
    records = _records(audit_dir)
    decisions = [r for r in records if r["type"] == "decision"]

    def one(**match: Any) -> dict[str, Any]:
        found = [r for r in decisions if all(r.get(k) == v for k, v in match.items())]
        assert len(found) == 1, (match, decisions)
        return found[0]

    allowed = one(action="publish", client="sensor-a", outcome="allow")
    assert (allowed["qos"], allowed["retain"], allowed["roles"]) == (1, True, ["field", "sensor"])
    assert allowed["set"] == "own-data" and allowed["rule"] == "own"
    assert allowed["iface"]  # the loopback interface's name, as the site ACL matches it
    denied = one(action="publish", client="sensor-a", outcome="deny")
    assert (denied["qos"], denied["retain"], denied["rc"]) == (2, False, 0x87)
    sub = one(action="subscribe", client="sensor-a")
    assert (sub["qos"], sub["outcome"], sub["topic"]) == (2, "allow", "commands/sensor-a")
    assert "retain" not in sub
    # the site ACL's message kind of each request (what-if replays ACL rules by kind)
    assert (allowed["msg"], denied["msg"], sub["msg"]) == ("put", "put", "declare_subscriber")
    default_deny = one(action="publish", client="ops-console", outcome="deny")
    assert "rule" not in default_deny and default_deny["set"] == "ops"
    assert "roles" not in default_deny  # absent when the principal has none
    compiled = Grants.parse(grants).for_tenant("~")
    token_records = [r for r in decisions if r.get("client") == "tok-1"]
    assert {r["grants"] for r in token_records} == {grants_digest(compiled)}
    assert all("set" not in r for r in token_records)  # judged by grants, not permissions
    assert one(action="publish", client="tok-1", outcome="deny")["qos"] == 1
    # item 30.3: allowed connect decisions with log_allowed; no client_stats when interval = 0
    connects = [r for r in decisions if r["action"] == "connect"]
    assert {(r["client"], r["outcome"], r["rc"]) for r in connects} == {
        ("sensor-a", "allow", 0),
        ("ops-console", "allow", 0),
        ("tok-1", "allow", 0),
    }
    assert all(r["addr"] == "127.0.0.1" for r in connects)
    assert one(action="connect", client="sensor-a")["roles"] == ["field", "sensor"]
    assert not [r for r in records if r.get("event") == "client_stats"]


def test_every_refused_connect_is_audited(tmp_path: Path) -> None:
    broker, audit_dir = _broker(
        tmp_path, audit="stats_interval = 0", limits="max_connect_user_properties = 2"
    )
    pw, tok = broker.ports["pw"], broker.ports["tok"]
    assert login(pw, "anon-1") == 0x87  # no method of the listener applies: anonymous refused
    assert login(pw, "sensor-a", username="sensor-a", password="wrong") == 0x86
    assert login(pw, "not-the-console", username="ops", password=PASSWORDS["ops"]) == 0x85
    assert login(tok, "tok-bad", properties=_token_props("not.a.jwt")) in (0x86, 0x87, 0x8C)
    with RawClient(broker.host, pw, level=4) as raw:  # MQTT 3.1.1: return code 4
        ack = raw.connect("v3-client", username="sensor-a", password=b"wrong")
        assert isinstance(ack, Connack) and ack.reason_code == 4
    with RawClient(broker.host, pw) as raw:  # refused before authentication (pre-auth budget)
        props = MqttProperties(user_properties=(("a", "1"), ("b", "2"), ("c", "3")))
        assert raw.connect("props-client", properties=props).reason_code == 0x97
    assert broker.stop() == 0
    refused = {
        r["client"]: r
        for r in _records(audit_dir)
        if r["type"] == "decision" and r["action"] == "connect"
    }
    assert set(refused) == {
        "anon-1",
        "sensor-a",
        "not-the-console",
        "tok-bad",
        "v3-client",
        "props-client",
    }
    for record in refused.values():
        assert record["outcome"] == "deny" and record["addr"] == "127.0.0.1"
        assert record["reason"] and record["detail"].startswith("listener ")
    assert refused["anon-1"]["rc"] == 0x87 and "user" not in refused["anon-1"]
    assert (refused["sensor-a"]["rc"], refused["sensor-a"]["user"]) == (0x86, "sensor-a")
    assert refused["sensor-a"]["method"] == "password"
    assert (refused["not-the-console"]["rc"], refused["not-the-console"]["user"]) == (0x85, "ops")
    assert refused["tok-bad"]["method"] == "token" and refused["tok-bad"]["rc"] >= 0x80
    assert refused["v3-client"]["rc"] == 0x86  # the MQTT 5 code, whatever the client speaks
    assert "max_connect_user_properties" in refused["props-client"]["reason"]


def test_connect_rate_refusals_are_audited(tmp_path: Path) -> None:
    broker, audit_dir = _broker(
        tmp_path,
        # the broker-wide bucket alone (one source would get half of it)
        limits="connect_rate = 0.001\nconnect_burst = 2\nsource_connect_share = 1.0",
    )
    codes = [login(broker.ports["pw"], f"rate-{i}") for i in range(4)]
    assert codes[:2] == [0x87, 0x87] and codes[2:] == [0x9F, 0x9F]
    assert broker.stop() == 0
    rate = [r for r in _records(audit_dir) if r.get("rc") == 0x9F]
    assert {r["client"] for r in rate} == {"rate-2", "rate-3"}
    assert all("connect_rate" in r["reason"] and r["action"] == "connect" for r in rate)


STORM = 2000


def _storm_connect(port: int) -> None:
    with RawClient("127.0.0.1", port) as raw:
        ack = raw.connect("storm-dev", username=STORM_USER, password=b"wrong-password")
        assert ack.reason_code == 0x86


def test_storm_is_aggregated_and_a_real_event_survives(tmp_path: Path) -> None:
    """2,000 identical wrong-password CONNECTs and 2,000 identical denied publishes, with a
    distinct security event in the middle of each: a bounded number of records (and INFO
    lines), counts that add up exactly, the distinct events present."""
    broker, audit_dir = _broker(
        tmp_path,
        audit="stats_interval = 0\nmax_segment_bytes = 65536\nmax_segments = 2",
        limits="connect_rate = 100000\nconnect_burst = 100000",
    )
    pw = broker.ports["pw"]
    for i in range(STORM):
        _storm_connect(pw)
        if i == STORM // 2:
            assert login(pw, "intruder", username="ops", password="guess") == 0x86
    sensor = Paho("sensor-a")
    try:
        assert sensor.connect(pw, "sensor-a", PASSWORDS["sensor-a"]) == 0
        for i in range(STORM):
            sensor.c.publish("admin/reboot", b"x", 0)  # QoS 0: no answer to wait for
            if i == STORM // 2:
                assert sensor.subscribe("secrets/#") == 0x87
        assert sensor.publish("sensors/sensor-a/t") < 0x80  # every QoS 0 PUBLISH was read
    finally:
        sensor.close()
    assert broker.stop() == 0
    records = _records(audit_dir)
    assert broker.log().count("Traceback") == 0
    logins = [r for r in records if r.get("client") == "storm-dev"]
    publishes = [r for r in records if r.get("topic") == "admin/reboot"]
    assert sum(r.get("count", 1) for r in logins) == STORM
    assert sum(r.get("count", 1) for r in publishes) == STORM
    assert len(logins) <= 4 and len(publishes) <= 4  # at most two per window
    assert all(r["rc"] == 0x86 and r["user"] == STORM_USER for r in logins)
    assert all(r["rc"] == 0x87 and r["outcome"] == "deny" for r in publishes)
    summary = next(r for r in publishes if "count" in r)
    assert summary["first_ts"] <= summary["last_ts"]
    # the distinct events in the middle of each storm
    assert [r["rc"] for r in records if r.get("client") == "intruder"] == [0x86]
    assert [r["topic"] for r in records if r.get("action") == "subscribe"] == ["secrets/#"]
    # the INFO lines are aggregated the same way
    log = broker.log()
    assert log.count("connect refused") <= 6 and "1999 more time(s)" in log
    assert log.count("denied publish 'admin/reboot'") <= 4


def test_aggregation_off_writes_every_record_as_a_valid_line(tmp_path: Path) -> None:
    broker, audit_dir = _broker(tmp_path, audit="stats_interval = 0\naggregate_window = 0")
    for _ in range(5):
        assert login(broker.ports["pw"], "again", username="sensor-a", password="bad") == 0x86
    assert broker.stop() == 0
    lines = [
        json.loads(line)
        for path in sorted(audit_dir.glob("audit-*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert len(lines) == len(_records(audit_dir))  # every line a valid v1 record
    assert [r.get("count") for r in lines if r.get("client") == "again"] == [None] * 5

"""Issue 31 item 1: client ids belong to whoever may use them (docs/sessions.md "Whose client
ids"). Over real sockets against the real broker, an adversary and a victim side by side: the
device's password entry binds ``clientids = valve-*``; dave (another password user), a token
with another subject, an anonymous loopback client and a 3.1.1 clean-session-0 client each try
the device's id first. They are refused, whatever ``foreign_session`` says, with one Reason
String whether or not a session exists; the device connects and its session (and what is queued
for it) is its own. A reload that removes dave ends dave's sessions."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge_broker.auth.password import PasswordEntry, write_password_file
from edge_broker.mqtt.packets import Connack, Disconnect, Properties, Puback, Publish
from tests.authz.session_support import hashed, reload, wait_for_log
from tests.broker.broker_raw import RawClient, unique_id
from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import ED_KID, grant, make_token, token_config  # noqa: E402

PASSWORDS = {"device": "valve-secret", "dave": "dave-secret", "ops": "ops-secret"}
PERSISTENT = 300


def write_users(path: Path, users: dict[str, tuple[str, ...]]) -> None:
    """``users``: name → the client id globs its entry binds (``()``: none)."""
    write_password_file(
        path,
        {
            user: PasswordEntry(user, hashed(user, PASSWORDS[user]), (), ("user",), clientids)
            for user, clientids in users.items()
        },
    )


USERS = {"device": ("valve-*",), "dave": (), "ops": ()}


def config(directory: Path, foreign_session: str = "refuse") -> str:
    token_config(directory)  # writes the token keys
    return f"""
[sys]
interval = 0
[broker]
foreign_session = "{foreign_session}"
[passwords]
file = "{directory / "passwd"}"
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0
auth_methods = ["password", "token", "anonymous"]
[[tokens.keys]]
file = "{directory / "ed25519.pub.pem"}"
kid = "{ED_KID}"
[permissions]
unassigned = "allow"
[permissions.sets.user]
rules = [ {{ id = "all", topic = "#" }} ]
[[permissions.assign]]
role = "user"
sets = ["user"]
"""


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[object]:
    started: list[RunningBroker] = []

    def make(foreign_session: str = "refuse") -> RunningBroker:
        write_users(tmp_path / "passwd", USERS)
        b = start_broker(tmp_path / f"run{len(started)}", config(tmp_path, foreign_session))
        started.append(b)
        return b

    yield make
    for b in started:
        b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def login(
    b: RunningBroker, who: str, cid: str, *, clean: bool = False
) -> tuple[RawClient, Connack]:
    """``who``: a password user, ``token`` (a token with subject "other" and no client id
    binding), ``anonymous`` (MQTT 5) or ``anonymous311`` (3.1.1, clean session 0)."""
    level = 4 if who == "anonymous311" else 5
    c = RawClient(b.host, b.port, level=level)
    props = Properties(session_expiry_interval=PERSISTENT) if level == 5 else Properties()
    if who in PASSWORDS:
        return c, c.connect(
            cid, clean=clean, username=who, password=PASSWORDS[who].encode(), properties=props
        )
    if who == "token":
        token = make_token([grant(["~"], pub=["#"], sub=["#"])], subject="other")
        props = Properties(
            session_expiry_interval=PERSISTENT,
            authentication_method="TOKEN",
            authentication_data=token.encode(),
        )
    return c, c.connect(cid, clean=clean, properties=props)


SQUATTERS = ("dave", "token", "anonymous", "anonymous311")


def refused(ack: Connack, who: str) -> str:
    """The refusal's Reason String (3.1.1 has none: return code 5)."""
    if who == "anonymous311":
        assert ack.reason_code == 0x05, (who, ack)
        return ""
    assert ack.reason_code == 0x87, (who, ack)
    return ack.properties.reason_string or ""


def queue_command(b: RunningBroker, topic: str, payload: bytes) -> None:
    pub, ack = login(b, "ops", unique_id("ops-"), clean=True)
    assert ack.reason_code == 0
    pub.send(Publish(topic, payload, 1, packet_id=1))
    assert pub.expect(Puback).reason_code == 0
    pub.close()


def test_squatters_cannot_take_a_bound_id_and_the_device_keeps_its_session(gateway) -> None:
    b = gateway()
    cid = unique_id("valve-")
    topic = f"cmd/{cid}"
    reasons = {}
    for who in SQUATTERS:  # first, before the device ever connected: no session exists
        c, ack = login(b, who, cid)
        reasons[who] = refused(ack, who)
        c.close()
    device, ack = login(b, "device", cid)
    assert ack.reason_code == 0 and not ack.session_present
    assert device.subscribe(topic, 1).reason_codes == (1,)
    device.send(Disconnect(0))
    device.close()
    queue_command(b, topic, b"close")
    for who in SQUATTERS:  # now a session exists: the same answer, word for word
        c, ack = login(b, who, cid, clean=True)
        assert refused(ack, who) == reasons[who], who
        c.close()
    assert "session ownership" in reasons["dave"] and cid in reasons["dave"]
    device, ack = login(b, "device", cid)
    assert ack.reason_code == 0 and ack.session_present  # its own session, with its command
    assert [p.payload for p in device.publishes(0.8)] == [b"close"]
    device.close()


def test_with_fresh_a_squatter_still_cannot_wipe_the_devices_queue(gateway) -> None:
    b = gateway("fresh")
    cid = unique_id("valve-")
    topic = f"cmd/{cid}"
    device, ack = login(b, "device", cid)
    assert ack.reason_code == 0 and device.subscribe(topic, 1).reason_codes == (1,)
    device.send(Disconnect(0))
    device.close()
    queue_command(b, topic, b"open")
    for who in SQUATTERS:
        c, ack = login(b, who, cid, clean=True)
        refused(ack, who)
        c.close()
    device, ack = login(b, "device", cid)
    assert ack.reason_code == 0 and ack.session_present
    assert [p.payload for p in device.publishes(0.8)] == [b"open"]
    device.close()


def test_a_token_bound_id_is_taken_back_from_an_unbound_squatter(gateway) -> None:
    """A token's ``client_id`` binding is known only when the token is presented: an anonymous
    client may make a session under the id first (an unbound id is first come), but the bound
    token ends it and gets a fresh session of its own; the squatter is refused from then on."""
    b = gateway()
    cid = unique_id("tokdev-")
    squatter, ack = login(b, "anonymous", cid)
    assert ack.reason_code == 0
    token = make_token([grant(["~"], pub=["#"], sub=["#"])], subject="dev", client_id=cid)
    device = RawClient(b.host, b.port)
    props = Properties(
        session_expiry_interval=PERSISTENT,
        authentication_method="TOKEN",
        authentication_data=token.encode(),
    )
    ack = device.connect(cid, clean=False, properties=props)
    assert ack.reason_code == 0 and not ack.session_present  # nothing of the squatter's
    assert [p.reason_code for p in squatter.closed() if isinstance(p, Disconnect)] == [0x8E]
    again, ack = login(b, "anonymous", cid, clean=True)
    refused(ack, "anonymous")
    for c in (device, again):
        c.close()


def test_reload_that_removes_dave_ends_daves_sessions(gateway, tmp_path: Path) -> None:
    b = gateway()
    online_id, offline_id = unique_id("dave-on-"), unique_id("dave-off-")
    offline, ack = login(b, "dave", offline_id)
    assert ack.reason_code == 0 and offline.subscribe("d/#", 1).reason_codes == (1,)
    offline.send(Disconnect(0))
    offline.close()
    online, ack = login(b, "dave", online_id)
    assert ack.reason_code == 0
    write_users(tmp_path / "passwd", {"device": ("valve-*",), "ops": ()})
    reload(b)
    closed = [p for p in online.closed() if isinstance(p, Disconnect)]
    assert [p.reason_code for p in closed] == [0x87]
    wait_for_log(b, "session(s) ended (owner removed or id bound to others)")
    write_users(tmp_path / "passwd", USERS)  # dave comes back: nothing of his old sessions
    reload(b)
    for cid in (online_id, offline_id):
        c, ack = login(b, "dave", cid)
        assert ack.reason_code == 0 and not ack.session_present, cid
        c.close()


def test_reload_that_binds_an_id_ends_the_unbound_session_under_it(gateway, tmp_path) -> None:
    b = gateway()
    cid = unique_id("pump-")
    dave, ack = login(b, "dave", cid)
    assert ack.reason_code == 0  # "pump-*" is bound by nobody yet: first come
    write_users(tmp_path / "passwd", {**USERS, "device": ("valve-*", "pump-*")})
    reload(b)
    closed = [p for p in dave.closed() if isinstance(p, Disconnect)]
    assert [p.reason_code for p in closed] == [0x87]
    assert "now bound to other credentials" in (closed[0].properties.reason_string or "")
    device, ack = login(b, "device", cid)
    assert ack.reason_code == 0 and not ack.session_present
    device.close()

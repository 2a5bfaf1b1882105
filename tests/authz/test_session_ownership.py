"""Issue 15 item 1: a session belongs to the principal that created it. Over real sockets
against the real broker: another principal (another password user, another method, another
token subject) neither resumes nor takes over it — CONNACK 0x87 / 3.x 0x05 with a Reason String,
the owner's connection and session untouched — unless ``[broker] foreign_session = "fresh"``,
which ends the owner's session and starts an empty one. The owner itself takes over as before,
and the owner survives a restart."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from edge_broker.mqtt.packets import (
    Connack,
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
)
from tests.authz.session_support import PASSWORDS, gateway_config, write_passwd
from tests.broker.broker_raw import RawClient, unique_id
from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402

PERSISTENT = Properties(session_expiry_interval=300)


def login(
    b: RunningBroker,
    user: str | None,
    cid: str,
    *,
    level: int = 5,
    clean: bool = False,
    expiry: int = 300,
) -> tuple[RawClient, Connack]:
    c = RawClient(b.host, b.port, level=level)
    kw = {} if user is None else {"username": user, "password": PASSWORDS[user].encode()}
    props = Properties(session_expiry_interval=expiry) if level == 5 else Properties()
    return c, c.connect(cid, clean=clean, properties=props, **kw)


@pytest.fixture
def gateway(tmp_path: Path):
    """bob is admin (admin/#), alice and carol users; anonymous allowed on loopback."""

    def make(**kw: object) -> RunningBroker:
        write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin", "carol": "user"})
        b = start_broker(tmp_path / f"run{len(started)}", gateway_config(tmp_path, **kw))  # type: ignore[arg-type]
        started.append(b)
        return b

    started: list[RunningBroker] = []
    yield make
    for b in started:
        b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def queue_for_bob(b: RunningBroker, cid: str, level: int = 5) -> None:
    """bob's persistent session with admin/# and one queued QoS 1 admin message."""
    bob, ack = login(b, "bob", cid, level=level)
    assert ack.reason_code == 0
    assert bob.subscribe("admin/#", 1).reason_codes == (1,)
    bob.send(Disconnect(0) if level == 5 else Disconnect())
    bob.close()
    pub, ack = login(b, "bob", unique_id("pub-"), clean=True, expiry=0)
    pub.send(Publish("admin/secret", b"for bob only", 1, packet_id=1))
    assert pub.expect(Puback).reason_code == 0  # queued for bob's session
    pub.close()


def test_another_password_user_cannot_resume_the_session(gateway) -> None:
    b = gateway()
    cid = unique_id("bob-")
    queue_for_bob(b, cid)
    alice, ack = login(b, "alice", cid)
    assert ack.reason_code == 0x87 and not ack.session_present
    assert "session ownership" in (ack.properties.reason_string or "")
    assert "another principal's session" in (ack.properties.reason_string or "")
    alice.close()
    bob, ack = login(b, "bob", cid)  # the owner's session is untouched
    assert ack.reason_code == 0 and ack.session_present
    assert [p.payload for p in bob.publishes(0.8)] == [b"for bob only"]
    bob.close()


def test_another_principal_cannot_take_over_a_live_connection(gateway) -> None:
    b = gateway()
    cid = unique_id("bob-")
    bob, ack = login(b, "bob", cid)
    assert ack.reason_code == 0 and bob.subscribe("admin/#", 0).reason_codes == (0,)
    for user in ("alice", None):  # another password user, and anonymous (another method)
        intruder, ack = login(b, user, cid, clean=True)
        assert ack.reason_code == 0x87, user
        intruder.close()
    bob.send(Pingreq())
    assert isinstance(bob.recv(), Pingresp)  # still connected, never sent 0x8E
    pub, _ = login(b, "bob", unique_id("pub-"), clean=True, expiry=0)
    pub.send(Publish("admin/live", b"live", 0))
    assert [p.payload for p in bob.publishes(0.8)] == [b"live"]
    pub.close()
    bob.close()


def test_mqtt311_refusal_is_return_code_5(gateway) -> None:
    b = gateway()
    cid = unique_id("bob-")
    queue_for_bob(b, cid, level=4)
    alice, ack = login(b, "alice", cid, level=4)
    assert ack.reason_code == 0x05 and not ack.session_present
    alice.close()
    bob, ack = login(b, "bob", cid, level=4)
    assert ack.reason_code == 0 and ack.session_present
    assert [p.payload for p in bob.publishes(0.8)] == [b"for bob only"]
    bob.close()


def test_the_owner_still_takes_over_its_own_session(gateway) -> None:
    b = gateway()
    cid = unique_id("bob-")
    first, ack = login(b, "bob", cid)
    assert first.subscribe("admin/#", 1).reason_codes == (1,)
    second, ack = login(b, "bob", cid)
    assert ack.reason_code == 0 and ack.session_present
    assert [p.reason_code for p in first.closed() if isinstance(p, Disconnect)] == [0x8E]
    pub, _ = login(b, "bob", unique_id("pub-"), clean=True, expiry=0)
    pub.send(Publish("admin/after", b"after", 0))
    assert [p.payload for p in second.publishes(0.8)] == [b"after"]
    for c in (first, second, pub):
        c.close()


def test_fresh_option_ends_the_owners_session_and_hands_nothing_over(gateway) -> None:
    b = gateway(broker_extra='foreign_session = "fresh"')
    cid = unique_id("bob-")
    queue_for_bob(b, cid)
    alice, ack = login(b, "alice", cid)
    assert ack.reason_code == 0 and not ack.session_present
    assert alice.publishes(0.8) == []  # bob's queued admin message is not handed over
    pub, _ = login(b, "bob", unique_id("pub-"), clean=True, expiry=0)
    pub.send(Publish("admin/later", b"later", 0))  # bob's subscriptions ended with his session
    assert alice.publishes(0.8) == []
    alice.close()
    bob, ack = login(b, "bob", cid)
    assert ack.reason_code == 0 and not ack.session_present  # alice's fresh one ended in turn
    bob.close()
    pub.close()


def test_the_owner_is_kept_across_a_restart(tmp_path: Path) -> None:
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin"})
    config = gateway_config(tmp_path, persistence=True)
    b = start_broker(tmp_path / "run1", config)
    cid = unique_id("bob-")
    try:
        queue_for_bob(b, cid)
    finally:
        assert b.stop() == 0
    b = start_broker(tmp_path / "run2", config)
    try:
        alice, ack = login(b, "alice", cid)
        assert ack.reason_code == 0x87
        alice.close()
        bob, ack = login(b, "bob", cid)
        assert ack.reason_code == 0 and ack.session_present
        assert [p.payload for p in bob.publishes(0.8)] == [b"for bob only"]
        bob.close()
    finally:
        b.stop()


def test_token_subjects_are_principals(tmp_path: Path) -> None:
    b = start_broker(tmp_path / "run", token_config(tmp_path))
    wide = [grant(["~"], pub=["#"], sub=["#"])]
    cid = unique_id("dev-")

    def token_login(token: str) -> tuple[RawClient, Connack]:
        c = RawClient(b.host, b.port)
        return c, c.connect(
            cid,
            clean=False,
            properties=Properties(
                session_expiry_interval=300,
                authentication_method="TOKEN",
                authentication_data=token.encode(),
            ),
        )

    try:
        owner, ack = token_login(make_token(wide, subject="device-1"))
        assert ack.reason_code == 0 and owner.subscribe("x/#", 1).reason_codes == (1,)
        other, ack = token_login(make_token(wide, subject="device-2"))
        assert ack.reason_code == 0x87  # another subject, even with the same grants
        other.close()
        anonymous = RawClient(b.host, b.port)
        assert anonymous.connect(cid, clean=False).reason_code == 0x87  # another method
        anonymous.close()
        again, ack = token_login(make_token(wide, subject="device-1"))  # a fresh token, same sub
        assert ack.reason_code == 0 and ack.session_present
        for c in (owner, again):
            c.close()
    finally:
        b.stop()


def test_a_session_from_an_older_state_gets_a_safe_owner() -> None:
    """Records written before owners were stored (10 fields): password/certificate/SMOKER owners
    come from the stored verified name; token and anonymous ones are unknown, which nobody
    matches (ended for a fresh session, never resumed)."""
    from edge_broker.broker.ownership import Principal, may_resume
    from edge_broker.broker.persist.tables import decode_session

    def old_record(identity: dict[str, object]) -> list[object]:
        return ["~", identity, 5, 300, None, None, None, None, [], 1]

    pw, _ = decode_session(
        "c1", old_record({"client_id": "c1", "method": "password", "username": "bob"}), 0.0, 0.0
    )
    assert pw.owner == Principal("password", "bob")
    assert may_resume(pw, Principal("password", "bob"))
    assert not may_resume(pw, Principal("password", "alice"))
    tok, _ = decode_session(
        "c2", old_record({"client_id": "c2", "method": "token", "username": "admin"}), 0.0, 0.0
    )
    assert tok.owner is not None and not tok.owner.named
    assert not may_resume(tok, Principal("token", "(no subject)"))
    assert not may_resume(tok, Principal("token", "sub admin"))


def test_anonymous_clients_of_another_listener_are_another_principal(broker_factory) -> None:
    b = broker_factory(
        {"listeners": [{"name": "one", "bind": "127.0.0.1"}, {"name": "two", "bind": "127.0.0.1"}]}
    )
    cid = unique_id("anon-")
    owner = RawClient(b.host, b.ports["one"])
    assert owner.connect(cid, clean=False, properties=PERSISTENT).reason_code == 0
    other = RawClient(b.host, b.ports["two"])
    assert other.connect(cid, clean=False, properties=PERSISTENT).reason_code == 0x87
    same = RawClient(b.host, b.ports["one"])  # the same listener: the same principal
    ack = same.connect(cid, clean=False, properties=PERSISTENT)
    assert ack.reason_code == 0 and ack.session_present
    for c in (owner, other, same):
        c.close()

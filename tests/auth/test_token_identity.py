"""A token client's identity carries only what the token proves (issue 15 item 6).

The CONNECT User Name of a token client is not verified by anything, so it must not reach the
site ACL's ``usernames`` subjects (nor authorizers or permissions). The token's own ``sub``
claim, which the issuer signed, is the identity's user name. Real broker, raw sockets.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from token_broker import grant, make_token, token_config

from tests.conftest import RunningBroker, start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from broker_raw import RawClient, unique_id  # noqa: E402

from edge_broker.mqtt.packets import Puback, Publish  # noqa: E402

GRANTS = [grant(["acme"], pub=["ops/#"], sub=["ops/#"])]

# Only the user name "admin" may publish to ops/**: everyone else is denied by default.
ACL = """
[acl]
enabled = true
default_permission = "deny"

[[acl.rules]]
id = "admins-operate"
messages = ["put", "declare_subscriber"]
flows = ["ingress", "egress"]
permission = "allow"
key_exprs = ["ops/**"]

[[acl.subjects]]
id = "admins"
usernames = ["admin"]

[[acl.policies]]
rules = ["admins-operate"]
subjects = ["admins"]
"""


@pytest.fixture(scope="module")
def acl_token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    directory = tmp_path_factory.mktemp("token-identity")
    b = start_broker(directory, token_config(directory, methods=("token",)) + ACL)
    yield b
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def _publish(b: RunningBroker, token: str, username: str | None) -> int:
    with RawClient(b.host, b.port) as c:
        ack = c.connect(unique_id("t"), username=username, password=token.encode())
        assert ack.reason_code == 0, ack
        c.send(Publish("ops/restart", b"now", 1, packet_id=1))
        return c.expect(Puback).reason_code


def test_connect_user_name_of_a_token_client_is_not_trusted(acl_token_broker):
    """A token without ``sub`` and the CONNECT user name 'admin': the ACL must not see 'admin'."""
    assert _publish(acl_token_broker, make_token(GRANTS), "admin") == 0x87


def test_connect_user_name_does_not_override_the_token_subject(acl_token_broker):
    assert _publish(acl_token_broker, make_token(GRANTS, subject="bob"), "admin") == 0x87


def test_token_subject_is_the_verified_user_name(acl_token_broker):
    """The issuer's ``sub`` claim is what the identity carries, whatever CONNECT said."""
    assert _publish(acl_token_broker, make_token(GRANTS, subject="admin"), "mallory") in (
        0x00,
        0x10,
    )
    assert _publish(acl_token_broker, make_token(GRANTS, subject="admin"), None) in (0x00, 0x10)


def test_reauthentication_cannot_switch_to_another_subject(acl_token_broker):
    """Re-authenticating with a token for 'admin' must not turn bob's connection into admin's."""
    from edge_broker.mqtt.packets import Auth, Disconnect, Properties

    def props(token: str) -> Properties:
        return Properties(authentication_method="TOKEN", authentication_data=token.encode())

    with RawClient(acl_token_broker.host, acl_token_broker.port) as c:
        ack = c.connect(unique_id("ra"), properties=props(make_token(GRANTS, subject="bob")))
        assert ack.reason_code == 0
        c.send(Auth(0x19, props(make_token(GRANTS, subject="admin"))))
        answer = c.recv()
        assert isinstance(answer, Disconnect) and answer.reason_code == 0x87
        assert "subject 'admin'" in (answer.properties.reason_string or "")
    with RawClient(acl_token_broker.host, acl_token_broker.port) as c:  # same subject: fine
        ack = c.connect(unique_id("rb"), properties=props(make_token(GRANTS, subject="admin")))
        assert ack.reason_code == 0
        c.send(Auth(0x19, props(make_token(GRANTS, subject="admin"))))
        answer = c.recv()
        assert isinstance(answer, Auth) and answer.reason_code == 0
        c.send(Publish("ops/restart", b"now", 1, packet_id=1))
        assert c.expect(Puback).reason_code in (0x00, 0x10)

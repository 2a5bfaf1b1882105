"""Issue 15 item 5: a reload judges live credentials again. Over real sockets against the real
broker: a password entry removed (``passwd remove`` + SIGHUP) or whose hash changed ends the
connection (MQTT 5: DISCONNECT 0x87 with a Reason String; 3.1.1: closed); a role that changed
takes effect on the open connection (a demoted user loses what the old role allowed)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish
from tests.authz.session_support import PASSWORDS, gateway_config, reload, write_passwd
from tests.broker.broker_raw import RawClient, unique_id
from tests.conftest import RunningBroker, start_broker


@pytest.fixture
def gateway(tmp_path: Path):
    write_passwd(tmp_path / "passwd", {"alice": "user", "bob": "admin", "carol": "user"})
    b = start_broker(tmp_path / "run", gateway_config(tmp_path))
    yield b, tmp_path
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def login(b: RunningBroker, user: str, level: int = 5) -> RawClient:
    c = RawClient(b.host, b.port, level)
    assert (
        c.connect(
            unique_id(user + "-"), username=user, password=PASSWORDS[user].encode()
        ).reason_code
        == 0
    )
    return c


def test_removed_user_is_disconnected_with_0x87(gateway) -> None:
    b, directory = gateway
    bob = login(b, "bob")
    alice = login(b, "alice")
    result = subprocess.run(
        [sys.executable, "-m", "edge_broker", "passwd", "remove", str(directory / "passwd"), "bob"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    reload(b)
    packets = bob.closed()
    assert isinstance(packets[-1], Disconnect) and packets[-1].reason_code == 0x87
    assert "removed" in (packets[-1].properties.reason_string or "")
    alice.send(Publish("open/x", b"x", 1, packet_id=1))  # others are untouched
    assert alice.expect(Puback).reason_code in (0, 0x10)
    alice.close()


def test_changed_password_closes_a_311_connection(gateway) -> None:
    b, directory = gateway
    carol = login(b, "carol", level=4)
    write_passwd(
        directory / "passwd",
        {"alice": "user", "bob": "admin", "carol": "user"},
        passwords={"carol": "new-song"},
    )
    reload(b)
    assert carol.closed() == []  # 3.1.1 has no DISCONNECT from the server: closed
    assert "password of user 'carol' was changed" in b.log()


def test_a_changed_role_takes_effect_on_the_open_connection(gateway) -> None:
    b, directory = gateway
    bob = login(b, "bob")
    assert bob.subscribe("admin/#", 1).reason_codes == (1,)
    write_passwd(directory / "passwd", {"alice": "user", "bob": "user", "carol": "user"})
    reload(b)
    bob.send(Publish("admin/x", b"x", 1, packet_id=7, properties=Properties()))
    assert bob.expect(Puback).reason_code == 0x87  # the "user" role: no admin/#
    assert "subscription removed" in b.log()
    bob.close()


# -- token connections: the JWT is verified again under the reloaded [tokens] -----------------

TOKEN_SECRETS = {
    "old": "old-secret-0123456789abcdef012345",
    "new": "new-secret-0123456789abcdef012345",
}


def _token_config(kids: list[str], binding: bool = False) -> str:
    keys = "".join(
        f'[[tokens.keys]]\nkid = "{kid}"\nsecret = "{TOKEN_SECRETS[kid]}"\n\n' for kid in kids
    )
    return (
        '[[listeners]]\nname = "t"\nport = 0\nauth_methods = ["token"]\n\n'
        f"[tokens]\nrequire_client_id_binding = {'true' if binding else 'false'}\n\n" + keys
    )


def _token(kid: str, client_id: str | None = None) -> bytes:
    from edge_broker.auth.token import create_token
    from edge_broker.auth.token_keys import TokenKey

    key = TokenKey.hs256(TOKEN_SECRETS[kid].encode(), kid, "test")
    grants = [{"tenant_ids": ["~"], "allow_channels_pub": ["t/#"], "allow_channels_sub": ["t/#"]}]
    return create_token(key, grants, ttl=600, subject=f"device-{kid}", client_id=client_id).encode()


def test_a_token_signed_by_a_removed_key_ends_its_connection(tmp_path: Path) -> None:
    """Rotating the issuer key out of [tokens] ends the connections it admitted (0x87, named),
    as a new CONNECT with that token would be refused; tokens of the kept key stay."""
    b = start_broker(tmp_path / "run", _token_config(["old", "new"]))
    try:
        clients = {}
        for kid in ("old", "new"):
            c = RawClient(b.host, b.port, 5)
            assert c.connect(f"tok-{kid}", username="x", password=_token(kid)).reason_code == 0
            clients[kid] = c
        reload(b, _token_config(["new"]))
        packets = clients["old"].closed()
        assert isinstance(packets[-1], Disconnect) and packets[-1].reason_code == 0x87
        assert "no longer verifies" in (packets[-1].properties.reason_string or "")
        kept = clients["new"]
        kept.send(Publish("t/x", b"x", 1, packet_id=1))
        assert kept.expect(Puback).reason_code in (0, 0x10)  # still connected, still allowed
        kept.close()
        assert "credentials_revoked" in b.log() or "connection ended" in b.log()
    finally:
        b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def test_requiring_client_id_binding_ends_unbound_token_connections(tmp_path: Path) -> None:
    b = start_broker(tmp_path / "run", _token_config(["new"]))
    try:
        unbound = RawClient(b.host, b.port, 4)
        assert unbound.connect("free-1", username="x", password=_token("new")).reason_code == 0
        bound = RawClient(b.host, b.port, 5)
        assert (
            bound.connect(
                "bound-1", username="x", password=_token("new", client_id="bound-1")
            ).reason_code
            == 0
        )
        reload(b, _token_config(["new"], binding=True))
        assert unbound.closed() == []  # 3.1.1: closed without a DISCONNECT
        bound.send(Publish("t/y", b"y", 1, packet_id=1))
        assert bound.expect(Puback).reason_code in (0, 0x10)
        bound.close()
        assert "tokens must now be bound to the Client Identifier" in b.log()
    finally:
        b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)


def test_a_client_id_no_longer_listed_ends_the_password_connection(gateway) -> None:
    """A password entry's client ids (issue 15 item 8) are judged again at reload too."""
    from edge_broker.auth.password import PasswordEntry, write_password_file
    from tests.authz.session_support import hashed

    b, directory = gateway
    alice = login(b, "alice")  # client id "alice-…"
    write_password_file(
        directory / "passwd",
        {
            "alice": PasswordEntry("alice", hashed("alice"), (), ("user",), ("sensor-*",)),
            **{
                u: PasswordEntry(u, hashed(u), (), (r,))
                for u, r in (("bob", "admin"), ("carol", "user"))
            },
        },
    )
    reload(b)
    packets = alice.closed()
    assert isinstance(packets[-1], Disconnect) and packets[-1].reason_code == 0x87
    assert "may no longer connect as" in (packets[-1].properties.reason_string or "")

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
    assert c.connect(unique_id(user + "-"), username=user,
                     password=PASSWORDS[user].encode()).reason_code == 0
    return c


def test_removed_user_is_disconnected_with_0x87(gateway) -> None:
    b, directory = gateway
    bob = login(b, "bob")
    alice = login(b, "alice")
    result = subprocess.run([sys.executable, "-m", "edge_broker", "passwd", "remove",
                             str(directory / "passwd"), "bob"], capture_output=True, text=True)
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
    write_passwd(directory / "passwd", {"alice": "user", "bob": "admin", "carol": "user"},
                 passwords={"carol": "new-song"})
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

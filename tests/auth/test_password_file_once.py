"""The password file is read once per start or reload (auth.settings.PasswordsConfig.entries): the
entries that load_config validated are what the broker authenticates with and what a reload
judges live connections by. Over real sockets against the real broker, as an operator does it
(edit the file, SIGHUP)."""

from __future__ import annotations

from edge_broker.config import loads_config
from edge_broker.mqtt.packets import Disconnect
from tests.authz.session_support import PASSWORDS, reload, write_passwd
from tests.authz.test_credentials_reload import gateway, login  # noqa: F401 (gateway: a fixture)
from tests.broker.broker_raw import RawClient, unique_id


def refused(b, user: str) -> bool:  # type: ignore[no-untyped-def]
    with RawClient(b.host, b.port, 5) as c:
        ack = c.connect(unique_id(user + "-"), username=user, password=PASSWORDS[user].encode())
        return ack.reason_code != 0


def test_an_edit_takes_effect_at_the_reload_not_at_the_next_connect(gateway) -> None:  # noqa: F811
    """Before, the reload read the file twice (to validate, then to judge live connections)
    and the rebuilt authentication read it a third time at the next CONNECT: an edit saved
    after the SIGHUP, not yet applied, already decided who got in, and live connections and new
    logins were judged by two versions of the file."""
    b, directory = gateway
    bob = login(b, "bob")  # a live password connection: the reload judges it again
    reload(b)
    write_passwd(directory / "passwd", {"bob": "admin", "carol": "user"})  # alice removed
    alice = login(b, "alice")  # the applied file still lists her
    assert not refused(b, "carol")
    reload(b)  # now the edit applies: her connection ends and she cannot log in again
    packets = alice.closed()
    assert isinstance(packets[-1], Disconnect) and packets[-1].reason_code == 0x87
    assert refused(b, "alice")
    assert not refused(b, "carol")
    bob.close()


def test_the_loaded_config_carries_the_entries(tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_passwd(tmp_path / "passwd", {"alice": "user"})
    text = f'[passwords]\nfile = "{tmp_path / "passwd"}"\n'
    config = loads_config(text, "<test>")
    (tmp_path / "passwd").unlink()  # nothing reads it again
    assert set(config.passwords.entries) == {"alice"}
    assert config.passwords.entries["alice"].roles == ("user",)
    assert loads_config("", "<test>").passwords.entries == {}

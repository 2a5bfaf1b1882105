"""Shared pieces of the issue-15 tests (sessions belong to their principal; everything that
leaves is judged now): a gateway-like config with password users and roles, password files
written in-process, SIGHUP reloads and log waits."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TypeVar

from edge_broker.auth.password import PasswordEntry, hash_password, write_password_file
from edge_broker.mqtt.packets import Properties, Will
from tests.broker.broker_raw import ClientPackets, unique_id
from tests.conftest import RunningBroker
from tests.waiting import wait_for_log as wait_for_log  # for the modules importing it here

PASSWORDS = {"alice": "wonder", "bob": "builder", "carol": "singer"}
_HASHES: dict[str, bytes] = {}
C = TypeVar("C", bound=ClientPackets)

# alice and carol: "user" (everything but admin/#); bob: "admin" (everything). Anonymous clients
# (loopback) are unassigned: "deny".
RULES_WIDE = '{ id = "all", topic = "#" }'
RULES_NO_ADMIN = (
    '{ id = "no-admin", topic = "admin/#", type = "DENY" }, { id = "all", topic = "#" }'
)


def password_login(client: C, user: str, cid: str, clean: bool = False, **props: int) -> C:
    """``client`` (a real-socket RawClient or the harness's MemoryClient) connected as ``user``
    with its password and a 300 s session expiry (``props``: more CONNECT properties); the
    CONNACK must accept it."""
    ack = client.connect(
        cid,
        clean=clean,
        username=user,
        password=PASSWORDS[user].encode(),
        properties=Properties(session_expiry_interval=300, **props),
    )
    assert ack.reason_code == 0, ack
    return client


def hashed(user: str, password: str | None = None) -> bytes:
    """argon2id costs tens of ms: one hash per (user, password) per test run."""
    key = f"{user}:{password or PASSWORDS[user]}"
    if key not in _HASHES:
        _HASHES[key] = hash_password(password or PASSWORDS[user])
    return _HASHES[key]


def write_passwd(
    path: Path, roles: dict[str, str], passwords: dict[str, str] | None = None
) -> None:
    """``roles``: user → role; users not named are absent from the file."""
    passwords = passwords or {}
    write_password_file(
        path,
        {
            user: PasswordEntry(user, hashed(user, passwords.get(user)), (), (role,))
            for user, role in roles.items()
        },
    )


def gateway_config(
    directory: Path,
    *,
    admin_rules: str = RULES_WIDE,
    user_rules: str = RULES_NO_ADMIN,
    broker_extra: str = "",
    persistence: bool = False,
    methods: str = '["password", "anonymous"]',
    sys_interval: float = 0,
    audit: bool = False,
) -> str:
    """Password users with roles, ``unassigned = "deny"``, anonymous on loopback; with
    ``audit`` the audit log in ``directory/audit``."""
    state = directory / "state"
    persist = f'[persistence]\nenabled = true\nstate_dir = "{state}"\n' if persistence else ""
    if audit:
        persist += f'[audit]\ndir = "{directory / "audit"}"\ngateway_id = "gw-test"\n'
    return f"""
[sys]
interval = {sys_interval}
[broker]
{broker_extra}
{persist}
[passwords]
file = "{directory / "passwd"}"
[[listeners]]
name = "tcp"
port = 0
auth_methods = {methods}
[permissions]
unassigned = "deny"
[permissions.sets.admin]
rules = [ {admin_rules} ]
[permissions.sets.user]
rules = [ {user_rules} ]
[[permissions.assign]]
role = "admin"
sets = ["admin"]
[[permissions.assign]]
role = "user"
sets = ["user"]
"""


def reload(b: RunningBroker, config: str | None = None) -> None:
    """Rewrite the config file (when given), SIGHUP, wait until the policy is applied."""
    if config is not None:
        b.config_path.write_text(config)
    before = b.log().count("policy applied")
    os.kill(b.pid, signal.SIGHUP)
    wait_for_log(b, "policy applied", before + 1)


NO_WILLS = (
    '{ id = "no-wills", topic = "wills/#", type = "DENY", activity = "PUBLISH" }, '
    '{ id = "all", topic = "#" }'
)
"""Site rules that deny publishing (and so every will) under ``wills/``."""


def will(topic: str, delay: int | None = None, retain: bool = False) -> Will:
    """A QoS 0 will ``gone`` on ``topic``, delayed ``delay`` seconds (None: at once);
    ``retain``: a watcher that subscribes after it was published still gets it."""
    return Will(topic, b"gone", 0, retain, properties=Properties(will_delay_interval=delay))


def watching(c: ClientPackets, topic: str, **login: object) -> ClientPackets:
    """``c`` (a RawClient or an in-memory client) connected with ``login`` and subscribed to
    ``topic`` at QoS 0."""
    assert c.connect(unique_id("watch-"), **login).reason_code == 0  # type: ignore[arg-type]
    assert c.subscribe(topic, 0).reason_codes == (0,)
    return c


def with_token_will(
    c: ClientPackets, token: str, topic: str, delay: int | None, retain: bool = False
) -> None:
    """Connect ``c`` with ``token`` (enhanced authentication ``TOKEN``), a 30 s session and
    :func:`will` on ``topic``; the CONNACK must accept it."""
    ack = c.connect(
        unique_id("dev-"),
        will=will(topic, delay, retain),
        properties=Properties(
            session_expiry_interval=30,
            authentication_method="TOKEN",
            authentication_data=token.encode(),
        ),
    )
    assert ack.reason_code == 0

"""The password and certificate methods over real sockets (paho-mqtt and the raw client):
right CONNACK codes, tenants and roles from the password file, permissions per CN and role."""

from __future__ import annotations

import ssl
import subprocess
import sys
import threading
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
from broker_raw import RawClient  # noqa: E402

from edge_broker.mqtt.packets import (  # noqa: E402
    Connack,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from tests.conftest import start_broker  # noqa: E402
from tests.ops.tls_files import make_pki


def run(*args: str, stdin: str = "") -> None:
    result = subprocess.run(
        [sys.executable, "-m", "edge_broker", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("pwcert")
    pw = d / "passwd"
    run(
        "passwd",
        "add",
        str(pw),
        "alice",
        "--password-stdin",
        "--tenants",
        "acme",
        "--roles",
        "sensor",
        stdin="wonder\n",
    )
    run(
        "passwd",
        "add",
        str(pw),
        "bob",
        "--password-stdin",
        "--tenants",
        "acme,globex",
        stdin="builder\n",
    )
    make_pki(d, {"server": "localhost", "gw": "gateway-7", "other": "intruder"})
    config = f"""
[sys]
interval = 2
[passwords]
file = "{pw}"
[[listeners]]
name = "pw"
port = 0
auth_methods = ["password"]
[[listeners]]
name = "tls"
port = 0
transport = "tls"
tls_cert = "{d / "server.pem"}"
tls_key = "{d / "server.key"}"
tls_ca = "{d / "ca.pem"}"
require_client_cert = true
auth_methods = ["certificate"]
[permissions]
unassigned = "deny"
[permissions.sets.sensor]
rules = [{{ id = "sensor-own", topic = "sensors/${{username}}/#" }}]
[permissions.sets.gateway]
rules = [{{ id = "gw-all", topic = "#" }}]
[[permissions.assign]]
role = "sensor"
sets = ["sensor"]
[[permissions.assign]]
cert_cn = "gateway-*"
sets = ["gateway"]
"""
    b = start_broker(d / "run", config)
    yield b, d
    b.stop()


def raw_connect(
    b, username: str | None, password: bytes | None, level: int = 5, props: Properties | None = None
) -> Connack:
    with RawClient(b.host, b.ports["pw"], level=level) as c:
        return c.connect(
            f"c-{username}-{level}",
            username=username,
            password=password,
            properties=props or Properties(),
        )


@pytest.mark.parametrize("level", [3, 4, 5])
def test_wrong_password_and_unknown_user_look_the_same(setup, level: int) -> None:
    b, _ = setup
    wrong = raw_connect(b, "alice", b"nope", level)
    unknown = raw_connect(b, "mallory", b"nope", level)
    expected = 0x86 if level == 5 else 0x04
    assert wrong.reason_code == unknown.reason_code == expected
    if level == 5:
        assert wrong.properties.reason_string == unknown.properties.reason_string


def test_good_password_tenant_and_role_permissions(setup) -> None:
    b, _ = setup
    with RawClient(b.host, b.ports["pw"]) as c:
        assert c.connect("alice-dev", username="alice", password=b"wonder").reason_code == 0
        c.send(Publish("sensors/alice/t", b"1", 1, packet_id=1))
        assert c.expect(Puback).reason_code == 0x10  # allowed (tenant acme, nobody subscribed)
        c.send(Publish("sensors/bob/t", b"1", 1, packet_id=2))
        assert c.expect(Puback).reason_code == 0x87
    # bob lists two tenants and has no role: must name a tenant he has, gets no permissions
    assert (
        raw_connect(
            b, "bob", b"builder", props=Properties(user_properties=(("tenant", "initech"),))
        ).reason_code
        == 0x87
    )
    with RawClient(b.host, b.ports["pw"]) as c:
        c.connect(
            "bob-dev",
            username="bob",
            password=b"builder",
            properties=Properties(user_properties=(("tenant", "globex"),)),
        )
        c.send(Publish("anything", b"1", 1, packet_id=1))
        assert c.expect(Puback).reason_code == 0x87  # unassigned = deny


def test_paho_with_password(setup) -> None:
    b, _ = setup
    connected = threading.Event()
    codes: list[int] = []

    def on_connect(client, userdata, flags, reason_code, properties):
        codes.append(int(reason_code.value))
        connected.set()

    c = paho.Client(CallbackAPIVersion.VERSION2, client_id="paho-alice", protocol=paho.MQTTv311)
    c.username_pw_set("alice", "wonder")
    c.on_connect = on_connect
    c.connect(b.host, b.ports["pw"])
    c.loop_start()
    try:
        assert connected.wait(10)
    finally:
        c.loop_stop()
        c.disconnect()
    assert codes == [0]


class TlsRawClient(RawClient):
    """The raw test client over a TLS socket with a client certificate."""

    def __init__(self, host: str, port: int, ctx: ssl.SSLContext) -> None:
        super().__init__(host, port)
        self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")


def tls_raw(b, d: Path, name: str) -> RawClient:
    ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
    ctx.load_cert_chain(str(d / f"{name}.pem"), str(d / f"{name}.key"))
    return TlsRawClient(b.host, b.ports["tls"], ctx)


def test_certificate_cn_selects_permissions(setup) -> None:
    b, d = setup
    gw = tls_raw(b, d, "gw")
    try:
        assert gw.connect("gw-client").reason_code == 0
        gw.send(Subscribe(1, (Subscription("#", 1),)))
        assert gw.expect(Suback).reason_codes == (1,)
    finally:
        gw.close()
    other = tls_raw(b, d, "other")
    try:
        assert other.connect("intruder-client").reason_code == 0  # authenticated by its CN ...
        other.send(Subscribe(1, (Subscription("#", 1),)))
        assert other.expect(Suback).reason_codes == (0x87,)  # ... but no permissions: unassigned
    finally:
        other.close()


def test_certificate_client_cannot_choose_a_tenant(setup) -> None:
    """A certificate proves its CN, not a tenant (issue 15 item 7): only "~" by default."""
    b, d = setup
    gw = tls_raw(b, d, "gw")
    try:
        ack = gw.connect("gw-tenant", properties=Properties(user_properties=(("tenant", "acme"),)))
        assert ack.reason_code == 0x87
        assert "tenant_choice" in (ack.properties.reason_string or "")
    finally:
        gw.close()
    gw = tls_raw(b, d, "gw")
    try:
        assert gw.connect("gw-default").reason_code == 0
    finally:
        gw.close()

"""Sessions are per (tenant, client id): the same client id in two tenants is two clients — no
takeover, no shared session state — with and without persistence (AUTHZ.md §1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker_raw import RawClient  # noqa: E402

from edge_broker.mqtt.packets import (  # noqa: E402
    Pingreq,
    Pingresp,
    Properties,
    Publish,
)
from tests.conftest import start_broker  # noqa: E402


def tenant(name: str, expiry: int = 0) -> Properties:
    return Properties(user_properties=(("tenant", name),), session_expiry_interval=expiry)


@pytest.mark.parametrize("persist", [False, True])
def test_same_client_id_in_two_tenants_coexists(tmp_path: Path, persist: bool) -> None:
    config = '[[listeners]]\nname = "tcp"\nport = 0\ntenant_choice = "open"\n'
    if persist:
        config += f'[persistence]\nenabled = true\nstate_dir = "{tmp_path / "state"}"\n'
    b = start_broker(tmp_path / "run", config)
    try:
        with RawClient(b.host, b.port) as a, RawClient(b.host, b.port) as c:
            assert (
                a.connect("device-1", clean=False, properties=tenant("acme", 300)).reason_code == 0
            )
            ack = c.connect("device-1", clean=False, properties=tenant("globex", 300))
            assert ack.reason_code == 0 and not ack.session_present  # not acme's session
            a.subscribe("t", 1)
            # acme's client was not taken over by globex's
            a.send(Pingreq())
            a.expect(Pingresp)
            c.send(Publish("t", b"globex", 1, packet_id=1))
            c.recv()  # PUBACK
            a.nothing(0.5)  # and nothing crosses
        with RawClient(b.host, b.port) as again:
            ack = again.connect("device-1", clean=False, properties=tenant("acme", 300))
            assert ack.session_present  # acme's session survived globex's connection
    finally:
        b.stop()

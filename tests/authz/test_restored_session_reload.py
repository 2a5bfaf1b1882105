"""Found by test_lifecycle_restart_property.py: a token client's session restored after a
restart was skipped by every reload until its client came back (``judged_later``), so a site
ACL that denied its subscription and its queued messages removed neither; when the ACL allowed
them again before the client resumed, both had survived the revocation that removed them from
every other session. The site ACL (and the other gates that do not read token grants) judge a
restored token session at each reload like any session; its token is applied at resume."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from edge_broker.mqtt.packets import Properties, Puback, Publish
from tests.authz.session_support import reload
from tests.authz.test_lifecycle_restart_property import ACL_DENY_B
from tests.authz.test_session_authz_property import ACL_OPEN
from tests.broker.broker_raw import RawClient, unique_id
from tests.conftest import start_broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import grant, make_token, token_config  # noqa: E402


def login(token: str) -> Properties:
    return Properties(
        session_expiry_interval=300,
        authentication_method="TOKEN",
        authentication_data=token.encode(),
    )


def test_a_reload_judges_a_restored_token_session_before_its_client_returns(tmp_path) -> None:
    persist = f'\n[persistence]\nenabled = true\nstate_dir = "{tmp_path / "state"}"\n'
    base = token_config(tmp_path / "keys") + persist
    token = make_token([grant(["~"], pub=["b/#"], sub=["b/#"])], subject="d")
    client_id = unique_id("restored-")
    b = start_broker(tmp_path / "run1", base + ACL_OPEN)
    try:
        c = RawClient(b.host, b.port)
        assert c.connect(client_id, clean=False, properties=login(token)).reason_code == 0
        assert c.subscribe("b/#", 1).reason_codes == (1,)
        c.close()
    finally:
        assert b.stop() == 0
    b = start_broker(tmp_path / "run2", base + ACL_OPEN)
    try:
        pub = RawClient(b.host, b.port)
        assert pub.connect(unique_id("pub-")).reason_code == 0
        pub.send(Publish("b/x", b"queued before the revocation", 1, packet_id=1))
        assert pub.expect(Puback).reason_code == 0
        reload(b, base + ACL_DENY_B)  # no b/ for anyone: the subscription and the queue go
        reload(b, base + ACL_OPEN)
        pub.send(Publish("b/x", b"after the revocation", 1, packet_id=2))
        assert pub.expect(Puback).reason_code == 0x10  # no matching subscribers: it was removed
        c = RawClient(b.host, b.port)
        ack = c.connect(client_id, clean=False, properties=login(token))
        assert ack.reason_code == 0 and ack.session_present
        assert c.publishes(0.8) == []  # re-subscribing is the client's call, as for any session
        assert "subscription removed after" in b.log()
    finally:
        b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)

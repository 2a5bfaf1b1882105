"""Client-supplied text cannot forge lines or fields in the text log (issue 15 item 10b).

A client id (or topic, or user name) with a newline used to start a new log line that looked
like the broker's own; a space and ``key=value`` in it added a field. Real broker, raw sockets,
default text log format.
"""

from __future__ import annotations

from broker_raw import RawClient, unique_id

from edge_broker.mqtt.packets import Pingreq, Pingresp, Publish
from tests.waiting import wait_for_log

FORGED = "FORGED"


def test_client_text_cannot_start_a_log_line(broker_factory):
    b = broker_factory()
    marker = unique_id("m")
    evil = f"{marker}\n2026-01-01T00:00:00Z INFO {FORGED} client_id=admin\r\u2028x"
    with RawClient(b.host, b.port) as c:
        assert c.connect(evil).reason_code == 0
        c.send(Publish("$SYS/" + marker + f"\n{FORGED} line", b"x", 1, packet_id=1))
        c.recv()
        c.send(Pingreq())
        while not isinstance(c.recv(), Pingresp):
            pass
    log = wait_for_log(b, marker)
    lines = log.splitlines()
    assert not [line for line in lines if line.startswith(("2026-01-01", FORGED))], log[-2000:]
    connected = [line for line in lines if marker in line and "client connected" in line]
    assert len(connected) == 1
    # the field is quoted (it has spaces) and its control characters are visible escapes
    assert (
        f'client_id="{marker}\\n2026-01-01T00:00:00Z INFO FORGED client_id=admin'
        '\\r\\u2028x" tenant=~ method=anonymous'
    ) in connected[0]


def test_refused_connect_with_forged_fields_stays_one_line(broker_factory, tmp_path):
    from edge_broker.auth.password import set_user, write_password_file

    passwd = tmp_path / "passwd"
    write_password_file(passwd, set_user({}, "u", "pw"))
    b = broker_factory(
        f'[[listeners]]\nname = "pw"\nbind = "127.0.0.1"\nport = 0\n'
        f'auth_methods = ["password"]\n[passwords]\nfile = "{passwd}"\n'
    )
    marker = unique_id("r")
    with RawClient(b.host, b.port) as c:
        ack = c.connect(
            f"{marker} reason_code=0x00 listener=admin\n{FORGED}", username="u", password=b"wrong"
        )
        assert ack.reason_code == 0x86
    log = wait_for_log(b, marker)
    refused = [line for line in log.splitlines() if marker in line]
    assert len(refused) == 1 and "connect refused" in refused[0]
    # the client's text is one quoted value; the broker's own fields follow it
    assert (
        f'client_id="{marker} reason_code=0x00 listener=admin\\n{FORGED}" reason_code=0x86 '
        in refused[0]
    )
    assert refused[0].endswith(" listener=pw")
    assert not any(line.startswith(FORGED) for line in log.splitlines())


def test_escape_text_keeps_plain_text_and_escapes_every_control_character():
    from edge_broker.broker.logs import escape_text

    assert escape_text("plain/topic ünïcode") == "plain/topic ünïcode"
    assert escape_text("a\x00\x1b\x7f\x85\u2029") == "a\\x00\\x1b\\x7f\\x85\\u2029"
    assert "\n" not in escape_text("".join(chr(i) for i in range(0x20)))

"""``edge-broker session list|drop`` against a running broker, over its control channel
``<state_dir>/control.sock`` (broker/control_channel.py; docs/sessions.md)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish
from tests.broker.broker_raw import RawClient, unique_id
from tests.conftest import ROOT, start_broker


def config(state: Path) -> str:
    return f"""
[sys]
interval = 0
[persistence]
state_dir = "{state}"
durability = "none"
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0
auth_methods = ["anonymous"]
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", "session", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def ask_raw(path: Path, data: bytes) -> dict[str, object]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(data)
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    return json.loads(answer)


def test_session_list_and_drop_against_a_running_broker(tmp_path: Path) -> None:
    state = tmp_path / "st"
    b = start_broker(tmp_path / "run", config(state))
    try:
        sock = state / "control.sock"
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600  # owner only
        squatter_id, topic = unique_id("squat-"), unique_id("t/")
        squatter = RawClient(b.host, b.port)
        props = Properties(session_expiry_interval=600)
        assert squatter.connect(squatter_id, clean=False, properties=props).reason_code == 0
        assert squatter.subscribe(topic, 1).reason_codes == (1,)
        offline_id = unique_id("off-")
        offline = RawClient(b.host, b.port)
        assert offline.connect(offline_id, clean=False, properties=props).reason_code == 0
        assert offline.subscribe(topic, 1).reason_codes == (1,)
        offline.send(Disconnect(0))
        offline.close()
        pub = RawClient(b.host, b.port)
        assert pub.connect(unique_id("pub-")).reason_code == 0
        pub.send(Publish(topic, b"x", 1, packet_id=1))
        assert pub.expect(Puback).reason_code == 0
        pub.close()

        listed = cli("list", "--socket", str(sock), "--json")
        assert listed.returncode == 0, listed.stderr
        sessions = {s["client_id"]: s for s in json.loads(listed.stdout)["sessions"]}
        assert sessions[squatter_id]["connected"] is True
        assert sessions[offline_id]["connected"] is False and sessions[offline_id]["queued"] == 1
        assert sessions[offline_id]["owner"].startswith("anonymous")
        table = cli("list", "--config", str(b.config_path))  # the socket found from the config
        assert table.returncode == 0, table.stderr
        assert any(line.startswith(offline_id + "\t") for line in table.stdout.splitlines())

        dropped = cli("drop", "--socket", str(sock), squatter_id)
        assert dropped.returncode == 0, dropped.stderr
        closed = [p for p in squatter.closed() if isinstance(p, Disconnect)]
        assert [p.reason_code for p in closed] == [0x98]
        assert cli("drop", "--socket", str(sock), offline_id).returncode == 0
        again = cli("list", "--socket", str(sock), "--json")
        ids = {s["client_id"] for s in json.loads(again.stdout)["sessions"]}
        assert squatter_id not in ids and offline_id not in ids
        missing = cli("drop", "--socket", str(sock), squatter_id)
        assert missing.returncode == 1 and "no session" in missing.stderr
        back = RawClient(b.host, b.port)  # the id is free, nothing of the old session kept
        ack = back.connect(offline_id, clean=False, properties=props)
        assert ack.reason_code == 0 and not ack.session_present
        back.close()
        assert "session dropped: " + squatter_id in b.log()

        # bad requests get a clear error, the channel stays up
        assert ask_raw(sock, b"nonsense\n")["ok"] is False
        assert "unknown" in str(ask_raw(sock, b'{"op": "explode"}\n')["error"])
        long = ask_raw(sock, b'{"op": "list", "x": "' + b"a" * 10_000 + b'"}\n')
        assert long["ok"] is False and "4096" in str(long["error"])
        assert ask_raw(sock, b'{"op": "list"}\n')["ok"] is True
    finally:
        b.stop()
    assert not (state / "control.sock").exists()  # removed at shutdown


def test_session_cli_without_a_broker_says_what_to_do(tmp_path: Path) -> None:
    result = cli("list", "--socket", str(tmp_path / "control.sock"))
    assert result.returncode == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr

"""A state log damaged beyond repair (random bytes) has a documented way out (issue 20):
``edge-broker state check|set-aside`` and ``[persistence] on_damage = "refuse" | "set-aside"``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import BrokerFactory

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("EDGE_BROKER_STATE_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )


def damaged_state(tmp_path: Path, on_damage: str | None = None) -> tuple[Path, Path]:
    state = tmp_path / "state"
    state.mkdir()
    (state / "broker.log").write_bytes(os.urandom(4096))
    conf = tmp_path / "b.toml"
    extra = f'on_damage = "{on_damage}"\n' if on_damage else ""
    conf.write_text(
        f'[[listeners]]\nname = "tcp"\nport = 0\n\n[persistence]\nstate_dir = "{state}"\n{extra}'
    )
    return conf, state


def test_refused_by_default_with_the_way_out_in_every_message(tmp_path: Path) -> None:
    conf, state = damaged_state(tmp_path)
    run = subprocess.run(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert (
        "the file is damaged: `edge-broker state set-aside --config FILE` moves it aside"
        in run.stderr
    )
    check = cli("check", "--config", str(conf))
    assert check.returncode == 1
    assert f"{conf}: persistence.on_damage: " in check.stderr and "state set-aside" in check.stderr

    status = cli("state", "check", "--config", str(conf))
    assert status.returncode == 1
    assert f"{state / 'broker.log'} (sessions and retained messages): refused: " in status.stdout
    assert f"{state / 'claims.log'} (claims): missing" in status.stdout

    aside = cli("state", "set-aside", "--config", str(conf))
    assert aside.returncode == 0, aside.stderr
    moved = [p.name for p in state.iterdir() if p.name.startswith("broker.log.damaged-")]
    assert len(moved) == 1 and not (state / "broker.log").exists()
    assert cli("state", "check", "--config", str(conf)).returncode == 0
    assert cli("check", "--config", str(conf)).returncode == 0


def test_on_damage_set_aside_starts_empty_and_says_so(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    conf, state = damaged_state(tmp_path, "set-aside")
    damaged = (state / "broker.log").read_bytes()
    assert cli("check", "--config", str(conf)).returncode == 0  # the broker will start
    broker = broker_factory(conf.read_text().replace("port = 0\n", "port = 0\n", 1))
    log = broker.log()
    assert "was damaged beyond repair: moved to" in log and "starting with an EMPTY store" in log
    moved = [p for p in state.iterdir() if p.name.startswith("broker.log.damaged-")]
    assert len(moved) == 1 and moved[0].read_bytes() == damaged  # kept for inspection
    with broker.connect_socket() as conn:  # the new store works: a retained message is stored
        conn.sendall(bytes([0x10, 14, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 60, 0, 2]) + b"c1")
        assert conn.recv(4) == bytes([0x20, 2, 0, 0])
        conn.sendall(bytes([0x31, 5, 0, 1]) + b"t" + b"hi")
        conn.sendall(bytes([0xE0, 0]))
    busy = cli(
        "state", "set-aside", "--all", "--config", str(conf)
    )  # refused while the broker runs
    assert busy.returncode == 1 and "a running broker holds it" in busy.stderr
    assert broker.stop() == 0
    assert "Traceback" not in broker.log()
    status = cli("state", "check", "--config", str(conf))
    assert (
        status.returncode == 0
        and "broker.log (sessions and retained messages): ok" in status.stdout
    )

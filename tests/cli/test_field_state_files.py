"""Every file the broker keeps in its state directory is covered by ``check``, ``state check``,
``state set-aside`` and ``[persistence] on_damage`` at ``run`` (issue 29 rows 1, 2 and 11).

A real gateway (sessions, claims, a bridge, policy sync over MQTT with the audit upload, the
audit log in the state directory) runs against a real cloud broker until every file exists, and
stops. The list of files comes from the registry the commands use (``ops/state_files.py``), and
the directory is walked to prove the registry misses none. Then each file in turn gets 3,000
random bytes, and the four ways of looking at it must agree: a file that stops ``run`` fails
``check`` and ``state check``, is moved by ``state set-aside``, and is moved by ``run`` itself
under ``on_damage = "set-aside"``, which says so; a file whose damage does not matter passes
them all and the broker starts.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as paho
import pytest

from edge_broker.auth.password import set_user, write_password_file
from edge_broker.config import load_config
from edge_broker.ops.state_files import state_files
from tests.cli.field_cli import cli
from tests.conftest import BrokerFactory, start_broker
from tests.sync.test_audit_upload import Collector
from tests.waiting import wait_for

GATEWAY = "gw-1"
# the files that stop `run` when damaged beyond repair (each `set-aside`-able)
REFUSED = (
    "broker.log",
    "claims.log",
    "bridge-cloud.log",
    "sync/bundle.cbor",
    "sync/audit-cursor.json",
)
# the files whose damage does not matter (rewritten, or read leniently)
LENIENT = (
    "broker.log.lock",
    "claims.log.lock",
    "bridge-cloud.log.lock",
    "sync/passwd.v1",
    "audit/audit-00000001.jsonl",
)


def gateway_config(state: Path, keys: Path, cloud_port: int, on_damage: str = "refuse") -> str:
    return f"""
[[listeners]]
name = "tcp"
port = 0

[claims]
enabled = true

[persistence]
state_dir = "{state}"
on_damage = "{on_damage}"

[audit]
dir = "{state}/audit"

[sync]
source = "mqtt"
gateway_id = "{GATEWAY}"
trusted_keys = ["{keys}/cloud.key.pub"]
host = "127.0.0.1"
port = {cloud_port}

[[bridges]]
name = "cloud"
address = "127.0.0.1"
port = {cloud_port}
client_id = "{GATEWAY}-bridge"

[[bridges.topics]]
direction = "out"
local = "sensors/#"
remote_prefix = "site/{GATEWAY}/"
qos = 1
"""


@dataclass(frozen=True)
class Pristine:
    state: Path  # the state directory as the gateway left it (copied, never changed)
    keys: Path
    cloud_port: int  # the cloud broker is stopped: the gateway starts offline


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pristine]:
    work = tmp_path_factory.mktemp("gateway")
    made = cli("bundle", "keygen", str(work / "cloud.key"))
    assert made.returncode == 0, made.stderr
    write_password_file(work / "passwd", set_user({}, "alice", "pw"))
    (work / "policy.toml").write_text(
        '[passwords]\nfile = "passwd"\n\n[permissions]\nunassigned = "allow"\n'
    )
    bundle = work / "bundle.cbor"
    created = cli(
        "bundle", "create", "--key", str(work / "cloud.key"), "--version", "1", "--gateway",
        GATEWAY, "--policy", str(work / "policy.toml"), "-o", str(bundle),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    cloud = start_broker(work / "cloud")
    gateway = None
    try:
        operator = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id="operator")
        operator.connect(cloud.host, cloud.port)
        operator.loop_start()
        sent = operator.publish(f"edge/{GATEWAY}/policy", bundle.read_bytes(), qos=1, retain=True)
        sent.wait_for_publish(10)
        operator.loop_stop()
        operator.disconnect()
        state = work / "state"
        # a real collector: the gateway's audit cursor moves only once a batch is stored
        collector = Collector(cloud.port, work / "collected")
        gateway = start_broker(work / "gw", gateway_config(state, work, cloud.port))
        cursor = state / "sync/audit-cursor.json"  # the bundle applied, audited and uploaded
        wait_for(cursor.exists, 30, gateway.log)
        collector.stop()
        assert gateway.stop() == 0
        assert "Traceback" not in gateway.log()
    finally:
        if gateway is not None:
            gateway.stop()
        cloud.stop()
    yield Pristine(state, work, cloud.port)


@dataclass(frozen=True)
class Gateway:
    state: Path
    refuse: Path  # config with on_damage = "refuse" (the default)
    aside: Path  # config with on_damage = "set-aside"


@pytest.fixture
def gateway(pristine: Pristine, tmp_path: Path) -> Gateway:
    state = tmp_path / "state"
    shutil.copytree(pristine.state, state)
    refuse, aside = tmp_path / "refuse.toml", tmp_path / "aside.toml"
    refuse.write_text(gateway_config(state, pristine.keys, pristine.cloud_port))
    aside.write_text(gateway_config(state, pristine.keys, pristine.cloud_port, "set-aside"))
    return Gateway(state, refuse, aside)


def damage(path: Path) -> None:
    path.write_bytes(os.urandom(3000))


def set_aside_copies(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.damaged-*"))


def test_the_registry_lists_every_file_the_gateway_keeps(gateway: Gateway) -> None:
    listed = {f.path for f in state_files(load_config(gateway.refuse)) if f.path.exists()}
    on_disk = {p for p in gateway.state.rglob("*") if p.is_file()}
    assert on_disk == listed
    names = {str(p.relative_to(gateway.state)) for p in on_disk}
    assert names == {*REFUSED, *LENIENT}  # what this gateway keeps, as the module says
    everything = cli("state", "check", "--config", str(gateway.refuse))
    assert everything.returncode == 0, everything.stdout + everything.stderr
    for path in on_disk:
        assert f"{path} (" in everything.stdout


@pytest.mark.parametrize("name", REFUSED)
def test_a_damaged_file_is_refused_everywhere_and_set_aside_everywhere(
    name: str, gateway: Gateway, broker_factory: BrokerFactory
) -> None:
    path = gateway.state / name
    damage(path)

    check = cli("check", "--config", str(gateway.refuse))
    assert check.returncode == 1, check.stderr
    assert f"{gateway.refuse}: persistence.on_damage: {path}" in check.stderr
    assert "state set-aside" in check.stderr
    status = cli("state", "check", "--config", str(gateway.refuse))
    assert status.returncode == 1
    line = next(line for line in status.stdout.splitlines() if line.startswith(f"{path} ("))
    assert "): refused: " in line, status.stdout
    run = cli("run", "--config", str(gateway.refuse), timeout=30)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert str(path) in run.stderr and "state set-aside" in run.stderr, run.stderr
    assert path.exists() and not set_aside_copies(path)  # refusing changed nothing

    # on_damage = "set-aside": check says what run will do, and run does it
    ahead = cli("check", "--config", str(gateway.aside))
    assert ahead.returncode == 0, ahead.stderr
    assert f"warning: {gateway.aside}: persistence.on_damage: {path}" in ahead.stderr
    assert "will move it aside at start" in ahead.stderr
    damaged = path.read_bytes()
    broker = broker_factory(gateway.aside.read_text())
    log = broker.log()
    assert f"{path} " in log and f"moved to {path}.damaged-" in log, log
    if name == "sync/bundle.cbor":
        assert "starting WITHOUT it, on the base config alone" in log
    moved = set_aside_copies(path)
    assert len(moved) == 1 and moved[0].read_bytes() == damaged  # kept for inspection
    assert broker.stop() == 0
    assert "Traceback" not in broker.log()

    # `state set-aside` moves it the same way, and only it
    for old in moved:
        old.unlink()
    damage(path)
    aside = cli("state", "set-aside", "--config", str(gateway.refuse))
    assert aside.returncode == 0, aside.stderr
    assert f"{path} (" in aside.stdout and f": refused: moved to {path}.damaged-" in aside.stdout
    assert aside.stdout.rstrip().endswith("1 file(s) set aside")
    assert not path.exists() and len(set_aside_copies(path)) == 1
    after = cli("state", "check", "--config", str(gateway.refuse))  # and check agrees again
    assert after.returncode == 0, after.stdout + after.stderr


def test_files_whose_damage_does_not_matter_stop_nothing(
    gateway: Gateway, broker_factory: BrokerFactory
) -> None:
    for name in LENIENT:
        damage(gateway.state / name)
    check = cli("check", "--config", str(gateway.refuse))
    assert check.returncode == 0, check.stderr
    status = cli("state", "check", "--config", str(gateway.refuse))
    assert status.returncode == 0, status.stdout
    for name in LENIENT:
        assert f"{gateway.state / name} (" in status.stdout
    aside = cli("state", "set-aside", "--config", str(gateway.refuse))
    assert aside.returncode == 0 and aside.stdout.rstrip().endswith("0 file(s) set aside")
    broker = broker_factory(gateway.refuse.read_text())  # starts: nothing refused
    assert broker.stop() == 0
    assert "Traceback" not in broker.log()


def test_a_new_store_drops_nothing(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    """Row 11: the first start on an empty state directory wrote its format mark and counted it
    as a dropped record."""
    state = tmp_path / "empty"
    broker = broker_factory(
        f'[[listeners]]\nname = "tcp"\nport = 0\n\n[persistence]\nstate_dir = "{state}"\n'
    )
    assert broker.stop() == 0
    log = broker.log()
    assert "0 sessions, 0 queued messages, 0 retained messages restored" in log
    assert "(0 expired or unusable records dropped)" in log, log

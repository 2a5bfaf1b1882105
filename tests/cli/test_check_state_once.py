"""``edge-broker check`` (systemd's ExecStartPre) and ``run`` used to replay the state logs one
after the other at every start. ``check`` now replays a log only when its header is bad (the
only case in which a log is refused); ``run`` still refuses a damaged store with the message it
always gave, and so does ``check``. The time saved is measured by scripts/bench_startup.py."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from edge_broker.broker.persist.tables import log_path
from edge_broker.cli.broker import _state_problems
from edge_broker.config import loads_config
from edge_broker.store.damage import inspect_log, refusal
from edge_broker.store.frame import FILE_MAGIC
from edge_broker.store.keyed import KeyedLog, Put
from tests.ops.test_state_recovery import cli

REPLAYS: list[str] = []  # the mmap a replay reads the log through, while a test listens


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "mmap.__new__" and REPLAYS and REPLAYS[0] == "listening":
        REPLAYS.append(event)


sys.addaudithook(_audit)  # cannot be removed: it records only between listen() and stop()


def replays_during(action) -> int:  # type: ignore[no-untyped-def]
    REPLAYS[:] = ["listening"]
    try:
        action()
    finally:
        count = len(REPLAYS) - 1
        REPLAYS.clear()
    return count


def state_config(tmp_path: Path):  # type: ignore[no-untyped-def]
    state = tmp_path / "state"
    state.mkdir()
    conf = tmp_path / "b.toml"
    conf.write_text(
        f'[[listeners]]\nname = "tcp"\nport = 0\n\n[persistence]\nstate_dir = "{state}"\n'
    )
    return conf, loads_config(conf.read_text(), str(conf))


def sound_log(path: Path, records: int = 200) -> None:
    keyed = KeyedLog.open(path, fsync="never")
    for i in range(records):
        keyed.commit_sync([Put("queue", i, {"topic": f"t/{i}", "payload": b"x" * 100})])
    keyed.close()


def test_check_does_not_replay_a_sound_state_log(tmp_path: Path) -> None:
    conf, config = state_config(tmp_path)
    sound_log(log_path(config))
    assert replays_during(lambda: inspect_log(log_path(config))) == 1  # the hook sees a replay
    assert replays_during(lambda: _state_problems(config)) == 0
    check = cli("check", "--config", str(conf))
    assert check.returncode == 0, check.stderr


def test_a_log_of_a_newer_format_is_refused_by_check_as_by_run(tmp_path: Path) -> None:
    conf, config = state_config(tmp_path)
    path = log_path(config)
    sound_log(path)
    with open(path, "r+b") as f:  # a header a later edge-broker wrote
        f.write(FILE_MAGIC + struct.pack(">HH", 99, 0))
    refused = refusal(path)
    assert refused is not None and refused == inspect_log(path)
    assert "format version 99" in refused.detail
    check = cli("check", "--config", str(conf))
    assert check.returncode == 1 and f"persistence.on_damage: {refused.detail}" in check.stderr
    run = cli("run", "--config", str(conf))
    assert run.returncode == 1 and "format version 99" in run.stderr


@pytest.mark.parametrize("damage", ["bad magic, records intact", "random bytes"])
def test_a_bad_header_is_still_judged_by_a_replay(tmp_path: Path, damage: str) -> None:
    """Only the replay knows whether an intact record follows a bad header: salvaged (starts)
    or refused (does not), as run decides."""
    _, config = state_config(tmp_path)
    path = log_path(config)
    sound_log(path)
    data = bytearray(path.read_bytes())
    if damage == "random bytes":
        data[:] = bytes((i * 131 + 7) % 251 for i in range(4096))
    else:
        data[:4] = b"JUNK"
    path.write_bytes(bytes(data))
    expected = inspect_log(path)
    assert expected.refused == (damage == "random bytes")
    assert refusal(path) == (expected if expected.refused else None)
    assert replays_during(lambda: _state_problems(config)) == 1
    assert bool(_state_problems(config)) == expected.refused

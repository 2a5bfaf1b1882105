"""MQTT.js (MQTT 5) + libsodium-wrappers against the broker (tests/node/smoker.js), as the
TypeScript reference client works: SMOKER enhanced authentication, claim, subscribe, unclaim, and
the refusals (impostor 0x85, wrong key 0x87, tampered claim 0x99)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

NODE_DIR = Path(__file__).resolve().parent.parent / "node"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None
    or not (NODE_DIR / "node_modules" / "mqtt").is_dir()
    or not (NODE_DIR / "node_modules" / "libsodium-wrappers").is_dir(),
    reason="MQTT.js / libsodium-wrappers not installed: run npm install in tests/node",
)


def test_mqttjs_smoker_client_claims_subscribes_and_unclaims(
    tmp_path: Path, broker_factory: Any
) -> None:
    broker = broker_factory(
        {
            "listeners": [
                {"name": "t", "bind": "127.0.0.1", "auth_methods": ["smoker", "anonymous"]}
            ],
            "claims": {"store_dir": str(tmp_path / "claims"), "fsync": "never"},
        }
    )
    run = subprocess.run(
        ["node", str(NODE_DIR / "smoker.js"), broker.host, str(broker.port)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.stdout, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["ok"], out.get("error")
    assert out["ownerConnack"] == 0 and out["ownerAuthMethod"] == "SMOKER"
    assert out["readerConnack"] == 0
    assert out["claim"] == 0x00
    assert out["tampered"] == 0x99
    assert out["readerSuback"] == [1] and out["readerWildSuback"] == [1]
    assert out["readerPublish"] == 0x87  # whitelisted to subscribe only
    assert out["plainSuback"] == [0x87]
    assert out["publish1"] in (0x00, 0x10) and out["publish2"] in (0x00, 0x10)
    assert out["unclaim"] == 0x00
    owner_topic = [t for t, _ in out["readerGot"]]
    # one copy of 21.5 (two overlapping subscriptions, one delivery), nothing after the unclaim
    assert [p for _, p in out["readerGot"]] == ["21.5"], out["readerGot"]
    assert all(t.endswith("/temperature") for t in owner_topic)
    assert out["plainGot"] == []
    assert out["impostorConnack"] == 0x85
    assert out["wrongKeyConnack"] == 0x87

"""The MicroPython firmware client (run under CPython, in its own process) signs the golden
claims byte for byte as pynacl does, and the broker's claim checks accept what it sends."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from claims_helpers import NoThrottle, smoker_identity
from test_claims_vectors import ID_1, ID_2, SIGNATURE_1, SIGNATURE_2

from edge_broker.claims.evaluate import evaluate_claim
from edge_broker.mqtt.reason_codes import ReasonCode

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware_clients" / "micropython"

SIGN = """
import json, sys
from smokermqtt import claims, ids
from smokermqtt.ed25519 import SigningKey
key = SigningKey(bytes(range(1, 33)))
me = ids.client_id(key.public_key)
other = sys.argv[1]
out = [me]
out.append(claims.claim(key, me, "restricted/%s/temperature" % me, "WHITELIST",
                        [("*", "SUBSCRIBE"), (other, "PUBLISH")]).decode())
out.append(claims.claim(key, me, "restricted/%s/küche/température" % me, "BLACKLIST", []).decode())
print(json.dumps(out))
"""


@pytest.mark.skipif(not (FIRMWARE / "smokermqtt" / "claims.py").exists(), reason="no firmware")
def test_firmware_claims_match_the_golden_vectors_and_are_accepted() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SIGN, ID_2],
        cwd=FIRMWARE,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    me, first, second = json.loads(result.stdout)
    assert me == ID_1
    for payload, expected in ((first, SIGNATURE_1), (second, SIGNATURE_2)):
        claim = json.loads(payload)
        assert base64.b64decode(claim["signature"]) == base64.b64decode(expected)
        outcome = evaluate_claim(smoker_identity(ID_1), 1, payload.encode(), NoThrottle(), 0.0)
        assert outcome.reason_code is ReasonCode.SUCCESS, outcome.reason_string

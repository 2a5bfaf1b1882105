"""Crash safety of the claim store: kill -9 during a claim storm, then every claim that was
answered 0x00 is present and verified (issue 6 "Crash safety"); damage is reported, not fatal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from claims_helpers import OWNER, OWNER_KEY, claim_payload, restriction, smoker_identity

from edge_broker.claims.model import Claim
from edge_broker.claims.persistence import KeyedClaimStore
from edge_broker.claims.service import ClaimService
from edge_broker.mqtt.reason_codes import ReasonCode

HERE = Path(__file__).parent


def test_kill_9_during_a_claim_storm_loses_no_acknowledged_claim(tmp_path: Path) -> None:
    log = tmp_path / "claims.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    # the storm acknowledges exactly when a broker would send PUBACK 0x00
    process = subprocess.Popen(
        [sys.executable, str(HERE / "claims_storm.py"), str(log)],
        stdout=subprocess.PIPE,
        env=env,
    )
    acked: list[str] = []
    try:
        assert process.stdout is not None
        while len(acked) < 300:
            line = process.stdout.readline()
            assert line, f"the storm stopped early (exit {process.poll()})"
            acked.append(line.decode().split(" ", 1)[1].strip())
        process.send_signal(signal.SIGKILL)  # mid-storm: writes and fsyncs are in flight
    finally:
        process.kill()
        process.wait()
    store = KeyedClaimStore.open(str(log))
    service = ClaimService(store)
    report = service.load_report
    assert report.quarantined == ()
    assert report.loaded >= len(acked)
    for topic in acked:
        assert isinstance(service.lookup(topic), Claim), topic
    store.keyed.close()


async def test_torn_tail_and_flipped_bits_are_reported_and_do_not_stop_loading(
    tmp_path: Path,
) -> None:
    path = tmp_path / "claims.log"
    store = KeyedClaimStore.open(str(path))
    service = ClaimService(store)
    topics = [f"restricted/{OWNER}/t{i}" for i in range(20)]
    for topic in topics:
        payload = claim_payload(restriction(topic), OWNER_KEY)
        assert (
            await service.claim(smoker_identity(), 1, payload)
        ).reason_code is ReasonCode.SUCCESS
    await store.aclose()

    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # a flipped bit in the middle of some record
    path.write_bytes(bytes(data) + b"\x00\x01torn")  # and a torn tail
    damaged = KeyedClaimStore.open(str(path))
    report = damaged.keyed.report
    assert not report.clean and report.damaged and report.tail_bytes_dropped > 0
    service = ClaimService(damaged)
    survivors = [t for t in topics if isinstance(service.lookup(t), Claim)]
    assert len(survivors) == len(topics) - 1  # only the record with the flipped bit is lost
    assert service.load_report.quarantined == ()  # a damaged frame is dropped, never served
    # the service keeps working on the recovered log
    payload = claim_payload(restriction(f"restricted/{OWNER}/after"), OWNER_KEY)
    assert (await service.claim(smoker_identity(), 1, payload)).reason_code is ReasonCode.SUCCESS
    await damaged.aclose()

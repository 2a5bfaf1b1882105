"""`edge-broker keygen` and `edge-broker claim sign|list|show|verify`, run through the real CLI."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.claims.evaluate import evaluate_claim
from edge_broker.claims.model import Activity, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore
from edge_broker.claims.service import ClaimService
from edge_broker.claims.smoker_id import is_smoker_id
from edge_broker.cli import main
from edge_broker.keys import load_signing_key, write_signing_key
from edge_broker.mqtt.reason_codes import ReasonCode
from tests.claims.claims_helpers import (
    OTHER,
    OWNER,
    OWNER_KEY,
    NoThrottle,
    claim_payload,
    restriction,
)
from tests.claims.claims_helpers import smoker_identity as identity


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_keygen_then_sign_then_the_broker_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "owner.key"
    code, out, _ = run(capsys, "keygen", "--out", str(key_file))
    me = out.strip()
    assert code == 0 and is_smoker_id(me)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert load_signing_key(key_file).verify_key.encode() == __import__("base64").b32decode(me)

    code, out, _ = run(
        capsys,
        "claim",
        "sign",
        "--key",
        str(key_file),
        "--topic",
        "küche/temperature",
        "--type",
        "whitelist",
        "--allow",
        f"{OTHER}:subscribe",
        "--allow",
        "*:PUBLISH",
    )
    assert code == 0
    payload = out.strip().encode()
    outcome = evaluate_claim(identity(me), 1, payload, NoThrottle(), 0.0)
    assert outcome.reason_code is ReasonCode.SUCCESS and outcome.claim is not None
    r = outcome.claim.restriction
    assert r.topic_name == f"restricted/{me}/küche/temperature"
    assert r.restriction_type is RestrictionType.WHITELIST
    assert [(p.client_id, p.activity) for p in r.permissions] == [
        (OTHER, Activity.SUBSCRIBE),
        ("*", Activity.PUBLISH),
    ]


def test_keygen_device_writes_what_the_firmware_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    device = tmp_path / "dev"
    code, out, err = run(capsys, "keygen", "--device", str(device))
    assert code == 0 and 'edit "host"' in err
    config = json.loads((device / "config.json").read_text())
    assert config == {"client_id": out.strip(), "host": "CHANGE-ME", "port": 1883}
    key = load_signing_key(device / "device.key")
    assert (device / "claims").is_dir()
    from edge_broker.claims.smoker_id import smoker_id

    assert smoker_id(key.verify_key) == config["client_id"]
    # the firmware's own reader agrees (it runs under CPython too)
    firmware = Path(__file__).parents[2] / "firmware_clients" / "micropython"
    check = (
        "import sys; from smokermqtt import provision as p; "
        "print(p.read_seed(sys.argv[1]).hex(), p.read_config(sys.argv[2])['client_id'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", check, str(device / "device.key"), str(device / "config.json")],
        cwd=firmware,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split() == [bytes(key).hex(), out.strip()]
    # a second keygen does not silently replace the device's identity
    code, _, err = run(capsys, "keygen", "--device", str(device), "--host", "10.0.0.1")
    assert code == 2 and "--force" in err
    code, out2, _ = run(capsys, "keygen", "--device", str(device), "--host", "gw", "--force")
    assert code == 0 and out2 != out
    assert json.loads((device / "config.json").read_text())["host"] == "gw"


def test_keygen_needs_a_destination(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "keygen")
    assert code == 2 and "--out FILE" in err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--topic", "t", "--type", "GREYLIST"], "use WHITELIST or BLACKLIST"),
        (["--topic", "t", "--type", "WHITELIST", "--allow", "nobody"], "ID:ACTIVITY"),
        (["--topic", "t", "--type", "WHITELIST", "--allow", "*:READ"], "not one of"),
        (["--topic", "t", "--type", "WHITELIST", "--allow", "sensor:ALL"], "neither '*' nor"),
        (["--topic", f"restricted/{OTHER}/t", "--type", "BLACKLIST"], "may only claim"),
        (["--topic", "a/#", "--type", "BLACKLIST"], "'#'"),
    ],
)
def test_sign_refuses_bad_input_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    key_file = tmp_path / "k"
    write_signing_key(key_file, OWNER_KEY)
    code, out, err = run(capsys, "claim", "sign", "--key", str(key_file), *args)
    assert code in (1, 2) and out == "" and fragment in err


def test_sign_to_a_file_and_verify_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key_file = tmp_path / "k"
    key_file.write_text(bytes(OWNER_KEY).hex())  # the 64-hex-digit form devices store
    out_file = tmp_path / "claim.json"
    code, _, _ = run(
        capsys, "claim", "sign", "--key", str(key_file), "--topic", "t", "--type", "BLACKLIST",
        "--out", str(out_file),
    )  # fmt: skip
    assert code == 0
    code, out, _ = run(capsys, "claim", "verify", "--file", str(out_file))
    assert code == 0 and f"restricted/{OWNER}/t" in out
    broken = json.loads(out_file.read_text())
    broken["restriction"]["restrictionType"] = "WHITELIST"
    out_file.write_text(json.dumps(broken))
    code, _, err = run(capsys, "claim", "verify", "--file", str(out_file))
    assert code == 1 and "invalid claim" in err


async def test_list_show_verify_on_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = KeyedClaimStore.open(str(tmp_path / "claims.log"))
    service = ClaimService(store)
    good = f"restricted/{OWNER}/good"
    bad = f"restricted/{OWNER}/bad"
    r_good = restriction(good, RestrictionType.WHITELIST, (OTHER, Activity.SUBSCRIBE))
    await service.claim(identity(), 1, claim_payload(r_good))
    await service.claim(identity(), 1, claim_payload(restriction(bad)))
    await store.aclose()
    tampered = KeyedClaimStore.open(str(tmp_path / "claims.log"))
    tampered.put_sync("~", bad, {"restriction": "{}", "signature": bytes(64), "at": 0})
    tampered.close()

    code, out, _ = run(capsys, "claim", "list", "--store", str(tmp_path))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"~\t{bad}\tQUARANTINED")
    assert lines[1] == f"~\t{good}\tWHITELIST\t1 permission(s)"

    code, out, _ = run(capsys, "claim", "show", "--store", str(tmp_path), good)
    shown = json.loads(out)
    assert code == 0 and shown["status"] == "ok" and shown["tenant"] == "~"
    assert shown["claim"]["restriction"]["permissions"] == [
        {"clientId": OTHER, "activity": "SUBSCRIBE"}
    ]

    code, out, _ = run(capsys, "claim", "verify", "--store", str(tmp_path))
    assert code == 1 and "1 claim(s) verified, 1 quarantined" in out and bad in out

    code, _, err = run(capsys, "claim", "show", "--store", str(tmp_path), f"restricted/{OWNER}/x")
    assert code == 2 and "no claim" in err
    code, _, err = run(capsys, "claim", "list", "--store", str(tmp_path / "nowhere"))
    assert code == 2 and "no claim store" in err


def test_console_script_is_wired(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "edge-broker"
    result = subprocess.run(
        [str(exe), "keygen", "--out", str(tmp_path / "k")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ},
    )
    assert result.returncode == 0 and is_smoker_id(result.stdout.strip())


async def test_list_filters_are_tinydb_queries_on_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.claims.claims_helpers import OTHER_KEY, THIRD

    service = ClaimService(KeyedClaimStore.open(str(tmp_path / "claims.log")))
    mine = restriction(f"restricted/{OWNER}/a", RestrictionType.WHITELIST, (OTHER, Activity.ALL))
    open_one = restriction(
        f"restricted/{OWNER}/b", RestrictionType.BLACKLIST, ("*", Activity.PUBLISH)
    )
    closed = restriction(f"restricted/{OWNER}/c", RestrictionType.WHITELIST, (THIRD, Activity.ALL))
    theirs = restriction(None, RestrictionType.WHITELIST, owner=OTHER)
    for r in (mine, open_one, closed):
        await service.claim(identity(), 1, claim_payload(r))
    await service.claim(identity(OTHER), 1, claim_payload(theirs, OTHER_KEY))
    assert isinstance(service.store, KeyedClaimStore)
    await service.store.aclose()

    def topics(*extra: str) -> list[str]:
        code, out, _ = run(capsys, "claim", "list", "--store", str(tmp_path), *extra)
        assert code == 0
        return [line.split("\t")[1] for line in out.splitlines()]

    assert topics("--owner", OTHER) == [theirs.topic_name]
    assert topics("--involving", OTHER) == [mine.topic_name, open_one.topic_name]
    assert topics("--involving", THIRD) == [open_one.topic_name, closed.topic_name]
    assert topics("--tenant", "elsewhere") == []
    assert len(topics()) == 4


async def test_a_claim_edited_through_tinydb_is_quarantined(tmp_path: Path) -> None:
    from tinydb import Query, TinyDB

    from edge_broker.store import LogStorage

    path = str(tmp_path / "claims.log")
    service = ClaimService(KeyedClaimStore.open(path))
    topic = f"restricted/{OWNER}/door"
    await service.claim(identity(), 1, claim_payload(restriction(topic, RestrictionType.WHITELIST)))
    assert isinstance(service.store, KeyedClaimStore)
    await service.store.aclose()

    db = TinyDB(path, storage=LogStorage)  # the attacker's tool of choice
    claims = db.table("claims")
    doc = claims.get(Query().topic == topic)
    assert isinstance(doc, dict)
    widened = doc["restriction"].replace(
        '"permissions":[]', f'"permissions":[{{"activity":"ALL","clientId":"{OTHER}"}}]'
    )
    assert widened != doc["restriction"]
    claims.update({"restriction": widened}, Query().topic == topic)
    db.close()

    reopened = ClaimService(KeyedClaimStore.open(path))
    assert [t for _, t, _ in reopened.load_report.quarantined] == [topic]
    result = reopened.decide(identity(OTHER), topic, Activity.SUBSCRIBE)
    assert result.reason_code is ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR
    assert isinstance(reopened.store, KeyedClaimStore)
    await reopened.store.aclose()

"""`edge-broker keygen` and `edge-broker claim sign | list | show | verify` (SMOKER.md).

``keygen`` makes an Ed25519 key (PKCS#8 PEM, mode 0600, via ``edge_broker.keys``) and prints its
SMOKER ID; ``--device DIR`` provisions a firmware client: ``DIR/device.key``, ``DIR/config.json``
(client id, broker host and port to edit) and an empty ``DIR/claims/`` for pre-signed claims.
``claim sign`` makes a signed claim offline (e.g. at provisioning); ``list``, ``show`` and
``verify`` read a claim store (``DIR/claims.log``) without changing it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey
from tinydb import Query, TinyDB

from ..claims.errors import ClaimError
from ..claims.model import Activity, Claim, Permission, Restriction, RestrictionType
from ..claims.parse import parse_claim
from ..claims.persistence import CLAIMS_LOG, TINYDB_TABLE, KeyedClaimStore, verify_record
from ..claims.service import ClaimService
from ..claims.signature import sign_restriction, verify_claim
from ..claims.smoker_id import smoker_id
from ..claims.topics import RESTRICTED_PREFIX
from ..identity import DEFAULT_TENANT
from ..keys import KeyFileError, load_signing_key, write_signing_key
from ..store import LogStorage, StoreError
from .errors import UsageError

DEVICE_KEY_FILE = (
    "device.key"  # the names firmware_clients/micropython/smokermqtt/provision.py reads
)
DEVICE_CONFIG_FILE = "config.json"
DEVICE_CLAIMS_DIR = "claims"
HOST_PLACEHOLDER = "CHANGE-ME"


# -- keygen ---------------------------------------------------------------------------------------


def _cmd_keygen(args: argparse.Namespace) -> int:
    if not args.device and not args.out:
        raise UsageError("say where the key goes: --out FILE and/or --device DIR")
    key = SigningKey.generate()
    me = smoker_id(key.verify_key)
    if args.device:
        directory = Path(args.device)
        directory.mkdir(parents=True, exist_ok=True)
        config_path = directory / DEVICE_CONFIG_FILE
        if config_path.exists() and not args.force:
            raise UsageError(f"{config_path}: exists; pass --force to replace the device's config")
        write_signing_key(directory / DEVICE_KEY_FILE, key, overwrite=args.force)
        config = {"client_id": me, "host": args.host, "port": args.port}
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        (directory / DEVICE_CLAIMS_DIR).mkdir(exist_ok=True)
        print(me)
        where = f"{directory / DEVICE_KEY_FILE}, {config_path}"
        hint = (
            f'; edit "host" in {config_path} to the gateway\'s address'
            if args.host == HOST_PLACEHOLDER
            else ""
        )
        print(f"device provisioned: {where}{hint}", file=sys.stderr)
    if args.out:
        write_signing_key(args.out, key, overwrite=args.force)
        if not args.device:
            print(me)
    return 0


# -- claim sign -----------------------------------------------------------------------------------


def _permission(text: str) -> Permission:
    client_id, sep, activity = text.rpartition(":")
    if not sep or not client_id:
        raise UsageError(f"--allow {text!r}: write ID:ACTIVITY, e.g. '*:SUBSCRIBE'")
    try:
        return Permission(client_id, Activity(activity.upper()))
    except ValueError:
        raise UsageError(
            f"--allow {text!r}: activity {activity!r} is not one of PUBLISH, SUBSCRIBE, ALL"
        ) from None


def build_restriction(key: SigningKey, topic: str, kind: str, allow: list[str]) -> Restriction:
    """The restriction ``claim sign`` signs; a topic without ``restricted/`` is put in the
    key's own area (``temperature`` → ``restricted/<ID>/temperature``)."""
    me = smoker_id(key.verify_key)
    full = topic if topic.startswith(RESTRICTED_PREFIX) else f"{RESTRICTED_PREFIX}{me}/{topic}"
    try:
        restriction_type = RestrictionType(kind.upper())
    except ValueError:
        raise UsageError(f"--type {kind!r}: use WHITELIST or BLACKLIST") from None
    return Restriction(full, restriction_type, tuple(_permission(a) for a in allow))


def _cmd_sign(args: argparse.Namespace) -> int:
    key = load_signing_key(args.key)
    restriction = build_restriction(key, args.topic, args.type, args.allow)
    me = smoker_id(key.verify_key)
    if restriction.owner != me:
        raise UsageError(
            f"--topic {restriction.topic_name!r} is in {restriction.owner}'s area; this key "
            f"({me}) may only claim restricted/{me}/…"
        )
    claim = sign_restriction(key, restriction)
    payload = claim.to_json()
    verify_claim(parse_claim(payload.encode("utf-8")))  # exactly what the broker will check
    if args.out:
        Path(args.out).write_text(payload + "\n", encoding="utf-8")
        print(f"{args.out}: claim on {restriction.topic_name}", file=sys.stderr)
    else:
        print(payload)
    return 0


# -- claim list | show | verify -------------------------------------------------------------------


def _open_service(directory: str) -> ClaimService:
    path = os.path.join(directory, CLAIMS_LOG)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no claim store here; --store names the broker's state directory")
    return ClaimService(KeyedClaimStore.open(path, readonly=True))


def _query(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The stored claim documents that match the filters, by TinyDB query on the log."""
    path = os.path.join(args.store, CLAIMS_LOG)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no claim store here; --store names the broker's state directory")
    q = Query()
    condition = q.noop()
    if args.tenant is not None:
        condition &= q.tenant == args.tenant
    if getattr(args, "topic", None) is not None:
        condition &= q.topic == args.topic
    if getattr(args, "owner", None) is not None:
        condition &= q.owner == args.owner
    involving = getattr(args, "involving", None)
    if involving is not None:
        named = (f'"clientId":"{involving}"', '"clientId":"*"')
        condition &= (q.owner != involving) & q.restriction.test(
            lambda text: isinstance(text, str) and any(n in text for n in named)
        )
    db = TinyDB(path, storage=LogStorage, readonly=True)
    try:
        docs = [dict(doc) for doc in db.table(TINYDB_TABLE).search(condition)]
    finally:
        db.close()
    return sorted(docs, key=lambda d: (str(d.get("tenant")), str(d.get("topic"))))


def _status(doc: dict[str, Any]) -> Claim | str:
    """The verified claim of a document, or why it is quarantined."""
    try:
        return verify_record(str(doc.get("topic")), doc)
    except ClaimError as exc:
        return exc.message


def _cmd_list(args: argparse.Namespace) -> int:
    for doc in _query(args):
        status = _status(doc)
        where = f"{doc.get('tenant')}\t{doc.get('topic')}"
        if isinstance(status, str):
            print(f"{where}\tQUARANTINED\t{status}")
        else:
            r = status.restriction
            count = len(r.permissions)
            print(f"{where}\t{r.restriction_type.value}\t{count} permission(s)")
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    docs = _query(args)
    if not docs:
        raise UsageError(f"no claim on {args.topic!r} in tenant {args.tenant!r}")
    doc = docs[0]
    status = _status(doc)
    shown: dict[str, Any] = {"tenant": doc.get("tenant"), "topicName": doc.get("topic")}
    if isinstance(status, str):
        shown.update(status="QUARANTINED", reason=status)
    else:
        shown.update(status="ok", stored_at=doc.get("at"), claim=status.to_json_obj())
    print(json.dumps(shown, indent=2, ensure_ascii=False))
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    if args.file:
        claim = parse_claim(Path(args.file).read_bytes())
        verify_claim(claim)
        print(f"{args.file}: valid claim on {claim.topic_name} by {claim.owner}")
        return 0
    if not args.store:
        raise UsageError("give --store DIR (a claim store) or --file CLAIM.json")
    service = _open_service(args.store)
    report = service.load_report
    for tenant, topic, reason in report.quarantined:
        print(f"QUARANTINED\t{tenant}\t{topic}\t{reason}")
    print(
        f"{report.loaded} claim(s) verified, {len(report.quarantined)} quarantined "
        f"({report.seconds * 1000:.0f} ms)"
    )
    return 1 if report.quarantined else 0


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.claims_func(args))
    except (UsageError, KeyFileError, StoreError) as exc:
        print(f"edge-broker {args.command}: {exc}", file=sys.stderr)
        return 2
    except ClaimError as exc:
        print(f"edge-broker {args.command}: invalid claim: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"edge-broker {args.command}: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keygen = subparsers.add_parser(
        "keygen", help="make an Ed25519 key and print its SMOKER ID (client id)"
    )
    keygen.add_argument("--out", help="write the private key here (PKCS#8 PEM, mode 0600)")
    keygen.add_argument(
        "--device",
        metavar="DIR",
        help=f"provision a firmware client: DIR/{DEVICE_KEY_FILE}, DIR/{DEVICE_CONFIG_FILE}, "
        f"DIR/{DEVICE_CLAIMS_DIR}/",
    )
    keygen.add_argument("--host", default=HOST_PLACEHOLDER, help="broker host for config.json")
    keygen.add_argument("--port", type=int, default=1883, help="broker port for config.json")
    keygen.add_argument("--force", action="store_true", help="replace existing files")
    keygen.set_defaults(func=_run, claims_func=_cmd_keygen)

    claim = subparsers.add_parser("claim", help="sign SMOKER claims; inspect a claim store")
    claim.set_defaults(func=_run)
    sub = claim.add_subparsers(dest="claim_command", metavar="ACTION")
    sub.required = True

    sign = sub.add_parser("sign", help="print a signed claim (JSON for access/claim)")
    sign.add_argument("--key", required=True, help="the owner's private key (PEM or hex seed)")
    sign.add_argument(
        "--topic", required=True, help="restricted/<ID>/<rest>, or just <rest> in the key's area"
    )
    sign.add_argument("--type", required=True, help="WHITELIST or BLACKLIST")
    sign.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="ID:ACTIVITY",
        help="a permission (repeatable): SMOKER ID or '*', then PUBLISH, SUBSCRIBE or ALL",
    )
    sign.add_argument("--out", help="write the claim to this file instead of stdout")
    sign.set_defaults(claims_func=_cmd_sign)

    for name, func, text in (
        ("list", _cmd_list, "one line per stored claim (quarantined ones included)"),
        ("show", _cmd_show, "print one stored claim as JSON"),
        ("verify", _cmd_verify, "re-verify every stored claim (exit 1 if any is compromised)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--store", required=name != "verify", help="the broker's state directory")
        p.add_argument("--tenant", default=None if name == "list" else DEFAULT_TENANT)
        if name == "list":
            p.add_argument("--owner", metavar="ID", help="only claims owned by this SMOKER ID")
            p.add_argument(
                "--involving", metavar="ID", help="only others' claims naming this ID or '*'"
            )
        if name == "show":
            p.add_argument("topic")
        if name == "verify":
            p.add_argument("--file", help="verify one claim file instead of a store")
        p.set_defaults(claims_func=func)

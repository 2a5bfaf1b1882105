"""`edge-broker bundle create | verify | show | keygen`: signed policy bundles by hand."""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import nacl.signing

from ..keys import (
    KeyFileError,
    load_signing_key,
    load_verify_key,
    write_signing_key,
    write_verify_key,
)
from ..sync.bundle import (
    BundleError,
    check_acceptable,
    create_bundle,
    key_id,
    read_envelope,
    verify_bundle,
)


def load_policy_file(path: str) -> dict[str, Any]:
    """A policy source: TOML (``.toml``) or JSON, whose top-level tables are policy sections."""
    text = Path(path).read_bytes()
    try:
        if path.endswith(".toml"):
            data: Any = tomllib.loads(text.decode("utf-8"))
        else:
            data = json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path}: cannot parse the policy file: {exc}") from exc
    if not isinstance(data, dict):
        raise BundleError(f"{path}: the policy file must hold a table of sections")
    return data


def embed_files(policy: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``[passwords] file`` and ``[acl] file`` as what a bundle carries — the users with their
    hashes, the ACL's JSON5 as its ``access_control`` keys — never as paths of this machine,
    which gateways do not have (issue 20). Relative paths are read from ``folder``."""
    from ..auth.password import PasswordFileError, load_password_file

    out = dict(policy)
    passwords = out.get("passwords")
    if isinstance(passwords, dict):
        if set(passwords) != {"file"} or not isinstance(passwords["file"], str):
            raise BundleError(
                'policy [passwords] takes only file = "PATH" (the users and hashes are '
                "embedded; max_concurrent is the gateway's own setting)"
            )
        try:
            entries = load_password_file(folder / passwords["file"])
        except PasswordFileError as exc:
            raise BundleError(f"policy passwords.file: {exc}") from exc
        out["passwords"] = [
            {
                "username": e.username,
                "hash": e.hash.decode("ascii"),
                "tenants": list(e.tenants),
                "roles": list(e.roles),
            }
            for e in sorted(entries.values(), key=lambda e: e.username)
        ]
    acl = out.get("acl")
    if isinstance(acl, dict) and "file" in acl:
        from ..authz.json5_text import loads_json5

        others = sorted(k for k in acl if k != "file")
        if others:
            raise BundleError(
                f"policy [acl]: give either file or the access_control keys, not both "
                f"(remove {', '.join(others)})"
            )
        path = folder / str(acl["file"])
        try:
            data = loads_json5(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BundleError(
                f"policy acl.file: cannot read {str(path)!r} as JSON5: {exc}"
            ) from exc
        if isinstance(data, dict) and isinstance(data.get("access_control"), dict):
            data = data["access_control"]  # a whole Zenoh config.json5, as [acl] file accepts
        if not isinstance(data, dict):
            raise BundleError(f"policy acl.file: {str(path)!r} holds no access_control object")
        out["acl"] = data
    return out


def _cmd_create(args: argparse.Namespace) -> int:
    from ..sync.apply import check_policy

    key = load_signing_key(args.key)
    policy = embed_files(load_policy_file(args.policy), Path(args.policy).resolve().parent)
    check_policy(policy, args.policy, args.separator, args.version)
    issued_at = int(args.issued_at) if args.issued_at is not None else int(time.time())
    data = create_bundle(
        key, version=args.version, gateway=args.gateway, issued_at=issued_at, policy=policy
    )
    Path(args.output).write_bytes(data)
    print(
        f"{args.output}: bundle v{args.version} for {args.gateway!r}, {len(data)} bytes, key "
        f"{key_id(key.verify_key)}"
    )
    return 0


def _trusted(paths: list[str]) -> list[nacl.signing.VerifyKey]:
    return [load_verify_key(p) for p in paths]


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..sync.apply import check_policy

    bundle = verify_bundle(Path(args.bundle).read_bytes(), _trusted(args.trust))
    if args.gateway is not None:
        check_acceptable(bundle, args.gateway, args.current_version)
    check_policy(bundle.policy, f"{args.bundle} (policy)", args.separator, bundle.version)
    print(
        f"{args.bundle}: OK: v{bundle.version} for {bundle.gateway!r}, issued {bundle.issued_at}, "
        f"key {bundle.kid}"
    )
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    data = Path(args.bundle).read_bytes()
    if args.trust:
        bundle = verify_bundle(data, _trusted(args.trust))
        shown: dict[str, Any] = {
            "verified": True,
            "kid": bundle.kid,
            "version": bundle.version,
            "gateway": bundle.gateway,
            "issued_at": bundle.issued_at,
            "policy": bundle.policy,
        }
    else:
        import cbor2

        envelope = read_envelope(data)
        body = cbor2.loads(envelope["body"])
        shown = {
            "verified": False,
            "kid": envelope["kid"],
            **{k: v for k, v in body.items() if k != "format"},
        }
    print(json.dumps(shown, indent=2, sort_keys=True, default=repr))
    return 0


def _cmd_keygen(args: argparse.Namespace) -> int:
    key = nacl.signing.SigningKey.generate()
    write_signing_key(args.out, key)
    write_verify_key(args.out + ".pub", key.verify_key)
    print(
        f"{args.out}: private key; {args.out}.pub: public key to trust on gateways; key id "
        f"{key_id(key.verify_key)}"
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.bundle_func(args))
    except (BundleError, KeyFileError) as exc:
        print(f"edge-broker bundle: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"edge-broker bundle: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("bundle", help="create, verify and show signed policy bundles")
    parser.set_defaults(func=_run)
    sub = parser.add_subparsers(dest="bundle_command", metavar="ACTION")
    sub.required = True

    create = sub.add_parser("create", help="sign a policy file into a bundle")
    create.add_argument(
        "--key", required=True, help="the cloud's Ed25519 private key (PEM or hex seed)"
    )
    create.add_argument(
        "--version", required=True, type=int, help="bundle version, higher than any before"
    )
    create.add_argument(
        "--gateway", required=True, help="target gateway id, or '*' for every gateway"
    )
    create.add_argument("--policy", required=True, help="policy sections as TOML (.toml) or JSON")
    create.add_argument(
        "--issued-at", type=int, help="Unix seconds (default: now); fix it for reproducible bundles"
    )
    create.add_argument("-o", "--output", required=True)
    create.set_defaults(bundle_func=_cmd_create)

    verify = sub.add_parser(
        "verify", help="check a bundle's signature (and its target and version)"
    )
    verify.add_argument("bundle")
    verify.add_argument(
        "--trust", action="append", required=True, help="a trusted public key file (repeatable)"
    )
    verify.add_argument("--gateway", help="check that the bundle applies to this gateway")
    verify.add_argument("--current-version", type=int, help="refuse versions not newer than this")
    verify.set_defaults(bundle_func=_cmd_verify)

    for compiling in (create, verify):
        compiling.add_argument(
            "--separator",
            default="/",
            choices=("/", "."),
            help="the gateways' [topics] separator, for compiling the policy as they will",
        )

    show = sub.add_parser("show", help="print a bundle's header and policy as JSON")
    show.add_argument("bundle")
    show.add_argument(
        "--trust", action="append", default=[], help="verify with these public keys first"
    )
    show.set_defaults(bundle_func=_cmd_show)

    keygen = sub.add_parser("keygen", help="make a cloud signing key pair (OUT and OUT.pub)")
    keygen.add_argument("out")
    keygen.set_defaults(bundle_func=_cmd_keygen)

"""`edge-broker token create|inspect`: issue and examine tokens with tenant grants (seed 000).

``create`` validates every grant and rule with the same parser (and messages) the broker uses
when the token is presented, so an invalid rule never reaches a device. ``inspect`` shows the
header, claims, grants and validity; with ``--key`` or ``--jwks`` it verifies the token exactly
as the broker would (:class:`~edge_broker.auth.token.TokenVerifier`).

Exit codes: 0 valid (created / valid token), 1 token refused or invalid, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from ..auth.token import (
    DEFAULT_LEEWAY,
    GRANTS_CLAIM,
    TokenError,
    TokenVerifier,
    VerifiedToken,
    create_token,
    unverified_parts,
)
from ..auth.token_keys import ALGORITHMS, TokenKey, TokenKeyError, load_jwks
from ..authz.grants import GrantError, Grants
from ..matching.names import DEFAULT_SEPARATOR
from .errors import UsageError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``1h``, ``7d``, ``2w`` or a sum such as ``1h30m`` → seconds."""
    total, pos = 0.0, 0
    cleaned = text.strip().lower()
    while pos < len(cleaned):
        match = _DURATION.match(cleaned, pos)
        if match is None:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not cleaned or pos != len(cleaned) or total <= 0:
        raise UsageError(f"--ttl {text!r}: give a positive duration like 3600, 15m, 1h or 7d")
    return total


def _read_arg(value: str, what: str) -> str:
    """``@path`` reads a file, ``-`` standard input; anything else is the value itself."""
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@"):
        try:
            return Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{what} {value}: cannot read ({exc.strerror})") from None
    return value


def _grants(values: list[str]) -> list[Any]:
    grants: list[Any] = []
    for value in values:
        text = _read_arg(value, "--grant")
        try:
            decoded = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"--grant {value[:60]!r}: not valid JSON ({exc})") from None
        if isinstance(decoded, dict) and GRANTS_CLAIM in decoded:
            decoded = decoded[GRANTS_CLAIM]
        grants.extend(decoded if isinstance(decoded, list) else [decoded])
    return grants


def _key(args: argparse.Namespace) -> TokenKey:
    return TokenKey.load(args.key, kid=args.kid, algorithm=args.alg)


def _cmd_create(args: argparse.Namespace) -> int:
    key = _key(args)
    grants = _grants(args.grant)
    try:
        text = create_token(
            key,
            grants,
            ttl=parse_duration(args.ttl),
            subject=args.sub,
            client_id=args.client_id,
            audience=(args.aud[0] if len(args.aud) == 1 else args.aud) if args.aud else None,
            issuer=args.iss,
            separator=args.separator,
        )
    except GrantError as exc:
        print(f"edge-broker token create: invalid grants: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(text)
    return 0


def _iso(seconds: Any) -> str:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return "-" if seconds is None else repr(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _relative(seconds: float) -> str:
    span = abs(int(seconds))
    days, rest = divmod(span, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if v]
    text = " ".join(parts[:2]) or "0s"
    return f"in {text}" if seconds >= 0 else f"{text} ago"


def _verifier(args: argparse.Namespace, header_kid: Any) -> TokenVerifier | None:
    keys: list[TokenKey] = []
    if args.key:
        # The operator names the key to check with: it stands for the token's kid unless
        # --kid says otherwise.
        kid = args.kid if args.kid is not None else header_kid
        keys.append(
            TokenKey.load(args.key, kid=kid if isinstance(kid, str) else None, algorithm=args.alg)
        )
    if args.jwks:
        keys.extend(load_jwks(args.jwks))
    if not keys:
        return None
    return TokenVerifier(
        keys,
        audience=args.aud,
        issuer=args.iss,
        leeway=args.leeway,
        separator=args.separator,
    )


def _cmd_inspect(args: argparse.Namespace) -> int:
    text = _read_arg(args.token, "TOKEN").strip()
    now = time.time()
    report: dict[str, Any] = {}
    problems: list[str] = []
    try:
        header, claims = unverified_parts(text)
    except TokenError as exc:
        return _show(args, {"valid": False, "problems": [exc.reason]}, [exc.reason])
    verifier = _verifier(args, header.get("kid"))
    report["header"] = header
    report["claims"] = {k: v for k, v in claims.items() if k != GRANTS_CLAIM}
    try:
        grants: Grants | None = Grants.parse(claims.get(GRANTS_CLAIM), args.separator)
    except GrantError as exc:
        grants = None
        problems.append(f"invalid token grants: {exc}")
    report["grants"] = claims.get(GRANTS_CLAIM)
    exp = claims.get("exp")
    if isinstance(exp, (int, float)) and not isinstance(exp, bool):
        report["expires_in"] = exp - now
        if now > exp + args.leeway:
            problems.append(f"token expired at {_iso(exp)}")
    nbf = claims.get("nbf")
    if isinstance(nbf, (int, float)) and not isinstance(nbf, bool) and now + args.leeway < nbf:
        problems.append(f"token not valid before {_iso(nbf)}")
    verified: VerifiedToken | None = None
    if verifier is None:
        report["signature"] = "not verified (give --key or --jwks)"
    else:
        try:
            verified = verifier.verify(text, client_id=args.client_id, now=now)
            report["signature"] = f"verified ({verified.algorithm}, kid {verified.kid!r})"
            if args.tenant is not None:
                verified.for_tenant(args.tenant)
        except TokenError as exc:
            if verified is None:
                report["signature"] = "refused"
            report["reason_code"] = f"0x{int(exc.reason_code):02X} {exc.reason_code.name}"
            if exc.reason not in problems:
                problems.append(exc.reason)
    if verifier is None and args.tenant is not None and grants is not None:
        if grants.for_tenant(args.tenant) is None:
            problems.append(f"token grants no access to tenant {args.tenant!r}")
    report["verified"] = verified is not None
    report["valid"] = not problems
    report["problems"] = problems
    return _show(args, report, problems)


def _show(args: argparse.Namespace, report: dict[str, Any], problems: list[str]) -> int:
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True, default=str))
        return 0 if not problems else 1
    if "header" in report:
        claims = report["claims"]
        print(f"header:     {json.dumps(report['header'], sort_keys=True)}")
        for name in ("sub", "client_id", "iss", "aud"):
            if name in claims:
                print(f"{name + ':':<11} {claims[name]}")
        print(f"issued:     {_iso(claims.get('iat'))}")
        print(f"not before: {_iso(claims.get('nbf'))}")
        exp = claims.get("exp")
        left = f" ({_relative(report['expires_in'])})" if "expires_in" in report else ""
        print(f"expires:    {_iso(exp) if exp is not None else 'never'}{left}")
        print(f"signature:  {report['signature']}")
        grants = report.get("grants")
        if isinstance(grants, list):
            print("grants:")
            for i, grant in enumerate(grants):
                if not isinstance(grant, dict):
                    print(f"  [{i}] {grant!r}")
                    continue
                tenants = grant.get("tenant_ids")
                shown = ", ".join(map(str, tenants)) if isinstance(tenants, list) else tenants
                print(f"  [{i}] tenants: {shown}")
                for kind, key in (("pub", "allow_channels_pub"), ("sub", "allow_channels_sub")):
                    rules = grant.get(key, [])
                    for rule in rules if isinstance(rules, list) else [rules]:
                        print(f"      {kind}: {rule}")
    if problems:
        for problem in problems:
            print(f"INVALID: {problem}")
        return 1
    print("VALID" if report.get("verified") else "VALID (signature unchecked)")
    return 0


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.token_func(args))
    except (UsageError, TokenKeyError) as exc:
        print(f"edge-broker token: {exc}", file=sys.stderr)
        return 2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("token", help="create and inspect tokens with tenant grants")
    parser.set_defaults(func=_run)
    sub = parser.add_subparsers(dest="token_command", metavar="ACTION")
    sub.required = True

    def key_options(p: argparse.ArgumentParser, required: bool) -> None:
        p.add_argument(
            "--key",
            required=required,
            metavar="FILE",
            help="PEM key (private to sign) or, with --alg HS256, a secret file",
        )
        p.add_argument(
            "--alg",
            choices=ALGORITHMS,
            help="algorithm (default: from the PEM key; HS256 for a secret file)",
        )
        p.add_argument("--kid", help="key id written to / expected in the token header")
        p.add_argument(
            "--separator",
            choices=(".", "/"),
            default=DEFAULT_SEPARATOR,
            help="channel separator of the rules (default '/')",
        )

    create = sub.add_parser("create", help="sign a token; invalid rules are refused")
    key_options(create, required=True)
    create.add_argument(
        "--grant",
        action="append",
        required=True,
        metavar="JSON|@FILE",
        help='a grant object {"tenant_ids": [...], "allow_channels_pub": [...], '
        '"allow_channels_sub": [...]} or a list of them; repeatable',
    )
    create.add_argument("--ttl", default="1h", help="lifetime: 3600, 15m, 1h, 7d (default 1h)")
    create.add_argument("--sub", help="subject")
    create.add_argument("--client-id", help="bind the token to this MQTT client id")
    create.add_argument("--aud", action="append", default=[], help="audience (repeatable)")
    create.add_argument("--iss", help="issuer")
    create.set_defaults(token_func=_cmd_create)

    inspect = sub.add_parser("inspect", help="show a token's header, grants and validity")
    inspect.add_argument("token", metavar="TOKEN", help="the token, @FILE, or - for stdin")
    key_options(inspect, required=False)
    inspect.add_argument("--jwks", metavar="FILE", help="verify with the keys of a JWKS file")
    inspect.add_argument("--aud", help="expected audience")
    inspect.add_argument("--iss", help="expected issuer")
    inspect.add_argument("--client-id", help="check the client id binding")
    inspect.add_argument("--tenant", help="check that the grants name this tenant")
    inspect.add_argument(
        "--leeway",
        type=float,
        default=DEFAULT_LEEWAY,
        help=f"clock leeway in seconds (default {DEFAULT_LEEWAY:g})",
    )
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.set_defaults(token_func=_cmd_inspect)

"""``edge-broker explain`` and ``edge-broker lint`` (AUTHZ.md §4)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..config import Config, ConfigError, load_config
from ..identity import DEFAULT_TENANT, Identity


def _load(path: str) -> Config | None:
    try:
        return load_config(path)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return None


def _identity(args: argparse.Namespace, config: Config) -> Identity | str:
    roles = tuple(args.role or ())
    tenant = args.tenant
    method = args.method
    grants = None
    username = args.username
    if args.username and config.passwords.file and not roles:
        entry = config.passwords.entries.get(args.username)  # as load_config read the file
        if entry is not None:
            roles = entry.roles
            if tenant is None and len(entry.tenants) == 1:
                tenant = entry.tenants[0]
            method = method or "password"
    if args.token:
        from ..auth.token import TokenError
        from ..auth.token_method import build_verifier

        try:
            verified = build_verifier(config.tokens, config.topics.separator).verify(
                args.token, client_id=args.client_id, tenant=tenant or DEFAULT_TENANT
            )
        except TokenError as exc:
            return f"the token is refused: {exc}"
        grants = verified.for_tenant(tenant or DEFAULT_TENANT)
        method = "token"
        username = verified.subject  # as the broker does: never a user name the token lacks
        roles = tuple(args.role or ())  # a password entry's roles are not a token client's
    return Identity(
        client_id=args.client_id,
        method=method or ("certificate" if args.cert_cn else "anonymous"),
        tenant=tenant or DEFAULT_TENANT,
        username=username,
        cert_cn=args.cert_cn,
        interface=args.interface,
        roles=roles,
        grants=grants,
    )


def cmd_explain(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return 2
    from ..authz.explain import explain, explanation_text
    from ..authz.policy import build_policy
    from ..mqtt.packets import NO_PROPERTIES

    identity = _identity(args, config)
    if isinstance(identity, str):
        print(identity, file=sys.stderr)
        return 2
    policy = build_policy(config)
    verdicts, final = asyncio.run(
        explain(policy, identity, args.action, args.topic, args.qos, args.retain, NO_PROPERTIES)
    )
    print(explanation_text(identity, args.action, args.topic, args.qos, verdicts, final))
    return 0 if final.allowed else 1


def cmd_lint(args: argparse.Namespace) -> int:
    config = _load(args.config)
    if config is None:
        return 2
    from ..auth.client_id_lint import lint_client_id_binding
    from ..authz.permissions_lint import lint_permissions
    from ..ops.principal_lint import lint_unpermitted_principals

    findings: list[str] = []
    if config.permissions is not None:
        findings += lint_permissions(config.permissions)
        findings += lint_client_id_binding(config)
        findings += lint_unpermitted_principals(config)
    acl_config = getattr(config, "acl", None)
    if acl_config is not None and getattr(acl_config, "enabled", False):
        try:
            from ..authz.acl_lint import lint_acl

            source = getattr(acl_config, "config", acl_config)
            findings += [f"acl: {finding}" for finding in lint_acl(source)]
        except (ImportError, TypeError, AttributeError) as exc:
            findings.append(f"acl: could not be linted ({exc})")
    for listener in config.listeners:
        if "anonymous" in listener.auth_methods and listener.bind not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            findings.append(
                f"listeners.{listener.name}: anonymous clients are accepted on {listener.bind}; "
                "limit anonymous access with permissions or remove the method"
            )
        if listener.tenant_choice == "open":
            findings.append(
                f'listeners.{listener.name}: tenant_choice = "open": clients whose credentials '
                "name no tenant may enter any tenant they name; remove it unless tenants are not "
                "a security boundary here"
            )
    from ..ops.exposure import exposure_warnings

    findings += exposure_warnings(config)
    for finding in findings:
        print(finding)
    print(f"{len(findings)} finding(s) in {config.file}")
    return 1 if findings else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = subparsers.add_parser(
        "explain", help="show every gate's verdict for one publish or subscribe"
    )
    explain.add_argument("--config", "-c", required=True, metavar="FILE")
    explain.add_argument("--client-id", required=True)
    explain.add_argument("--username")
    explain.add_argument("--tenant")
    explain.add_argument("--cert-cn")
    explain.add_argument(
        "--interface", help="the network interface the client connects on (site ACL)"
    )
    explain.add_argument(
        "--role", action="append", help="a role (repeatable; default: from the password file)"
    )
    explain.add_argument(
        "--method", help="authentication method (default: token/password/certificate/anonymous)"
    )
    explain.add_argument("--token", help="a JWT: its grants decide as for a token client")
    explain.add_argument("--qos", type=int, default=0, choices=(0, 1, 2))
    explain.add_argument("--retain", action="store_true")
    explain.add_argument("action", choices=("publish", "subscribe"))
    explain.add_argument("topic")
    explain.set_defaults(func=cmd_explain)
    lint = subparsers.add_parser(
        "lint", help="report rules that never match, shadowed rules, broad grants"
    )
    lint.add_argument("--config", "-c", required=True, metavar="FILE")
    lint.set_defaults(func=cmd_lint)

"""Turning a verified bundle into the running policy (DESIGN.md "cloud policy sync").

The new configuration is the running base config file with the bundle's policy sections in place of
the file's: ``permissions``, ``acl``, ``authorizers`` and ``tokens`` replace the file's tables;
``claims`` keys update the file's ``[claims]`` (limits; the store location stays the gateway's);
``passwords`` (a list of ``{username, hash, tenants, roles, clientids}``) is written to a password
file in the sync state directory and ``[passwords] file`` points at it. The merged table goes
through :func:`~edge_broker.config.parse_config` (same checks, same messages) and then the
broker's ``apply_config`` (``sync.host.PolicyHost``), which compiles everything before it swaps
anything: a bad bundle never replaces a good one.
"""

from __future__ import annotations

import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..auth.password import PasswordEntry, PasswordFileError, write_password_file
from ..config import EMBEDDED_FILE, ConfigError, parse_config
from .bundle import BundleError, PolicyBundle
from .state import SyncStateDir

if TYPE_CHECKING:
    from ..config import Config

REPLACED = ("permissions", "acl", "authorizers", "tokens")
CLAIMS_LOCAL = frozenset({"enabled", "store_dir", "fsync"})  # where and whether: the gateway's


def base_table(config: Config) -> dict[str, Any]:
    """The running config's file as a TOML table (empty for the embedded default)."""
    if config.file == EMBEDDED_FILE:
        return {}
    try:
        with open(config.file, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise BundleError(f"cannot re-read the base config {config.file}: {exc}") from exc


_ENTRY_KEYS = ("username", "hash", "tenants", "roles", "clientids")
_LISTS = ("tenants", "roles", "clientids")


def _password_entries(value: Any) -> dict[str, PasswordEntry]:
    if not isinstance(value, list):
        raise BundleError(
            "bundle section 'passwords' must be a list of {username, hash, tenants, roles, "
            "clientids}"
        )
    entries: dict[str, PasswordEntry] = {}
    for i, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("username"), str)
            or not isinstance(item.get("hash"), str)
        ):
            raise BundleError(f"bundle passwords[{i}] needs username and an argon2id hash string")
        if not item["hash"].startswith("$argon2id$"):
            from ..auth.mosquitto_hashes import hash_problem  # imported Mosquitto users keep theirs

            problem = hash_problem(item["hash"])
            if problem is not None:
                raise BundleError(f"bundle passwords[{i}] ({item['username']!r}): {problem}")
        if set(item) - set(_ENTRY_KEYS):
            raise BundleError(
                f"bundle passwords[{i}] has unknown keys {sorted(set(item) - set(_ENTRY_KEYS))}"
            )
        lists: dict[str, tuple[str, ...]] = {}
        for key in _LISTS:
            items = item.get(key, [])
            # the password file is ':'-separated with ','-separated lists: one line per entry
            if not isinstance(items, list) or not all(
                isinstance(t, str) and t and not any(c in t for c in ":,\n\r") for t in items
            ):
                raise BundleError(
                    f"bundle passwords[{i}]: {key} must be a list of non-empty strings "
                    "without ':', ',' or line breaks"
                )
            lists[key] = tuple(items)
        entries[item["username"]] = PasswordEntry(
            item["username"],
            item["hash"].encode("ascii"),
            lists["tenants"],
            lists["roles"],
            lists["clientids"],
        )
    return entries


def merged_config(base: Config, bundle: PolicyBundle, state: SyncStateDir) -> Config:
    """The config the bundle asks for; BundleError naming the problem when it is not valid."""
    return _merge(
        base_table(base),
        bundle.policy,
        bundle.version,
        state.password_file(bundle.version),
        base.file,
    )  # the file name stays: the next bundle re-reads it


def check_policy(
    policy: Mapping[str, Any], label: str = "<policy>", separator: str = "/", version: int = 0
) -> None:
    """Compile ``policy`` exactly as a gateway applying it would — :func:`merged_config`'s merge
    and ``parse_config``, then ``build_pipeline`` as ``apply_config`` does (authorizers built,
    gates compiled) — over a gateway config with no policy of its own. ``bundle create`` and
    ``bundle verify`` run it, so no bundle is signed or passed that every gateway refuses
    (issue 20). BundleError naming the problem."""
    from ..authz.policy import build_pipeline

    with tempfile.TemporaryDirectory(prefix="edge-broker-policy-") as scratch:
        config = _merge(
            {"topics": {"separator": separator}}, policy, version, Path(scratch) / "passwd", label
        )
        try:
            build_pipeline(config, None, None)
        except Exception as exc:  # an authorizer's constructor, a gate that does not compile
            raise BundleError(f"{label}: the policy does not compile on a gateway: {exc}") from exc


def _merge(
    table: dict[str, Any], policy: Mapping[str, Any], version: int, password_path: Path, file: str
) -> Config:
    acl = policy.get("acl")
    if isinstance(acl, dict) and "file" in acl:
        raise BundleError(
            f"bundle v{version}: acl.file names a path on the machine that made the bundle; "
            "`edge-broker bundle create` embeds the file's content: create the bundle again"
        )
    for name in REPLACED:
        if name in policy:
            table[name] = policy[name]
    if "claims" in policy:
        if not isinstance(policy["claims"], dict):
            raise BundleError("bundle section 'claims' must be a table")
        local = sorted(set(policy["claims"]) & CLAIMS_LOCAL)
        if local:
            raise BundleError(
                f"bundle section 'claims' may set limits only; {', '.join(local)} "
                "belong to the gateway's own config"
            )
        table["claims"] = {**table.get("claims", {}), **policy["claims"]}
    if "passwords" in policy:
        entries = _password_entries(policy["passwords"])
        path = password_path
        try:
            write_password_file(path, entries)
        except (OSError, PasswordFileError) as exc:
            raise BundleError(f"cannot write the bundle's password file {path}: {exc}") from exc
        table["passwords"] = {**table.get("passwords", {}), "file": str(path)}
    try:
        return parse_config(table, file)
    except ConfigError as exc:
        raise BundleError(
            f"bundle v{version} does not make a valid config: "
            + "; ".join(str(p) for p in exc.problems)
        ) from exc

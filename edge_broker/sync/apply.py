"""Turning a verified bundle into the running policy (DESIGN.md "cloud policy sync").

The new configuration is the running base config file with the bundle's policy sections in
place of the file's: ``permissions``, ``acl``, ``authorizers`` and ``tokens`` replace the
file's tables; ``claims`` keys update the file's ``[claims]`` (limits; the store location stays
the gateway's); ``passwords`` (a list of ``{username, hash, tenants, roles, clientids}``) is written to a
password file in the sync state directory and ``[passwords] file`` points at it. The merged
table goes through :func:`~edge_broker.config.parse_config` (same checks, same messages) and
then :func:`~edge_broker.broker.reload.apply_config`, which compiles everything before it swaps
anything: a bad bundle never replaces a good one.
"""

from __future__ import annotations

import tomllib
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
        raise BundleError("bundle section 'passwords' must be a list of {username, hash, tenants, roles, clientids}")
    entries: dict[str, PasswordEntry] = {}
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("username"), str) \
                or not isinstance(item.get("hash"), str) or not item["hash"].startswith("$argon2id$"):
            raise BundleError(f"bundle passwords[{i}] needs username and an argon2id hash string")
        if set(item) - set(_ENTRY_KEYS):
            raise BundleError(f"bundle passwords[{i}] has unknown keys {sorted(set(item) - set(_ENTRY_KEYS))}")
        lists: dict[str, tuple[str, ...]] = {}
        for key in _LISTS:
            items = item.get(key, [])
            # the password file is ':'-separated with ','-separated lists: one line per entry
            if not isinstance(items, list) or not all(
                    isinstance(t, str) and t and not any(c in t for c in ":,\n\r") for t in items):
                raise BundleError(f"bundle passwords[{i}]: {key} must be a list of non-empty strings "
                                  "without ':', ',' or line breaks")
            lists[key] = tuple(items)
        entries[item["username"]] = PasswordEntry(item["username"], item["hash"].encode("ascii"),
                                                  lists["tenants"], lists["roles"], lists["clientids"])
    return entries


def merged_config(base: Config, bundle: PolicyBundle, state: SyncStateDir) -> Config:
    """The config the bundle asks for; BundleError naming the problem when it is not valid."""
    table = base_table(base)
    policy = bundle.policy
    for name in REPLACED:
        if name in policy:
            table[name] = policy[name]
    if "claims" in policy:
        if not isinstance(policy["claims"], dict):
            raise BundleError("bundle section 'claims' must be a table")
        local = sorted(set(policy["claims"]) & CLAIMS_LOCAL)
        if local:
            raise BundleError(f"bundle section 'claims' may set limits only; {', '.join(local)} "
                              "belong to the gateway's own config")
        table["claims"] = {**table.get("claims", {}), **policy["claims"]}
    if "passwords" in policy:
        entries = _password_entries(policy["passwords"])
        path = state.password_file(bundle.version)
        try:
            write_password_file(path, entries)
        except (OSError, PasswordFileError) as exc:
            raise BundleError(f"cannot write the bundle's password file {path}: {exc}") from exc
        table["passwords"] = {**table.get("passwords", {}), "file": str(path)}
    try:
        return parse_config(table, base.file)  # the file name stays: the next bundle re-reads it
    except ConfigError as exc:
        raise BundleError(f"bundle v{bundle.version} does not make a valid config: "
                          + "; ".join(str(p) for p in exc.problems)) from exc


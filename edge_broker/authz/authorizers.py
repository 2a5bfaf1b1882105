"""Authorizers (seed 003 "Publish Authorizer" / "Subscription Authorizer"; AUTHZ.md §2 gate 3).

An authorizer is a Python class named in config (``class = "package.module:Class"``), built once
with its ``options`` table, whose coroutine methods are called in config order:

- ``async def authorize_publish(self, request: PublishRequest) -> Outcome`` for every PUBLISH
  and for the will in every CONNECT (``request.will`` is True);
- ``async def authorize_subscribe(self, request: SubscribeRequest) -> Outcome`` for every topic
  filter of a SUBSCRIBE.

A class may define only one of them; the missing one counts as ``Outcome.next()``. Outcomes:

- ``Outcome.allow()``: allowed; the identity-policy gate (default permissions or token grants) is
  not consulted; the site ACL and claims still apply.
- ``Outcome.deny(reason_code=0x87, reason_string=None)``: denied with that code.
- ``Outcome.disconnect(reason_code=0x87, reason_string=None)``: denied, and the client is
  disconnected (MQTT 5: DISCONNECT with that code).
- ``Outcome.next()``: no opinion; the next authorizer decides, and after the last one the
  identity policy.

Each authorizer has a ``timeout`` (seconds, default 1.0) and a ``fallback`` (``"deny"``, the
default, or ``"next"``). A call that times out, raises, or returns anything but an Outcome is
logged and treated as its fallback (seed 003: a call that decides nothing denies); the broker
never crashes on a plugin.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..identity import Identity
from ..mqtt.reason_codes import (
    DISCONNECT_REASON_CODES,
    PUBACK_REASON_CODES,
    SUBACK_REASON_CODES,
    ReasonCode,
)
from .decision import Decision, GateName
from .errors import AuthzError
from .request import NO_PUBLISH_PROPERTIES, PublishProperties

log = logging.getLogger("edge_broker.authz.authorizers")

# Seed 003: the reason codes an authorizer may put on PUBACK/PUBREC (AckReasonCode) and SUBACK
# are the packet's own failure codes (MQTT 5 §3.4.2.1, §3.9.3), taken from the codec's tables;
# a disconnect outcome may use any DISCONNECT code (§3.14.2.1)
PUBLISH_DENY_CODES = frozenset(c for c in PUBACK_REASON_CODES if c >= 0x80)
SUBSCRIBE_DENY_CODES = frozenset(c for c in SUBACK_REASON_CODES if c >= 0x80)
DISCONNECT_CODES = DISCONNECT_REASON_CODES


class AuthorizerConfigError(AuthzError):
    """An authorizer that cannot be loaded; the message names the entry and what to change."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an authorizer decided (module docstring)."""

    kind: str  # "allow" | "deny" | "disconnect" | "next"
    reason_code: int = int(ReasonCode.NOT_AUTHORIZED)
    reason_string: str | None = None

    @classmethod
    def allow(cls) -> Outcome:
        return cls("allow", 0)

    @classmethod
    def deny(
        cls, reason_code: int = ReasonCode.NOT_AUTHORIZED, reason_string: str | None = None
    ) -> Outcome:
        return cls("deny", int(reason_code), reason_string)

    @classmethod
    def disconnect(
        cls, reason_code: int = ReasonCode.NOT_AUTHORIZED, reason_string: str | None = None
    ) -> Outcome:
        return cls("disconnect", int(reason_code), reason_string)

    @classmethod
    def next(cls) -> Outcome:
        return cls("next", 0)


@dataclass(frozen=True, slots=True)
class PublishRequest:
    """A PUBLISH (or a will) as an authorizer sees it."""

    identity: Identity
    topic: str
    payload: bytes
    qos: int
    retain: bool
    will: bool = False
    # the message's properties: the codec's ``Properties`` (every MQTT 5 field) whenever the
    # broker asks; typed by what the gates read so authz needs no codec import (issue 21)
    properties: PublishProperties = NO_PUBLISH_PROPERTIES

    @property
    def user_properties(self) -> tuple[tuple[str, str], ...]:
        return self.properties.user_properties


@dataclass(frozen=True, slots=True)
class SubscribeRequest:
    """One topic filter of a SUBSCRIBE as an authorizer sees it."""

    identity: Identity
    topic_filter: str  # without $share/<group>/
    qos: int
    share_group: str | None = None
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    user_properties: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class AuthorizerSpec:
    """One ``[[authorizers]]`` entry of the config."""

    name: str
    class_path: str
    timeout: float = 1.0
    fallback: str = "deny"  # "deny" | "next"
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LoadedAuthorizer:
    spec: AuthorizerSpec
    instance: Any
    calls: int = 0
    failures: int = 0


def load_class(class_path: str, where: str) -> type:
    module_name, _, attr = class_path.partition(":")
    if not module_name or not attr:
        raise AuthorizerConfigError(
            f"{where}: class must be written 'package.module:ClassName', not {class_path!r}"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an ImportError, or the plugin module's own error
        raise AuthorizerConfigError(
            f"{where}: cannot import module {module_name!r}: {exc}"
        ) from exc
    cls = getattr(module, attr, None)
    if not isinstance(cls, type):
        raise AuthorizerConfigError(f"{where}: module {module_name!r} has no class {attr!r}")
    return cls


def check_authorizer_class(cls: type, spec: AuthorizerSpec, where: str) -> None:
    """Raise unless ``cls`` has an ``async def authorize_publish`` or ``authorize_subscribe``
    (config validation runs this too, so ``edge-broker check`` refuses what a start would)."""
    if not any(
        asyncio.iscoroutinefunction(getattr(cls, m, None))
        for m in ("authorize_publish", "authorize_subscribe")
    ):
        raise AuthorizerConfigError(
            f"{where}: {spec.class_path} is not an authorizer: it must define "
            "'async def authorize_publish(self, request)' and/or 'async def "
            "authorize_subscribe(self, request)'"
        )


def instantiate(spec: AuthorizerSpec, where: str) -> LoadedAuthorizer:
    cls = load_class(spec.class_path, where)
    check_authorizer_class(cls, spec, where)
    try:
        instance = cls(dict(spec.options))
    except Exception as exc:
        raise AuthorizerConfigError(
            f"{where}: {spec.class_path}({dict(spec.options)!r}) failed: {exc}"
        ) from exc
    return LoadedAuthorizer(spec, instance)


def _to_decision(name: str, outcome: Outcome, allowed_codes: frozenset[int]) -> Decision | None:
    if outcome.kind == "next":
        return None
    if outcome.kind == "allow":
        return Decision(True, GateName.AUTHORIZER, name)
    codes = DISCONNECT_CODES if outcome.kind == "disconnect" else allowed_codes
    code = outcome.reason_code
    if code not in codes:
        log.warning(
            "authorizer %s answered reason code 0x%02X, which is not valid here; using 0x87",
            name,
            code,
        )
        code = int(ReasonCode.NOT_AUTHORIZED)
    reason = outcome.reason_string or f"denied by authorizer {name!r}"
    return Decision(
        False,
        GateName.AUTHORIZER,
        name,
        ReasonCode(code),
        reason,
        disconnect=outcome.kind == "disconnect",
    )


class AuthorizerChain:
    """The configured authorizers in order; gate 3 of AUTHZ.md §2."""

    def __init__(self, authorizers: Sequence[LoadedAuthorizer]) -> None:
        self.authorizers = tuple(authorizers)
        self.has_publish = any(hasattr(a.instance, "authorize_publish") for a in self.authorizers)
        self.has_subscribe = any(
            hasattr(a.instance, "authorize_subscribe") for a in self.authorizers
        )

    async def _call(self, entry: LoadedAuthorizer, method: str, request: Any) -> Outcome:
        spec = entry.spec
        fn = getattr(entry.instance, method, None)
        if fn is None:
            return Outcome.next()
        entry.calls += 1
        try:
            result = await asyncio.wait_for(fn(request), timeout=spec.timeout)
        except TimeoutError:
            entry.failures += 1
            log.warning(
                "authorizer %s timed out after %.3fs in %s; fallback %s",
                spec.name,
                spec.timeout,
                method,
                spec.fallback,
            )
            return self._fallback(spec, f"authorizer {spec.name!r} timed out")
        except Exception as exc:
            entry.failures += 1
            log.error(
                "authorizer %s raised %s: %s; fallback %s",
                spec.name,
                type(exc).__name__,
                exc,
                spec.fallback,
            )
            return self._fallback(spec, f"authorizer {spec.name!r} failed")
        if not isinstance(result, Outcome):
            entry.failures += 1
            log.error(
                "authorizer %s returned %r instead of an Outcome; treated as its fallback",
                spec.name,
                result,
            )
            return self._fallback(spec, f"authorizer {spec.name!r} decided nothing")
        return result

    @staticmethod
    def _fallback(spec: AuthorizerSpec, reason: str) -> Outcome:
        return (
            Outcome.next()
            if spec.fallback == "next"
            else Outcome.deny(ReasonCode.NOT_AUTHORIZED, reason)
        )

    async def authorize_publish(self, request: PublishRequest) -> Decision | None:
        """The first authorizer's allow/deny/disconnect, or None when all said next."""
        for entry in self.authorizers:
            decision = _to_decision(
                entry.spec.name,
                await self._call(entry, "authorize_publish", request),
                PUBLISH_DENY_CODES,
            )
            if decision is not None:
                return decision
        return None

    async def authorize_subscribe(self, request: SubscribeRequest) -> Decision | None:
        for entry in self.authorizers:
            decision = _to_decision(
                entry.spec.name,
                await self._call(entry, "authorize_subscribe", request),
                SUBSCRIBE_DENY_CODES,
            )
            if decision is not None:
                return decision
        return None


def parse_authorizer_specs(
    entries: Sequence[Mapping[str, Any]], file: str = "<config>"
) -> list[AuthorizerSpec]:
    """``[[authorizers]]`` tables → specs; errors name ``authorizers[i].key``."""
    specs = []
    names: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"{file}: authorizers[{i}]"
        if not isinstance(entry, Mapping):
            raise AuthorizerConfigError(f"{where}: must be a table")
        unknown = sorted(set(entry) - {"name", "class", "timeout", "fallback", "options"})
        if unknown:
            raise AuthorizerConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)}; allowed: name, class, timeout, "
                "fallback, options"
            )
        class_path = entry.get("class")
        if not isinstance(class_path, str):
            raise AuthorizerConfigError(
                f'{where}.class: write the plugin class as "package.module:ClassName"'
            )
        name = entry.get("name", class_path)
        if not isinstance(name, str) or name in names:
            raise AuthorizerConfigError(f"{where}.name: must be a unique string")
        names.add(name)
        timeout = entry.get("timeout", 1.0)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not 0 < timeout <= 60
        ):
            raise AuthorizerConfigError(f"{where}.timeout: seconds, greater than 0 and at most 60")
        fallback = entry.get("fallback", "deny")
        if fallback not in ("deny", "next"):
            raise AuthorizerConfigError(f'{where}.fallback: "deny" or "next", not {fallback!r}')
        options = entry.get("options", {})
        if not isinstance(options, Mapping):
            raise AuthorizerConfigError(f"{where}.options: must be a table")
        specs.append(AuthorizerSpec(name, class_path, float(timeout), fallback, dict(options)))
    return specs

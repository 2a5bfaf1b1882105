"""Judging one logged request again, or saying exactly why it cannot be judged (issue 30).

A gate may read more of a request than an audit record carries: the QoS and retain flag, the
principal's roles, the certificate CN, the interface, the token grants (written since the
record's ``qos``/``retain``/``roles``/``cn``/``iface``/``grants`` fields exist) and the site
ACL's message kind (``delete``/``query``/``reply`` depend on the payload and properties, which no
record holds; a record's ``msg`` field, when a writer adds one, is used). :func:`judge` never
guesses such an attribute. It decides the request under every value the attribute can take
that the policy distinguishes:

- ``qos`` 0, 1, 2 and ``retain`` off/on when the record lacks them;
- the publish's ACL message kind (``put``, ``delete`` when retained, ``query``, ``reply``) and
  the subscribe's (``declare_subscriber``, ``declare_queryable``), unless the record says;
- for a record written before those fields existed (it has no ``qos``): no role, no CN, no
  interface, and one value per role pattern, CN pattern and interface name the policy's
  assignments and ACL subjects name (each alone, and the roles all together).

When every variant gets the same outcome, the request is judged (its rule is the variants'
rule, or their distinct rules joined with ``|``); otherwise it *cannot be judged*, naming the
attributes missing and the rules the variants reached. A record with ``qos`` is of the current
format: an absent ``roles``/``cn``/``iface``/``grants`` there means none.

Token clients (``method = token``, or a ``grants`` digest) are judged by their token's grants,
which are in the token, not in any bundle: a candidate cannot change gate 4 for them. The
logged decision says what it answered (a denial by gate ``token``: denied; allowed, or denied by
a later gate: allowed), so only the bundle's gates are replayed; a record whose decision was
made before gate 4 (by an authorizer) leaves the grants' answer unknown: cannot judge.

Pure Python: the what-if job calls :func:`judge` per distinct request inside Spark.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .replay import Verdict, decide

MAX_VARIANTS = 4096  # a record needing more (a policy naming very many roles) cannot be judged

_PUBLISH_KINDS = ("put", "delete", "query", "reply")
_SUBSCRIBE_KINDS = ("declare_subscriber", "declare_queryable")
_BEFORE_GATE_4 = ("authorizer",)


@dataclass(frozen=True, slots=True)
class Judgement:
    """``verdict`` when the request can be judged; else ``missing`` (the record's attributes the
    policy distinguishes: ``qos``, ``retain``, ``message``, ``roles``, ``cn``, ``iface``,
    ``grants``) and ``rules`` (the rules the variants reached, ``(no rule)`` for none)."""

    verdict: Verdict | None
    missing: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Witnesses:
    """One value per pattern or name the policy keys on, for records that lack the field."""

    roles: tuple[str, ...] = ()
    cns: tuple[str, ...] = ()
    ifaces: tuple[str, ...] = ()


def _witness(pattern: str) -> str:
    """A string the shell-style ``pattern`` matches (``*`` -> nothing, ``?`` -> ``x``, a class
    -> its first member)."""
    out = re.sub(r"\[!?\]?[^\]]*\]", lambda m: _class_member(m.group(0)), pattern)
    return out.replace("*", "").replace("?", "x")


def _class_member(text: str) -> str:
    body = text[1:-1]
    if body.startswith("!"):
        return "\x01"  # nearly never in a class: the negated class matches it
    return body[:1] or "x"


def witnesses(sections: Mapping[str, Any]) -> Witnesses:
    """The role, CN and interface values a policy's sections tell apart (:class:`Witnesses`)."""
    roles: list[str] = []
    cns: list[str] = []
    ifaces: list[str] = []
    permissions = sections.get("permissions")
    if isinstance(permissions, Mapping):
        for entry in permissions.get("assign") or ():
            if isinstance(entry, Mapping):
                if isinstance(entry.get("role"), str):
                    roles.append(_witness(entry["role"]))
                if isinstance(entry.get("cert_cn"), str):
                    cns.append(_witness(entry["cert_cn"]))
    acl = sections.get("acl")
    if isinstance(acl, Mapping):
        for subject in acl.get("subjects") or ():
            if isinstance(subject, Mapping):
                cns.extend(str(v) for v in subject.get("cert_common_names") or ())
                ifaces.extend(str(v) for v in subject.get("interfaces") or ())
    return Witnesses(
        tuple(dict.fromkeys(roles)), tuple(dict.fromkeys(cns)), tuple(dict.fromkeys(ifaces))
    )


def merge_witnesses(many: Iterable[Witnesses]) -> Witnesses:
    items = list(many)
    return Witnesses(
        tuple(dict.fromkeys(r for w in items for r in w.roles)),
        tuple(dict.fromkeys(c for w in items for c in w.cns)),
        tuple(dict.fromkeys(i for w in items for i in w.ifaces)),
    )


def is_token_client(record: Mapping[str, Any]) -> bool:
    return record.get("method") == "token" or bool(record.get("grants"))


def _roles_of(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):  # a flattened column: roles joined with ","
        return tuple(sorted(r for r in value.split(",") if r))
    return tuple(sorted(str(r) for r in value))


def _dimensions(
    record: Mapping[str, Any], seen: Witnesses
) -> tuple[list[tuple[str, list[Any]]], dict[str, Any]]:
    """Per attribute the record lacks: its name and the values to try; and the known ones."""
    current = record.get("qos") is not None  # the record format that carries every attribute
    publish = record.get("action") == "publish"
    known: dict[str, Any] = {}
    vary: list[tuple[str, list[Any]]] = []
    if current:
        known["qos"] = int(record["qos"])
    else:
        vary.append(("qos", [0, 1, 2]))
    if publish:
        if record.get("retain") is not None:
            known["retain"] = bool(record["retain"])
        else:
            vary.append(("retain", [False, True]))
    kinds = _PUBLISH_KINDS if publish else _SUBSCRIBE_KINDS
    if record.get("msg") in kinds:
        known["message"] = record["msg"]
    else:
        vary.append(("message", list(kinds)))
    if current or record.get("roles") is not None:
        known["roles"] = _roles_of(record.get("roles"))
    else:
        options: list[tuple[str, ...]] = [()] + [(r,) for r in seen.roles]
        if len(seen.roles) > 1:
            options.append(tuple(sorted(seen.roles)))
        vary.append(("roles", options))
    for field, names in (("cn", seen.cns), ("iface", seen.ifaces)):
        if current or record.get(field) is not None:
            known[field] = record.get(field)
        else:
            vary.append((field, [None, *names]))
    return vary, known


def _request(record: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    request = dict(record)
    request.update(values)
    return request


def _rule_name(verdict: Verdict) -> str:
    return verdict.rule or "(no rule)"


def judge(policy: Any, record: Mapping[str, Any], seen: Witnesses = Witnesses()) -> Judgement:
    """``policy``'s verdict on a logged publish or subscribe, or why it cannot be judged
    (module docstring). ``seen``: :func:`witnesses` of the policies being compared."""
    token = is_token_client(record)
    if token and record.get("gate") in _BEFORE_GATE_4 and record.get("outcome") != "allow":
        return Judgement(None, ("grants",), ("(token grants)",))
    if token and record.get("gate") == "token" and record.get("outcome") != "allow":
        logged = Verdict(
            str(record.get("outcome")), "token", record.get("rule"), int(record.get("rc") or 0)
        )
        return Judgement(logged)
    vary, known = _dimensions(record, seen)
    total = 1
    for _, options in vary:
        total *= len(options)
    if total > MAX_VARIANTS:
        return Judgement(None, tuple(name for name, _ in vary), ("(too many variants)",))
    verdicts: dict[tuple[Any, ...], Verdict] = {}
    names = [name for name, _ in vary]
    for combo in itertools.product(*(options for _, options in vary)):
        values = dict(known)
        values.update(zip(names, combo, strict=True))
        if values.get("message") == "delete" and not values.get("retain"):
            continue  # a delete is a retained empty publish: no such variant
        verdicts[combo] = decide(policy, _request(record, values))
    outcomes = {v.outcome for v in verdicts.values()}
    rules = tuple(sorted({_rule_name(v) for v in verdicts.values()}))
    if len(outcomes) == 1:
        first = next(iter(verdicts.values()))
        if len(rules) == 1:
            return Judgement(first)
        gates = sorted({v.gate or "" for v in verdicts.values()})
        return Judgement(
            Verdict(first.outcome, "|".join(gates) or None, " | ".join(rules), first.rc)
        )
    # Which attributes matter: those whose value alone changes the outcome somewhere.
    missing = []
    for i, name in enumerate(names):
        seen_outcomes: dict[tuple[Any, ...], set[str]] = {}
        for combo, verdict in verdicts.items():
            seen_outcomes.setdefault(combo[:i] + combo[i + 1 :], set()).add(verdict.outcome)
        if any(len(found) > 1 for found in seen_outcomes.values()):
            missing.append(name)
    return Judgement(None, tuple(missing or names), rules)

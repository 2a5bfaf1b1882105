"""Quotas per tenant and per principal (docs/limits-quotas.md): no tenant and no principal can
take more than its share of what the broker shares.

Every broker-wide total of ``[limits]`` that clients fill is divided the same way: one tenant
may hold at most ``tenant_share`` of it, one principal (``broker/ownership.py``: a user, a
token subject, a certificate, a SMOKER key, the anonymous clients of one listener) at most
``principal_share`` of it, whatever the number of client ids, sessions or tenants it uses. So a
full tenant leaves ``1 - tenant_share`` of every total to the others, and a full principal
leaves ``tenant_share - principal_share`` of its tenant's share to the tenant's other principals.

:class:`Quotas` is one accounting object per broker. It is charged and released where the
broker-wide counters are (retained_budget.py for retained messages, the subscription and queue
call sites, the connection count), always as "this holder now holds n" (:meth:`Ledger.hold`):
each holder (a connection, a session, a retained topic) remembers what it was charged and to
whom, so a release takes back exactly that, and a later count can never drift from the holders.
A refusal names the limit, the share and the tenant or principal; it is answered with 0x97
Quota exceeded by the caller, counted and logged (``limits.tenant_share`` /
``limits.principal_share`` in ``$SYS/broker/limits/.../hits`` and the metrics).
"""

from __future__ import annotations

from collections.abc import Iterator, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..ownership import Principal

if TYPE_CHECKING:
    from ...config import LimitsConfig
    from ..message import Message
    from .limit_hits import LimitHits

# What a retained message restored from a state that did not record its publisher is charged
# to: its tenant's share still counts it; no client is ever this principal.
UNATTRIBUTED = Principal("unattributed", "(stored before quotas)")


@dataclass(frozen=True, slots=True)
class Kind:
    """One shared resource: its name, the ``[limits]`` key of its broker-wide total, and the
    unit its amounts are in (for Reason Strings)."""

    name: str
    total_key: str
    unit: str

    def total(self, limits: LimitsConfig) -> int:
        value = getattr(limits, self.total_key)
        assert isinstance(value, int)
        return value


CONNECTIONS = Kind("connections", "max_connections", "connections")
SUBSCRIPTIONS = Kind("subscriptions", "max_subscriptions_total", "subscriptions")
RETAINED_MESSAGES = Kind("retained messages", "max_retained_messages", "retained messages")
RETAINED_BYTES = Kind("retained bytes", "max_retained_bytes", "bytes of retained messages")
QUEUED_BYTES = Kind("queued bytes", "max_queued_bytes_total", "queued bytes")
KINDS = (CONNECTIONS, SUBSCRIPTIONS, RETAINED_MESSAGES, RETAINED_BYTES, QUEUED_BYTES)


class SessionHolding(Protocol):
    """A session as the quotas see it (``Session`` is one): its tenant, its owner (the
    principal that created it; ``None`` only while it is being restored) and its
    subscriptions."""

    @property
    def tenant(self) -> str: ...

    @property
    def owner(self) -> Principal | None: ...

    @property
    def subscriptions(self) -> Sized: ...


def share_of(total: int, share: float) -> int:
    """A share of a total, rounded down, never below 1 (a share must let one item in)."""
    return max(1, int(total * share))


class Ledger:
    """What the holders of one kind hold: per holder, per tenant, per principal and in total.

    Invariant (tests/broker/test_quotas.py): ``tenants``, ``principals`` and ``total`` are
    exactly the sums over ``holders``; keys that hold nothing are removed, so the maps stay as
    small as the set of holders.

    The sums per tenant and per principal are kept in one-element lists (cells) so that the
    hot case, a session's queue growing or draining by a message (issue 32), changes them
    without hashing a :class:`Principal` (a dataclass: its hash and ``==`` run in Python, twice
    per dict update): the last principal's cell is remembered by identity."""

    __slots__ = (
        "kind",
        "holders",
        "_tenants",
        "_principals",
        "total",
        "limits",
        "floor",
        "_last",
        "_last_cell",
    )

    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.holders: dict[object, tuple[str, Principal, int]] = {}
        self._tenants: dict[str, list[int]] = {}
        self._principals: dict[Principal, list[int]] = {}
        self.total = 0
        # while ``total`` and what is asked stay within ``floor`` no share can be exceeded
        # (refusal's fast path; a caller on a hot path may test it first); computed for
        # ``limits``, the running [limits] (a reload replaces the object)
        self.limits: LimitsConfig | None = None
        self.floor = -1
        self._last: Principal | None = None  # the principal whose cell is _last_cell
        self._last_cell: list[int] = [0]

    @property
    def tenants(self) -> dict[str, int]:
        """What each tenant holds (a copy)."""
        return {tenant: cell[0] for tenant, cell in self._tenants.items()}

    @property
    def principals(self) -> dict[Principal, int]:
        """What each principal holds (a copy)."""
        return {principal: cell[0] for principal, cell in self._principals.items()}

    def held_by(self, principal: Principal) -> int:
        cell = self._principals.get(principal)
        return 0 if cell is None else cell[0]

    def _principal_cell(self, principal: Principal) -> list[int]:
        if principal is self._last:
            return self._last_cell
        cell = self._principals.get(principal)
        if cell is None:
            cell = self._principals[principal] = [0]
        self._last = principal
        self._last_cell = cell
        return cell

    def hold(self, holder: object, tenant: str, principal: Principal, amount: int) -> None:
        """``holder`` now holds ``amount`` (0: nothing), charged to ``tenant`` and ``principal``;
        what it held before is released from whoever it was charged to."""
        old = self.holders.get(holder)
        if old is not None:
            if old[1] is principal and old[0] == tenant and amount > 0:
                # the hot case: the same tenant and principal, still holding something, so
                # only the difference moves and no key can fall to zero
                more = amount - old[2]
                if more:
                    self.holders[holder] = (tenant, principal, amount)
                    self.total += more
                    self._tenants[tenant][0] += more
                    self._principal_cell(principal)[0] += more
                return
            if old[0] == tenant and old[1] == principal and old[2] == amount:
                return
            self._add(old[0], old[1], -old[2])
        if amount > 0:
            self.holders[holder] = (tenant, principal, amount)
            self._add(tenant, principal, amount)
        elif old is not None:
            del self.holders[holder]

    def release(self, holder: object) -> None:
        """``holder`` holds nothing any more."""
        old = self.holders.pop(holder, None)
        if old is not None:
            self._add(old[0], old[1], -old[2])

    def _add(self, tenant: str, principal: Principal, amount: int) -> None:
        self.total += amount
        cell = self._tenants.get(tenant)
        if cell is None:
            cell = self._tenants[tenant] = [0]
        cell[0] += amount
        if not cell[0]:
            del self._tenants[tenant]
        cell = self._principal_cell(principal)
        cell[0] += amount
        if not cell[0]:
            del self._principals[principal]
            self._last = None  # its cell is no longer in the map
            self._last_cell = [0]

    def refusal(
        self,
        limits: LimitsConfig,
        tenant: str,
        principal: Principal,
        more: int,
        tenant_more: int | None = None,
    ) -> tuple[str, str] | None:
        """``(limit key, Reason String)`` when ``more`` would take ``principal`` (and
        ``tenant_more``, by default ``more``, would take ``tenant``) past its share of this
        kind's total (the running config: a reload may change them); ``None`` when it fits.
        Nothing is charged here."""
        if limits is not self.limits:
            self.limits = limits
            self.floor = _floor(limits, self.kind.total(limits))
        if self.total + (more if tenant_more is None or tenant_more < more else tenant_more) <= (
            self.floor
        ):
            return None  # nobody holds more than everybody: no share is near (the hot path)
        kind = self.kind
        share = limits.principal_share
        if more > 0 and share < 1.0:  # a share of 1.0 is off: nothing to look up or format
            total = kind.total(limits)
            held = self.held_by(principal)
            if held + more > share_of(total, share):
                key = "principal_share"
                return key, _reason(str(principal), held, kind, total, key, share)
        share = limits.tenant_share
        extra = more if tenant_more is None else tenant_more
        if extra > 0 and share < 1.0:
            total = kind.total(limits)
            cell = self._tenants.get(tenant)
            held = 0 if cell is None else cell[0]
            if held + extra > share_of(total, share):
                key = "tenant_share"
                return key, _reason(f"tenant {tenant!r}", held, kind, total, key, share)
        return None


def _floor(limits: LimitsConfig, total: int) -> int:
    """The smallest share in force of ``total``: while every holder together stays within it,
    no tenant or principal can exceed its share (a share of 1.0 is off)."""
    floor = total
    if limits.principal_share < 1.0:
        floor = min(floor, share_of(total, limits.principal_share))
    if limits.tenant_share < 1.0:
        floor = min(floor, share_of(total, limits.tenant_share))
    return floor


def _reason(who: str, held: int, kind: Kind, total: int, key: str, share: float) -> str:
    cap = share_of(total, share)
    return (
        f"{who} holds {held} {kind.unit}; its share is {cap} "
        f"(limits.{key} {share:g} of limits.{kind.total_key} {total})"
    )


class Quotas:
    """The ledgers of every kind, and who owns each retained message (one per broker)."""

    __slots__ = (
        "connections",
        "subscriptions",
        "retained_messages",
        "retained_bytes",
        "queued_bytes",
        "retained_owners",
        "retaining",
    )

    def __init__(self) -> None:
        self.connections = Ledger(CONNECTIONS)
        self.subscriptions = Ledger(SUBSCRIPTIONS)
        self.retained_messages = Ledger(RETAINED_MESSAGES)
        self.retained_bytes = Ledger(RETAINED_BYTES)
        self.queued_bytes = Ledger(QUEUED_BYTES)
        # (tenant, topic) -> the principal a retained message is charged to
        self.retained_owners: dict[tuple[str, str], Principal] = {}
        # the principal the next retained message stored is charged to (Broker.retain,
        # recovery); None: UNATTRIBUTED
        self.retaining: Principal | None = None

    def ledgers(self) -> Iterator[Ledger]:
        yield self.connections
        yield self.subscriptions
        yield self.retained_messages
        yield self.retained_bytes
        yield self.queued_bytes

    # -- retained messages: told by RetainedBudget of every message a store gains and loses --

    def retained_added(self, tenant: str, message: Message) -> None:
        owner = self.retaining or UNATTRIBUTED
        key = (tenant, message.topic)
        self.retained_owners[key] = owner
        self.retained_messages.hold(key, tenant, owner, 1)
        self.retained_bytes.hold(key, tenant, owner, message.size)

    def retained_removed(self, tenant: str, message: Message) -> None:
        key = (tenant, message.topic)
        self.retained_owners.pop(key, None)
        self.retained_messages.release(key)
        self.retained_bytes.release(key)

    def retained_owner(self, tenant: str, topic: str) -> Principal | None:
        return self.retained_owners.get((tenant, topic))

    def retained_refusal(
        self,
        limits: LimitsConfig,
        tenant: str,
        owner: Principal,
        message: Message,
        old: Message | None,
    ) -> tuple[str, str] | None:
        """Whether ``owner`` may store ``message`` in place of ``old`` (the topic's retained
        message, if any): a replacement is charged to the new publisher, what the old one held
        goes back to its owner."""
        same = old is not None and self.retained_owners.get((tenant, message.topic)) == owner
        old_size = 0 if old is None else old.size
        refused = self.retained_messages.refusal(
            limits, tenant, owner, 0 if same else 1, 0 if old is not None else 1
        )
        if refused is None:
            refused = self.retained_bytes.refusal(
                limits,
                tenant,
                owner,
                message.size - (old_size if same else 0),
                message.size - old_size,
            )
        return refused

    # -- connections, subscriptions, queues: held per connection / session ---------------------

    def hold_subscriptions(self, session: SessionHolding) -> None:
        """``session`` now holds its subscriptions (after any change to them)."""
        self.subscriptions.hold(
            session, session.tenant, session.owner or UNATTRIBUTED, len(session.subscriptions)
        )

    def session_ended(self, session: SessionHolding) -> None:
        self.subscriptions.release(session)
        self.queued_bytes.release(session)

    def refusal(
        self,
        ledger: Ledger,
        limits: LimitsConfig,
        tenant: str,
        principal: Principal,
        more: int,
        hits: LimitHits,
        client_id: str,
        what: str,
    ) -> str | None:
        """:meth:`Ledger.refusal`, counted and logged as a limit hit; the Reason String."""
        refused = ledger.refusal(limits, tenant, principal, more)
        if refused is None:
            return None
        key, reason = refused
        hits.limits_key(key, client_id, f"{what} refused: {reason}")
        return reason


def quota_report(limits: LimitsConfig) -> list[str]:
    """What ``edge-broker check`` prints: each shared total and its tenant and principal
    shares (docs/limits-quotas.md)."""
    lines = [
        f"quotas: one tenant at most limits.tenant_share {limits.tenant_share:g}, "
        f"one principal at most limits.principal_share {limits.principal_share:g} of each total"
    ]
    for kind in KINDS:
        total = kind.total(limits)
        tenant = share_of(total, limits.tenant_share) if limits.tenant_share < 1.0 else total
        principal = (
            share_of(total, limits.principal_share) if limits.principal_share < 1.0 else total
        )
        lines.append(
            f"  {kind.name:<18} total {total:>12,} (limits.{kind.total_key}); "
            f"per tenant {tenant:>12,}; per principal {principal:>12,}"
        )
    return lines

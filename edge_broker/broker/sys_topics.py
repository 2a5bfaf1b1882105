"""``$SYS/broker/...`` topics as Mosquitto publishes them, refreshed every ``[sys] interval``
seconds.

The default tenant keeps them in its own retained store (with the operator's ``authz/...``
counters). Every other tenant sees the same broker-wide values, so they are kept once, in a
store all tenant spaces share (:attr:`SysPublisher.shared`), and a tick routes a value only
when it changed, and only into spaces with a ``$SYS`` subscription: with 3,000 open tenants a
tick is 3,000 dict lookups, not 75,000 retained messages rewritten (and a PINGREQ does not
wait behind it). A tenant's new ``$SYS`` subscription gets the retained values from the shared
store (``TopicSpace.retained_matching``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from .. import __version__
from ..matching.names import DEFAULT_TENANT
from ..matching.reserved_topics import SYS_ROOT
from .message import Message
from .retained import MemoryRetainedStore

if TYPE_CHECKING:
    from ..authz.policy import Policy
    from ..claims.runtime import ClaimsRuntime
    from .bridging import Bridging
    from .delivery import Delivery
    from .limits.limit_hits import LimitHits
    from .limits.read_pool import ReadPool
    from .limits.retained_budget import RetainedBudget
    from .limits.write_budget import WriteBudget
    from .persist.persistence import Persistence
    from .session import SessionStore
    from .stats import BrokerStats
    from .topic_space import TopicSpace


class SysHost(Protocol):
    """What ``$SYS`` reports and where it publishes (``Broker`` is one)."""

    @property
    def separator(self) -> str: ...

    @property
    def stats(self) -> BrokerStats: ...

    @property
    def topic_spaces(self) -> Mapping[str, TopicSpace]: ...

    @property
    def sessions(self) -> SessionStore: ...

    @property
    def delivery(self) -> Delivery: ...

    @property
    def limit_hits(self) -> LimitHits: ...

    @property
    def retained_budget(self) -> RetainedBudget: ...

    @property
    def read_pool(self) -> ReadPool: ...

    @property
    def write_budget(self) -> WriteBudget: ...

    @property
    def persistence(self) -> Persistence | None: ...

    @property
    def policy(self) -> Policy: ...

    @property
    def generation(self) -> int: ...

    @property
    def bridges(self) -> Bridging | None: ...

    @property
    def claims(self) -> ClaimsRuntime | None: ...


def sys_values(broker: SysHost) -> dict[str, str]:
    """Topic (below ``$SYS/broker/``) → value text."""
    s = broker.stats
    subscriptions = sum(space.subscription_count() for space in broker.topic_spaces.values())
    retained = sum(len(space.retained) for space in broker.topic_spaces.values())
    sessions = len(broker.sessions)
    return {
        "version": f"edge-broker version {__version__}",
        "uptime": f"{s.uptime()} seconds",
        "clients/connected": str(s.clients_connected),
        "clients/active": str(s.clients_connected),
        "clients/maximum": str(s.clients_maximum),
        "clients/total": str(sessions),
        "clients/disconnected": str(max(0, sessions - s.clients_connected)),
        "messages/received": str(s.messages_received),
        "messages/sent": str(s.messages_sent),
        "publish/messages/received": str(s.messages_received),
        "publish/messages/sent": str(s.messages_sent),
        "publish/messages/dropped": str(s.dropped + s.dropped_oversize),
        "bytes/received": str(s.bytes_received),
        "bytes/sent": str(s.bytes_sent),
        "subscriptions/count": str(subscriptions),
        "retained messages/count": str(retained),
        **store_values(broker),
        # "limits.max_waiting" → one level "limits_max_waiting" whatever the topic separator
        **{
            f"limits/{key.replace('.', '_')}/hits": str(n)
            for key, n in broker.limit_hits.counts.items()
        },
        **limit_values(broker),
    }


def limit_values(broker: SysHost) -> dict[str, str]:
    """The totals the ``[limits]`` budgets compare against (issue 16); what each key refused is
    ``limits/<key>/hits`` (broker/limits/limit_hits.py)."""
    values: dict[str, str] = {}
    budget = broker.retained_budget
    values["limits/retained/count"] = str(budget.count)
    values["limits/retained/bytes"] = str(budget.bytes)
    values["limits/topic_spaces"] = str(len(broker.topic_spaces))
    values["limits/queued/bytes"] = str(broker.delivery.queued_total)
    values["limits/backpressure/holds"] = str(broker.stats.backpressure_holds)  # publishes held
    values["limits/backpressure/timeouts"] = str(broker.stats.backpressure_timeouts)
    values["limits/read_pool/bytes"] = str(broker.read_pool.used)  # reserved for packets read
    values["limits/write_buffers/bytes"] = str(broker.write_budget.total)  # unsent, all transports
    if broker.claims is not None:  # the live SMOKER claims against [claims] max_claims_*
        service = broker.claims.service  # (not stats(): no store health or quarantine walk)
        values["limits/claims/count"] = str(len(service))
        values["limits/claims/bytes"] = str(service.pool_used())
    return values


def store_values(broker: SysHost) -> dict[str, str]:
    """``store/healthy`` 1/0 and ``store/refused`` (issue 8), when persistence is on."""
    persistence = broker.persistence
    if persistence is None:
        return {}
    return {
        "store/healthy": "1" if persistence.healthy else "0",
        "store/refused": str(persistence.refused),
    }


def authz_values(broker: SysHost) -> dict[str, str]:
    """``authz/...`` counters (AUTHZ.md §4): per (gate, rule) hits and denials, and totals.

    Rule ids are operator-written: a ``/`` or ``.`` in one becomes ``_`` so that each counter
    stays one topic level; decisions no rule made count under ``-``."""
    s = broker.stats
    values = {
        "authz/denied/publish": str(s.publish_denied),
        "authz/denied/subscribe": str(s.subscribe_denied),
        "authz/subscriptions_removed": str(s.subscriptions_removed),
        "authz/deliveries_revoked": str(s.deliveries_revoked),
        "authz/wills_denied": str(s.wills_denied),
        "authz/sessions_refused": str(s.sessions_refused),
        "authz/connections_revoked": str(s.connections_revoked),
        "authz/generation": str(broker.generation),
    }
    if broker.bridges is not None:  # issue 19: bridge/<name>/...
        values.update(broker.bridges.values())
    pipeline = getattr(broker.policy, "pipeline", None)
    if pipeline is not None:
        for counter, kind in ((pipeline.hits, "hits"), (pipeline.denials, "denials")):
            for (gate, rule), count in counter.items():
                safe = rule.replace("/", "_").replace(".", "_").replace("+", "_").replace("#", "_")
                values[f"authz/{gate}/{safe}/{kind}"] = str(count)
    return values


class SysPublisher:
    """What the last tick published, per scope, so the next one sends only what changed."""

    __slots__ = ("shared", "_last_default", "_last_shared")

    def __init__(self, separator: str) -> None:
        # the tenants' $SYS values: one retained message per topic for every tenant space
        self.shared = MemoryRetainedStore(separator)
        self._last_default: dict[str, str] = {}
        self._last_shared: dict[str, str] = {}

    def publish(self, broker: SysHost) -> None:
        """Publish the values that changed since the last tick: retained in the default
        tenant's space (the authz counters only there: rule names and counts are the
        operator's, not a tenant's) and in the shared store, routed to the spaces that
        subscribe to ``$SYS``."""
        sep = broker.separator
        values = sys_values(broker)
        spaces = broker.topic_spaces
        default = spaces.get(DEFAULT_TENANT)
        if default is not None:
            changed = _changed({**values, **authz_values(broker)}, self._last_default, sep)
            for message in changed:
                default.retained.set(message)
                broker.delivery.route(default, message)
        changed = _changed(values, self._last_shared, sep)
        if not changed:
            return
        for message in changed:
            self.shared.set(message)
        for tenant, space in list(spaces.items()):
            if tenant != DEFAULT_TENANT and space.trie.has_first_level(SYS_ROOT):
                for message in changed:
                    broker.delivery.route(space, message)


def _changed(values: dict[str, str], last: dict[str, str], sep: str) -> list[Message]:
    """Retained messages for the values that differ from ``last`` (which is brought up to
    date); values that are gone are forgotten (a bridge removed by a reload)."""
    messages = []
    for name, value in values.items():
        if last.get(name) != value:
            last[name] = value
            topic = SYS_ROOT + sep + "broker" + sep + name.replace("/", sep)
            messages.append(Message(topic, value.encode(), 0, True))
    for name in [name for name in last if name not in values]:
        del last[name]
    return messages

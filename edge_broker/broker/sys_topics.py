"""``$SYS/broker/...`` topics as Mosquitto publishes them, retained in every topic space and
refreshed every ``[sys] interval`` seconds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from .. import __version__
from ..matching.names import DEFAULT_TENANT
from ..matching.reserved_topics import SYS_ROOT
from .message import Message

if TYPE_CHECKING:
    from ..authz.policy import Policy
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


def publish_sys(broker: SysHost) -> None:
    """Publish every value as a retained message in every topic space (the authz counters only
    in the default tenant ``~``: rule names and counts are the operator's, not a tenant's)."""
    sep = broker.separator
    values = sys_values(broker)
    for tenant, space in list(broker.topic_spaces.items()):
        items = (
            values.items()
            if tenant != DEFAULT_TENANT
            else {**values, **authz_values(broker)}.items()
        )
        for name, value in items:
            topic = SYS_ROOT + sep + "broker" + sep + name.replace("/", sep)
            message = Message(topic, value.encode(), 0, True)
            space.retained.set(message)
            broker.delivery.route(space, message)

"""Every bridge of one broker (``Broker.bridges``): the outbound hook, the inbound publish, the
bridge principal's authorization, and the values for ``$SYS`` and the metrics endpoint.

Authorization (AUTHZ.md §2, docs/bridge.md): a bridge is a principal of its own, an
:class:`~edge_broker.identity.Identity` with ``method = "bridge"``, ``client_id`` and
``username`` = the bridge's name, ``interface`` = ``bridge/<name>`` (a name no network interface
can have) and ``tenant`` = the mapping's tenant. Default permissions select it with
``method = "bridge"`` (and ``username = "<name>"``), site-ACL subjects with
``interfaces = ["bridge/<name>"]``. Outbound, a message is queued only if the principal may
receive it: the same delivery gates as a subscriber with an exact subscription (default
permissions on the concrete topic, ACL egress, claims). Inbound, a message is published only if
the principal may publish it (every publish gate, authorizers included). Denials are counted
and audited by the same pipeline as any client's.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ..audit import events as audit_events
from ..authz.decision import Decision, GateName
from ..broker.awaiting import all_of
from ..broker.message import Message, make_message
from ..broker.ownership import Principal
from ..config.bridges import BridgeConfig, TopicMapping
from ..identity import Identity
from ..matching.names import shown
from ..mqtt.packets import NO_PROPERTIES, Properties, Publish
from ..store import StoreError
from ..store.damage import damage_hint, open_or_set_aside
from ..store.errors import StoreOpenError
from .link import BridgeLink
from .queue import Entry, OutboundQueue
from .store import BridgeStore, MemoryStore, queue_path, read_queue
from .topics import (
    ORIGIN_KEY_BYTES,
    ORIGIN_PROPERTY,
    TopicMap,
    origin_marker,
    origin_name,
    origin_value,
    strip_forged_origins,
)

if TYPE_CHECKING:
    from ..broker.server import Broker

log = logging.getLogger("edge_broker.bridge")

ROUTES = 512  # remembered (tenant, local topic) → mapping per bridge, forgotten at once beyond


class Bridge:
    """One configured bridge: its queue, store, link and principal."""

    def __init__(
        self,
        config: BridgeConfig,
        store: Any,
        separator: str,
        inbound: Any,
        max_packet_size: int = 1 << 20,
        origin_key: bytes | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self.origin = origin_marker(config.name)
        # this bridge's entry in the MQTT 5 origin path (topics.py): only this process makes it
        self.origin_value = origin_value(
            config.client_id, origin_key or secrets.token_bytes(ORIGIN_KEY_BYTES)
        )
        self.topics = TopicMap(config.topics, separator)
        self.queue = OutboundQueue(
            config.queue_max_messages, config.queue_max_bytes, config.overflow
        )
        self.store = store
        entries, self.next_seq = store.recovered()
        for entry in entries:
            self.queue.restore(entry)
        self.link = BridgeLink(
            config, self.queue, store, inbound, self.topics, max_packet_size, self.origin_value
        )
        self._identities: dict[str, Identity] = {}
        self._overflow_logged = 0.0
        # per tenant: local topic → (mapping, remote topic), or None when no mapping forwards it
        self._routes: dict[str, dict[str, tuple[TopicMapping, str] | None]] = {}

    def route(self, tenant: str, topic: str) -> tuple[TopicMapping, str] | None:
        """The first outbound mapping that forwards ``topic`` of ``tenant`` and the remote topic
        it becomes, or None; remembered per topic (a bridge's mappings never change while it
        runs: reloads keep them) for at most ``ROUTES`` topics."""
        routes = self._routes.get(tenant)
        if routes is None:
            routes = self._routes[tenant] = {}
        elif topic in routes:
            return routes[topic]
        mapping = self.topics.outbound_for(tenant, topic)
        found = None if mapping is None else (mapping, TopicMap.to_remote(mapping, topic))
        if len(routes) >= ROUTES:
            routes.clear()
        routes[topic] = found
        return found

    @property
    def stats(self) -> Any:
        return self.link.stats

    def identity(self, tenant: str) -> Identity:
        found = self._identities.get(tenant)
        if found is None:
            found = self._identities[tenant] = Identity(
                client_id=self.name,
                method="bridge",
                tenant=tenant,
                username=self.name,
                interface=self.config.principal,
            )
        return found

    def enqueue(self, mapping: TopicMapping, message: Message, remote: str | None = None) -> None:
        """Queue ``message`` for the remote under ``mapping`` (``remote``: its remote topic,
        when the caller has it)."""
        props = message.properties
        extra = None
        if props is not NO_PROPERTIES and (
            props.user_properties
            or props.content_type is not None
            or props.payload_format_indicator is not None
            or props.response_topic is not None
            or props.correlation_data is not None
        ):
            extra = [
                [list(p) for p in props.user_properties],
                props.content_type,
                props.payload_format_indicator,
                props.response_topic,
                props.correlation_data,
            ]
        qos = mapping.qos if mapping.qos < message.qos else message.qos
        entry = Entry(
            self.next_seq,
            TopicMap.to_remote(mapping, message.topic) if remote is None else remote,
            message.payload,
            qos,
            message.retain,
            extra,
        )
        self.next_seq += 1
        dropped = self.queue.push(entry)
        stats = self.link.stats
        if dropped and dropped[-1] is entry:
            dropped.pop()
            self._dropped(1, "the new message (queue full, drop-newest or all in flight)")
        else:
            stats.queued += 1
            self.store.queued(entry)
        for old in dropped:
            self.store.done(old)
        if dropped:
            self._dropped(len(dropped), "the oldest queued messages (queue full, drop-oldest)")
        self.link.wake()

    def _dropped(self, count: int, what: str) -> None:
        self.link.stats.dropped += count
        now = time.monotonic()
        if now - self._overflow_logged >= 10.0:  # one line per 10 s, the counter has the rest
            self._overflow_logged = now
            log.warning(
                f"bridge {self.name}: outbound queue full ({len(self.queue)} messages, "
                f"{self.queue.bytes} bytes): dropped {what}; {self.link.stats.dropped} dropped so "
                "far",
                extra={
                    "event": "bridge_queue_overflow",
                    "bridge": self.name,
                    "dropped": self.link.stats.dropped,
                },
            )


class Bridges:
    """Every bridge of the broker (module docstring)."""

    def __init__(self, broker: Broker, bridges: list[Bridge]) -> None:
        self.broker = broker
        self.bridges = bridges
        self.own_ids: frozenset[str] = frozenset()  # the bridges' client ids
        self.own_origins: frozenset[str] = frozenset()  # their origin values (with the tag)
        self.origin_key = secrets.token_bytes(ORIGIN_KEY_BYTES)  # per process, never stored

    @classmethod
    def open(cls, broker: Broker) -> Bridges:
        config = broker.config
        bridges: list[Bridge] = []
        instance = cls(broker, bridges)
        for bc in config.bridges:
            store: Any
            if config.persistence.enabled:
                from ..broker.persist.persistence import FSYNC
                from ..store.state_dir import state_dir

                directory = state_dir(config)
                settings = config.persistence
                fsync: str | float = FSYNC.get(settings.durability, settings.interval_ms / 1000.0)
                path = queue_path(directory, bc.name)
                try:
                    directory.mkdir(parents=True, exist_ok=True)
                    store = open_or_set_aside(
                        path,
                        partial(BridgeStore, path, fsync),
                        settings.on_damage,
                        log,
                        read_queue,
                        f"messages queued for bridge {bc.name}",
                    )
                except (StoreError, OSError) as exc:
                    raise StoreOpenError(
                        f"bridge {bc.name}: cannot open its queue log {str(path)!r}: {exc}; check "
                        "that no other broker uses the state directory and that it is writable, or "
                        "set [persistence] state_dir" + damage_hint(path, read_queue)
                    ) from exc
                if broker.persistence is not None:  # written before any socket write
                    broker.persistence.write_ahead_hooks.append(store.flush)
                    store.write_ahead = True
            else:
                store = MemoryStore()
            bridge = Bridge(
                bc,
                store,
                broker.separator,
                instance._inbound,
                config.limits.max_packet_size,
                instance.origin_key,
            )
            if len(bridge.queue):
                log.info(
                    f"bridge {bc.name}: {len(bridge.queue)} queued messages recovered",
                    extra={
                        "event": "bridge_recovered",
                        "bridge": bc.name,
                        "queued": len(bridge.queue),
                    },
                )
            bridges.append(bridge)
        instance.own_ids = frozenset(b.config.client_id for b in bridges)
        instance.own_origins = frozenset(b.origin_value for b in bridges)
        return instance

    def start(self) -> None:
        for bridge in self.bridges:
            bridge.link.start()

    async def close(self) -> None:
        for bridge in self.bridges:
            await bridge.link.close()
            try:
                await bridge.store.aclose()
            except Exception as exc:
                log.error("bridge %s: closing the queue log failed: %s", bridge.name, exc)

    # -- outbound -------------------------------------------------------------------------

    def offer(self, tenant: str, message: Message) -> None:
        """Delivery.route calls this for every routed message (before local subscribers)."""
        topic = message.topic
        if topic[:1] == "$":
            return
        policy = self.broker.policy
        if not policy.routable(message):
            return
        for bridge in self.bridges:
            if message.origin == bridge.origin:
                continue  # it came in over this bridge: never back out (no loops)
            route = bridge.route(tenant, topic)
            if route is None:
                continue
            mapping = route[0]
            props = message.properties
            if props.user_properties and self._left_before(props.user_properties):
                bridge.stats.echoes += (
                    1  # left over one of our bridges before, came back another way
                )
                continue
            if message.expires_at is not None and message.expired(self.broker.clock()):
                continue
            pipeline = policy.pipeline
            if (
                pipeline is not None
                and not pipeline.check_deliver(
                    bridge.identity(tenant), message, mapping.qos, None, True
                ).allowed
            ):
                bridge.stats.denied_out += 1
                continue
            bridge.enqueue(mapping, message, route[1])

    def _left_before(self, user_properties: tuple[tuple[str, str], ...]) -> bool:
        """The message's origin path (MQTT 5 user properties ``ORIGIN_PROPERTY``, one per
        bridge it crossed) holds the value of one of this broker's bridges, tag included: a
        client that only knows a bridge's client id cannot make a message look bridged."""
        own = self.own_origins
        return any(k == ORIGIN_PROPERTY and v in own for k, v in user_properties)

    def client_properties(self, props: Properties) -> Properties:
        """A client's PUBLISH properties with every forged ``edge-bridge-origin`` entry naming
        one of our bridges removed (counted per bridge as ``forged_origin``); the same object
        when there is none (broker/bridging.py ``client_properties``, at PUBLISH ingress)."""
        kept = strip_forged_origins(props.user_properties, self.own_ids, self.own_origins)
        if kept is None:
            return props
        forged = {
            origin_name(v)
            for k, v in props.user_properties
            if k == ORIGIN_PROPERTY and (k, v) not in kept
        }
        for bridge in self.bridges:
            if bridge.config.client_id in forged:
                bridge.stats.forged_origin += 1
        log.warning(
            "a client PUBLISH named bridge client id(s) %s in %s without this broker's tag: "
            "the entries were removed, the message is bridged as any other",
            ", ".join(sorted(forged)),
            ORIGIN_PROPERTY,
            extra={"event": "bridge_forged_origin"},
        )
        return replace(props, user_properties=kept)

    def take_pending(self) -> Awaitable[None] | None:
        """handle_publish: the bridge queues' write of the message just published, which the
        publisher's PUBACK waits for too (durability ``sync``: on disk); None if none is owed."""
        bridges = self.bridges
        if len(bridges) == 1:  # the common case: that store's own future, or None
            return bridges[0].store.take_pending()  # type: ignore[no-any-return]
        owed: list[Awaitable[None]] = [
            f for f in (b.store.take_pending() for b in self.bridges) if f is not None
        ]
        if not owed:
            return None
        return owed[0] if len(owed) == 1 else all_of(*owed)

    # -- inbound --------------------------------------------------------------------------

    def _bridge_of(self, link: BridgeLink) -> Bridge:
        for bridge in self.bridges:
            if bridge.link is link:
                return bridge
        raise LookupError(link.config.name)

    def _inbound(self, link: BridgeLink, packet: Publish) -> Awaitable[bool] | bool:
        """A PUBLISH from the remote: map, authorize, route locally. True: acknowledge it."""
        bridge = self._bridge_of(link)
        stats = link.stats
        props = packet.properties
        if props.user_properties and self._left_before(props.user_properties):
            stats.echoes += 1  # went out over one of our bridges and came back
            return True
        found = bridge.topics.inbound_for(packet.topic)
        if found is None:
            return True  # the remote sent what no mapping asked for: acknowledged, not routed
        mapping, local = found
        # built once: judged, retained and routed as this one value (issue 21)
        message = make_message(
            local,
            packet.payload,
            packet.qos,
            packet.retain,
            _inbound_properties(props),
            bridge.origin,
            self.broker.clock,
        )
        identity = bridge.identity(mapping.tenant)
        verdict = self.broker.policy.check_publish(identity, message)
        if isinstance(verdict, Decision):
            return self._decided(bridge, mapping, message, identity, verdict)
        return self._await(bridge, mapping, message, identity, verdict)

    async def _await(
        self,
        bridge: Bridge,
        mapping: TopicMapping,
        packet: Message,
        identity: Identity,
        verdict: Any,
    ) -> bool:
        decision = await verdict
        result = self._decided(bridge, mapping, packet, identity, decision)
        return result if isinstance(result, bool) else await result

    def _decided(
        self,
        bridge: Bridge,
        mapping: TopicMapping,
        packet: Message,
        identity: Identity,
        decision: Decision,
    ) -> Awaitable[bool] | bool:
        broker = self.broker
        if decision.denied:
            bridge.stats.denied_in += 1
            if decision.gate in (GateName.SYNTAX, GateName.RESERVED):
                # gates 1-2 are decided before the pipeline, which audits the others; logged
                # and audited as they do, aggregated (a bridge must not flood the audit log)
                audit_events.decision(
                    broker.decisions,
                    "publish",
                    identity,
                    packet.topic,
                    decision,
                    None,
                    packet.qos,
                    packet.retain,
                )
            return True  # acknowledged to the remote (MQTT 3.x style), never routed
        message = packet
        space = broker.topic_space(mapping.tenant)
        if packet.retain:  # within the retained limits, as any client's (delivered either way)
            broker.retain(
                space,
                message,
                identity.client_id,
                f"bridged PUBLISH to {shown(packet.topic)} from bridge {bridge.name}",
                Principal("bridge", bridge.name),  # its own share, never a client's
            )
        broker.delivery.route(space, message)
        persistence = broker.persistence
        if not packet.qos or persistence is None:
            return True
        # acknowledged to the remote once what it changed is stored, as a device's PUBACK is
        # (issue 17 write-ahead; durability "sync": after the fsync)
        stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        waiting = persistence.acknowledge(
            bridge.link, partial(_acknowledged, stored), broker.config.limits.receive_maximum
        )
        if stored.done() and waiting is None:
            return stored.result()
        return _wait_stored(stored, waiting)

    # -- observability --------------------------------------------------------------------

    def values(self) -> dict[str, str]:
        """``$SYS/broker/bridge/<name>/…`` (below ``$SYS/broker/``)."""
        out: dict[str, str] = {}
        for bridge in self.bridges:
            s = bridge.stats
            base = f"bridge/{bridge.name}/"
            out.update(
                {
                    base + "connected": "1" if s.connected else "0",
                    base + "state": s.state,
                    base + "queue/messages": str(len(bridge.queue)),
                    base + "queue/bytes": str(bridge.queue.bytes),
                    base + "queue/inflight": str(len(bridge.queue.inflight)),
                    base + "messages/queued": str(s.queued),
                    base + "messages/sent": str(s.sent),
                    base + "messages/acknowledged": str(s.acknowledged),
                    base + "messages/dropped": str(s.dropped),
                    base + "messages/rejected": str(s.rejected),
                    base + "messages/received": str(s.received),
                    base + "denied/out": str(s.denied_out),
                    base + "denied/in": str(s.denied_in),
                    base + "echoes": str(s.echoes),
                    base + "forged_origin": str(s.forged_origin),
                    base + "last_error": s.last_error or (bridge.store.last_error or ""),
                }
            )
        return out


def _inbound_properties(props: Any) -> Any:
    """What a PUBLISH from the remote keeps locally: per-hop properties (alias, subscription
    ids) are dropped (MQTT 5 §3.3.2.3.4, §3.3.4)."""
    if props is NO_PROPERTIES or (props.topic_alias is None and not props.subscription_identifiers):
        return props
    return replace(props, topic_alias=None, subscription_identifiers=())


def _acknowledged(stored: asyncio.Future[bool], error: StoreError | None) -> None:
    if not stored.done():
        stored.set_result(error is None)  # not stored: not acknowledged, the remote resends


async def _wait_stored(stored: asyncio.Future[bool], waiting: Awaitable[None] | None) -> bool:
    if waiting is not None:
        await waiting
    return await stored

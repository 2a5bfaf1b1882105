"""The ``Broker``: one object owning config, listeners, sessions, topic spaces, retained
messages, statistics and the policy (CONVENTIONS.md: no module-level mutable state).

Also the connection lifecycle the handlers rely on: admission (connection limit and connect
rate), session takeover / resume / clean start (MQTT 5 §3.1.2.4, §3.1.4), will messages with
delay (§3.1.2.5, §3.1.3.2.2), session expiry (§3.1.2.11.2), keep alive ×1.5 (§3.1.2.10),
``$SYS`` and graceful shutdown (DISCONNECT 0x8B).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..audit import events as audit_events
from ..audit.aggregate import DecisionWindow
from ..audit.settings import open_audit_log
from ..auth.chain import AuthChain
from ..auth.login_fairness import login_source
from ..auth.method_api import ConnectionInfo
from ..authz.decision import Decision
from ..authz.policy import Policy, build_policy
from ..authz.session_verdicts import Verdict
from ..config import Config, ConfigError, ListenerConfig, claims_enabled, load_config
from ..engine.connection import Timeout
from ..engine.deadlines import Deadlines
from ..engine.events import TimedOut
from ..engine.negotiation import Offer, departure, resumes
from ..identity import DEFAULT_TENANT, Identity
from ..mqtt.packets import Connect, Will
from ..mqtt.reason_codes import ReasonCode
from .bridging import Bridging
from .connection import Connection
from .delivery import Delivery
from .limits.fd_budget import (
    EVICT_AFTER,
    accept_error_handler,
    connection_cap,
    log_cap_change,
    oldest_unauthenticated,
    raise_soft_limit,
)
from .limits.limit_hits import LimitHits
from .limits.pre_auth import SourceRates, connect_timed_out, source_rate_refusal
from .limits.quotas import UNATTRIBUTED, Quotas
from .limits.read_pool import ReadPool
from .limits.retained_budget import RetainedBudget
from .limits.source_shares import SourceShares
from .limits.write_budget import WriteBudget
from .listeners import connection_info, start_listener
from .message import Message, will_message
from .network_interfaces import InterfaceMap
from .ownership import ClientIdBindings, Principal
from .rejudge import (
    apply_verdicts,
    judge_subscriptions,
    judge_will,
    purge_undeliverable,
    recheck_subscriptions,
    rejudge_session,
    will_refused,
)
from .reload import ReloadResult, apply_config
from .retained import MemoryRetainedStore, RetainedStore
from .scheduler import Scheduler
from .session import MemorySessionStore, Session, SessionStore, SubscriptionEntry, session_key
from .session_control import end_sessions_of_lost_owners
from .stats import BrokerStats
from .sys_topics import SysPublisher
from .token_expiry import token_expired
from .topic_space import TopicSpace, space_cache_bytes

if TYPE_CHECKING:
    from ..audit.log import AuditLog
    from ..claims.runtime import ClaimsRuntime
    from .control_channel import ControlChannel
    from .persist.persistence import Persistence

log = logging.getLogger("edge_broker.broker")

# Periods of the duties that are polled (broker/scheduler.py): each runs only while it has
# something to do; keep alive, connect timeout, wills and expiries wake the broker at their
# own deadlines instead.
TICK = 0.5  # audit flush, store probe, write-buffer resample: each while it has work
SPACE_SWEEP_INTERVAL = 5.0  # seconds between two looks for empty tenant topic spaces


class Broker:
    def __init__(
        self,
        config: Config,
        sessions: SessionStore | None = None,
        retained_factory: Callable[[str], RetainedStore] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``sessions`` and ``retained_factory(tenant)`` are the persistence seams (issue 8);
        both default to memory. ``clock`` is the one clock of the session lifecycle (keep
        alive, connect timeout, will delay, session expiry, connect rate): a test gives a
        fake one and calls :meth:`tick` instead of sleeping (tests/engine_harness.py)."""
        self.config = config
        self.clock = clock
        self._retained_factory = retained_factory
        self.separator = config.topics.separator
        self.stats = BrokerStats(clock)
        self.limit_hits = LimitHits(clock=clock)  # issue 16: counter + rate-limited log per bound
        self._connection_cap = connection_cap(config.limits.max_connections)
        # what each tenant and principal holds of every shared total (issue 31 item 2)
        self.quotas = Quotas()
        self.retained_budget = RetainedBudget(self.quotas)  # retained messages of every space
        self.read_pool = ReadPool(self)  # packets being read beyond read_buffer_size
        self.write_budget = WriteBudget(self)  # bytes in transport write buffers
        self.claims: ClaimsRuntime | None = None  # SMOKER claims ([claims]), opened by start()
        self.persistence: Persistence | None = None  # [persistence] enabled, opened by start()
        self.bridges: Bridging | None = None  # [[bridges]] (issue 19), opened by start()
        self.control: ControlChannel | None = None  # <state_dir>/control.sock, by start()
        # registered by the run path that builds the bridges too (ops/service.py): the broker
        # does not import the bridges, which are built on it (issue 21 item 5)
        self.open_bridges: Callable[[Broker], Bridging] | None = None
        self.audit: AuditLog | None = open_audit_log(config.audit, config.sync.gateway_id)
        # denials (and allowed decisions) aggregated into the audit log and the INFO lines
        self.decisions = DecisionWindow(
            self.audit,
            window=config.audit.aggregate_window,
            max_keys=config.audit.aggregate_max_keys,
            clock=clock,
        )
        self.policy = self.build_policy(config)
        self.generation = 0  # bumped by every policy change (reload, bundle)
        self.sessions: SessionStore = sessions if sessions is not None else MemorySessionStore()
        self.topic_spaces: dict[str, TopicSpace] = {}
        self.sys_publisher = SysPublisher(self.separator)
        self.delivery = Delivery(self)
        self.connections: set[Connection] = set()
        self.servers: list[asyncio.Server] = []
        self.bound: list[tuple[str, str, str, int]] = []  # (name, transport, host, port)
        self.tls_contexts: dict[
            str, Any
        ] = {}  # listener name → its live ssl.SSLContext (SIGHUP reloads it)
        self._chains: dict[str, AuthChain] = {}
        self._bindings = ClientIdBindings(config.passwords.entries)
        self._bindings_of: object = config.passwords.entries
        self._interfaces = InterfaceMap()
        self._dirty: list[Connection] = []
        self._flush_pending = False
        # offline sessions' delayed wills and expiries, on self.clock (engine/deadlines.py)
        self._wills: Deadlines[Session] = Deadlines()
        self._will_tasks: set[asyncio.Task[None]] = set()  # wills awaiting an authorizer
        self._expiring: Deadlines[Session] = Deadlines()
        # when each connection's engine may next time out (keep alive, connect timeout, token):
        # the tick looks only at those due instead of walking every connection (watch())
        self._timeouts: Deadlines[Connection] = Deadlines()
        self._connect_timeout = config.broker.connect_timeout
        self._rate_tokens = float(config.limits.connect_burst)
        self._rate_at = clock()
        self.source_rates = SourceRates()  # per-source connect rate (issue 31 item 4)
        self.source_shares = SourceShares()  # per-source open sockets (issue 34 item 4)
        # what authentication methods keep across reloads (auth/methods.py KEEPS_STATE)
        self.auth_kept: dict[str, object] = {}
        self._stop = asyncio.Event()
        self._all_closed: asyncio.Event | None = None  # set by shutdown() while it waits
        # the one source of "when next": the heaps above and the periodic duties (tick())
        self.timers = Scheduler(clock, self._wake)
        for heap in (self._timeouts, self._wills, self._expiring):
            self.timers.add_source(heap.next_at)
        self.timers.add_source(self.decisions.next_due)
        self.decisions.on_due = self.timers.arm
        if self.audit is not None:
            self.audit.on_buffered = self._audit_buffered
            self._audit_buffered()  # whatever opening the broker recorded
        self.topic_space(DEFAULT_TENANT)
        self._plan_duties(clock())
        if self.config.sys.interval:
            self.timers.at("sys", clock())  # $SYS is there from the start, then every interval

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self.claims is None and claims_enabled(self.config):
            # only brokers with claims pay for these imports
            from ..claims.runtime import ClaimsRuntime

            self.claims = ClaimsRuntime.open(self.config)
            self.claims.start()
            self.policy = self.build_policy(self.config)
        if self.persistence is None and self.config.persistence.enabled:
            # after the claims: restored wills and sessions are judged with the whole policy
            self._open_persistence()
            if len(self.sessions):
                end_sessions_of_lost_owners(self, "restart")
                checked, removed = await recheck_subscriptions(self, "restart")
                log.info(
                    f"restored sessions judged under the current policy: {checked} "
                    f"subscription(s) checked, {removed} removed",
                    extra={"event": "restored_judged", "subscriptions_removed": removed},
                )
        if self.persistence is not None or self.claims is not None:
            # What the stores loaded lives as long as the broker: move it out of the cyclic GC's
            # generations so later collections do not walk it (a full collection over a 100k-record
            # index stalls the loop for seconds; store/gcpause.py).
            gc.freeze()
        raise_soft_limit(self.config.limits.max_connections)
        self._connection_cap = connection_cap(self.config.limits.max_connections)
        asyncio.get_running_loop().set_exception_handler(accept_error_handler(self.limit_hits))
        if self.bridges is None and self.config.bridges:  # before the listeners: nothing unbridged
            if self.open_bridges is None:
                raise RuntimeError(
                    "[[bridges]] is configured but nothing here opens bridges: start the broker "
                    "with ops.service.run_service (as `edge-broker run` does), which registers "
                    "them, or remove [[bridges]]"
                )
            self.bridges = self.open_bridges(self)
            self.bridges.start()
        if self.control is None:  # edge-broker session list|drop: ready when clients are
            from .control_channel import ControlChannel

            self.control = await ControlChannel.start(self)
        for listener in self.config.listeners:
            server = await start_listener(
                listener, self._factory(listener), self.tls_contexts, self._tls_refused
            )
            self.servers.append(server)
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                self.bound.append((listener.name, listener.transport, host, port))
                log.info(
                    f"listener {listener.name} ({listener.transport}) listening on {host}:{port}",
                    extra={
                        "event": "listening",
                        "listener": listener.name,
                        "transport": listener.transport,
                        "host": host,
                        "port": port,
                    },
                )
        self.timers.start(asyncio.get_running_loop())

    def _open_persistence(self) -> None:
        """Open ``<state_dir>/broker.log`` and load it before serving (issue 8)."""
        # imported here: a broker without [persistence] does not load the store's layer
        # (about 30 modules; issue 32)
        from .persist.persistence import Persistence
        from .persist.recovery import recover
        from .persist.retained import PersistentRetainedStore

        persistence = self.persistence = Persistence.open(self.config, self.clock)
        separator = self.separator

        def retained_store(tenant: str) -> RetainedStore:
            return PersistentRetainedStore(persistence, tenant, separator)

        self._retained_factory = retained_store
        for tenant, space in self.topic_spaces.items():
            if len(space.retained) == 0:
                space.retained = retained_store(tenant)
                self._count_retained(space)
        recover(persistence, self)

    def restore_session(self, session: Session) -> None:
        """Recovery: an offline session from the store, with its expiry and delayed will."""
        self.sessions.put(session)
        self.quotas.hold_subscriptions(session)  # charged again to its tenant and owner
        self.delivery.hold_queue(session)
        if session.will is not None and session.will_at is not None:
            self._wills.set(session, session.will_at)
            self.timers.arm(session.will_at)
        if session.expires_at is not None:
            self._expiring.set(session, session.expires_at)
            self.timers.arm(session.expires_at)

    def _factory(self, listener: ListenerConfig) -> Any:
        if listener.transport == "websocket":
            # Imported only when needed: the websockets package costs memory on small boards.
            from .websocket import WebSocketProtocol

            return lambda: WebSocketProtocol(Connection(self, listener))
        return lambda: Connection(self, listener)

    def _tls_refused(
        self, listener: ListenerConfig, transport: asyncio.BaseTransport, exc: BaseException
    ) -> None:
        """A TLS handshake failed (listeners.TlsAcceptor): logged and audited, aggregated."""
        info = connection_info(listener, transport, self._interfaces)
        audit_events.tls_refused(self.decisions, info, exc)
        self.stats.connections_refused += 1

    def request_stop(self) -> None:
        self._stop.set()

    async def reload(self, path: str) -> ReloadResult:
        """SIGHUP / ``edge-broker reload``: validate ``path`` and apply it (broker/reload.py);
        a file with errors keeps the running policy (never fails open)."""
        try:
            # parsing and compiling a large policy takes seconds on a Pi: not on the event loop
            new = await asyncio.to_thread(load_config, path)
        except ConfigError as exc:
            for problem in exc.problems:
                log.error("reload refused: %s", problem, extra={"event": "reload_refused"})
            message = (
                f"reload of {path} refused ({len(exc.problems)} error(s)); "
                "the running policy is kept"
            )
            log.error(message, extra={"event": "reload_refused"})
            if self.audit is not None:
                self.audit.event("policy_rejected", detail=f"{message}: {exc.problems[0]}")
            return ReloadResult(False, message)
        return await apply_config(self, new, f"reload of {path}")

    async def apply_config(self, new: Config, source: str) -> ReloadResult:
        """Compile ``new``'s policy, swap it in, judge live sessions again (broker/reload.py):
        what policy sync calls with a merged bundle (``sync.host.PolicyHost``)."""
        return await apply_config(self, new, source)

    def end_sessions_of_lost_owners(self, why: str) -> int:
        """Sessions whose owner lost the right to them end (broker/session_control.py)."""
        return end_sessions_of_lost_owners(self, why)

    def reset_authentication(self) -> None:
        """Rebuild every listener's authentication chain on its next CONNECT (new keys, files)."""
        self._chains.clear()

    async def serve(self) -> None:
        """Run until :meth:`request_stop`, then shut down gracefully."""
        await self.start()
        await self._stop.wait()
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop accepting, DISCONNECT 0x8B to MQTT 5 clients, flush, close."""
        log.info(
            "shutting down", extra={"event": "shutdown", "clients": self.stats.clients_connected}
        )
        for server in self.servers:
            server.close()
        if self.control is not None:
            await self.control.close()
        for conn in list(self.connections):
            conn.close(ReasonCode.SERVER_SHUTTING_DOWN, "server shutting down")
        # each connection ends on the next loop pass (its session detached, a delayed will
        # scheduled); then no timer fires while the sockets drain (graceful_close.py): a will
        # whose delay would end during the drain waits in the store for the next start, as it
        # did when sockets closed at once
        await asyncio.sleep(0)
        self.timers.stop()
        if self.connections:
            # at most 3 s of the event loop's own time for the sockets to close (not the
            # broker's clock: a test's fake clock does not move while this waits)
            self._all_closed = asyncio.Event()
            try:
                await asyncio.wait_for(self._all_closed.wait(), 3.0)
            except TimeoutError:
                pass
        if self.bridges is not None:
            await self.bridges.close()
        if self.claims is not None:
            await self.claims.close()
        if self.persistence is not None:
            await self.persistence.aclose()
        self.decisions.close()
        if self.audit is not None:
            self.audit.close()
        for server in self.servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 1.0)
            except TimeoutError:
                pass

    # -- policy -----------------------------------------------------------------------------

    def build_policy(self, config: Config) -> Policy:
        """Gates 1–2 plus, when anything is configured, the pipeline of gates 3–6 (AUTHZ.md §2):
        authorizers, default permissions / token grants, and the claims gate. A broker with none
        of them keeps the fast path: no per-message policy work beyond gates 1–2."""
        claims_gate = self.claims.gate if self.claims is not None else None
        return build_policy(config, claims_gate, self.decisions)

    # -- connections ------------------------------------------------------------------------

    def connection_info(self, listener: ListenerConfig, transport: Any) -> ConnectionInfo:
        return connection_info(listener, transport, self._interfaces)

    def connection_opened(self, conn: Connection) -> None:
        self.connections.add(conn)
        self.watch(conn)
        self.stats.connections_total += 1
        # read at each accept (one getrlimit): RLIMIT_NOFILE and the limit can change at any time
        cap = connection_cap(self.config.limits.max_connections)
        if cap != self._connection_cap:
            log_cap_change(self._connection_cap, cap)
            self._connection_cap = cap
        if len(self.connections) > self._connection_cap:
            # A socket that never sent its CONNECT (or never finished its WebSocket upgrade)
            # for EVICT_AFTER seconds makes room for the new one: half-open sockets cannot
            # keep a real client out (broker/limits/fd_budget.py)
            stale = oldest_unauthenticated(self.connections, self.clock() - EVICT_AFTER)
            if stale is not None:
                self.limit_hits.hit(
                    "limits.max_connections",
                    "connection without CONNECT closed to make room for a new one: "
                    f"{len(self.connections)} connections open, at most {self._connection_cap}",
                )
                stale.close(None, "no CONNECT yet, closed to make room at the connection cap")
                return
            # Far over the limit: do not even read a CONNECT (half-open floods), and never let
            # connections use up the file descriptors (broker/limits/fd_budget.py).
            reason = (
                f"{len(self.connections)} connections open, limits.max_connections is "
                f"{self.config.limits.max_connections} (+64 before CONNECT, and at most "
                f"{self._connection_cap} within RLIMIT_NOFILE)"
            )
            self.limit_hits.hit("limits.max_connections", f"connection closed at accept: {reason}")
            conn.close(None, reason)
            return
        self._count_source(conn)

    def _count_source(self, conn: Connection) -> None:
        """Close a socket whose source already holds its share of the cap (source_shares.py)."""
        source = login_source(conn.info.remote_address)
        limits = self.config.limits
        allowed = SourceShares.share(limits.source_connection_share, self._connection_cap)
        held = self.source_shares.open(id(conn), source, allowed)
        if held is not None:
            reason = (
                f"{held} connections open from {source}, limits.source_connection_share is "
                f"{limits.source_connection_share:g} of {self._connection_cap} "
                f"(at most {allowed} from one address)"
            )
            self.limit_hits.hit(
                "limits.source_connection_share", f"connection closed at accept: {reason}"
            )
            conn.close(None, reason)

    def admit(self, conn: Connection) -> tuple[int, str] | None:
        """Connection limit and connect rate (token bucket), checked at CONNECT."""
        limits = self.config.limits
        if self.stats.clients_connected >= limits.max_connections:
            reason = (
                f"the broker already has {limits.max_connections} clients (limits.max_connections)"
            )
            self.limit_hits.hit(
                "limits.max_connections", f"CONNECT refused: {reason}", conn.client_id
            )
            return (ReasonCode.QUOTA_EXCEEDED, reason)
        now = self.clock()
        source = login_source(conn.info.remote_address)
        refused = source_rate_refusal(
            self.source_rates, source, limits, now, self.limit_hits, conn.client_id
        )
        if refused is not None:
            return (ReasonCode.CONNECTION_RATE_EXCEEDED, refused)
        self._rate_tokens = min(
            float(limits.connect_burst),
            self._rate_tokens + (now - self._rate_at) * limits.connect_rate,
        )
        self._rate_at = now
        if self._rate_tokens < 1.0:
            reason = "too many connections per second (limits.connect_rate)"
            self.limit_hits.hit("limits.connect_rate", f"CONNECT refused: {reason}", conn.client_id)
            self.source_rates.give_back(source)
            return (ReasonCode.CONNECTION_RATE_EXCEEDED, reason)
        self._rate_tokens -= 1.0
        return None

    def auth_chain(self, listener: ListenerConfig) -> AuthChain:
        chain = self._chains.get(listener.name)
        if chain is None:
            chain = self._chains[listener.name] = AuthChain.from_config(
                listener, self.config, self.auth_kept
            )
        return chain

    def topic_space(self, tenant: str) -> TopicSpace:
        space = self.topic_spaces.get(tenant)
        if space is None:
            retained = self._retained_factory(tenant) if self._retained_factory else None
            space = self.topic_spaces[tenant] = TopicSpace(
                tenant,
                self.separator,
                retained,
                space_cache_bytes(tenant, self.config.limits.routing_cache_bytes),
                None if tenant == DEFAULT_TENANT else self.sys_publisher.shared,
            )
            self._count_retained(space)
            if "space_sweep" not in self.timers and tenant != DEFAULT_TENANT:
                self.timers.every("space_sweep", SPACE_SWEEP_INTERVAL, self.clock())
        return space

    def free_empty_topic_spaces(self) -> int:
        """Drop the topic spaces of tenants without a session, subscription or retained
        message (issue 16: 3,000 clients each naming a new tenant kept 36 MB, and ``$SYS`` was
        written into every space). The default tenant stays; a space is made again on use."""
        if len(self.topic_spaces) <= 1:
            return 0
        in_use = {session.tenant for session in self.sessions}
        empty = [
            tenant
            for tenant, space in self.topic_spaces.items()
            if tenant != DEFAULT_TENANT and tenant not in in_use and space.is_empty()
        ]
        for tenant in empty:
            del self.topic_spaces[tenant]
        return len(empty)

    def _count_retained(self, space: TopicSpace) -> None:
        """Make the space's retained store report to :attr:`retained_budget` (issue 16)."""
        store = space.retained
        if isinstance(store, MemoryRetainedStore):
            store.budget = self.retained_budget
            store.budget_tenant = space.tenant

    def retain(
        self,
        space: TopicSpace,
        message: Message,
        client_id: str,
        what: str,
        owner: Principal | None,
    ) -> tuple[str, str] | None:
        """Store ``message`` as the retained message of its topic in ``space`` (an empty payload
        clears it), within the retained limits (retained_budget.py) and ``owner``'s and the
        tenant's shares of them (limits/quotas.py; ``None``: not a client's, charged to
        ``UNATTRIBUTED``). Every retained PUBLISH, will and bridged message goes here. Over a
        limit nothing changes; the refusal is counted and logged (``{what} not retained: …``)
        and returned as (limit key, reason) for the caller to answer its client."""
        if not message.payload:
            space.retained.delete(message.topic)
            return None
        charged = owner if owner is not None else UNATTRIBUTED
        refusal = self.retained_budget.refusal(
            self.config.limits, space.tenant, message, space.retained.get(message.topic), charged
        )
        if refusal is None:
            self.quotas.retaining = charged
            try:
                space.retained.set(message)
            finally:
                self.quotas.retaining = None
            return None
        limit, reason = refusal
        self.limit_hits.limits_key(limit, client_id, f"{what} not retained: {reason}")
        return refusal

    def schedule_flush(self, conn: Connection) -> None:
        self._dirty.append(conn)
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self.persistence is not None:
            self.persistence.before_send()  # write-ahead: the log holds it first (issue 17)
        dirty, self._dirty = self._dirty, []
        for conn in dirty:
            conn.flush()
        # what a write can start between ticks: bytes left in a transport, a failed store write
        persistence = self.persistence
        timers = self.timers
        if (self.write_budget.total and "write_resample" not in timers) or (
            persistence is not None and not persistence.healthy and "store_probe" not in timers
        ):
            self._plan_duties(self.clock())

    # -- sessions ---------------------------------------------------------------------------

    def live_session(self, tenant: str, client_id: str) -> Session | None:
        """The session of (``tenant``, ``client_id``) unless it has expired."""
        existing = self.sessions.get(session_key(tenant, client_id))
        if (
            existing is not None
            and existing.connection is None
            and (existing.expires_at is not None and existing.expires_at <= self.clock())
        ):
            return None
        return existing

    def client_id_bindings(self) -> ClientIdBindings:
        """The client ids the password file in force binds (broker/ownership.py), compiled
        again when a reload brings another file."""
        entries = self.config.passwords.entries
        if entries is not self._bindings_of:
            self._bindings = ClientIdBindings(entries)
            self._bindings_of = entries
        return self._bindings

    def attach_session(
        self,
        conn: Connection,
        connect: Connect,
        identity: Identity,
        expiry: int,
        principal: Principal,
        fresh: bool = False,
    ) -> tuple[Session, bool]:
        """Take over a live session (DISCONNECT 0x8E), resume or start a session.

        The caller checked ownership (broker/ownership.py); ``fresh``: the existing session
        belongs to another principal and ends here (``[broker] foreign_session = "fresh"``). A
        takeover that resumes keeps the session whatever the old connection's expiry was
        (MQTT 5 MQTT-3.1.2-23, MQTT-4.4.0-1; 3.1.1 MQTT-3.1.2-4)."""
        client_id = conn.client_id
        existing = self.sessions.get(session_key(identity.tenant, client_id))
        now = self.clock()
        resume = (
            existing is not None
            and not fresh
            and existing.tenant == identity.tenant
            and resumes(connect, existing.expires_at, now)  # engine/negotiation.py
        )
        if existing is not None and existing.connection is not None:
            old = existing.connection
            assert isinstance(old, Connection)  # only attach_session attaches a session
            old.close(ReasonCode.SESSION_TAKEN_OVER, "session taken over by a new connection")
            old.disconnect_reason = "session taken over"
            self._detach(old, keep_session=resume)
        if existing is not None and not resume:
            self._end_session(existing)
            existing = None
        if existing is None:
            session = Session(client_id, identity.tenant, identity, conn.level)
            session.owner = principal
            self.sessions.put(session)
            present = False
        else:
            session = existing
            present = True
            session.will = None
            session.will_at = None
            self._wills.discard(session)
            session.expires_at = None
            self._expiring.discard(session)
        session.identity = identity
        session.protocol_level = conn.level
        session.expiry_interval = expiry
        session.connection = conn
        conn.session = session
        conn.engine.flow = session  # the engine moves its QoS flow (engine/flow.py)
        persistence = self.persistence
        if persistence is not None and (expiry > 0 or persistence.tracks(session)):
            persistence.adopt(session)  # outlives its connection: stored (issue 8)
        self.stats.clients_connected += 1
        self.quotas.connections.hold(conn, identity.tenant, principal, 1)
        self.stats.clients_maximum = max(self.stats.clients_maximum, self.stats.clients_connected)
        return session, present

    # -- re-judgement at CONNECT and re-authentication (the handlers' entry, broker/rejudge.py)

    async def judge_resumed(
        self, session: Session, identity: Identity
    ) -> list[Verdict[SubscriptionEntry]]:
        """What the policy now says of ``session``'s subscriptions as ``identity`` (nothing
        changes yet): the verdicts that change something."""
        _, verdicts = await judge_subscriptions(self, session, identity)
        return verdicts

    def apply_resumed(
        self, session: Session, verdicts: list[Verdict[SubscriptionEntry]], why: str
    ) -> None:
        """Apply :meth:`judge_resumed`'s verdicts and drop what may no longer be delivered."""
        removed = apply_verdicts(self, session, verdicts, why)
        purge_undeliverable(self, session, why, removed)

    async def rejudge(self, session: Session, why: str) -> None:
        """Judge ``session`` again as its current identity (subscriptions, queue, in flight)."""
        await rejudge_session(self, session, why)

    def offer(self) -> Offer:
        """This broker's side of the CONNECT negotiation and the capabilities its CONNACK
        announces (engine/negotiation.py), as configured now (a reload may change it)."""
        cfg = self.config.broker
        limits = self.config.limits
        return Offer(
            server_keep_alive=cfg.server_keep_alive,
            max_keep_alive=cfg.max_keep_alive,
            max_session_expiry=cfg.max_session_expiry,
            max_inflight=limits.max_inflight,
            receive_maximum=limits.receive_maximum,
            maximum_qos=cfg.maximum_qos,
            retain_available=cfg.retain_available,
            maximum_packet_size=limits.max_packet_size,
            topic_alias_maximum=cfg.topic_alias_maximum,
            wildcard_subscriptions=cfg.wildcard_subscriptions,
            subscription_identifiers=cfg.subscription_identifiers,
            shared_subscriptions=cfg.shared_subscriptions,
        )

    def connection_closed(self, conn: Connection) -> None:
        """The socket is gone (after :meth:`connection_ended`; a closing one drains first,
        broker/graceful_close.py): it no longer counts among the open connections."""
        self.connections.discard(conn)
        self.source_shares.close(id(conn))
        if self._all_closed is not None and not self.connections:
            self._all_closed.set()

    def connection_ended(self, conn: Connection) -> None:
        """The MQTT connection is over: no more deadlines, the session detached (will, expiry),
        the client no longer counted as connected."""
        self._timeouts.discard(conn)
        if conn.session is not None:
            self._detach(conn)
        if conn.client_id and conn.identity is not None:
            audit_events.disconnected(self.audit, conn)
            log.info(
                "client disconnected",
                extra={
                    "event": "disconnect",
                    "client_id": conn.client_id,
                    "reason": conn.disconnect_reason,
                },
            )

    def _detach(self, conn: Connection, keep_session: bool = False) -> None:
        """The connection of a session is gone: will (maybe delayed) and session expiry.
        ``keep_session``: a takeover resumes the session at once (no expiry, and a delayed will
        is not sent: MQTT 5 §3.1.3.2.2)."""
        session = conn.session
        conn.session = None
        conn.engine.flow = None
        if session is None or session.connection is not conn:
            return
        session.connection = None
        session.token_deadline = conn.engine.token_deadline  # for the will (rejudge.py)
        self.stats.clients_connected -= 1
        self.quotas.connections.release(conn)
        will, conn.will = conn.will, None
        # what the end of the connection does to the will and the session: the engine's
        # decision (engine/negotiation.py), this broker's timers and stores act on it
        gone = departure(will, conn.v5, session.expiry_interval, keep_session, self.clock())
        if will is not None:
            if gone.will_now:
                self.publish_will(session, will)
            elif gone.will_at is not None:
                session.will = will
                session.will_at = gone.will_at
                self._wills.set(session, gone.will_at)
                self.timers.arm(gone.will_at)
        if keep_session:
            return
        if gone.end_session:
            self._end_session(session)
            return
        if gone.expires_at is not None:
            session.expires_at = gone.expires_at
            self._expiring.set(session, gone.expires_at)
            self.timers.arm(gone.expires_at)
        if self.persistence is not None:
            self.persistence.session_changed(session)

    def end_session(self, session: Session, reason_code: int, reason: str) -> None:
        """An operator (broker/session_control.py) or a policy change (broker/ownership.py)
        ends ``session``: its connection closes with ``reason_code`` (MQTT 5 DISCONNECT; 3.x:
        closed) and its will is discarded; the session, its queue and a delayed will go."""
        conn = session.connection
        if conn is not None:
            assert isinstance(conn, Connection)  # only attach_session attaches a session
            conn.close(reason_code, reason, will=False)
            conn.will = None  # also when it was closing already (a revoked password)
            conn.disconnect_reason = reason
            self._detach(conn, keep_session=True)
        session.will = None
        session.will_at = None
        self._end_session(session)

    def _end_session(self, session: Session) -> None:
        """The session ends: its pending will is published, its subscriptions removed."""
        if session.will is not None:
            will, session.will = session.will, None
            self.publish_will(session, will)
        self._wills.discard(session)
        self._expiring.discard(session)
        if session.subscriptions:  # a session without any must not make its space again
            space = self.topic_space(session.tenant)
            for entry in list(session.subscriptions.values()):
                space.unsubscribe(entry, entry.routed_filter(self.separator))
        session.subscriptions.clear()
        self.delivery.forget_queue(session)
        self.quotas.session_ended(session)
        session.queue.clear()
        session.inflight.clear()
        if self.sessions.get(session.key) is session:
            self.sessions.remove(session.key)
        if self.persistence is not None:
            self.persistence.forget(session)

    def publish_will(self, session: Session, will: Will) -> None:
        """Publish ``will`` if the policy in force now allows it (broker/rejudge.py). The
        message is built once: judged, retained and routed as that one value (issue 21)."""
        message = will_message(will, session.client_id, self.clock)
        verdict = judge_will(self, session, message)
        if isinstance(verdict, Decision):
            if verdict.denied:
                will_refused(self, session, message, verdict)
            else:
                self._route_will(session, message)
            return
        task = asyncio.get_running_loop().create_task(
            self._publish_judged(session, message, verdict)
        )
        self._will_tasks.add(task)
        task.add_done_callback(self._will_tasks.discard)

    async def _publish_judged(
        self, session: Session, message: Message, verdict: Awaitable[Decision]
    ) -> None:
        try:
            decision = await verdict
        except Exception:
            log.exception("judging the will of %r failed; not published", session.client_id)
            return
        if decision.denied:
            will_refused(self, session, message, decision)
        else:
            self._route_will(session, message)

    def _route_will(self, session: Session, message: Message) -> None:
        space = self.topic_space(session.tenant)
        if message.retain:
            self.retain(
                space, message, session.client_id, f"will of {session.client_id!r}", session.owner
            )
        self.delivery.route(space, message)
        log.info(
            "will published",
            extra={"event": "will", "client_id": session.client_id, "topic": message.topic},
        )

    # -- timers -----------------------------------------------------------------------------

    def _wake(self) -> None:
        """The scheduler's timer: run what is due (it then re-arms at the next due time)."""
        try:
            self.tick(self.clock())
        except Exception:
            log.exception("periodic broker task failed")
            self.timers.hold(self.clock() + TICK)  # what it left due: again later, not at once

    def watch(self, conn: Connection) -> None:
        """Look at ``conn`` again at its engine's next deadline (engine/connection.py); called
        when it opens and whenever a deadline may have moved earlier (CONNACK, a token)."""
        if conn.closing:
            self._timeouts.discard(conn)
            return
        at = conn.engine.next_deadline(self._connect_timeout)
        if at is None:
            self._timeouts.discard(conn)
        else:
            self._timeouts.set(conn, at)
            self.timers.arm(at)

    def _audit_buffered(self) -> None:
        """The audit log has records to write: flush them within ``TICK``."""
        if "audit_flush" not in self.timers:
            self.timers.at("audit_flush", self.clock() + TICK)

    def next_due(self) -> float | None:
        """When :meth:`tick` next has something to do (broker clock); None: never, until a
        new deadline appears (broker/scheduler.py)."""
        return self.timers.next_at()

    def tick(self, now: float) -> None:
        """Run every deadline and periodic duty due at ``now`` (broker/scheduler.py)."""
        timeout = self.config.broker.connect_timeout
        if timeout != self._connect_timeout:  # a reload changed it: every deadline again
            self._connect_timeout = timeout
            for conn in list(self.connections):
                self.watch(conn)
        for conn in self._timeouts.due(now):
            # the engine answers a keep-alive timeout itself (its DISCONNECT 0x8D and the end
            # of the connection come back as events); the connect timeout and an expired token
            # are the broker's to answer (pre_auth.py, token_expiry.py)
            events = conn.engine.handle_timer(now, timeout)
            first = events[0] if events else None  # TimedOut comes first
            due = first.what if isinstance(first, TimedOut) else None
            if due is Timeout.CONNECT:
                connect_timed_out(conn, timeout, self.limit_hits)
            elif due is Timeout.TOKEN:
                token_expired(conn)
            elif events:
                conn.act(events)
            if conn in self.connections:
                self.watch(conn)  # not yet (bytes came since), or what remains after it
        for session in self._wills.due(now):
            if session.will is not None:
                will, session.will, session.will_at = session.will, None, None
                self.publish_will(session, will)
                if self.persistence is not None:
                    self.persistence.session_changed(session)
        for session in self._expiring.due(now):
            self._end_session(session)
        self.decisions.expire(now)
        duties = self.timers.due(now)
        if "store_probe" in duties and self.persistence is not None:
            self.persistence.tick()
        if "client_stats" in duties and self.audit is not None:
            audit_events.client_stats(self.audit, self.connections, now)
        if "audit_flush" in duties and self.audit is not None:
            try:
                self.audit.flush()
            except OSError as exc:
                log.error("cannot write the audit log: %s", exc, extra={"event": "audit_error"})
        if "space_sweep" in duties:
            self.free_empty_topic_spaces()
            self.delivery.recount(self.sessions)
            for session in self.sessions:  # queues changed elsewhere (re-judged) counted again
                self.quotas.hold_subscriptions(session)
        if "write_resample" in duties:
            self.write_budget.resample()
        if "sys" in duties:
            self.sys_publisher.publish(self)
        self._plan_duties(now)

    def _plan_duties(self, now: float) -> None:
        """Which periodic duties have something to do from ``now`` on (after every tick, and
        from the places that can give one work between ticks: ``_flush``, ``topic_space``)."""
        timers = self.timers
        timers.every("sys", self.config.sys.interval, now)
        audit = self.audit  # its flush is planned when a record arrives (_audit_buffered)
        if audit is not None and audit.stats_interval:
            if "client_stats" not in timers:
                timers.at("client_stats", max(now, audit.next_stats_at))
        else:
            timers.every("client_stats", None, now)
        persistence = self.persistence
        unhealthy = persistence is not None and not persistence.healthy
        timers.every("store_probe", TICK if unhealthy else None, now)
        timers.every("write_resample", TICK if self.write_budget.total else None, now)
        sweep = len(self.topic_spaces) > 1 or self.delivery.queued_total > 0
        timers.every("space_sweep", SPACE_SWEEP_INTERVAL if sweep else None, now)

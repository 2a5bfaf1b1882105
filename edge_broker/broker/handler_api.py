"""What a packet handler may touch: the narrow broker interface of the ``handle_*`` modules (as
Mosquitto's ``handle_*.c`` get one client context and a small set of database calls).

:class:`ClientContext` is the connection as a handler sees it: who the client is, its session,
and the calls that answer it (``send``, ``refuse_connect``, ``violation``, ``close`` …); of its
engine only what :class:`HandlerEngine` names (the acknowledgement flows and their replies, the
topic aliases). :class:`BrokerServices` names the members of the broker a handler may reach
through ``conn.broker``, and of the configuration only ``[broker]`` and ``[limits]``
(:class:`HandlerConfig`). ``broker/connection.py``'s ``Connection`` and ``broker/server.py``'s
``Broker`` satisfy them structurally (mypy checks it where the connection calls its handlers),
and the handlers import neither: what a handler may call is written down here, in one place.

Where a handler hands the connection back to the broker (admission, attaching a session,
storing before an acknowledgement) the parameter is typed ``Any``: the broker takes the whole
connection there, which a handler does not need to know.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..audit.aggregate import DecisionWindow
    from ..audit.log import AuditLog
    from ..auth.chain import AuthChain
    from ..auth.method_api import Authenticator, ConnectionInfo
    from ..auth.password import PasswordEntry
    from ..authz.decision import Decision
    from ..authz.policy import Policy
    from ..authz.session_verdicts import Verdict
    from ..claims.runtime import ClaimsRuntime
    from ..config import BrokerConfig, LimitsConfig, ListenerConfig
    from ..engine.aliases import InboundAliases
    from ..engine.events import Flow, ProtocolViolation
    from ..engine.negotiation import Agreement, Offer
    from ..engine.states import Trigger
    from ..identity import Identity
    from ..mqtt.packets import Connect, Packet, Properties, Will
    from .bridging import Bridging
    from .delivery import Delivery
    from .limits.limit_hits import LimitHits
    from .limits.publish_quota import PublishQuota
    from .limits.quotas import Quotas
    from .limits.read_pool import ReadPool
    from .limits.write_budget import WriteBudget
    from .message import Message
    from .ownership import ClientIdBindings, Principal
    from .persist.persistence import Persistence
    from .session import Session, SubscriptionEntry
    from .stats import BrokerStats
    from .topic_space import TopicSpace


class HandlerConfig(Protocol):
    """What a handler reads of the configuration: ``[broker]`` and ``[limits]`` (``Config``
    is one; the handlers never see the other sections)."""

    @property
    def broker(self) -> BrokerConfig: ...
    @property
    def limits(self) -> LimitsConfig: ...


class HandlerEngine(Protocol):
    """What a handler may ask of the connection's sans-io engine (engine/connection.py): the
    client's topic aliases, the acknowledgement flows (the engine moves the session's QoS flow
    and writes the replies into its one output buffer), and the admitting token's deadline."""

    token_deadline: float | None

    @property
    def aliases_in(self) -> InboundAliases: ...

    def puback_received(self, packet_id: int) -> Flow: ...
    def pubcomp_received(self, packet_id: int) -> Flow: ...
    def pubrec_received(self, packet_id: int, reason_code: int, reply_now: bool = True) -> Flow: ...
    def pubrel_received(self, packet_id: int, reply_now: bool = True) -> Flow: ...
    def qos2_publish_received(
        self, packet_id: int, receive_maximum: int, reply_now: bool = True
    ) -> Flow | ProtocolViolation: ...
    def hold(self, packet_id: int) -> None: ...
    def unhold(self, packet_id: int) -> None: ...
    def send_publish_ack(self, qos: int, packet_id: int, routed: int) -> None: ...
    def send_pubrec(self, packet_id: int) -> None: ...
    def send_pubrel(self, packet_id: int) -> None: ...
    def send_pubcomp(self, packet_id: int) -> None: ...


class BrokerServices(Protocol):
    """The broker members a handler may use (read-only: a handler never replaces them)."""

    @property
    def config(self) -> HandlerConfig: ...
    @property
    def separator(self) -> str: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def limit_hits(self) -> LimitHits: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def delivery(self) -> Delivery: ...
    @property
    def persistence(self) -> Persistence | None: ...
    @property
    def audit(self) -> AuditLog | None: ...
    @property
    def claims(self) -> ClaimsRuntime | None: ...
    @property
    def bridges(self) -> Bridging | None: ...
    @property
    def topic_spaces(self) -> dict[str, TopicSpace]: ...
    @property
    def quotas(self) -> Quotas: ...

    def topic_space(self, tenant: str) -> TopicSpace: ...
    def free_empty_topic_spaces(self) -> int: ...
    def retain(
        self,
        space: TopicSpace,
        message: Message,
        client_id: str,
        what: str,
        owner: Principal | None,
    ) -> tuple[str, str] | None: ...
    def live_session(self, tenant: str, client_id: str) -> Session | None: ...
    def client_id_bindings(self) -> ClientIdBindings: ...
    def auth_chain(self, listener: ListenerConfig) -> AuthChain: ...
    def offer(self) -> Offer: ...
    def admit(self, conn: Any) -> tuple[int, str] | None: ...
    def attach_session(
        self,
        conn: Any,
        connect: Connect,
        identity: Identity,
        expiry: int,
        principal: Principal,
        fresh: bool = False,
    ) -> tuple[Session, bool]: ...
    def watch(self, conn: Any) -> None: ...
    async def judge_resumed(
        self, session: Session, identity: Identity
    ) -> list[Verdict[SubscriptionEntry]]: ...
    def apply_resumed(
        self, session: Session, verdicts: list[Verdict[SubscriptionEntry]], why: str
    ) -> None: ...
    async def rejudge(self, session: Session, why: str) -> None: ...


class ConnectionHost(BrokerServices, Protocol):
    """What a connection uses of the broker beyond its handlers' :class:`BrokerServices`
    (``Broker`` is one, and ``Connection.broker`` is typed this): the buffers it reads into and
    writes from, the flush it asks for, where a refusal is aggregated, and the calls that tell
    the broker it opened, ended and closed."""

    @property
    def read_pool(self) -> ReadPool: ...
    @property
    def write_budget(self) -> WriteBudget: ...
    @property
    def decisions(self) -> DecisionWindow: ...

    def connection_info(self, listener: ListenerConfig, transport: Any) -> ConnectionInfo: ...
    def connection_opened(self, conn: Any) -> None: ...
    def schedule_flush(self, conn: Any) -> None: ...
    def connection_ended(self, conn: Any) -> None: ...
    def connection_closed(self, conn: Any) -> None: ...


class ClientContext(Protocol):
    """One client's connection as its handlers see it. Plain attributes are the handlers' to
    set (what the CONNECT and authentication establish); properties are read-only."""

    client_id: str
    assigned_client_id: str | None
    identity: Identity | None
    connect_packet: Connect | None
    authenticator: Authenticator | None
    auth_state: object
    will: Will | None
    password_entry: PasswordEntry | None
    token_credential: bytes | None
    msgs_in: int
    refusal: tuple[Decision, Identity | None] | None  # the decision a refused CONNACK names

    @property
    def broker(self) -> BrokerServices: ...
    @property
    def engine(self) -> HandlerEngine: ...
    @property
    def session(self) -> Session | None: ...
    @property
    def listener(self) -> ListenerConfig: ...
    @property
    def info(self) -> ConnectionInfo: ...
    @property
    def closing(self) -> bool: ...
    @property
    def level(self) -> int: ...
    @property
    def v5(self) -> bool: ...
    @property
    def problem_information(self) -> bool: ...
    @property
    def last_rx(self) -> float: ...
    @property
    def publish_quota(self) -> PublishQuota | None: ...

    def send(self, data: bytes) -> None: ...
    def send_packet(self, packet: Packet) -> None: ...
    def trigger(self, event: Trigger) -> None: ...
    def accept(
        self, agreement: Agreement, session_present: bool, properties: Properties
    ) -> None: ...
    def refuse_connect(self, reason_code: int, reason: str) -> None: ...
    def violation(self, reason_code: int, reason: str) -> None: ...
    def close(self, reason_code: int | None, reason: str, will: bool = True) -> None: ...
    def resend_inflight(self) -> None: ...


Handler = Callable[[ClientContext, Any], Awaitable[None] | None]
"""A packet handler: done (None), or an awaitable the connection waits for before the next
packet."""

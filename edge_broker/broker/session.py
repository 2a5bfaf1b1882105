"""Sessions (MQTT 5 §4.1): what the broker keeps for a client id between connections.

A session holds the client's subscriptions, its outgoing QoS 1/2 messages (in flight, in order,
and queued behind the Receive Maximum or while offline), the packet ids of incoming QoS 2
messages awaiting PUBREL, its expiry and a pending delayed will. Sessions are keyed by client id
across the whole broker (takeover is per client id); each remembers its tenant.

:class:`SessionStore` is the seam for persistence (issue 8): the broker only calls these methods.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

# Inflight is re-exported: persistence.py restores in-flight messages with it
from ..engine.flow import Inflight as Inflight
from ..engine.flow import QosFlow
from ..engine.negotiation import NEVER_EXPIRES as NEVER_EXPIRES
from ..identity import DEFAULT_TENANT, Identity
from ..mqtt.packets import Will
from .journal import NO_JOURNAL, SessionJournal
from .message import Message
from .message import Outgoing as Outgoing  # defined below the journal, which names it
from .message import new_outgoing as new_outgoing

if TYPE_CHECKING:
    from ..engine.states import ConnState
    from .ownership import Principal


class Attached(Protocol):
    """The connection a session is attached to, as delivery, persistence, the topic spaces and
    a takeover use it (``Connection`` is one): whether it can take more now, the ways to send,
    its live will, and how it is closed."""

    disconnect_reason: str

    @property
    def state(self) -> ConnState: ...

    @property
    def paused(self) -> bool: ...  # its transport is full: deliveries wait

    @property
    def closing(self) -> bool: ...

    @property
    def send_quota(self) -> int: ...  # min(our max_inflight, the client's Receive Maximum)

    @property
    def will(self) -> Will | None: ...  # the connected client's will

    def send_message(self, message: Message, retain: bool, sub_ids: tuple[int, ...]) -> bool: ...

    def send_publish(self, outgoing: Outgoing) -> bool: ...

    def register_inflight(self, outgoing: Outgoing) -> None: ...

    def close(self, reason_code: int | None, reason: str, will: bool = True) -> None: ...


class _NoQueue(deque[Any]):
    """The queue of every session no message has waited in yet: one shared instance, always
    empty (an empty ``deque`` allocates its first 64-slot block: about 760 B per idle
    session). Reading it reads an empty queue; adding to it is a bug, so it raises: the
    places that queue take :meth:`Session.open_queue` (or test ``is NO_QUEUE`` inline)."""

    __slots__ = ()

    def _refuse(self, *args: object) -> NoReturn:
        raise TypeError("the shared empty session queue: add to Session.open_queue()")

    def append(self, x: Any) -> NoReturn:
        self._refuse()

    def appendleft(self, x: Any) -> NoReturn:
        self._refuse()

    def extend(self, iterable: Any) -> NoReturn:
        self._refuse()

    def extendleft(self, iterable: Any) -> NoReturn:
        self._refuse()

    def insert(self, i: int, x: Any) -> NoReturn:
        self._refuse()


NO_QUEUE: deque[Any] = _NoQueue()


@dataclass(frozen=True, slots=True)
class SubscriptionEntry:
    """One subscription of a session: its options (MQTT 5 §3.8.3.1) and identifier."""

    session: Session
    topic_filter: str  # as the client wrote it (``$share/g/f`` included)
    qos: int
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    subscription_id: int | None = None
    share_group: str | None = None
    recheck: bool = False  # deliveries must pass the policy's deliver check (AUTHZ.md §2 gate 4)
    queryable: bool = False  # SUBSCRIBE user property queryable=true (site ACL declare_queryable)
    # deliveries can be denied by gates 5-6 (Policy.delivers_need_check, issue 21): decided at
    # subscribe time and again by broker/rejudge.py; True until decided (restored sessions)
    egress: bool = True

    def routed_filter(self, separator: str) -> str:
        """The filter the topic space indexes this entry under: ``topic_filter`` without
        ``$share/<group>/`` (MQTT 5 §4.8.2; ``separator`` between the parts)."""
        if self.share_group is None:
            return self.topic_filter
        return self.topic_filter.split(separator, 2)[2]


def session_key(tenant: str, client_id: str) -> str:
    """Sessions are per (tenant, client id): a client id reused in another tenant is another
    client (AUTHZ.md §1: nothing crosses tenants). U+0000 cannot occur in an MQTT string, so the
    key is unambiguous; in the default tenant it is the client id itself."""
    return client_id if tenant == DEFAULT_TENANT else f"{tenant}\x00{client_id}"


def client_id_of(key: str) -> str:
    """The client id in a :func:`session_key`."""
    return key.rpartition("\x00")[2]


class Session(QosFlow[Outgoing]):
    """Mutable per-client state; see the module docstring. Its QoS 1/2 flow state (packet ids,
    in-flight table, incoming QoS 2 ids) and the transitions on it are ``engine/flow.py``'s."""

    __slots__ = (
        "key",
        "client_id",
        "tenant",
        "identity",
        "protocol_level",
        "subscriptions",
        "queue",
        "queued_bytes",
        "expiry_interval",
        "expires_at",
        "will",
        "will_at",
        "connection",
        "owner",
        "journal",
        "token_deadline",
    )

    def __init__(self, client_id: str, tenant: str, identity: Identity, protocol_level: int):
        super().__init__()  # inflight, qos2_incoming, next_packet_id (engine/flow.py)
        self.client_id = client_id
        self.tenant = tenant
        self.key = session_key(tenant, client_id)
        self.identity = identity
        self.protocol_level = protocol_level
        self.subscriptions: dict[str, SubscriptionEntry] = {}
        self.queue: deque[Outgoing] = NO_QUEUE  # its own deque once a message waits
        self.queued_bytes = 0
        self.expiry_interval = 0
        self.expires_at: float | None = None  # monotonic deadline while offline
        self.will: Will | None = None  # pending delayed will (after the connection closed)
        self.will_at: float | None = None
        self.connection: Attached | None = None
        # the principal that created the session (broker/ownership.py); None only while restoring
        self.owner: Principal | None = None
        self.journal: SessionJournal = NO_JOURNAL  # persistence: broker/journal.py (issue 17)
        # its last connection's token end on the broker's clock: a will is judged by it too
        self.token_deadline: float | None = None

    def open_queue(self) -> deque[Outgoing]:
        """The queue to add to: the session's own, made when the first message waits."""
        queue = self.queue
        if queue is NO_QUEUE:
            queue = self.queue = deque()
        return queue

    def __repr__(self) -> str:
        return f"Session({self.client_id!r}, tenant={self.tenant!r})"


class SessionStore(Protocol):
    """Where sessions live, by :func:`session_key` (persisted through broker/persist/)."""

    def get(self, key: str) -> Session | None: ...

    def put(self, session: Session) -> None: ...

    def remove(self, key: str) -> None: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Session]: ...


class MemorySessionStore:
    __slots__ = ("_sessions",)

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def get(self, key: str) -> Session | None:
        return self._sessions.get(key)

    def put(self, session: Session) -> None:
        self._sessions[session.key] = session

    def remove(self, key: str) -> None:
        self._sessions.pop(key, None)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._sessions.values()))

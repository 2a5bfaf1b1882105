"""What an operator may see and do on a running broker: the narrow interface the admin API
calls (``admin/``), never the broker's internals.

Reads return plain JSON-ready values (dicts, lists, str, int, float, bool), computed on demand:
nothing here runs per message. The one hook is the denial ring: :meth:`Operator.attach` makes
the audit aggregation (``audit/aggregate.py``) hand each denial to a bounded ring, so a broker
without ``[admin]`` pays nothing and one with it pays only on denials.

Actions (disconnect, retained delete, claim revoke, reload, session drop) change the broker
the way the broker itself would: the same close with DISCONNECT 0x98, the same retained
store delete (budget and persistence follow), the same reload as SIGHUP.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..authz.explain import explain, explanation_text
from ..config import EMBEDDED_FILE
from ..identity import DEFAULT_TENANT, Identity
from ..mqtt.reason_codes import ReasonCode
from .session_control import drop_session, session_info
from .stats import resident_bytes

if TYPE_CHECKING:
    from .connection import Connection
    from .server import Broker

DENIAL_RING = 200  # recent denials kept for the admin API
DENIAL_TEXT = 1024  # characters kept of each text field: the ring holds at most ~1 MB
PREVIEW_BYTES = 64
SECRET_WORDS = ("password", "secret", "token", "hash", "credential", "private")
MASK = "***"


def _wall(broker: Broker, monotonic_at: float) -> float:
    """A broker-clock instant as Unix time (the API speaks wall clock)."""
    return round(time.time() - (broker.clock() - monotonic_at), 3)


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > DENIAL_TEXT:
        return value[:DENIAL_TEXT] + "…"
    return value


def _principal(identity: Identity) -> str | None:
    """Who a client is, in the words an operator filters by: the user name, the certificate's
    CN or the SMOKER id (none for an anonymous client)."""
    return identity.username or identity.cert_cn or identity.smoker_id


def _address(value: Any) -> str:
    return f"{value[0]}:{value[1]}" if value else ""


def preview(payload: bytes) -> str:
    """The first 64 bytes of a payload: as text when they are UTF-8, else hex."""
    head = payload[:PREVIEW_BYTES]
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a character cut by the 64-byte limit: the text before it
        if len(payload) > PREVIEW_BYTES and exc.start >= len(head) - 3 and exc.end == len(head):
            return head[: exc.start].decode("utf-8")
    return head.hex()


def claim_id(tenant: str, topic: str) -> str:
    """A claim's id in the API: ``tenant|topic`` (a tenant name holds no ``|``)."""
    return f"{tenant}|{topic}"


def redact(value: Any, key: str = "", depth: int = 0) -> Any:
    """``value`` as JSON values with every secret replaced by ``"***"``: a key naming a
    password, secret, token, hash, credential or private key, and every bytes value."""
    if any(word in key.lower() for word in SECRET_WORDS) and value not in (None, "", (), []):
        return MASK
    if depth > 8:
        return type(value).__name__
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: redact(getattr(value, f.name), f.name, depth + 1)
            for f in dataclasses.fields(value)
        }
    if isinstance(value, dict):
        return {str(k): redact(v, str(k), depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [redact(v, key, depth + 1) for v in value]
    if isinstance(value, bytes):
        return MASK
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return type(value).__name__


class Operator:
    """The admin API's view of one :class:`~edge_broker.broker.server.Broker`."""

    def __init__(
        self,
        broker: Broker,
        *,
        memory_budget: Callable[[], int | None] | None = None,
        bridges: Callable[[], list[dict[str, Any]]] | None = None,
        reload: Callable[[], Awaitable[Any]] | None = None,  # a ReloadResult-like outcome
        policy_bundle: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._broker = broker
        self._memory_budget = memory_budget
        self._bridges = bridges
        self._reload = reload
        self._policy_bundle = policy_bundle
        self.denials: deque[dict[str, Any]] = deque(maxlen=DENIAL_RING)
        self.denial_seq = 0  # how many denials were ever put in the ring
        self._rate_sample: tuple[float, int, int] | None = None
        self._rates = (0.0, 0.0)

    def attach(self) -> None:
        """Start feeding the denial ring (called once the admin listener runs)."""
        self._broker.decisions.on_denial = self._denied

    def detach(self) -> None:
        if self._broker.decisions.on_denial == self._denied:
            self._broker.decisions.on_denial = None

    def _denied(self, type_: str, fields: dict[str, Any]) -> None:
        self.denial_seq += 1
        record = {k: _clip(v) for k, v in fields.items() if v is not None}
        self.denials.append({"seq": self.denial_seq, "time": round(time.time(), 3), **record})

    # -- reads ---------------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        b = self._broker
        st = b.stats
        rss = resident_bytes()
        in_s, out_s = self.rates()
        store: dict[str, Any] = {"state": "memory"}
        if b.persistence is not None:
            store = {
                "state": "healthy" if b.persistence.healthy else "refusing writes",
                "refused": b.persistence.refused,
            }
            if not b.persistence.healthy:
                store["last_error"] = str(b.persistence.last_error)
        bundle = self._policy_bundle() if self._policy_bundle is not None else {}
        return {
            "version": __version__,
            "uptime_s": round(st.uptime(), 1),
            "connections": st.clients_connected,
            "sessions": len(b.sessions),
            "rates": {"in_per_s": in_s, "out_per_s": out_s},
            "memory": {
                "rss_bytes": rss,
                "budget_bytes": self._memory_budget() if self._memory_budget else None,
            },
            "limit_hits": dict(sorted(b.limit_hits.counts.items())),
            "store": store,
            "policy": {
                "bundle_version": bundle.get("version"),
                "signer": bundle.get("signer"),
                "generation": b.generation,
            },
        }

    def rates(self) -> tuple[float, float]:
        """Messages per second in and out since the previous call at least 1 s ago."""
        st = self._broker.stats
        now = self._broker.clock()
        sample = (now, st.messages_received, st.messages_sent)
        last = self._rate_sample
        if last is None:
            self._rate_sample = sample
            return self._rates
        elapsed = now - last[0]
        if elapsed >= 1.0:
            self._rates = (
                round((sample[1] - last[1]) / elapsed, 2),
                round((sample[2] - last[2]) / elapsed, 2),
            )
            self._rate_sample = sample
        return self._rates

    def _connected(self) -> Iterator[Connection]:
        for conn in self._broker.connections:
            if conn.identity is not None and conn.session is not None and not conn.closing:
                yield conn

    def _client_item(self, conn: Connection) -> dict[str, Any]:
        identity = conn.identity
        assert identity is not None
        return {
            "client_id": conn.client_id,
            "principal": _principal(identity),
            "method": identity.method,
            "tenant": identity.tenant,
            "address": _address(conn.info.remote_address),
            "protocol": {3: "3.1", 4: "3.1.1", 5: "5.0"}.get(conn.engine.level, "?"),
            "connected_at": _wall(self._broker, conn.engine.created),
        }

    def client_ids(self) -> set[tuple[str, str]]:
        """(tenant, client id) of every connected client (the live stream diffs them)."""
        return {(c.identity.tenant, c.client_id) for c in self._connected() if c.identity}

    def clients(
        self, filters: dict[str, str], offset: int = 0, limit: int = 100
    ) -> tuple[int, list[dict[str, Any]]]:
        """Connected clients matching ``filters`` (tenant, principal, method: equal; address:
        prefix; id: glob), sorted by client id, one page. Only the page's items are built."""
        pattern = filters.get("id") or None
        tenant, method = filters.get("tenant"), filters.get("method")
        principal, address = filters.get("principal"), filters.get("address")
        found = []
        for conn in self._connected():
            identity = conn.identity
            assert identity is not None
            if pattern is not None and not fnmatchcase(conn.client_id, pattern):
                continue
            if (tenant and identity.tenant != tenant) or (method and identity.method != method):
                continue
            if principal and _principal(identity) != principal:
                continue
            if address and not _address(conn.info.remote_address).startswith(address):
                continue
            found.append(conn)
        found.sort(key=lambda c: (c.client_id, c.identity.tenant if c.identity else ""))
        return len(found), [self._client_item(c) for c in found[offset : offset + limit]]

    def _find(self, client_id: str, tenant: str | None) -> Connection | None:
        for conn in self._connected():
            if conn.client_id == client_id and (
                tenant is None or (conn.identity is not None and conn.identity.tenant == tenant)
            ):
                return conn
        return None

    def client(self, client_id: str, tenant: str | None = None) -> dict[str, Any] | None:
        conn = self._find(client_id, tenant)
        if conn is None:
            return None
        session = conn.session
        assert session is not None and conn.identity is not None
        item = self._client_item(conn)
        item["keep_alive"] = conn.engine.keep_alive
        item["in_flight"] = len(session.inflight)
        item["queued"] = len(session.queue)
        item["subscriptions"] = [
            {"filter": f, "qos": entry.qos} for f, entry in sorted(session.subscriptions.items())
        ]
        item["claims"] = self._owned_claims(conn.identity)
        return item

    def _owned_claims(self, identity: Identity) -> list[dict[str, Any]]:
        claims = self._broker.claims
        owner = identity.smoker_id or identity.client_id
        if claims is None or claims.service is None:
            return []
        # a SMOKER claim holds until its owner (or an operator) removes it: no expiry
        return [
            {"pattern": c.topic_name, "expires": None}
            for c in claims.service.owned_claims(owner, identity.tenant)
        ]

    def sessions(self, offset: int = 0, limit: int = 1000) -> tuple[int, list[dict[str, Any]]]:
        """Offline persistent sessions in the shape ``edge-broker session list`` shows
        (broker/session_control.py), sorted by tenant and client id; only the page is built."""
        now = self._broker.clock()
        offline = [
            s
            for s in self._broker.sessions
            if s.connection is None and (s.expires_at is None or s.expires_at > now)
        ]
        offline.sort(key=lambda s: (s.tenant, s.client_id))
        wall = time.time()
        page = offline[offset : offset + limit]
        return len(offline), [session_info(s, now, wall).to_json() for s in page]

    def subscriptions(
        self, tenant: str | None = None, offset: int = 0, limit: int = 1000
    ) -> tuple[int, list[dict[str, Any]]]:
        """Every subscribed filter with how many sessions hold it, sorted, one page."""
        counts: dict[tuple[str, str], int] = {}
        for session in self._broker.sessions:
            if tenant and session.tenant != tenant:
                continue
            for topic_filter in session.subscriptions:
                key = (session.tenant, topic_filter)
                counts[key] = counts.get(key, 0) + 1
        keys = sorted(counts)
        page = keys[offset : offset + limit]
        return len(keys), [{"filter": f, "tenant": t, "clients": counts[(t, f)]} for t, f in page]

    def retained(
        self, tenant: str | None, prefix: str, offset: int = 0, limit: int = 100
    ) -> tuple[int, list[dict[str, Any]]]:
        found = []
        spaces = self._broker.topic_spaces
        for name in sorted(spaces):
            if tenant and name != tenant:
                continue
            wildcard = "#"
            for message in spaces[name].retained.matching(wildcard, self._broker.clock()):
                if message.topic.startswith(prefix):
                    found.append((name, message))
        found.sort(key=lambda pair: (pair[0], pair[1].topic))
        page = [
            {
                "tenant": name,
                "topic": m.topic,
                "bytes": len(m.payload),
                "qos": m.qos,
                "preview": preview(bytes(m.payload)),
            }
            for name, m in found[offset : offset + limit]
        ]
        return len(found), page

    def claims(self, owner: str | None = None) -> list[dict[str, Any]]:
        runtime = self._broker.claims
        if runtime is None or runtime.service is None:
            return []
        service = runtime.service
        items = []
        for tenant in service.tenants():
            for record in service.records(tenant):
                topic = record.topic_name
                record_owner = topic.split("/", 2)[1] if topic.count("/") >= 1 else ""
                if owner and record_owner != owner:
                    continue
                items.append(
                    {
                        "id": claim_id(tenant, topic),
                        "tenant": tenant,
                        "owner": record_owner,
                        "pattern": topic,
                        "expires": None,
                        "quarantined": not hasattr(record, "restriction"),
                    }
                )
        items.sort(key=lambda i: (i["tenant"], i["pattern"]))
        return items

    async def revoke_claim(self, ident: str) -> bool | str:
        """Remove the claim ``ident`` (as :func:`claim_id` names it)."""
        runtime = self._broker.claims
        if runtime is None or runtime.service is None:
            return False
        tenant, bar, topic = ident.partition("|")
        if not bar or not topic:
            return False
        return await runtime.service.revoke(tenant, topic)

    def bridges(self) -> list[dict[str, Any]]:
        return self._bridges() if self._bridges is not None else []

    async def recent_denials(self, limit: int = 50) -> list[dict[str, Any]]:
        """Newest first, each with the text ``edge-broker explain`` prints for its request (for
        a client still connected: judged again with its live identity)."""
        items = []
        for record in list(self.denials)[::-1][:limit]:
            items.append(await self.denial_item(record))
        return items

    async def denial_item(self, record: dict[str, Any]) -> dict[str, Any]:
        action = record.get("action", "")
        client_id = record.get("client") or ""
        topic = record.get("topic") or ""
        item = {
            "seq": record.get("seq"),
            "time": record.get("time"),
            "client_id": client_id,
            "principal": record.get("user"),
            "tenant": record.get("tenant"),
            "kind": action,
            "topic": topic,
            "gate": record.get("gate"),
            "rule": record.get("rule"),
            "reason": record.get("reason"),
        }
        explanation = None
        conn = self._find(client_id, record.get("tenant")) if client_id else None
        if conn is not None and conn.identity is not None and action in ("publish", "subscribe"):
            explanation = await self._explain_text(conn.identity, action, topic)
        if explanation is None:
            explanation = _record_explanation(record)
        item["explanation"] = explanation
        return item

    async def _explain_text(self, identity: Identity, action: str, topic: str) -> str:
        verdicts, final = await explain(self._broker.policy, identity, action, topic)
        return explanation_text(identity, action, topic, 0, verdicts, final)

    async def explain(self, identity: Identity, action: str, topic: str) -> dict[str, Any]:
        verdicts, final = await explain(self._broker.policy, identity, action, topic)
        return {
            "allowed": final.allowed,
            "gate": final.gate.value if final.gate is not None else None,
            "rule": final.rule,
            "reason": final.reason if not final.allowed else None,
            "explanation": explanation_text(identity, action, topic, 0, verdicts, final),
        }

    def identity_for(
        self,
        client_id: str,
        principal: str | None,
        tenant: str | None,
        token: str | None = None,
    ) -> Identity | str:
        """The identity ``explain`` judges: with ``token``, a token client's (the token verified
        with the broker's ``[tokens]`` keys: its subject and grants); else a connected client's
        own when it is connected (same client id and principal); else one built from the
        password file's entry of ``principal`` (roles, one tenant); else an anonymous one. A
        refused token answers why, as text."""
        config = self._broker.config
        if token is not None:
            from ..auth.token import TokenError
            from ..auth.token_method import build_verifier

            try:
                verified = build_verifier(config.tokens, config.topics.separator).verify(
                    token, client_id=client_id, tenant=tenant or DEFAULT_TENANT
                )
            except TokenError as exc:
                return f"the token is refused: {exc}"
            return Identity(
                client_id=client_id,
                method="token",
                tenant=tenant or DEFAULT_TENANT,
                username=verified.subject,
                grants=verified.for_tenant(tenant or DEFAULT_TENANT),
            )
        conn = self._find(client_id, tenant)
        if conn is not None and conn.identity is not None:
            if principal is None or conn.identity.username == principal:
                return conn.identity
        roles: tuple[str, ...] = ()
        method = "anonymous"
        if principal is not None:
            method = "password"
            entry = config.passwords.entries.get(principal) if config.passwords.file else None
            if entry is not None:
                roles = entry.roles
                if tenant is None and len(entry.tenants) == 1:
                    tenant = entry.tenants[0]
        return Identity(
            client_id=client_id,
            method=method,
            tenant=tenant or DEFAULT_TENANT,
            username=principal,
            roles=roles,
        )

    def config(self) -> dict[str, Any]:
        """The running configuration with every secret replaced by ``"***"``."""
        result = redact(self._broker.config)
        assert isinstance(result, dict)
        return result

    # -- actions -------------------------------------------------------------------------
    def disconnect(self, client_id: str, tenant: str | None, by: str) -> bool:
        """Close a connected client: DISCONNECT 0x98 (administrative action) for MQTT 5, the
        socket closed for 3.1/3.1.1. Its will is published as on any server-side close."""
        conn = self._find(client_id, tenant)
        if conn is None:
            return False
        conn.close(ReasonCode.ADMINISTRATIVE_ACTION, f"disconnected by admin user {by}")
        return True

    async def drop_session(self, client_id: str, tenant: str | None, by: str) -> bool | str:
        """Drop the session of ``client_id`` and release the id (broker/session_control.py:
        a connected client is ended with 0x98 first, its will discarded)."""
        if drop_session(self._broker, client_id, tenant, by=f"admin user {by}"):
            return True
        return f"no session {client_id!r}" + (f" in tenant {tenant!r}" if tenant else "")

    def delete_retained(self, tenant: str, topic: str) -> bool:
        space = self._broker.topic_spaces.get(tenant)
        if space is None or space.retained.get(topic) is None:
            return False
        space.retained.delete(topic)
        return True

    async def reload(self) -> dict[str, Any]:
        """What SIGHUP does; answers with the outcome."""
        if self._reload is not None:
            result = await self._reload()
        elif self._broker.config.file == EMBEDDED_FILE:
            return {
                "ok": False,
                "message": "the broker runs on its embedded default config: there is no file to "
                "reload (start it with --config FILE)",
            }
        else:
            from .listeners import reload_tls

            reload_tls(self._broker.tls_contexts, self._broker.config.listeners)
            result = await self._broker.reload(self._broker.config.file)
        return {
            "ok": bool(result.ok),
            "message": str(result.message),
            "subscriptions_checked": getattr(result, "subscriptions_checked", 0),
            "subscriptions_removed": getattr(result, "subscriptions_removed", 0),
        }

    def audit(self, action: str, user: str, source: str, target: str, outcome: str) -> None:
        """An admin action in the audit log (who, what, from where) and the log."""
        audit = self._broker.audit
        if audit is not None:
            audit.event(
                "admin",
                user=user,
                addr=source,
                topic=target,
                outcome=outcome,
                detail=action,
            )


def _record_explanation(record: dict[str, Any]) -> str:
    """The explanation a denial's audit record carries, for a client no longer connected."""
    gate = record.get("gate") or "policy"
    rule = f' rule "{record["rule"]}"' if record.get("rule") else ""
    perm_set = f" of set {record['set']}" if record.get("set") else ""
    roles = f" (roles {', '.join(record['roles'])})" if record.get("roles") else ""
    reason = f": {record['reason']}" if record.get("reason") else ""
    return (
        f"{record.get('action', 'request')} {record.get('topic', '')!r} by client "
        f"{record.get('client', '')!r}{roles} => DENIED by {gate}{rule}{perm_set}{reason}"
    )

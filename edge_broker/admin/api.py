"""The admin JSON API ``/api/v1`` (docs/admin-api.md), the one-time login link and the console's
static files, as one handler for :class:`~edge_broker.admin.http.HttpServer`.

Every request is answered with the security headers of :data:`SECURITY_HEADERS`; API answers are
JSON (``application/json``) and never cached. Errors are ``{"error": code, "message": text}``:
401 ``login`` without a live session, 403 ``csrf`` for a state-changing request without the
session's ``X-CSRF-Token``, 403 ``role`` for a viewer's action. Every action, login and logout is
written to the audit log with the admin user, the target and the source address.
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from ..broker.operator import Operator
from .http import Request, Response, path_segment
from .openapi import openapi_document
from .sessions import AdminAuth, AdminSession, LoginRefused

log = logging.getLogger("edge_broker.admin")

PREFIX = "/api/v1"
COOKIE = "eb_session"
SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
]
JSON_TYPE = "application/json; charset=utf-8"
MAX_PAGE = 1000
MAX_EVENT_STREAMS = 4  # live streams per admin listener (each holds a connection)
COUNTERS_EVERY = 2.0
POLL_EVERY = 0.5
STATIC_DIR = Path(__file__).resolve().parent.parent / "console" / "static"


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def json_response(
    status: int, value: Any, headers: list[tuple[str, str]] | None = None
) -> Response:
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(status, body, JSON_TYPE, list(headers or []))


def _error(status: int, code: str, message: str) -> Response:
    return json_response(status, {"error": code, "message": message})


def _int(query: dict[str, str], name: str, default: int, high: int) -> int:
    raw = query.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "bad_request", f"{name}={raw!r}: write a whole number") from None
    if not 0 <= value <= high:
        raise ApiError(400, "bad_request", f"{name}={value}: between 0 and {high}")
    return value


def _body(request: Request) -> dict[str, Any]:
    if not request.body:
        return {}
    try:
        value = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "bad_request", "the body is not JSON: send a JSON object") from None
    if not isinstance(value, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    return value


def _field(body: dict[str, Any], name: str, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise ApiError(400, "bad_request", f'"{name}" must be a non-empty string')
    return value


class AdminApi:
    """The routes (module docstring) over one :class:`Operator` and one :class:`AdminAuth`."""

    def __init__(
        self,
        operator: Operator,
        auth: AdminAuth,
        static_dir: Path = STATIC_DIR,
    ) -> None:
        self.operator = operator
        self.auth = auth
        self.static_dir = static_dir
        self.streams = 0
        self._routes: list[tuple[str, str, Callable[..., Awaitable[Response]], str]] = [
            # (method, path with {x} segments, handler, who: public | viewer | operator)
            ("GET", "/api/v1/me", self._me, "viewer"),
            ("POST", "/api/v1/logout", self._logout, "viewer"),
            ("GET", "/api/v1/overview", self._overview, "viewer"),
            ("GET", "/api/v1/clients", self._clients, "viewer"),
            ("GET", "/api/v1/clients/{id}", self._client, "viewer"),
            ("POST", "/api/v1/clients/{id}/disconnect", self._disconnect, "operator"),
            ("GET", "/api/v1/sessions", self._sessions, "viewer"),
            ("DELETE", "/api/v1/sessions/{id}", self._drop_session, "operator"),
            ("GET", "/api/v1/subscriptions", self._subscriptions, "viewer"),
            ("GET", "/api/v1/retained", self._retained, "viewer"),
            ("DELETE", "/api/v1/retained", self._delete_retained, "operator"),
            ("GET", "/api/v1/claims", self._claims, "viewer"),
            ("DELETE", "/api/v1/claims/{id}", self._revoke_claim, "operator"),
            ("GET", "/api/v1/bridges", self._bridges, "viewer"),
            ("GET", "/api/v1/denials", self._denials, "viewer"),
            ("POST", "/api/v1/explain", self._explain, "viewer"),
            ("GET", "/api/v1/config", self._config, "viewer"),
            ("GET", "/api/v1/events", self._events, "viewer"),
            ("GET", "/api/v1/openapi.json", self._openapi, "viewer"),
            ("POST", "/api/v1/reload", self._reload, "operator"),
        ]

    # -- dispatch ------------------------------------------------------------------------
    async def handle(self, request: Request) -> Response:
        if request.path.startswith(PREFIX + "/") or request.path == PREFIX:
            try:
                response = await self._api(request)
            except ApiError as exc:
                response = _error(exc.status, exc.code, str(exc))
            response.headers.append(("Cache-Control", "no-store"))
        elif request.path == "/login/once":
            response = self._login_once(request)
        else:
            response = self._static(request)
        response.headers.extend(SECURITY_HEADERS)
        return response

    async def _api(self, request: Request) -> Response:
        if request.path == PREFIX + "/login":
            if request.method != "POST":
                raise ApiError(405, "method", "log in with POST /api/v1/login")
            return await self._login(request)
        segments = request.path.split("/")
        allowed: list[str] = []
        for method, pattern, handler, who in self._routes:
            params = _match(pattern.split("/"), segments)
            if params is None:
                continue
            if method != request.method and not (method == "GET" and request.method == "HEAD"):
                allowed.append(method)
                continue
            session = self.auth.session(request.cookies.get(COOKIE))
            if session is None:
                raise ApiError(401, "login", "log in first: POST /api/v1/login")
            if request.method in ("POST", "DELETE", "PUT", "PATCH") and not self.auth.csrf_ok(
                session, request.headers.get("x-csrf-token")
            ):
                raise ApiError(
                    403,
                    "csrf",
                    "send the X-CSRF-Token header with the csrf value of your login",
                )
            if who == "operator" and session.role != "operator":
                raise ApiError(
                    403, "role", f"user {session.user!r} is a viewer: this needs an operator"
                )
            response: Response = await handler(request, session, **params)
            return response
        if allowed:
            return _error(405, "method", f"use {', '.join(sorted(set(allowed)))} here")
        return _error(404, "not_found", f"no API at {request.path}: see /api/v1/openapi.json")

    # -- auth ----------------------------------------------------------------------------
    def _cookie(self, request: Request, session: AdminSession) -> tuple[str, str]:
        secure = "; Secure" if request.tls else ""
        ttl = int(self.auth.ttl)
        return (
            "Set-Cookie",
            f"{COOKIE}={session.token}; HttpOnly; SameSite=Strict; Path=/; Max-Age={ttl}{secure}",
        )

    async def _login(self, request: Request) -> Response:
        body = _body(request)
        user = _field(body, "user")
        password = body.get("password")
        if not isinstance(password, str):
            raise ApiError(400, "bad_request", '"password" must be a string')
        assert user is not None
        got = await self.auth.login(user, password, request.remote)
        if isinstance(got, LoginRefused):
            self.operator.audit("login", user, request.remote, "", "deny")
            headers = [("Retry-After", str(got.retry_after))] if got.retry_after else []
            code = "backoff" if got.status == 429 else "login"
            return json_response(got.status, {"error": code, "message": got.message}, headers)
        self.operator.audit("login", got.user, request.remote, "", "allow")
        return json_response(
            200,
            {"user": got.user, "role": got.role, "csrf": got.csrf},
            [self._cookie(request, got)],
        )

    def _login_once(self, request: Request) -> Response:
        session = self.auth.use_once(request.query.get("token", ""), request.remote)
        if session is None:
            return Response(
                403,
                b"this one-time login link was used or is not valid: log in with a user of "
                b"[admin] users_file, or restart the broker for a new link\n",
            )
        self.operator.audit("login_once", session.user, request.remote, "", "allow")
        return Response(303, b"", headers=[("Location", "/"), self._cookie(request, session)])

    async def _me(self, request: Request, session: AdminSession) -> Response:
        return json_response(
            200, {"user": session.user, "role": session.role, "csrf": session.csrf}
        )

    async def _logout(self, request: Request, session: AdminSession) -> Response:
        self.auth.logout(session.token)
        self.operator.audit("logout", session.user, request.remote, "", "allow")
        expired = f"{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        return json_response(200, {"ok": True}, [("Set-Cookie", expired)])

    # -- reads ---------------------------------------------------------------------------
    async def _overview(self, request: Request, session: AdminSession) -> Response:
        return json_response(200, self.operator.overview())

    async def _clients(self, request: Request, session: AdminSession) -> Response:
        q = request.query
        filters = {k: q[k] for k in ("tenant", "principal", "method", "address", "id") if q.get(k)}
        total, items = self.operator.clients(
            filters, _int(q, "offset", 0, 10**9), _int(q, "limit", 100, MAX_PAGE)
        )
        return json_response(200, {"total": total, "items": items})

    async def _client(self, request: Request, session: AdminSession, id: str) -> Response:
        found = self.operator.client(id, request.query.get("tenant") or None)
        if found is None:
            raise ApiError(404, "not_found", f"client {id!r} is not connected")
        return json_response(200, found)

    async def _sessions(self, request: Request, session: AdminSession) -> Response:
        q = request.query
        total, items = self.operator.sessions(
            _int(q, "offset", 0, 10**9), _int(q, "limit", MAX_PAGE, MAX_PAGE)
        )
        return json_response(200, {"total": total, "items": items})

    async def _subscriptions(self, request: Request, session: AdminSession) -> Response:
        q = request.query
        total, items = self.operator.subscriptions(
            q.get("tenant") or None,
            _int(q, "offset", 0, 10**9),
            _int(q, "limit", MAX_PAGE, MAX_PAGE),
        )
        return json_response(200, {"total": total, "items": items})

    async def _retained(self, request: Request, session: AdminSession) -> Response:
        q = request.query
        total, items = self.operator.retained(
            q.get("tenant") or None,
            q.get("prefix", ""),
            _int(q, "offset", 0, 10**9),
            _int(q, "limit", 100, MAX_PAGE),
        )
        return json_response(200, {"total": total, "items": items})

    async def _claims(self, request: Request, session: AdminSession) -> Response:
        return json_response(200, {"items": self.operator.claims(request.query.get("owner"))})

    async def _bridges(self, request: Request, session: AdminSession) -> Response:
        return json_response(200, {"items": self.operator.bridges()})

    async def _denials(self, request: Request, session: AdminSession) -> Response:
        limit = _int(request.query, "limit", 50, 200)
        return json_response(200, {"items": await self.operator.recent_denials(limit)})

    async def _explain(self, request: Request, session: AdminSession) -> Response:
        body = _body(request)
        action = _field(body, "action")
        if action not in ("publish", "subscribe"):
            raise ApiError(400, "bad_request", '"action" must be "publish" or "subscribe"')
        topic = _field(body, "topic")
        client_id = _field(body, "client_id")
        principal = _field(body, "principal", False) or _field(body, "user", False)
        tenant = _field(body, "tenant", False)
        token = _field(body, "token", False)
        assert topic is not None and client_id is not None
        identity = self.operator.identity_for(client_id, principal, tenant, token)
        if isinstance(identity, str):
            raise ApiError(400, "token", identity)
        return json_response(200, await self.operator.explain(identity, action, topic))

    async def _config(self, request: Request, session: AdminSession) -> Response:
        return json_response(200, self.operator.config())

    async def _openapi(self, request: Request, session: AdminSession) -> Response:
        return json_response(200, openapi_document())

    # -- actions -------------------------------------------------------------------------
    def _audited(
        self, request: Request, session: AdminSession, action: str, target: str, ok: bool
    ) -> None:
        self.operator.audit(action, session.user, request.remote, target, "allow" if ok else "deny")
        log.info(
            "admin %s %s by %s from %s: %s",
            action,
            target,
            session.user,
            request.remote,
            "done" if ok else "nothing to do",
            extra={
                "event": "admin_action",
                "action": action,
                "target": target,
                "admin_user": session.user,
                "remote": request.remote,
            },
        )

    async def _disconnect(self, request: Request, session: AdminSession, id: str) -> Response:
        ok = self.operator.disconnect(id, request.query.get("tenant") or None, session.user)
        self._audited(request, session, "disconnect", id, ok)
        if not ok:
            raise ApiError(404, "not_found", f"client {id!r} is not connected")
        return json_response(200, {"ok": True})

    async def _drop_session(self, request: Request, session: AdminSession, id: str) -> Response:
        tenant = request.query.get("tenant") or None
        result = await self.operator.drop_session(id, tenant, session.user)
        self._audited(request, session, "drop_session", id, result is True)
        if result is not True:
            raise ApiError(404, "not_found", result or f"no session {id!r}")
        return json_response(200, {"ok": True})

    async def _delete_retained(self, request: Request, session: AdminSession) -> Response:
        q = request.query
        topic = q.get("topic", "")
        if not topic:
            raise ApiError(400, "bad_request", "name the message: ?tenant=...&topic=...")
        from ..identity import DEFAULT_TENANT

        tenant = q.get("tenant") or DEFAULT_TENANT
        ok = self.operator.delete_retained(tenant, topic)
        self._audited(request, session, "delete_retained", f"{tenant}|{topic}", ok)
        if not ok:
            raise ApiError(404, "not_found", f"no retained message on {topic!r} in {tenant!r}")
        return json_response(200, {"ok": True})

    async def _revoke_claim(self, request: Request, session: AdminSession, id: str) -> Response:
        result = await self.operator.revoke_claim(id)
        self._audited(request, session, "revoke_claim", id, result is True)
        if result is False:
            raise ApiError(404, "not_found", f"no claim {id!r} (ids are tenant|topic)")
        if result is not True:
            raise ApiError(503, "store", str(result))
        return json_response(200, {"ok": True})

    async def _reload(self, request: Request, session: AdminSession) -> Response:
        outcome = await self.operator.reload()
        self._audited(request, session, "reload", "config", bool(outcome.get("ok")))
        return json_response(200, outcome)

    # -- the live stream -----------------------------------------------------------------
    async def _events(self, request: Request, session: AdminSession) -> Response:
        if self.streams >= MAX_EVENT_STREAMS:
            raise ApiError(
                503, "busy", f"{MAX_EVENT_STREAMS} live streams are open: close one first"
            )
        return Response(
            200,
            content_type="text/event-stream; charset=utf-8",
            headers=[("X-Accel-Buffering", "no")],
            stream=self._event_stream(session),
        )

    async def _event_stream(self, session: AdminSession) -> AsyncIterator[bytes]:
        self.streams += 1
        try:
            op = self.operator
            seen = op.denial_seq
            clients = op.client_ids()
            next_counters = 0.0
            loop = asyncio.get_running_loop()
            yield b": edge-broker live stream\n\n"
            while self.auth.session(session.token) is not None:
                now = loop.time()
                if now >= next_counters:
                    yield _sse("counters", self._counters())
                    next_counters = now + COUNTERS_EVERY
                if op.denial_seq != seen:
                    fresh = [d for d in list(op.denials) if d["seq"] > seen]
                    seen = op.denial_seq
                    for record in fresh:
                        yield _sse("denial", await op.denial_item(record))
                now_clients = op.client_ids()
                if now_clients != clients:
                    for tenant, cid in sorted(now_clients - clients):
                        yield _sse(
                            "client", {"change": "connected", "client_id": cid, "tenant": tenant}
                        )
                    for tenant, cid in sorted(clients - now_clients):
                        yield _sse(
                            "client", {"change": "disconnected", "client_id": cid, "tenant": tenant}
                        )
                    clients = now_clients
                await asyncio.sleep(POLL_EVERY)
        finally:
            self.streams -= 1

    def _counters(self) -> dict[str, Any]:
        overview = self.operator.overview()
        backlog = sum(int(b.get("queue_depth") or 0) for b in self.operator.bridges())
        return {
            "connections": overview["connections"],
            "rates": overview["rates"],
            "memory": overview["memory"],
            "bridge_backlog": backlog,
        }

    # -- static files --------------------------------------------------------------------
    def _static(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response(405, b"the console's files are read with GET\n")
        if request.path == "/":
            name = "index.html"
        elif request.path.startswith("/static/"):
            name = request.path[len("/static/") :]
        else:
            return Response(404, b"not found: the console is at /, the API at /api/v1\n")
        base = self.static_dir.resolve()
        try:
            target = (base / path_segment(name)).resolve()
        except (ValueError, UnicodeDecodeError, OSError):
            return Response(404, b"not found\n")
        if base not in target.parents or not target.is_file():
            return Response(
                404,
                b"not found"
                + (b": the console pages are not installed" if not base.is_dir() else b"")
                + b"\n",
            )
        kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/javascript", "image/svg+xml"):
            kind += "; charset=utf-8"
        return Response(200, target.read_bytes(), kind)


def _match(pattern: list[str], segments: list[str]) -> dict[str, str] | None:
    if len(pattern) != len(segments):
        return None
    params: dict[str, str] = {}
    for want, got in zip(pattern, segments, strict=True):
        if want.startswith("{"):
            try:
                value = path_segment(got)
            except UnicodeDecodeError:
                return None
            if not value:
                return None
            params[want[1:-1]] = value
        elif want != got:
            return None
    return params


def _sse(event: str, data: Any) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event}\ndata: {text}\n\n".encode()

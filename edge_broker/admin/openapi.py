"""The OpenAPI 3.1 document of the admin API, served at ``/api/v1/openapi.json``.

Written as data: one row per operation (method, path, role, summary, query parameters, body
fields, answer), so that a test can check that every route of ``api.py`` is described and
nothing else is.
"""

from __future__ import annotations

from typing import Any

from .. import __version__

# (method, path, role, summary, query parameters, request body fields, answer schema name)
OPERATIONS: tuple[tuple[str, str, str, str, tuple[str, ...], tuple[str, ...], str], ...] = (
    (
        "POST",
        "/api/v1/login",
        "public",
        "Log in: sets the eb_session cookie, returns the CSRF "
        "token (401 wrong user or password, 429 with Retry-After while backing off)",
        (),
        ("user", "password"),
        "Me",
    ),
    ("GET", "/api/v1/me", "viewer", "Who is logged in, with the CSRF token", (), (), "Me"),
    ("POST", "/api/v1/logout", "viewer", "End this session", (), (), "Ok"),
    (
        "GET",
        "/api/v1/overview",
        "viewer",
        "Version, uptime, connections, sessions, message "
        "rates, memory against the budget, limit hits, store health, policy bundle",
        (),
        (),
        "Overview",
    ),
    (
        "GET",
        "/api/v1/clients",
        "viewer",
        "Connected clients, filtered and paged",
        ("tenant", "principal", "method", "address", "id", "offset", "limit"),
        (),
        "ClientPage",
    ),
    (
        "GET",
        "/api/v1/clients/{client_id}",
        "viewer",
        "One connected client (404 if not connected); the id percent-encoded, / as %2F",
        ("tenant",),
        (),
        "ClientDetail",
    ),
    (
        "POST",
        "/api/v1/clients/{client_id}/disconnect",
        "operator",
        "Disconnect a client: DISCONNECT 0x98 (MQTT 5) or the socket closed (3.1/3.1.1)",
        ("tenant",),
        (),
        "Ok",
    ),
    (
        "GET",
        "/api/v1/sessions",
        "viewer",
        "Offline persistent sessions, paged",
        ("offset", "limit"),
        (),
        "Sessions",
    ),
    (
        "DELETE",
        "/api/v1/sessions/{client_id}",
        "operator",
        "Drop a session and release its client id",
        ("tenant",),
        (),
        "Ok",
    ),
    (
        "GET",
        "/api/v1/subscriptions",
        "viewer",
        "Subscribed filters with their client counts, paged",
        ("tenant", "offset", "limit"),
        (),
        "Subscriptions",
    ),
    (
        "GET",
        "/api/v1/retained",
        "viewer",
        "Retained messages, paged",
        ("tenant", "prefix", "offset", "limit"),
        (),
        "RetainedPage",
    ),
    (
        "DELETE",
        "/api/v1/retained",
        "operator",
        "Delete one retained message",
        ("tenant", "topic"),
        (),
        "Ok",
    ),
    (
        "GET",
        "/api/v1/claims",
        "viewer",
        "SMOKER claims, optionally of one owner",
        ("owner",),
        (),
        "Claims",
    ),
    (
        "DELETE",
        "/api/v1/claims/{id}",
        "operator",
        "Revoke a claim (id: tenant|topic)",
        (),
        (),
        "Ok",
    ),
    (
        "GET",
        "/api/v1/bridges",
        "viewer",
        "Bridges: state, queue depth, counters, last error",
        (),
        (),
        "Bridges",
    ),
    (
        "GET",
        "/api/v1/denials",
        "viewer",
        "Recent denials, newest first, each with its explanation",
        ("limit",),
        (),
        "Denials",
    ),
    (
        "POST",
        "/api/v1/explain",
        "viewer",
        "Would this principal be allowed? (changes nothing; needs the CSRF header)",
        (),
        ("client_id", "action", "topic", "principal", "user", "token", "tenant"),
        "Explain",
    ),
    (
        "GET",
        "/api/v1/config",
        "viewer",
        'The running configuration, secrets as "***"',
        (),
        (),
        "Object",
    ),
    (
        "GET",
        "/api/v1/events",
        "viewer",
        "Server-Sent Events: counters every 2 s, denial, client",
        (),
        (),
        "EventStream",
    ),
    ("GET", "/api/v1/openapi.json", "viewer", "This document", (), (), "Object"),
    (
        "POST",
        "/api/v1/reload",
        "operator",
        "Reload the configuration as SIGHUP does",
        (),
        (),
        "Reload",
    ),
)

_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_NSTR = {"type": ["string", "null"]}


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def _items(item: dict[str, Any], paged: bool = False) -> dict[str, Any]:
    schema = _obj(items={"type": "array", "items": item})
    if paged:
        schema["properties"]["total"] = _INT
    return schema


CLIENT = _obj(
    client_id=_STR,
    principal=_NSTR,
    method=_STR,
    tenant=_STR,
    address=_STR,
    protocol=_STR,
    connected_at=_NUM,
)
DENIAL = _obj(
    time=_NUM,
    client_id=_STR,
    principal=_NSTR,
    kind=_STR,
    topic=_STR,
    gate=_NSTR,
    rule=_NSTR,
    reason=_NSTR,
    explanation=_STR,
)
SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": _obj(error=_STR, message=_STR),
    "Ok": _obj(ok={"type": "boolean"}),
    "Object": {"type": "object"},
    "Me": _obj(user=_STR, role={"enum": ["viewer", "operator"]}, csrf=_STR),
    "Overview": _obj(
        version=_STR,
        uptime_s=_NUM,
        connections=_INT,
        sessions=_INT,
        rates=_obj(in_per_s=_NUM, out_per_s=_NUM),
        memory=_obj(
            rss_bytes={"type": ["integer", "null"]}, budget_bytes={"type": ["integer", "null"]}
        ),
        limit_hits={"type": "object", "additionalProperties": _INT},
        store={"type": "object"},
        policy=_obj(bundle_version={"type": ["integer", "null"]}, signer=_NSTR),
    ),
    "ClientPage": _items(CLIENT, paged=True),
    "ClientDetail": {
        "allOf": [
            CLIENT,
            _obj(
                keep_alive=_INT,
                in_flight=_INT,
                queued=_INT,
                subscriptions={"type": "array", "items": _obj(filter=_STR, qos=_INT)},
                claims={"type": "array", "items": _obj(pattern=_STR, expires=_NSTR)},
            ),
        ]
    },
    "Sessions": _items(
        _obj(
            client_id=_STR,
            tenant=_STR,
            owner=_STR,
            connected={"type": "boolean"},
            expires_at={"type": ["number", "null"]},
            queued=_INT,
            queued_bytes=_INT,
            inflight=_INT,
        ),
        paged=True,
    ),
    "Subscriptions": _items(_obj(filter=_STR, tenant=_STR, clients=_INT), paged=True),
    "RetainedPage": _items(
        _obj(tenant=_STR, topic=_STR, bytes=_INT, qos=_INT, preview=_STR), paged=True
    ),
    "Claims": _items(_obj(id=_STR, owner=_STR, pattern=_STR, expires=_NSTR)),
    "Bridges": _items(
        _obj(name=_STR, state=_STR, queue_depth=_INT, counters={"type": "object"}, last_error=_NSTR)
    ),
    "Denials": _items(DENIAL),
    "Explain": _obj(allowed={"type": "boolean"}, gate=_NSTR, rule=_NSTR, explanation=_STR),
    "Reload": _obj(ok={"type": "boolean"}, message=_STR),
    "EventStream": {"type": "string", "description": "text/event-stream"},
}


def openapi_document() -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for method, path, role, summary, query, body, answer in OPERATIONS:
        op: dict[str, Any] = {
            "summary": summary,
            "x-role": role,
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {
                        "text/event-stream" if answer == "EventStream" else "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{answer}"}
                        }
                    },
                },
                "default": {
                    "description": "an error",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                    },
                },
            },
        }
        params = [
            {
                "name": name,
                "in": "query",
                "required": False,
                "schema": _INT if name in ("offset", "limit") else _STR,
            }
            for name in query
        ]
        params += [
            {"name": seg[1:-1], "in": "path", "required": True, "schema": _STR}
            for seg in path.split("/")
            if seg.startswith("{")
        ]
        if method in ("POST", "DELETE") and role != "public":
            params.append(
                {"name": "X-CSRF-Token", "in": "header", "required": True, "schema": _STR}
            )
        if params:
            op["parameters"] = params
        if body:
            op["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": _obj(**{f: _STR for f in body})}},
            }
        if role == "public":
            op["security"] = []
        paths.setdefault(path, {})[method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "edge-broker admin API", "version": f"v1 ({__version__})"},
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "session": {"type": "apiKey", "in": "cookie", "name": "eb_session"}
            },
        },
        "security": [{"session": []}],
    }

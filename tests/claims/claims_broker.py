"""A real broker (in this test's event loop) with the ``smoker`` method and a claim store in a
temporary directory, for the tests/claims/test_broker_*.py suites; clients connect over TCP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from nacl.signing import SigningKey

from edge_broker.broker.server import Broker
from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType
from edge_broker.config import loads_config
from edge_broker.smoker_client import SmokerClient

FAST_LIMITS = {
    "client_rate": 1000.0,
    "client_burst": 1000.0,
    "store_writes_per_second": 10000.0,
    "store_burst": 10000.0,
}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return repr(value)


def smoker_config(
    store_dir: Path, deny_action: str = "reason", tenant_choice: str = "credentials", **claims: Any
) -> str:
    lines = [
        "[[listeners]]",
        'name = "t"',
        'bind = "127.0.0.1"',
        "port = 0",
        'auth_methods = ["smoker", "anonymous"]',
        f'deny_action = "{deny_action}"',
        f'tenant_choice = "{tenant_choice}"',
        "",
        "[claims]",
        f"store_dir = {str(store_dir)!r}",
    ]
    settings = {"fsync": "never", **FAST_LIMITS, **claims}
    lines += [f"{k} = {toml_value(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"


@asynccontextmanager
async def running_broker(
    store_dir: Path, deny_action: str = "reason", tenant_choice: str = "credentials", **claims: Any
) -> AsyncIterator[tuple[Broker, int]]:
    broker = Broker(
        loads_config(smoker_config(store_dir, deny_action, tenant_choice, **claims), "<test>")
    )
    await broker.start()
    try:
        assert broker.claims is not None
        await broker.claims.verified()
        yield broker, broker.bound[0][3]
    finally:
        await broker.shutdown()


def client(port: int, key: SigningKey | None = None, client_id: str | None = None) -> SmokerClient:
    return SmokerClient("127.0.0.1", port, key, client_id=client_id, timeout=5)


def restriction(topic: str, kind: str, *perms: tuple[str, str]) -> Restriction:
    return Restriction(
        topic, RestrictionType(kind), tuple(Permission(c, Activity(a)) for c, a in perms)
    )

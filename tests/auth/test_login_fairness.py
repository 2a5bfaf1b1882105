"""Logins are fair between sources (issue 31 item 4). A real broker in this test's event loop,
real TCP connections bound to distinct loopback source addresses (127.0.0.2 is the adversary,
127.0.0.3 ... the victims), raw MQTT CONNECTs; conditions are waited on, never timed."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nacl.pwhash

from edge_broker.auth.login_fairness import FREE_FAILURES
from edge_broker.broker.server import Broker
from edge_broker.config import load_config
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Connack, Connect

ADVERSARY = "127.0.0.2"
VICTIMS = ("127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7")
_ids = itertools.count()


def slow_hash(password: bytes) -> str:
    # the broker's own parameters (7 MiB, t=5): tens of ms per check, so a line forms
    return nacl.pwhash.argon2id.str(password, opslimit=5, memlimit=7 * 1024 * 1024).decode()


def write_config(tmp_path: Path, users: dict[str, str], **sections: dict[str, Any]) -> Path:
    pw = tmp_path / "passwords"
    pw.write_text("".join(f"{u}:{h}\n" for u, h in users.items()))
    lines = [
        "[[listeners]]",
        'name = "t"',
        'bind = "127.0.0.1"',
        "port = 0",
        'auth_methods = ["password"]',
        "",
        "[passwords]",
        f"file = {str(pw)!r}",
        *(f"{k} = {v!r}" for k, v in sections.pop("passwords", {}).items()),
        "",
    ]
    for name, values in {"broker": {"connect_timeout": 60}, **sections}.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {v!r}" for k, v in values.items()]
        lines.append("")
    path = tmp_path / "broker.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.asynccontextmanager
async def running(path: Path) -> AsyncIterator[tuple[Broker, int]]:
    broker = Broker(load_config(str(path)))
    await broker.start()
    try:
        yield broker, broker.bound[0][3]
    finally:
        await broker.shutdown()


async def login(port: int, source: str, user: str, password: bytes) -> tuple[int, str]:
    """One CONNECT from ``source``: (CONNACK reason code, Reason String)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    try:
        cid = f"c{next(_ids)}"
        writer.write(encode(Connect(5, cid, True, 60, username=user, password=password), 5))
        parser = PacketReader(side="client", protocol_level=5)
        while True:
            data = await reader.read(4096)
            if not data:
                return -1, "closed without CONNACK"
            for packet in parser.feed(data):
                if isinstance(packet, Connack):
                    return packet.reason_code, packet.properties.reason_string or ""
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def logins_of(broker: Broker) -> Any:
    from edge_broker.auth.password_method import PasswordLogins

    logins = broker.auth_kept["password"]
    assert isinstance(logins, PasswordLogins)
    return logins


async def flood(port: int, outstanding: int, answers: list[tuple[int, str]]) -> None:
    """Wrong passwords for ever-new unknown users (no back-off applies to a new pair) from the
    adversary's address, ``outstanding`` CONNECTs at all times, as fast as the broker answers."""

    async def one() -> None:
        while True:
            answers.append(await login(port, ADVERSARY, f"nobody-{next(_ids)}", b"guess"))

    await asyncio.gather(*(one() for _ in range(outstanding)))


async def test_a_flood_from_one_address_does_not_lock_out_logins_from_others(
    tmp_path: Path,
) -> None:
    """One check at a time, 8 places in the line. The adversary keeps 20 wrong-password
    CONNECTs outstanding; five devices log in for the first time from five other addresses.
    Before: the adversary held the whole line and the devices got 0x89 Server busy. Now its
    share of the line is 4 (and a full line pushes out the longest line's newest waiter for a
    newcomer), and the slot goes to the sources in turn: every device gets in."""
    users = {f"dev{i}": slow_hash(b"pw-%d" % i) for i in range(len(VICTIMS))}
    path = write_config(
        tmp_path,
        users,
        passwords={"max_concurrent": 1, "max_waiting": 8, "max_waiting_per_source": 4},
        limits={"connect_rate": 100000, "connect_burst": 100000},
    )
    async with running(path) as (broker, port):
        answers: list[tuple[int, str]] = []
        attack = asyncio.ensure_future(flood(port, 20, answers))
        try:
            while not any(code == 0x89 for code, _ in answers):
                await asyncio.sleep(0.01)  # until the adversary has filled what it may
            results = await asyncio.gather(
                *(login(port, source, f"dev{i}", b"pw-%d" % i) for i, source in enumerate(VICTIMS))
            )
        finally:
            attack.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await attack
        assert results == [(0, "")] * len(VICTIMS)
        busy = [reason for code, reason in answers if code == 0x89]
        assert busy and any("passwords.max_waiting_per_source" in r for r in busy)
        assert broker.limit_hits.counts.get("passwords.max_waiting_per_source", 0) >= 1


async def test_a_connect_flood_from_one_address_leaves_the_rate_for_others(
    tmp_path: Path,
) -> None:
    """A global connect burst of 10 and no refill to speak of: the adversary's address may take
    half of it. Before: its 10 CONNECTs took the whole bucket and the device got 0x9F."""
    path = write_config(
        tmp_path,
        {"dev": slow_hash(b"pw")},
        limits={"connect_rate": 0.001, "connect_burst": 10},
    )
    async with running(path) as (broker, port):
        flood_codes = [
            (await login(port, ADVERSARY, f"nobody-{i}", b"guess"))[0] for i in range(10)
        ]
        assert flood_codes == [0x86] * 5 + [0x9F] * 5
        assert await login(port, VICTIMS[0], "dev", b"pw") == (0, "")
        assert broker.limit_hits.counts["limits.source_connect_share"] == 5
        assert "limits.connect_rate" not in broker.limit_hits.counts


async def test_failures_back_off_per_source_and_user_but_never_a_verified_device(
    tmp_path: Path,
) -> None:
    """After wrong passwords for dev from the adversary's address (the first FREE_FAILURES
    cost nothing), that pair waits before its next check (0x9F, no argon2id), the same user
    from another address does not; once the device has been verified (the credential
    cache), it gets in from any address at once."""
    path = write_config(
        tmp_path,
        {"dev": slow_hash(b"pw")},
        passwords={"failure_backoff": 600.0, "failure_backoff_max": 3600.0},
    )
    async with running(path) as (broker, port):
        for _ in range(FREE_FAILURES + 1):
            assert (await login(port, ADVERSARY, "dev", b"wrong"))[0] == 0x86
        code, reason = await login(port, ADVERSARY, "dev", b"pw")
        assert code == 0x9F and "passwords.failure_backoff" in reason
        for _ in range(FREE_FAILURES + 1):  # unknown users alike
            assert (await login(port, ADVERSARY, "nobody", b"x"))[0] == 0x86
        assert (await login(port, ADVERSARY, "nobody", b"x"))[0] == 0x9F
        assert await login(port, VICTIMS[0], "dev", b"pw") == (0, "")  # another address
        assert await login(port, ADVERSARY, "dev", b"pw") == (0, "")  # verified: cached
        assert broker.limit_hits.counts["passwords.failure_backoff"] == 2


async def test_the_credential_cache_survives_a_reload_for_unchanged_entries(
    tmp_path: Path,
) -> None:
    """Before, a reload emptied the cache and every device was cold after any SIGHUP. Now a
    device whose entry did not change stays verified; a changed password never matches."""
    users = {"dev": slow_hash(b"pw"), "other": slow_hash(b"o")}
    no_backoff = {"failure_backoff": 0.0}
    path = write_config(tmp_path, users, passwords=no_backoff)
    async with running(path) as (broker, port):
        assert await login(port, VICTIMS[0], "dev", b"pw") == (0, "")
        assert await login(port, VICTIMS[0], "other", b"o") == (0, "")
        cache = logins_of(broker).cache
        assert (cache.hits, len(cache)) == (0, 2)
        result = await broker.reload(str(path))
        assert result.ok
        assert await login(port, VICTIMS[0], "dev", b"pw") == (0, "")
        assert logins_of(broker).cache is cache and cache.hits == 1
        users["other"] = slow_hash(b"new")  # other's password changed in the file
        write_config(tmp_path, users, passwords=no_backoff)
        assert (await broker.reload(str(path))).ok
        assert (await login(port, VICTIMS[0], "other", b"o"))[0] == 0x86
        assert cache.hits == 1
        assert await login(port, VICTIMS[0], "other", b"new") == (0, "")
        assert await login(port, VICTIMS[0], "dev", b"pw") == (0, "")
        assert cache.hits == 2
